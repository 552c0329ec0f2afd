"""Delay embedding of a measured scalar series, and the checks its callers share.

A scalar series ``x_0, x_1, ...`` becomes the vectors ``X_i = (x_i,
x_{i + lag}, ..., x_{i + (dimension - 1) lag})`` (Takens 1981); for a generic
observable of a smooth system and ``dimension > 2 D`` (``D`` the attractor's
box-counting dimension) they are a smooth copy of the attractor, so distances
between them grow at the system's rates.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from lyapax._engine import validate
from lyapax._engine.blas_threads import holds_one_blas_thread

__all__ = ["delay_embedding"]


def as_series(name: str, series: Any, *, minimum: int = 2) -> jax.Array:
    """``series`` (NumPy or JAX, ``(n,)``) as a finite inexact JAX array.

    Raises:
        TypeError: not array-like.
        ValueError: not 1-D, fewer than ``minimum`` samples, nan or inf.
    """
    try:
        arr = series if isinstance(series, jax.Array) else jnp.asarray(series)
    except TypeError:
        raise TypeError(
            f"{name} must be a 1-D array of samples (NumPy or JAX); got "
            f"{type(series).__name__}"
        ) from None
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array (n,) of one observable; got shape "
            f"{arr.shape} (pass one column, e.g. {name}[:, 0])"
        )
    if arr.shape[0] < minimum:
        raise ValueError(
            f"{name} has {arr.shape[0]} samples; at least {minimum} are needed"
        )
    if not jnp.issubdtype(arr.dtype, jnp.inexact):
        arr = arr.astype(jnp.result_type(float))
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(f"{name} must be real; got dtype {arr.dtype}")
    if not validate.is_traced(arr) and not np.isfinite(np.asarray(arr)).all():
        bad = np.flatnonzero(~np.isfinite(np.asarray(arr)))
        raise ValueError(
            f"{name} must be finite; samples {bad[:10].tolist()} are nan or inf"
        )
    return arr


def embedding_size(n: int, dimension: Any, lag: Any) -> tuple[int, int, int]:
    """``(dimension, lag, n_vectors)`` checked for a series of ``n`` samples.

    Raises:
        TypeError: ``dimension`` or ``lag`` not an integer.
        ValueError: ``dimension`` or ``lag`` below 1, or the series shorter
            than one embedded vector (``(dimension - 1) * lag + 1`` samples).
    """
    dimension = validate.as_int("dimension", dimension, minimum=1)
    lag = validate.as_int("lag", lag, minimum=1)
    span = (dimension - 1) * lag
    if n <= span:
        raise ValueError(
            f"series of {n} samples is too short for the embedding dimension="
            f"{dimension}, lag={lag}: one vector spans (dimension - 1) * lag + 1 "
            f"= {span + 1} samples; use a longer series or a smaller "
            "dimension or lag"
        )
    return dimension, lag, n - span


def embed(x: jax.Array, dimension: int, lag: int, n_vectors: int) -> jax.Array:
    """``(n_vectors, dimension)`` delay vectors of a checked series ``x``."""
    rows = jnp.arange(n_vectors)[:, None] + lag * jnp.arange(dimension)[None, :]
    return x[rows]


@holds_one_blas_thread
def delay_embedding(
    series: Float[ArrayLike, " n"], dimension: int, lag: int = 1
) -> Float[Array, "n_vectors dimension"]:
    """Delay vectors ``X_i = (x_i, x_{i+lag}, ..., x_{i+(dimension-1) lag})``.

    Args:
        series: ``(n,)`` samples of one observable at a fixed interval (NumPy
            or JAX).
        dimension: embedding dimension ``m >= 1``.
        lag: delay in samples, ``>= 1``.

    Returns:
        ``(n - (dimension - 1) lag, dimension)`` JAX array; row ``i`` starts at
        sample ``i``.

    Raises:
        ValueError / TypeError: ``series`` not a finite 1-D array; ``dimension``
            or ``lag`` not an integer >= 1; the series shorter than one vector.
    """
    x = as_series("series", series, minimum=1)
    dimension, lag, n_vectors = embedding_size(x.shape[0], dimension, lag)
    return embed(x, dimension, lag, n_vectors)
