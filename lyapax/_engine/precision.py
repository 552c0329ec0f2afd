"""The library's own linear algebra at full precision, and dtype-free random frames.

On a TPU a float32 matrix product runs in bfloat16 passes by default (about
three digits; ``jax_default_matmul_precision`` chooses). The products that
are the library's own (Gram and projection products, the covariant vectors'
coefficients, the shadowing least squares, neighbour distances) go through
:func:`matmul` and :func:`einsum`, which ask for
``jax.lax.Precision.HIGHEST`` whatever that default says; the user's vector
field (and so the tangent products through it) keeps the user's setting. On
CPU the precision argument changes nothing: float32 and float64 products are
computed in full there either way.

:func:`standard_normal` draws random frames in float64 whenever float64
exists (``jax_enable_x64``) and rounds them to the run's dtype, so that one
seed gives one frame for every precision: the float64 frame as before, and a
float32 run starts from that frame rounded. With x64 off only float32 can be
drawn, and a seed's float32 frame is JAX's float32 draw.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array

__all__ = ["HIGHEST", "einsum", "matmul", "standard_normal"]

HIGHEST = jax.lax.Precision.HIGHEST


def matmul(a: Any, b: Any) -> Array:
    """``a @ b`` at ``Precision.HIGHEST``."""
    return jnp.matmul(a, b, precision=HIGHEST)


def einsum(subscripts: str, *operands: Any) -> Array:
    """``jnp.einsum`` at ``Precision.HIGHEST``."""
    return jnp.einsum(subscripts, *operands, precision=HIGHEST)


def draw_dtype(dtype: Any) -> Any:
    """The dtype a frame of ``dtype`` is drawn in: float64 when x64 is on,
    else ``dtype`` itself."""
    return jnp.float64 if jax.config.jax_enable_x64 else dtype  # type: ignore[attr-defined]


def standard_normal(key: Any, shape: tuple[int, ...], dtype: Any) -> Array:
    """``jax.random.normal(key, shape)`` drawn in :func:`draw_dtype` and
    rounded to ``dtype``: bit-identical to a float64 draw in float64."""
    return jax.random.normal(key, shape, draw_dtype(dtype)).astype(dtype)
