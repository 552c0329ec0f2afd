"""Run options: what a caller asks of a Lyapunov run, grouped and checked once.

The published entry points (``lyapunov_spectrum``, ``lyapunov_spectrum_dde``,
the sweeps) keep their flat keyword signatures; behind them the options
travel as one :class:`RunOptions` (as diffrax groups its options in
``SaveAt`` and a step-size controller), validated when it is built, with
named fields down to the kernel:

- :class:`Renormalisation`: steps between QR re-orthonormalisations, whether
  that count is compiled in, and the QR method;
- :class:`Saving`: whether states are saved, and every how many steps.

Checks that need the problem (``k <= d``, the transient in steps of ``dt``,
``n_steps`` in whole blocks) are made once the problem is known, by
:func:`lyapax._engine.run.run_args`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from lyapax._engine import validate
from lyapax._engine.progress import sink

__all__ = [
    "QR_METHODS",
    "Renormalisation",
    "RunOptions",
    "Saving",
]

#: A single run's frame of at most this many rows gets the fused QR (see
#: :meth:`Renormalisation.method`).
SINGLE_SMALL_D = 16

#: Accepted values of the public ``qr=`` argument.
QR_METHODS = ("auto", "householder", "lapack")


class Renormalisation(NamedTuple):
    """``every`` steps between re-orthonormalisations (>= 1); ``static``:
    compile ``every`` into the program; ``qr``: one of :data:`QR_METHODS`."""

    every: int
    static: bool
    qr: str

    def method(
        self, *, batched: bool, d: int | None = None, k: int | None = None
    ) -> str:
        """The kernel's QR method for a ``(d, k)`` frame: ``"auto"`` is the
        fused Householder QR of small frames for the vmapped rows of a sweep
        (``"small_unrolled"``: its columns unrolled, 7-10 % faster there) and
        for a single run (``"small"``: one column per loop iteration, a
        smaller program that compiles faster) of a frame of at most
        :data:`SINGLE_SMALL_D` rows (there LAPACK's call costs more than the
        QR: Lorenz, d = k = 3, 25.3 ms against 20.3 ms for 50 000 RK4 steps),
        and LAPACK for other single runs (run with one OpenBLAS thread on CPU:
        :mod:`lyapax._engine.blas_threads`; at d = 50, k = 5 the fused QR is
        7 % slower, at d = 20 even)."""
        if self.qr != "auto":
            return self.qr
        if batched:
            return "small_unrolled"
        # "small" keeps LAPACK for more than qr.SMALL_K columns by itself.
        return "small" if d is not None and d <= SINGLE_SMALL_D else "lapack"


class Saving(NamedTuple):
    """``states``: save the trajectory; ``decimate``: every that many steps."""

    states: bool
    decimate: int


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOptions:
    """The options of a run (see the module docstring), built by keyword
    (:meth:`of`, or the constructor, whose fields are keyword-only) and
    checked when built (:meth:`__check_init__`, as an ``equinox.Module``
    checks itself). A frozen dataclass, not an ``equinox.Module``: the
    options never enter a traced program, and equinox's constructor costs
    ~40 us against ~350 us for a warm 200-step Lorenz run.

    ``k`` exponents (None: the problem's default); ``t_transient`` model time
    run first; ``seed`` of the initial frame (one per row in sweeps);
    ``check_finite``; ``resume`` checkpoint or None; ``renorm``
    (:class:`Renormalisation`); ``saving`` (:class:`Saving`); ``progress``:
    where a progress bar goes (None: no bar; see
    :mod:`lyapax._engine.progress`).
    """

    k: Any = None
    t_transient: Any = 0.0
    seed: Any = 0
    check_finite: bool = False
    resume: Any = None
    renorm: Renormalisation = Renormalisation(1, False, "auto")
    saving: Saving = Saving(False, 1)
    progress: Any = None

    def __post_init__(self) -> None:
        self.__check_init__()

    def __check_init__(self) -> None:
        """Raises TypeError / ValueError naming the argument, its value and
        what is allowed."""
        static = self.renorm.static
        if not isinstance(static, bool | np.bool_):
            raise TypeError(
                "static_renorm_every must be True or False; got "
                f"{static!r} of type {type(static).__name__}"
            )
        qr = self.renorm.qr
        if not isinstance(qr, str) or qr not in QR_METHODS:
            raise ValueError(f"qr must be one of {QR_METHODS}; got {qr!r}")
        validate.as_int("renorm_every", self.renorm.every, minimum=1)
        validate.as_int("decimate", self.saving.decimate, minimum=1)

    @classmethod
    def of(
        cls,
        *,
        k: Any = None,
        renorm_every: Any = 1,
        t_transient: Any = 0.0,
        seed: Any = 0,
        check_finite: Any = False,
        resume: Any = None,
        save_states: Any = False,
        decimate: Any = 1,
        qr: Any = "auto",
        static_renorm_every: Any = False,
        progress: Any = False,
    ) -> RunOptions:
        """The options from the published argument names, by keyword (an
        unknown name is a ``TypeError``; absent ones take the published
        defaults).

        Raises:
            TypeError / ValueError: naming the argument, its value and what
                is allowed.
        """
        every = validate.as_int("renorm_every", renorm_every, minimum=1)
        decimate = validate.as_int("decimate", decimate, minimum=1)
        static = static_renorm_every
        if isinstance(static, np.bool_):
            static = bool(static)
        return cls(
            k=k,
            t_transient=t_transient,
            seed=seed,
            check_finite=bool(check_finite),
            resume=resume,
            renorm=Renormalisation(every, static, qr),
            saving=Saving(bool(save_states), decimate),
            progress=sink(progress),
        )
