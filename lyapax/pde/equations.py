"""Two standard semilinear PDEs: Kuramoto-Sivashinsky and complex
Ginzburg-Landau, as :class:`~lyapax.pde.problem.SemilinearProblem` s.

Without ``state0`` each starts from a seeded random field (``numpy`` seed 0)
advanced over a transient of ``TRANSIENT`` time units by its own step, so it
lies on (near) the attractor.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax.pde.problem import (
    SemilinearProblem,
    check_n_points,
    semilinear_problem,
    wavenumbers,
)

__all__ = ["TRANSIENT", "complex_ginzburg_landau", "kuramoto_sivashinsky"]

#: model time run from the seeded random field to the default ``state0``.
TRANSIENT = 200.0


def _square(u: Any) -> Any:
    return u * u


class _CGLNonlinear(eqx.Module):
    """``-(1 + i c) |A|^2 A`` on ``[Re A, Im A]`` (``c`` a runtime leaf)."""

    c: Any

    def __call__(self, z: Any) -> Any:
        x, y = jnp.split(z, 2)
        a2 = x * x + y * y
        return -jnp.concatenate([a2 * (x - self.c * y), a2 * (y + self.c * x)])


@eqx.filter_jit
def _advance(step: Any, u: Any, n_steps: Any) -> Any:
    return jax.lax.fori_loop(0, n_steps, lambda _, x: step(x), u)


def _check_length(length: Any) -> Any:
    if not validate.is_traced(length):
        validate.positive_float("length", length)
    return validate.float_leaf(length)


def _q(n: int, length: Any, complex_field: bool) -> Any:
    xp = jnp if validate.is_traced(length) else np
    return 2 * np.pi * xp.asarray(wavenumbers(n, complex_field)) / length


def _problem(
    linear: Any,
    nonlinear: Any,
    state0: Any,
    seeded: Callable[[np.random.Generator], np.ndarray],
    dt: Any,
    integrator: str,
    dealias: bool,
    multiplier: Any = None,
) -> SemilinearProblem:
    """The problem from ``state0``; without it, from ``seeded(rng)`` (numpy
    seed 0) advanced over ``TRANSIENT`` time units by the problem's step."""
    fresh = state0 is None
    if fresh:
        state0 = seeded(np.random.default_rng(0))
    problem = semilinear_problem(
        linear, nonlinear, state0, dt, integrator, dealias=dealias,
        nonlinear_multiplier=multiplier,
    )  # fmt: skip
    if not fresh:
        return problem
    n_steps = max(1, round(TRANSIENT / float(problem.dt)))
    u = _advance(problem.step_fn, problem.state0, jnp.asarray(n_steps, jnp.int32))
    return problem._replace(state0=u)


def _zero_mean_noise(rng: np.random.Generator, n: int) -> np.ndarray:
    u = 0.1 * rng.standard_normal(n)
    return u - u.mean()


def _unit_field_noise(rng: np.random.Generator, n: int) -> np.ndarray:
    noise = 0.01 * rng.standard_normal(2 * n)
    return np.concatenate([np.ones(n), np.zeros(n)]) + noise


def kuramoto_sivashinsky(
    n_points: int,
    length: float,
    state0: Any = None,
    dt: float = 0.25,
    integrator: str = "etdrk4",
    *,
    dealias: bool = True,
) -> SemilinearProblem:
    """``u_t = -u u_x - u_xx - u_xxxx`` on ``[0, length)``, periodic.

    Symbol ``q^2 - q^4`` per ``rfft`` mode (``q = 2 pi k / length``); the
    advection is ``-(u^2/2)_x``, written as ``N = u^2`` times the multiplier
    ``-i q / 2`` (zero at the Nyquist mode). The mean (mode 0) is kept in the
    state and conserved: one exponent is exactly that of ``L_0 = 0``.

    Args:
        n_points: grid points (even, >= 8 with ``dealias``).
        length: domain length ``L > 0`` (runtime data).
        state0: initial grid field ``(n_points,)``; default: a seeded random
            zero-mean field of amplitude 0.1 after ``TRANSIENT`` time units.
        dt: time step (runtime data).
        integrator: ``"etdrk4"`` or ``"ifrk4"``.
        dealias: the 2/3 rule (see :func:`semilinear_problem`).

    Raises:
        ValueError: ``n_points`` odd or too small, ``length <= 0``, and the
            errors of :func:`semilinear_problem`.
    """
    n = check_n_points(n_points, dealias)
    length = _check_length(length)
    q = _q(n, length, False)
    linear = q**2 - q**4
    nyquist = np.arange(n // 2 + 1) == n // 2
    multiplier = -0.5j * q * np.where(nyquist, 0.0, 1.0)
    seeded = partial(_zero_mean_noise, n=n)
    return _problem(
        linear, _square, state0, seeded, dt, integrator, dealias, multiplier
    )


def complex_ginzburg_landau(
    n_points: int,
    length: float,
    b: float,
    c: float,
    state0: Any = None,
    dt: float = 0.05,
    integrator: str = "etdrk4",
    *,
    dealias: bool = True,
) -> SemilinearProblem:
    """``A_t = A + (1 + i b) A_xx - (1 + i c) |A|^2 A`` on ``[0, length)``.

    The complex field is stored as two real fields, ``state = [Re A, Im A]``
    (``2 n_points`` values); the symbol ``1 - (1 + i b) q^2`` acts on the
    ``fft`` modes of ``A`` (NumPy order). ``b``, ``c`` and ``length`` are
    runtime data. The uniform oscillation ``A = e^{-i c t}`` is stable when
    ``1 + b c > 0`` (Benjamin-Feir-Newell).

    Args:
        n_points: grid points (even, >= 8 with ``dealias``).
        length: domain length ``> 0``.
        b, c: linear and nonlinear dispersion.
        state0: ``(2 n_points,)``; default: ``A = 1`` plus seeded noise of
            amplitude 0.01 after ``TRANSIENT`` time units.
        dt, integrator, dealias: as for :func:`kuramoto_sivashinsky`.

    Raises:
        ValueError: as :func:`kuramoto_sivashinsky`.
    """
    n = check_n_points(n_points, dealias)
    length = _check_length(length)
    b, c = validate.float_leaf(b), validate.float_leaf(c)
    q = _q(n, length, True)
    linear = 1 - (1 + 1j * b) * q**2
    seeded = partial(_unit_field_noise, n=n)
    return _problem(linear, _CGLNonlinear(c), state0, seeded, dt, integrator, dealias)
