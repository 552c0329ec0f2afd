"""ETDRK4 and integrating-factor coefficients of a diagonal linear part.

Kassam & Trefethen (2005): the ETDRK4 functions ``phi(z) = (e^z - 1)/z`` and
its relatives lose every digit to cancellation for small ``|z|``; evaluated
as the mean of the function over a circle of radius 1 around each ``z = h L``
(the trapezoidal rule of Cauchy's integral, geometrically convergent) they
keep full precision everywhere. The coefficients are computed in float64
with NumPy when the symbol and step are concrete (at build time), with
``jax.numpy`` when they are traced (a parameter swept by ``problem_family``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax._engine.warn import warn_at_caller

#: points on the contour (the full circle: a complex symbol is not symmetric).
_N_CONTOUR = 64
#: ``h Re L`` above this: the fastest mode grows by more than e^20 per step.
_MAX_GROWTH = 20.0


class ETDRK4Coefficients(NamedTuple):
    """``E = e^{hL}``, ``E2 = e^{hL/2}``, ``Q`` and ``f1, f2, f3`` of Cox &
    Matthews' scheme in Kassam & Trefethen's notation (one per mode)."""

    E: Any
    E2: Any
    Q: Any
    f1: Any
    f2: Any
    f3: Any


class IFRK4Coefficients(NamedTuple):
    """``E = e^{hL}`` and ``E2 = e^{hL/2}`` of the integrating-factor RK4."""

    E: Any
    E2: Any


def _xp(*values: Any) -> Any:
    return jnp if validate.is_traced(values) else np


def _real_if_real(xp: Any, symbol: Any, value: Any) -> Any:
    return value.real if not xp.iscomplexobj(symbol) else value


def etdrk4_coefficients(symbol: Any, dt: Any) -> ETDRK4Coefficients:
    """The ETDRK4 coefficients of ``symbol`` (any shape) with step ``dt``."""
    xp = _xp(symbol, dt)
    ctype = np.complex128 if xp is np else None
    L = xp.asarray(symbol)
    hL = (dt * L).astype(ctype) if ctype else dt * L + 0j
    roots = xp.exp(2j * np.pi * (xp.arange(_N_CONTOUR) + 0.5) / _N_CONTOUR)
    r = hL[..., None] + roots
    er = xp.exp(r)

    def mean(values: Any) -> Any:
        return _real_if_real(xp, L, xp.mean(values, axis=-1))

    coeffs = ETDRK4Coefficients(
        E=_real_if_real(xp, L, xp.exp(hL)),
        E2=_real_if_real(xp, L, xp.exp(hL / 2)),
        Q=dt * mean((xp.exp(r / 2) - 1) / r),
        f1=dt * mean((-4 - r + er * (4 - 3 * r + r**2)) / r**3),
        f2=dt * mean((2 + r + er * (r - 2)) / r**3),
        f3=dt * mean((-4 - 3 * r - r**2 + er * (4 - r)) / r**3),
    )
    if xp is np:
        _check(L, dt, coeffs)
    return coeffs


def ifrk4_coefficients(symbol: Any, dt: Any) -> IFRK4Coefficients:
    """``e^{hL}`` and ``e^{hL/2}`` of ``symbol`` with step ``dt``."""
    xp = _xp(symbol, dt)
    L = xp.asarray(symbol)
    coeffs = IFRK4Coefficients(xp.exp(dt * L), xp.exp(dt * L / 2))
    if xp is np:
        _check(L, dt, coeffs)
    return coeffs


def _check(L: Any, dt: float, coeffs: Any) -> None:
    """Non-finite coefficients raise; a step on which the fastest mode grows
    by more than e^20 warns (its coefficients are huge and cancel)."""
    if not all(np.isfinite(np.asarray(c)).all() for c in coeffs):
        raise ValueError(
            f"dt={float(dt)!r} with this linear symbol (max Re L = "
            f"{float(np.max(L.real)):.4g}) gives non-finite integrator "
            "coefficients (exp overflow); use a smaller dt"
        )
    growth = float(dt) * float(np.max(L.real))
    if growth > _MAX_GROWTH:
        warn_at_caller(
            f"dt={float(dt)!r}: the fastest-growing mode grows by e^{growth:.3g} "
            f"per step (dt * max Re L > {_MAX_GROWTH:g}); the exponential "
            "integrator's coefficients lose precision. Use a smaller dt."
        )
