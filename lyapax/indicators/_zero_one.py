"""The 0-1 test for chaos (Gottwald & Melbourne 2004, 2009).

An observable ``phi_j`` drives the translation variables ``z_c(n) = sum_{j<=n}
phi_j e^{i j c}``. For regular dynamics ``z_c`` stays bounded; for chaotic
dynamics it diffuses like a Brownian motion, so its mean square displacement
``M_c(n)`` grows linearly in ``n``. ``K_c``, the correlation of ``n`` with the
displacement ``D_c(n) = M_c(n) - (E phi)^2 (1 - cos n c) / (1 - cos c)`` (the
bounded oscillating term removed, G&M 2009), is near 1 for chaos and near 0 for
regular motion; the median over random frequencies ``c`` removes the few
``c`` that resonate with a regular orbit's frequencies.

``M_c`` for every lag comes from one FFT per frequency (the displacement sum
splits into two running sums of ``|z|^2`` and an autocorrelation), so a series
of ``N`` samples costs ``O(n_frequencies N log N)``; a batch of series (one per
parameter value) runs as one vmapped program.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from lyapax._engine import fft as fourier
from lyapax._engine import validate
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.precision import cumsum, draw_dtype, float_cos, float_sin

__all__ = ["ZeroOneResult", "zero_one_test"]

#: Complex numbers held at once by one chunk of a batch (``batch x frequencies
#: x 2 N``): 2^23 complex128 are 128 MiB.
_CHUNK_ELEMENTS = 2**23

#: Frequencies are drawn from ``(pi/5, 4 pi/5)``: away from 0 and pi, where
#: ``1 - cos c`` is small and the oscillating term is ill-conditioned (G&M 2009).
C_RANGE = (math.pi / 5, 4 * math.pi / 5)


class ZeroOneResult(NamedTuple):
    """The 0-1 test of one series or a batch.

    ``K (*batch)``: the median over ``frequencies`` of ``K_per_frequency
    (*batch, n_frequencies)``, each in ``[-1, 1]`` (a correlation; ~1 chaotic,
    ~0 regular); ``frequencies (n_frequencies,)``: the ``c`` used, shared by
    the batch; ``n_cut``: the largest lag of the displacement fitted.
    """

    K: Float[Array, "*batch"]
    K_per_frequency: Float[Array, "*batch n_frequencies"]
    frequencies: Float[Array, " n_frequencies"]
    n_cut: int


class _Options(NamedTuple):
    n_frequencies: int
    n_cut: int
    seed: int
    batch_size: int

    @classmethod
    def of(
        cls, n: int, n_batch: int, n_frequencies: Any, n_cut: Any, seed: Any, bs: Any
    ) -> _Options:
        n_frequencies = validate.as_int("n_frequencies", n_frequencies, minimum=1)
        seed = validate.as_int("seed", seed)
        if n_cut is None:
            n_cut = max(n // 10, 2)
        n_cut = validate.as_int("n_cut", n_cut, minimum=2)
        if n_cut > n // 2:
            raise ValueError(
                f"n_cut={n_cut} must be at most half the series length "
                f"({n} samples, so n_cut <= {n // 2}); G&M recommend n_cut = n/10"
            )
        if bs is None:
            bs = max(1, _CHUNK_ELEMENTS // (n_frequencies * 2 * n))
        bs = min(validate.as_int("batch_size", bs, minimum=1), max(n_batch, 1))
        return cls(n_frequencies, n_cut, seed, bs)


def _k_of_frequency(phi: jax.Array, c: jax.Array, n_cut: int) -> jax.Array:
    """``K_c`` of one series ``phi (N,)`` at frequency ``c``."""
    n = phi.shape[0]
    j = jnp.arange(1, n + 1, dtype=phi.dtype)
    # The walk z = p + i q in its real parts: a TPU's float64 has no complex.
    pq = cumsum(phi * jnp.stack([float_cos(c * j), float_sin(c * j)]), axis=-1)
    # sum_{j<=N-m} |z_{j+m} - z_j|^2 = S[N-m] + (S[N] - S[m]) - 2 R(m), with
    # S the running sum of |z|^2 and R(m) = sum_j p_j p_{j+m} + q_j q_{j+m}.
    sq = jnp.concatenate([jnp.zeros(1, phi.dtype), cumsum(jnp.sum(pq**2, axis=0))])
    corr = jnp.sum(fourier.autocorrelation(pq, n_cut), axis=0)
    m = jnp.arange(1, n_cut + 1)
    msd = (sq[n - m] + sq[n] - sq[m] - 2.0 * corr) / (n - m)
    mean = jnp.mean(phi)
    # "-cos + 1.0": a TPU's float64 computes a constant minus one element
    # 1.8e-8 off (docs/method.md, "Precision"); the same bits elsewhere.
    osc = mean**2 * (-float_cos(m * c) + 1.0) / (-float_cos(c) + 1.0)
    d = msd - osc
    x = m.astype(phi.dtype) - jnp.mean(m.astype(phi.dtype))
    dd = d - jnp.mean(d)
    denom = jnp.sqrt(jnp.sum(x**2) * jnp.sum(dd**2))
    # A displacement that does not move at all is as regular as it gets.
    return jnp.where(denom > 0, jnp.sum(x * dd) / jnp.where(denom > 0, denom, 1.0), 0.0)


@partial(jax.jit, static_argnames=("n_cut", "batch_size"))
def _zero_one_kernel(series, cs, n_cut: int, batch_size: int):
    per_c = jax.vmap(_k_of_frequency, in_axes=(None, 0, None))
    per_row = jax.vmap(lambda phi: per_c(phi, cs, n_cut))
    n_rows, n = series.shape
    # Whole chunks (padded with zero rows, cut off after): one loop body to
    # compile, where lax.map's batch_size would add a second for the rest.
    n_pad = -n_rows % batch_size
    padded = jnp.concatenate([series, jnp.zeros((n_pad, n), series.dtype)])
    kc = jax.lax.map(per_row, padded.reshape(-1, batch_size, n))
    kc = kc.reshape(-1, cs.shape[0])[:n_rows]
    return jnp.median(kc, axis=-1), kc


@holds_one_blas_thread
def zero_one_test(
    series: Float[ArrayLike, "*batch n"],
    n_frequencies: int = 100,
    seed: int = 0,
    n_cut: int | None = None,
    *,
    batch_size: int | None = None,
) -> ZeroOneResult:
    """The 0-1 test for chaos of an observable's series (or a batch of them).

    Args:
        series: ``(n,)`` samples of one observable at a fixed interval, or a
            batch ``(*batch, n)`` (e.g. one row per parameter value, as
            :func:`lyapax.sweep.sweep_trajectory` gives them), NumPy or JAX.
            Flows should be sampled coarsely (about one sample per
            oscillation): an oversampled series looks regular to the test.
        n_frequencies: how many random frequencies ``c`` in ``(pi/5, 4 pi/5)``
            the median is taken over.
        seed: seed of the frequencies (the same ``c`` for the whole batch).
        n_cut: largest lag ``n`` of the displacement ``D_c(n)``; default
            ``n // 10`` (G&M 2009), at most ``n // 2``.
        batch_size: series per chunk of the batch (default: chunks of about
            128 MiB of work arrays); the numbers do not depend on it.

    Returns:
        :class:`ZeroOneResult`: ``K`` near 1 for chaotic, near 0 for regular
        dynamics, shaped like the batch.

    Raises:
        ValueError / TypeError: ``series`` empty, shorter than 20 samples, not
            finite or not real; ``n_frequencies``, ``n_cut``, ``seed`` or
            ``batch_size`` not an integer in range.

    Gottwald & Melbourne, Proc. R. Soc. A 460, 603 (2004); SIAM J. Appl. Dyn.
    Syst. 8, 129 (2009) (the correlation method and the oscillating term).
    """
    arr = jnp.asarray(series)
    if arr.ndim == 0 or arr.size == 0:
        raise ValueError(
            f"series must be a non-empty array (n,) or (*batch, n); got shape "
            f"{arr.shape}"
        )
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(f"series must be real; got dtype {arr.dtype}")
    arr = validate.finite_array("series", arr)
    batch, n = arr.shape[:-1], arr.shape[-1]
    if n < 20:
        raise ValueError(
            f"series has {n} samples along its last axis; the 0-1 test needs at "
            "least 20 (use thousands: K converges slowly in n)"
        )
    flat = arr.reshape(-1, n)
    opts = _Options.of(n, flat.shape[0], n_frequencies, n_cut, seed, batch_size)
    key = jax.random.PRNGKey(opts.seed)
    # Drawn in float64 where it exists: one set of frequencies per seed.
    cs = jax.random.uniform(
        key,
        (opts.n_frequencies,),
        draw_dtype(arr.dtype),
        minval=C_RANGE[0],
        maxval=C_RANGE[1],
    ).astype(arr.dtype)
    k, kc = _zero_one_kernel(flat, cs, opts.n_cut, opts.batch_size)
    return ZeroOneResult(
        K=k.reshape(batch),
        K_per_frequency=kc.reshape(*batch, opts.n_frequencies),
        frequencies=cs,
        n_cut=opts.n_cut,
    )
