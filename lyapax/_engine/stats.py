"""Standard errors of Lyapunov exponents by non-overlapping batch means.

A Benettin run yields one log-growth ``g_j (k,)`` per renormalisation block
``j = 1..n``; the exponent estimate is ``sum_j g_j / T``. Consecutive blocks are
correlated, so their spread understates the error of the mean. Batch means
(Flegal & Jones 2010, "Batch means and spectral variance estimators in Markov
chain Monte Carlo") group the blocks into ``b`` consecutive batches of ``m``
blocks, long enough to be nearly independent, and use the spread of the batch
rates instead.

Rule used here (the "square-root rule"): ``b = max(2, floor(sqrt(n)))`` batches
of ``m = n // b`` blocks each; the last ``n - b*m < m`` blocks (the latest,
most stationary ones) are left out of the spread but not out of the estimate.
Both the number of batches and the batch length then grow like ``sqrt(n)``, so
the batch rates decorrelate as the run gets longer while there are enough of
them to estimate a variance. With fewer than 2 blocks no spread exists and the
standard error is NaN.

Calibration (tests/test_errorbars.py): when the log-growths fluctuate like a
random walk the true exponent lies within 2 standard errors ~95% of the time.
When much of the fluctuation telescopes (a coboundary: the logistic map at
r = 4, the rotating tangent direction of the Lorenz flow) the error of the
estimate decays faster than the batch spread, and the standard error is
conservative (several times too large at moderate run lengths) but not
optimistic.

The functions use ``jax.numpy`` (shapes fixed at trace time, so they run
inside ``jit``/``vmap`` and the engine's compiled program), or NumPy when every
input is a NumPy array: eager callers with growing arrays then avoid compiling
one small program per new shape.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

if TYPE_CHECKING:  # shape annotations only: jaxtyping costs ~0.1 s to import
    from jaxtyping import Array, ArrayLike, Float

__all__ = ["batch_count", "batch_means_stderr", "binned_stderr", "block_growths"]


def batch_count(n_blocks: int) -> int:
    """Number of batches for ``n_blocks`` blocks: ``max(2, isqrt(n))``; 0 if n < 2."""
    if n_blocks < 2:
        return 0
    return max(2, math.isqrt(n_blocks))


def _xp(*arrays: Any) -> Any:
    """NumPy when every input is a NumPy array or scalar, else ``jax.numpy``."""
    host = all(isinstance(a, np.ndarray | np.generic | float | int) for a in arrays)
    return np if host else jnp


def block_growths(history: Any, times: Any, cum_start: Any) -> jax.Array:
    """Per-block log-growths ``(..., n, k)`` from running estimates.

    Args:
        history: ``(..., n, k)`` running exponent estimates ``cum_j / times_j``.
        times: ``(..., n)`` elapsed times at each renormalisation.
        cum_start: ``(..., k)`` accumulated log-growth before the first block,
            in the column order of ``history`` (zeros for a fresh run).

    Leading axes (sweep rows) broadcast.
    """
    xp = _xp(history, times, cum_start)
    cum = history * times[..., :, None]
    start = xp.asarray(cum_start, cum.dtype)[..., None, :]
    start = xp.broadcast_to(start, (*cum.shape[:-2], 1, cum.shape[-1]))
    previous = xp.concatenate([start, cum[..., :-1, :]], axis=-2)
    return cum - previous


def batch_means_stderr(
    growth: Float[Array, "n k"] | Float[np.ndarray, "n k"],
    block_time: Float[ArrayLike, ""],
    total_time: Float[ArrayLike, ""],
) -> Float[Array, " k"]:
    """Standard error ``(k,)`` of the exponents from block log-growths.

    The batch rates ``r_b`` (log-growth per unit time over batch ``b``, which
    lasts ``tau = m * block_time``) estimate the asymptotic variance per unit
    time as ``tau * var(r_b)``; the standard error of an estimate averaged over
    ``total_time`` is ``sqrt(tau * var(r_b) / total_time)``. For a fresh run
    (``total_time = n * block_time``) this is the textbook ``std(r_b)/sqrt(b)``;
    a resumed chunk uses its own blocks for the variance and the whole run's
    length for the average.

    Args:
        growth: ``(..., n, k)`` log-growth of each renormalisation block.
        block_time: model time per block (``dt * renorm_every``).
        total_time: model time the estimate averages over (scalar or ``(...)``).

    Returns:
        ``(..., k)`` standard errors in 1/time units; NaN when ``n < 2``.
    """
    xp = _xp(growth, block_time, total_time)
    *lead, n, k = growth.shape
    b = batch_count(n)
    if b == 0:
        return xp.full((*lead, k), xp.nan, dtype=growth.dtype)
    m = n // b
    tau = m * block_time
    rates = growth[..., : b * m, :].reshape(*lead, b, m, k).sum(axis=-2) / tau
    var = xp.var(rates, axis=-2, ddof=1)
    return xp.sqrt(var * tau / xp.asarray(total_time)[..., None])


def _isqrt(n: jax.Array) -> jax.Array:
    """``floor(sqrt(n))`` of a non-negative int32 array, exact (no overflow)."""
    r = jnp.floor(jnp.sqrt(n.astype(jnp.result_type(float)))).astype(n.dtype)
    r = jnp.where((r > 0) & (r > n // jnp.maximum(r, 1)), r - 1, r)
    return jnp.where(r + 1 <= n // (r + 1), r + 1, r)


def running_stderr(
    cum: jax.Array, cum0: jax.Array, n: jax.Array, block_time: Any, total_time: Any
) -> jax.Array:
    """:func:`batch_means_stderr` of the first ``n`` blocks, ``n`` traced.

    Args:
        cum: ``(capacity, k)`` accumulated log-growth after each block; rows
            from ``n`` on are ignored.
        cum0: ``(k,)`` accumulated log-growth before the first block.
        n: number of blocks (int32, may be traced).
        block_time, total_time: as in :func:`batch_means_stderr`.

    The batches are those of :func:`batch_count`; a batch's log-growth is the
    difference of ``cum`` at its ends (the same sums, rounded once).
    """
    capacity = cum.shape[0]
    b = jnp.maximum(2, _isqrt(n))
    m = jnp.maximum(n // b, 1)
    n_max = max(2, math.isqrt(capacity))  # most batches any n <= capacity has
    ends = jnp.arange(n_max + 1) * m - 1  # last block of each batch, -1 = start
    at = jnp.take(cum, jnp.clip(ends, 0, capacity - 1), axis=0)
    at = jnp.where((ends < 0)[:, None], cum0, at)
    tau = m.astype(cum.dtype) * block_time
    rates = (at[1:] - at[:-1]) / tau
    used = (jnp.arange(n_max) < b)[:, None]
    count = b.astype(cum.dtype)
    mean = jnp.sum(jnp.where(used, rates, 0.0), axis=0) / count
    var = jnp.sum(jnp.where(used, (rates - mean) ** 2, 0.0), axis=0) / (count - 1)
    return jnp.where(n < 2, jnp.nan, jnp.sqrt(var * tau / total_time))


def binned_stderr(
    edges: np.ndarray, width: int, n: int, block_time: float, total_time: float
) -> np.ndarray:
    """:func:`batch_means_stderr` from a bounded summary of the blocks (NumPy).

    Args:
        edges: ``(c + 1, k)`` accumulated log-growth after blocks ``0, w, 2w,
            ..., c*w`` (row 0: before the first block), ``c*w <= n < (c+1)*w``.
        width: ``w``, blocks per bin (a power of two).
        n: blocks run.
        block_time, total_time: as in :func:`batch_means_stderr`.

    The batches are those of :func:`batch_count` with their length rounded
    down to whole bins (``max(1, m // w)`` bins each, as many as fit, at most
    ``b``): with ``w = 1`` exactly the square-root rule; once bins hold several
    blocks, batches of whole bins (their number bounded by ``c``).
    """
    k = edges.shape[1]
    b = batch_count(n)
    if b == 0:
        return np.full(k, np.nan, dtype=edges.dtype)
    per = max(1, (n // b) // width)  # bins per batch
    count = min(b, (edges.shape[0] - 1) // per)
    if count < 2:
        return np.full(k, np.nan, dtype=edges.dtype)
    tau = per * width * block_time
    at = edges[: count * per + 1 : per]
    rates = (at[1:] - at[:-1]) / tau
    var = np.var(rates, axis=0, ddof=1)
    return np.sqrt(var * tau / total_time)
