"""``sin`` and ``cos`` together from plain arithmetic: FTLE fields on XLA:CPU, and
small float64 arrays on a TPU (:func:`lyapax._engine.precision.float_sin`).

XLA:CPU evaluates a float64 ``sin`` or ``cos`` as one scalar library call per
element, which also keeps the loop around it from being vectorised; in an
FTLE field of a trigonometric velocity field these calls are most of the run
time. :func:`sincos` computes both values from one argument reduction and two
polynomials, in elementwise multiply-adds that XLA fuses and vectorises.

Method: ``k = round(x * 2/pi)``, ``r = x - k pi/2`` in three parts (Cody and
Waite: ``pi/2 = P1 + P2 + P3`` with ``P1``, ``P2`` of 30 significant bits, so
``k P1`` and ``k P2`` are exact for ``|k| < 2**23``), ``|r| <= pi/4``; then the
Taylor series of ``sin r`` to ``r**17`` and of ``cos r`` to ``r**16``, whose
truncation errors on ``|r| <= pi/4`` are below ``1e-19`` and ``3e-18``
(``r**19/19!``, ``r**18/18!``); the quadrant ``k mod 4`` swaps the two and
picks their signs. Measured against the library functions: at most
1.1e-16 absolute error for ``|x| <= 1e6``.

Arguments beyond :data:`LIMIT` (where the reduction would lose bits), and
infinities, give ``nan``; callers that cannot rule them out recompute with
``jnp.sin``/``jnp.cos`` where a ``nan`` appears (see
:func:`lyapax.finite_time.field.ftle_field`).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = ["LIMIT", "sincos"]

#: Largest ``|x|`` reduced exactly enough (``|k| < 2**22``).
LIMIT = 2.0**22

_PI = "3.14159265358979323846264338327950288419716939937510582097494459"


def _split_half_pi() -> tuple[float, float, float]:
    """``pi/2`` as ``P1 + P2 + P3``: two 30-bit parts and a float64 rest."""
    with localcontext() as ctx:
        ctx.prec = 60
        rest = Decimal(_PI) / 2
        parts = []
        for _ in range(2):
            mantissa, exponent = math.frexp(float(rest))
            part = math.ldexp(math.floor(mantissa * 2**30) / 2**30, exponent)
            parts.append(part)
            rest -= Decimal(part)
        return parts[0], parts[1], float(rest)


_P1, _P2, _P3 = _split_half_pi()
_TWO_OVER_PI = float(2 / Decimal(_PI))
#: Taylor coefficients: sin r = r + r z S(z), cos r = 1 + z C(z), z = r**2.
_S = [(-1) ** i / math.factorial(2 * i + 1) for i in range(1, 9)]
_C = [(-1) ** i / math.factorial(2 * i) for i in range(1, 9)]


def _horner(coefficients: list[float], z: Any) -> Any:
    acc = coefficients[-1]
    for c in coefficients[-2::-1]:
        acc = acc * z + c
    return acc


def sincos(x: Any) -> tuple[Any, Any]:
    """``(sin x, cos x)`` for a float array ``x`` (``nan`` where ``|x| >
    LIMIT`` or ``x`` is not finite); same shape and dtype as ``x``."""
    x = jnp.asarray(x)
    k = jnp.round(x * _TWO_OVER_PI)
    r = ((x - k * _P1) - k * _P2) - k * _P3
    z = r * r
    s = r + r * z * _horner(_S, z)
    c = 1.0 + z * _horner(_C, z)
    ok = jnp.abs(x) <= LIMIT
    q = jnp.where(ok, k, 0.0).astype(jnp.int32) & 3
    # Quadrants 0..3: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s).
    swap = (q & 1) == 1
    sin_sign = (1 - 2 * ((q >> 1) & 1)).astype(x.dtype)
    cos_sign = (1 - 2 * (((q + 1) >> 1) & 1)).astype(x.dtype)
    nan = jnp.asarray(np.nan, x.dtype)
    sin = jnp.where(swap, c, s) * sin_sign
    cos = jnp.where(swap, s, c) * cos_sign
    return jnp.where(ok, sin, nan), jnp.where(ok, cos, nan)
