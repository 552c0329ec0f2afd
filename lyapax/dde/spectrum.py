"""``lyapunov_spectrum_dde``: the delay equations' front door to the engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxtyping import ArrayLike, Float

from lyapax._engine import run
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.problem import resolve_call
from lyapax._engine.run import LyapunovResult, RunOptions
from lyapax._engine.shapes import Scalar
from lyapax.dde.problem import DDECheckpoint, DDEProblem, _plain_problem

__all__ = ["lyapunov_spectrum_dde"]


@holds_one_blas_thread
def lyapunov_spectrum_dde(
    step_fn_or_problem: DDEProblem | Callable[..., Any],
    state0: Float[ArrayLike, "n_sv n"] | int | None = None,
    dt: Scalar | None = None,
    n_steps: int | None = None,
    k: int | None = None,
    renorm_every: int = 1,
    t_transient: float = 0.0,
    seed: int = 0,
    check_finite: bool = False,
    resume: DDECheckpoint | None = None,
    save_states: bool = False,
    decimate: int = 1,
    buf0: Float[ArrayLike, "horizon ..."] | None = None,
    params: Any = None,
    qr: str = "auto",
    static_renorm_every: bool = False,
) -> LyapunovResult:
    """Leading ``k`` Lyapunov exponents of a delay equation.

    Arguments and result as :func:`lyapax.core.lyapunov_spectrum`, with these
    differences:

    Args:
        step_fn_or_problem: a :class:`DDEProblem` (then a second positional
            argument is ``n_steps``), or a carry step ``step(carry, _) ->
            (new_carry, new_state)`` with ``carry = (state, buf, t, params)``
            (e.g. from :func:`make_step_fn`), which needs ``state0, buf0, dt,
            n_steps``.
        k: number of exponents. Default: the size of the present state, with a
            warning, because the phase space (state + buffer) is usually far
            larger than the exponents of interest. At most ``d = state.size +
            buf.size``.
        t_transient: at least one history length (``horizon`` steps, rounded up
            to whole renormalisation blocks) is always run first on a fresh
            run, so that the initial history, which need not solve the
            equation, has left the buffer before averaging.
        resume: a :class:`DDECheckpoint`: continues exactly, including the ring
            buffer and its step counter.
        buf0: initial ring buffer (plain form; overrides ``problem.buf0``).
        params: the carry's parameters (plain form; overrides
            ``problem.params``).

    Returns:
        :class:`lyapax.core.LyapunovResult` whose checkpoint is a
        :class:`DDECheckpoint`; ``trajectory`` (``save_states``) holds the
        present state flattened, ``(n_steps // decimate, state.size)``.

    Raises:
        TypeError / ValueError: as ``lyapunov_spectrum``, plus a missing ``buf0``
            or a checkpoint that does not match the problem.
    """
    problem, n_steps = resolve_call(
        "lyapunov_spectrum_dde",
        step_fn_or_problem,
        n_steps,
        state0,
        dt,
        lambda: _plain_problem(step_fn_or_problem, state0, buf0, params, dt),
        (("state0", state0), ("buf0", buf0), ("dt", dt), ("n_steps", n_steps)),
    )
    if buf0 is not None or params is not None:
        if not isinstance(problem, DDEProblem):
            raise TypeError("buf0= and params= apply to delay problems only")
        problem = problem._replace(
            buf0=problem.buf0 if buf0 is None else buf0,
            params=problem.params if params is None else params,
        )
    options = RunOptions.of(
        k=k,
        renorm_every=renorm_every,
        t_transient=t_transient,
        seed=seed,
        check_finite=check_finite,
        resume=resume,
        save_states=save_states,
        decimate=decimate,
        qr=qr,
        static_renorm_every=static_renorm_every,
    )
    return run.spectrum(problem, n_steps, options)
