"""Nearest neighbours in a delay embedding and the divergence of their futures.

Both estimators of the largest exponent from data follow pairs of nearby
delay vectors forward in time: Rosenstein et al. (1993) the single nearest
neighbour of every point, Kantz (1994) a neighbourhood of each reference
point. One kernel serves both: for reference ``i`` with neighbours ``U_i``
(fixed at ``k = 0``)

    S(k) = < ln( mean_{j in U_i} |X_{i+k} - X_{j+k}| ) >_i,

which with one neighbour is Rosenstein's ``<ln d_i(k)>``.

The search runs over chunks of reference points against all candidates, so
memory is ``chunk x n`` distances, never ``n x n``; the chunk is sized to a
fixed number of distances (about 32 MiB). In float64 a chunk's squared
distances are ``|a|^2 + |b|^2 - 2 a.b`` (one matrix product); in float32 that
form loses a near neighbour's distance to cancellation, and they are summed
from the differences instead.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from lyapax._engine.precision import growth_log, matmul

#: Distances held at once by one chunk of the neighbour search.
_CHUNK_DISTANCES = 2**22


def chunk_rows(n_candidates: int, n_reference: int) -> int:
    """Reference rows per chunk: a power of two with ``rows x candidates``
    at most ``_CHUNK_DISTANCES`` (and not more rows than references)."""
    rows = max(1, _CHUNK_DISTANCES // max(n_candidates, 1))
    rows = 1 << (rows.bit_length() - 1)
    return max(1, min(rows, 1 << max(n_reference - 1, 0).bit_length()))


@partial(jax.jit, static_argnames=("n_candidates", "n_neighbours", "chunk"))
def nearest_neighbours(
    X: jax.Array,
    refs: jax.Array,
    theiler: jax.Array,
    n_candidates: int,
    n_neighbours: int,
    chunk: int,
) -> tuple[jax.Array, jax.Array]:
    """The ``n_neighbours`` nearest candidates of each reference point.

    Candidates are ``X[:n_candidates]`` (those whose future is long enough);
    a candidate ``j`` with ``|i - j| <= theiler`` is excluded (temporal
    neighbours are not independent). Returns ``(indices, distances)``, both
    ``(n_ref, n_neighbours)``, nearest first; a reference with fewer
    admissible candidates gets distance ``inf`` in the missing slots.
    """
    Y = X[:n_candidates]
    # Centred: the |a|^2 + |b|^2 - 2ab form (float64) cancels less.
    Y = Y - jnp.mean(Y, axis=0)
    sq = jnp.sum(Y * Y, axis=1)
    cand = jnp.arange(n_candidates)
    n_ref = refs.shape[0]
    n_pad = -n_ref % chunk
    padded = jnp.concatenate([refs, jnp.zeros(n_pad, refs.dtype)]).reshape(-1, chunk)

    def one_chunk(rows):
        a = Y[rows]
        if Y.dtype == jnp.float64:
            d2 = sq[rows][:, None] + sq[None, :] - 2.0 * matmul(a, Y.T)
        else:
            # The product form keeps log10(d^2 / (|x|^2 eps)) digits of d^2:
            # none of a near neighbour's in float32 (d ~ 1e-3 |x|: 6e-8 / 1e-6),
            # which then ranks the wrong candidate first. Differences keep them.
            diff = a[:, None, :] - Y[None, :, :]
            d2 = jnp.sum(diff * diff, axis=-1)
        far = jnp.abs(rows[:, None] - cand[None, :]) > theiler
        d2 = jnp.where(far, jnp.maximum(d2, 0.0), jnp.inf)
        # k passes of argmin: on a CPU, lax.top_k over long rows is ~50x slower.
        found, dists = [], []
        for step in range(n_neighbours):
            j = jnp.argmin(d2, axis=1)
            found.append(j)
            dists.append(jnp.take_along_axis(d2, j[:, None], axis=1)[:, 0])
            if step + 1 < n_neighbours:
                d2 = d2.at[jnp.arange(chunk), j].set(jnp.inf)
        return jnp.stack(found, axis=1), jnp.sqrt(jnp.stack(dists, axis=1))

    idx, dist = jax.lax.map(one_chunk, padded)
    idx = idx.reshape(-1, n_neighbours)[:n_ref]
    dist = dist.reshape(-1, n_neighbours)[:n_ref]
    return idx, dist


@partial(jax.jit, static_argnames=("horizon",))
def divergence_curve(
    X: jax.Array,
    refs: jax.Array,
    neighbours: jax.Array,
    usable: jax.Array,
    horizon: int,
) -> tuple[jax.Array, jax.Array]:
    """``(S (horizon + 1,), counts (horizon + 1,))``: the mean log distance of
    the references' futures from their neighbours' at ``k = 0..horizon``,
    and how many references entered each mean (``usable (n_ref, n_nb)``
    marks the neighbours that count; a reference with none, or whose mean
    distance is 0 at step ``k``, is left out of that step)."""
    weight = usable.astype(X.dtype)
    n_used = jnp.sum(weight, axis=1)

    def at(k):
        d = jnp.linalg.norm(X[neighbours + k] - X[refs + k][:, None, :], axis=-1)
        mean = jnp.sum(d * weight, axis=1) / jnp.maximum(n_used, 1.0)
        ok = (n_used > 0) & (mean > 0)
        logs = jnp.where(ok, growth_log(jnp.where(ok, mean, 1.0)), 0.0)
        count = jnp.sum(ok)
        return jnp.sum(logs) / jnp.maximum(count, 1), count

    s, counts = jax.lax.map(at, jnp.arange(horizon + 1))
    return jnp.where(counts > 0, s, jnp.nan), counts
