"""Semilinear PDE problems ``u_t = L u + N(u)`` on a periodic grid.

How the symbol of ``L`` is given (``d`` the length of the state):

- one real field of ``n`` points (``d = n``): ``linear`` has ``n // 2 + 1``
  values, one per ``rfft`` mode ``k = 0 .. n/2`` (wavenumber ``2 pi k /
  length``);
- ``m`` real fields of ``n`` points each, stored row after row (``d = m n``):
  ``linear`` has shape ``(m, n // 2 + 1)``, one symbol per field;
- one complex field ``A`` of ``n`` points stored as ``[Re A, Im A]`` (``d = 2
  n``): ``linear`` has ``n`` values, one per ``fft`` mode in NumPy's order
  (``numpy.fft.fftfreq(n) * n``): the symbol acts on ``A``, so ``(1 + i b)
  A_xx`` is ``-(1 + i b) q^2``, not a 2x2 block on the two real fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax._engine.abstract import AbstractProblem, EngineView
from lyapax._engine.pairs import Pair
from lyapax._engine.precision import emulated_float64
from lyapax._engine.problem import ODEProblem, with_state0
from lyapax.pde._coefficients import etdrk4_coefficients, ifrk4_coefficients
from lyapax.pde._step import ETDRK4Step, IFRK4Step, Spectral

__all__ = ["INTEGRATORS", "SemilinearProblem", "semilinear_problem"]

INTEGRATORS = ("etdrk4", "ifrk4")


class _SemilinearProblemFields(NamedTuple):
    """The fields of :class:`SemilinearProblem` (its published ``NamedTuple`` form)."""

    step_fn: Any
    state0: Any
    dt: Any
    linear: Any
    n_points: int
    n_fields: int
    complex_field: bool
    integrator: str
    dealias: bool


class SemilinearProblem(_SemilinearProblemFields, AbstractProblem):
    """A semilinear PDE ready for every engine entry point.

    ``step_fn`` the pseudo-spectral step (an ``AbstractStep``), ``state0 (d,)``
    the grid field, ``dt``; ``linear`` the symbol as given; ``n_points`` grid
    points per field, ``n_fields`` real fields (2 for a complex field),
    ``complex_field``; ``integrator``; ``dealias``.
    """

    __slots__ = ()

    def for_engine(self) -> EngineView:
        """The step on the grid field, run as a map (an ODE problem's view)."""
        return ODEProblem(self.step_fn, self.state0, self.dt).for_engine()

    def with_params(self, params: Any) -> SemilinearProblem:
        raise ValueError(
            "params_batch was given with a PDE problem, whose parameters live in "
            "its symbol and nonlinear term; sweep them with problem_family("
            "lambda p: kuramoto_sivashinsky(..., length=p)) (or semilinear_problem)"
        )

    def with_state(self, state0: Any) -> SemilinearProblem:
        return with_state0(self, state0)


def _layout(linear: Any, d: int) -> tuple[int, int, bool]:
    """``(n_points, n_fields, complex_field)`` from the symbol's shape."""
    shape = tuple(np.shape(linear))
    allowed = (
        f"expected ({d // 2 + 1},) for one real field of {d} points, "
        f"({d // 2},) for a complex field of {d // 2} points stored as "
        f"[Re, Im], or (m, n // 2 + 1) for m real fields of n = {d} / m points"
    )
    if len(shape) == 1 and shape[0] == d // 2 + 1:
        return d, 1, False
    if len(shape) == 1 and 2 * shape[0] == d:
        return d // 2, 2, True
    if len(shape) == 2 and shape[0] >= 1 and d % shape[0] == 0:
        n = d // shape[0]
        if shape[1] == n // 2 + 1:
            return n, shape[0], False
    raise ValueError(f"linear has shape {shape} for a state of length {d}; {allowed}")


def wavenumbers(n_points: int, complex_field: bool) -> np.ndarray:
    """The integer wavenumber of each mode (``rfft`` or ``fft`` order)."""
    if complex_field:
        return np.fft.fftfreq(n_points, 1.0 / n_points)
    return np.arange(n_points // 2 + 1, dtype=float)


def check_n_points(n_points: Any, dealias: bool, name: str = "n_points") -> int:
    """An even grid size, at least 4 (8 with the 2/3 rule, so that modes 0..2
    are kept)."""
    n = validate.as_int(name, n_points)
    smallest = 8 if dealias else 4
    if n % 2 or n < smallest:
        raise ValueError(
            f"{name} must be an even integer >= {smallest}"
            f"{' with dealias=True (the 2/3 rule keeps |k| < n/3)' if dealias else ''}"
            f"; got {name}={n}"
        )
    return n


def semilinear_problem(
    linear: Any,
    nonlinear: Callable[[Any], Any],
    state0: Any,
    dt: Any,
    integrator: str = "etdrk4",
    *,
    dealias: bool = True,
    nonlinear_multiplier: Any = None,
) -> SemilinearProblem:
    """Problem for ``u_t = L u + N(u)`` on a periodic grid (pseudo-spectral).

    Args:
        linear: Fourier symbol of ``L`` (see the module docstring for its
            shape: ``(n // 2 + 1,)`` for a real field of ``n`` points).
            Complex values allowed. Runtime data: a new symbol of the same
            shape compiles nothing new.
        nonlinear: ``N``: the grid field ``(d,)`` -> its nonlinear term
            ``(d,)`` on the grid (same layout, dtype and shape).
        state0: initial grid field ``(d,)``.
        dt: time step (model time units), runtime data.
        integrator: ``"etdrk4"`` (Cox & Matthews 2002, coefficients by Kassam
            & Trefethen's 2005 contour integral in float64 at build time) or
            ``"ifrk4"`` (classical RK4 on the integrating factor ``e^{-tL}``).
        dealias: zero the modes ``3 |k| >= n`` of ``N̂`` (Orszag's 2/3 rule,
            exact for quadratic ``N``). The state keeps all ``n`` modes; the
            truncated ones then evolve under ``L`` alone.
        nonlinear_multiplier: optional Fourier multiplier applied to ``N̂``
            (same shape as ``linear``), e.g. ``-0.5j * q`` to write
            ``-(u^2/2)_x`` as ``nonlinear=lambda u: u * u``: a derivative of
            ``N`` without an extra pair of transforms.

    Returns:
        :class:`SemilinearProblem`, accepted by ``lyapunov_spectrum``,
        ``covariant_vectors``, ``finite_time_exponents``, sweeps and
        ``run_until_converged``.

    Raises:
        ValueError: an unknown ``integrator``, a ``linear`` or
            ``nonlinear_multiplier`` of the wrong shape, an odd or too small
            grid, ``nonlinear`` returning another shape or dtype, a ``dt``
            that makes the coefficients non-finite.
        TypeError: ``nonlinear`` not callable, ``dealias`` not a bool.

    Warns:
        UserWarning: ``dt * max Re L > 20`` (coefficients lose precision).
    """
    if integrator not in INTEGRATORS:
        raise ValueError(
            f"integrator must be one of {INTEGRATORS}; got integrator={integrator!r}"
        )
    if not isinstance(dealias, bool):
        raise TypeError(f"dealias must be True or False; got {dealias!r}")
    if not callable(nonlinear):
        raise TypeError(
            f"nonlinear must be callable (grid field (d,) -> (d,)); got "
            f"{type(nonlinear).__name__}"
        )
    u0 = validate.as_state("state0", state0)
    dt = validate.as_dt(dt)
    if emulated_float64(u0.dtype) and validate.is_traced(
        (linear, dt, nonlinear_multiplier)
    ):
        # The coefficients of a traced symbol are computed in the program,
        # in complex arithmetic, which a TPU's float64 does not have.
        raise ValueError(
            f"lyapax.pde: a {u0.dtype} problem whose symbol, multiplier or dt "
            "is traced (problem_family, jax.vmap) cannot be built on a TPU, "
            "whose float64 emulation has no complex128 for the integrator's "
            "coefficients: give the family a float32 state0 (the sweep's "
            "precision= casts only after the problem is built), build one "
            "problem per parameter value, or sweep on the CPU"
        )
    d = int(u0.shape[0])
    n, n_fields, complex_field = _layout(linear, d)
    check_n_points(n, dealias, name="the grid size of state0")
    k = wavenumbers(n, complex_field)
    mask = (3 * np.abs(k) < n).astype(float) if dealias else np.ones_like(k)
    if nonlinear_multiplier is not None and np.shape(nonlinear_multiplier) != np.shape(
        linear
    ):
        raise ValueError(
            f"nonlinear_multiplier has shape {np.shape(nonlinear_multiplier)}; "
            f"expected the shape of linear, {np.shape(linear)}"
        )
    out = jax.eval_shape(nonlinear, u0)
    if getattr(out, "shape", None) != u0.shape or getattr(out, "dtype", None) != (
        u0.dtype
    ):
        raise ValueError(
            f"nonlinear must map the grid field of shape {u0.shape} and dtype "
            f"{u0.dtype} to the same; it returned shape "
            f"{getattr(out, 'shape', None)} and dtype {getattr(out, 'dtype', None)}"
        )
    spectral = Spectral(
        nonlinear,
        jnp.asarray(mask, dtype=u0.dtype),
        None
        if nonlinear_multiplier is None
        else _in_precision(nonlinear_multiplier, u0.dtype),
        n,
        n_fields,
        complex_field,
    )
    if integrator == "etdrk4":
        step: Any = ETDRK4Step(
            spectral, _leaves(etdrk4_coefficients(linear, dt), u0.dtype)
        )
    else:
        step = IFRK4Step(
            spectral, _leaves(ifrk4_coefficients(linear, dt), u0.dtype), dt
        )
    return SemilinearProblem(
        step, u0, dt, linear, n, n_fields, complex_field, integrator, dealias
    )


def _leaves(coeffs: Any, dtype: Any) -> Any:
    """Coefficients as JAX arrays (leaves of the step: runtime data) in the
    precision of the state's ``dtype`` (computed in float64 on the host, they
    made a float32 state's step float64 where x64 is on)."""
    return type(coeffs)(*(_in_precision(c, dtype) for c in coeffs))


def _in_precision(x: Any, dtype: Any) -> Any:
    """``x`` as a JAX array in ``dtype``'s precision, complex kept complex
    (as a :class:`~lyapax._engine.fft.Pair` where that float64 is emulated:
    a TPU has no complex128)."""
    real = np.finfo(dtype).dtype
    if np.iscomplexobj(x):
        if emulated_float64(real):
            return Pair.of(x, real)
        return jnp.asarray(x, np.result_type(real, np.complex64))
    return jnp.asarray(x, real)
