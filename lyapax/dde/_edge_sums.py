"""Dense per-edge delays summed over the sources: ``sum_j w_ij h(x_j(t - s_ij))``.

A coupling of the form ``combine(sum_j w_ij sources(x_j))`` (every built-in
one) needs, per target and step, the weighted sums of its node-local source
terms read one edge delay ago, and, for the Lyapunov tangents, their
derivatives ``sum_j w_ij slopes_ij dx_j(t - s_ij)``. Both are computed here
with one pass over the ``n^2`` edges:

* the source terms and their slopes are formed on the ``H n`` stored samples
  (``H`` ring-buffer slots), not on the ``n^2`` edges: for Kuramoto that is
  ``H n`` sines instead of ``n^2``;
* the terms' tangents ``slopes dx`` are formed there too, and each edge
  gathers its ``C (1 + k)`` numbers in one row; the targets are taken in
  blocks whose gathered values fit in cache and are reduced against the
  weights at once.

Sparse weights (a neighbour list of ``w`` slots per node) use
:func:`slot_edge_sums`: there the ``n w`` edge slots are fewer than the
``H n`` buffer entries, so the terms are formed per slot, once, and the
tangent sums are written out. In both forms the terms are computed into
memory first (:func:`~lyapax._internal.fusion.materialized`): left to
itself, XLA fuses them into their consumers and recomputes them there.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from lyapax._internal.fusion import materialized

#: Bytes of gathered edge values reduced at a time (about one L2 cache).
_BLOCK_BYTES = 2**21


def source_slopes(
    coupling: Any, buf: Float[Array, "H v n"], values: Float[Array, "H C n"]
) -> Float[Array, "v H C n"]:
    """Slopes of the coupling's source terms in each coupled variable ``v``.

    ``coupling.source_slopes(values, n_cvar)`` unless it returns None
    (Kuramoto's slopes are its cosines and sines again: no new
    transcendentals), else one ``jax.jvp`` of the node-local ``sources`` per
    coupled variable.
    """
    slopes = coupling.source_slopes(values, buf.shape[1])
    if slopes is not None:
        return slopes
    sources = jax.vmap(coupling.sources)

    def along(unit):
        direction = jnp.broadcast_to(unit[None, :, None], buf.shape)
        return jax.jvp(sources, (buf,), (direction,))[1]

    return jax.vmap(along)(jnp.eye(buf.shape[1], dtype=buf.dtype))


def summed_edges(
    table: Float[Array, "H n M"],
    t: Any,
    steps: Int[Array, "n n"],
    weights: Float[Array, "n n"],
) -> Float[Array, "n M"]:
    """``out[i, m] = sum_j weights[i, j] table[(t - steps[i, j]) % H, j, m]``.

    Each edge reads ``M`` contiguous numbers of ``table (H, n_source, M)``.
    Targets are taken in blocks whose gathered values fit in cache and are
    reduced against the weights at once (an unblocked ``(n, n, M)`` gather
    goes through memory: ~1.7x slower at n = 500).
    """
    horizon, n, width = table.shape
    rows = table.reshape(horizon * n, width)
    flat = jnp.mod(t - steps, horizon) * n + jnp.arange(n)[None, :]
    block = max(1, min(n, _BLOCK_BYTES // (n * width * table.dtype.itemsize)))
    n_blocks = -(-n // block)
    pad = n_blocks * block - n
    # Padded targets read row 0 with weight 0 and are cut off below.
    flat = jnp.pad(flat, ((0, pad), (0, 0))).reshape(n_blocks, block, n)
    w = jnp.pad(weights, ((0, pad), (0, 0))).reshape(n_blocks, block, n)
    dims = (((2,), (1,)), ((0,), (0,)))  # batch over targets, contract sources

    def reduce_block(args):
        idx, w_block = args
        return jax.lax.dot_general(w_block[:, None, :], rows[idx], dims)[:, 0, :]

    out = jax.lax.map(reduce_block, (flat, w))
    return out.reshape(n_blocks * block, width)[:n]


def edge_sums(
    coupling: Any,
    weights: Float[Array, "n n"],
    buf: Float[Array, "H v n"],
    t: Any,
    steps: Int[Array, "n n"],
    dbuf: Float[Array, "H v n k"] | None = None,
) -> tuple[Float[Array, "C n"], Float[Array, "C n k"]]:
    """Delayed weighted sums of the source terms and their tangents.

    ``sums[c, i] = sum_j w_ij sources(buf[(t - s_ij) % H, :, j])[c]`` and
    ``d_sums[c, i, :] = sum_j w_ij slopes_ij[c, v] dbuf[(t - s_ij) % H, v, j, :]``
    (``k = 0`` when ``dbuf`` is not given). The value and all ``k`` tangents
    of an edge are read by one gather of ``C (1 + k)`` numbers.
    """

    def terms_by_source(b):
        return jnp.swapaxes(jax.vmap(coupling.sources)(b), 1, 2)

    by_source = materialized(terms_by_source, t, buf)  # (H, n, C)
    values = jnp.swapaxes(by_source, 1, 2)  # (H, C, n)
    # Per (sample, source) row: the C terms, then their k tangents, i.e.
    # (H, n, C, 1 + k), built in that layout.
    table = by_source[..., None]
    if dbuf is not None:
        slopes = source_slopes(coupling, buf, values)  # (v, H, C, n)
        slopes = jnp.transpose(slopes, (1, 3, 2, 0))  # (H, n, C, v)
        if slopes.shape[-1] == 1:  # one coupled variable: a plain product
            tangents = slopes * dbuf[:, 0, :, None, :]
        else:
            tangents = jnp.einsum("hncv,hvnk->hnck", slopes, dbuf)
        table = jnp.concatenate([table, tangents], axis=-1)
    horizon, n, n_terms, width = table.shape
    sums = summed_edges(table.reshape(horizon, n, n_terms * width), t, steps, weights)
    sums = jnp.moveaxis(sums.reshape(n, n_terms, width), 0, 1)
    return sums[..., 0], sums[..., 1:]


def slot_edge_sums(
    coupling: Any,
    values: Float[Array, "n w"],
    buf: Float[Array, "H v n"],
    t: Any,
    steps: Int[Array, "n w"],
    sources: Int[Array, "n w"],
    dbuf: Float[Array, "H v n k"] | None = None,
) -> tuple[Float[Array, "C n"], Float[Array, "C n k"]]:
    """:func:`edge_sums` for sparse weights on a neighbour list.

    ``values (n, w)`` and ``sources (n, w)`` are the weights and source nodes
    of each slot, ``steps (n, w)`` its delay. The source terms are formed per
    edge slot (``n w`` of them, fewer than the ``H n`` buffer entries) and
    kept in memory, and the tangent sums are
    ``sum_s values[i, s] slopes_is[c, v] dx[v, s, :]`` written out, so that no
    fusion evaluates the terms once per tangent.
    """
    horizon = buf.shape[0]
    slots = jnp.mod(t - steps, horizon)
    delayed = jnp.moveaxis(buf[slots, :, sources], -1, 0)  # (v, n, w)

    def terms_of(d):
        return coupling.sources(d)

    terms = materialized(terms_of, t, delayed)  # (C, n, w)
    sums = jnp.sum(values[None] * terms, axis=-1)
    if dbuf is None:
        return sums, jnp.zeros((*sums.shape, 0), sums.dtype)
    # Slopes with the node axis n in the place of the buffer's sample axis.
    slopes = source_slopes(
        coupling, jnp.moveaxis(delayed, 0, 1), jnp.moveaxis(terms, 0, 1)
    )  # (v, n, C, w)
    weighted = values[None, :, None, :] * slopes
    dx = dbuf[slots, :, sources]  # (n, w, v, k)
    per_slot = jnp.transpose(weighted, (1, 2, 3, 0))[..., None] * dx[:, None]
    d_sums = jnp.sum(per_slot, axis=(2, 3))  # (n, C, k)
    return sums, jnp.swapaxes(d_sums, 0, 1)
