"""Sparse network weights as a padded neighbour list (ELL layout).

``EllWeights`` stores an ``(n, n)`` matrix indexed ``[target, source]`` as two
``(n, w)`` arrays: ``indices[i, s]`` is the source of the ``s``-th edge into
node ``i`` and ``values[i, s]`` its weight, with ``w`` the largest in-degree.
Rows with fewer edges are padded with weight 0 pointing at node ``i`` itself,
so a padded slot gathers a valid row and adds nothing.

``weights @ X`` for ``X (n, m)`` is one row gather ``X[indices]`` and a
weighted sum over the ``w`` slots: the state and all ``k`` tangent columns of a
Runge-Kutta stage share that single gather. On a CPU this beats BCOO's
scatter-add (measured in ``benchmarks/sparse_bench.py``); on a GPU each thread
reads its own row, so the gather coalesces along ``m``.

Conversion from BCOO, ``scipy.sparse`` or dense input happens once, eagerly,
at problem build (:func:`as_ell`); the compiled step only sees the two arrays.
"""

from __future__ import annotations

import sys
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lyapax._internal.fusion import computed_apart

__all__ = [
    "EllWeights",
    "as_ell",
    "ell_from_coo",
    "is_scipy_sparse",
    "values_at_slots",
]

# Widest row unrolled in the product; beyond it a fori_loop over slots.
_UNROLL = 64


class EllWeights(eqx.Module):
    """``(n, n)`` weights as a padded neighbour list; supports ``W @ X``.

    Attributes:
        indices: ``(n, w)`` int32 source node of each slot.
        values: ``(n, w)`` float weight of each slot (0 in padding).
    """

    indices: jax.Array
    values: jax.Array

    @property
    def shape(self) -> tuple[int, int]:
        n = self.indices.shape[0]
        return (n, n)

    @property
    def dtype(self) -> Any:
        return self.values.dtype

    @property
    def width(self) -> int:
        """Slots per row ``w`` (the largest in-degree)."""
        return int(self.indices.shape[1])

    def __matmul__(self, x: jax.Array) -> jax.Array:
        """``W @ x`` for ``x (n,)`` or ``(n, m)``: a row gather per edge slot.

        Up to ``_UNROLL`` slots are unrolled into ``w`` gathers of whole rows
        and multiply-adds, computed apart from the product's users
        (:func:`~lyapax._internal.fusion.computed_apart`) so that XLA fuses
        them into one pass; measured faster on a CPU than one ``(n, w, m)``
        gather and a reduction (9.8x for 400 products at n = 10^4, m = 12).
        Wider rows use a ``fori_loop`` over slots so that compile time stays
        bounded.
        """
        vals = self.values.astype(jnp.result_type(self.values, x))
        scale = vals if x.ndim == 1 else vals[..., None]
        w = self.width
        if w <= _UNROLL:

            def unrolled(x):
                acc = scale[:, 0] * x[self.indices[:, 0]]
                for s in range(1, w):
                    acc = acc + scale[:, s] * x[self.indices[:, s]]
                return acc

            # Apart, the gathers fuse into the multiply-adds (one pass over x).
            return computed_apart(unrolled, self.indices, x)

        def slot(s, acc):
            return acc + scale[:, s] * x[self.indices[:, s]]

        out_dtype = jnp.result_type(vals, x)
        return jax.lax.fori_loop(0, w, slot, jnp.zeros(x.shape, out_dtype))

    def gather(self, x: jax.Array) -> jax.Array:
        """``x[sources]`` per edge slot: ``(n, w, ...)`` (for per-edge terms)."""
        return x[self.indices]

    def todense(self) -> jax.Array:
        """The ``(n, n)`` dense matrix (duplicates summed)."""
        n, w = self.indices.shape
        rows = jnp.broadcast_to(jnp.arange(n)[:, None], (n, w))
        return (
            jnp.zeros((n, n), self.values.dtype).at[rows, self.indices].add(self.values)
        )


def ell_from_coo(
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    n: int,
    extra: tuple[np.ndarray, ...] = (),
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Host-side COO -> ELL: ``(indices, values, extras)`` each ``(n, w)``.

    Duplicate ``(row, col)`` entries are kept as separate slots (their product
    sums them, as BCOO does). ``extra`` arrays (e.g. per-edge delays) are laid
    out in the same slots, padded with 0.
    """
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    # Only the grouping by row matters (slot order within a row is free): a
    # stable integer sort, skipped when the rows come sorted (BCOO usually).
    if rows.size and np.all(rows[1:] >= rows[:-1]):
        order = np.arange(rows.size)
    else:
        order = np.argsort(rows, kind="stable")
    rows, cols = rows[order], cols[order]
    vals = np.asarray(vals)[order]
    counts = np.bincount(rows, minlength=n)
    w = max(int(counts.max()) if counts.size else 0, 1)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(rows.size) - starts[rows]
    indices = np.broadcast_to(np.arange(n)[:, None], (n, w)).astype(np.int32)
    values = np.zeros((n, w), dtype=vals.dtype)
    indices[rows, slot] = cols
    values[rows, slot] = vals
    out_extra = []
    for e in extra:
        e = np.asarray(e)[order]
        padded = np.zeros((n, w), dtype=e.dtype)
        padded[rows, slot] = e
        out_extra.append(padded)
    return indices, values, tuple(out_extra)


def is_bcoo(x: Any) -> bool:
    """``x`` is a ``jax.experimental.sparse.BCOO`` matrix. Only a program that
    imported that module can hold one, so lyapax never imports it (with SciPy,
    it would double the time ``import lyapax`` takes)."""
    sparse = sys.modules.get("jax.experimental.sparse")
    return sparse is not None and isinstance(x, sparse.BCOO)


def is_scipy_sparse(x: Any) -> bool:
    """True for a ``scipy.sparse`` matrix or array (without importing scipy)."""
    return type(x).__module__.startswith("scipy.sparse") and hasattr(x, "tocoo")


def _coo_of(weights: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(rows, cols, vals, n)`` of BCOO, scipy.sparse or dense input."""
    if is_bcoo(weights):
        idx = np.asarray(weights.indices)
        return idx[:, 0], idx[:, 1], np.asarray(weights.data), int(weights.shape[0])
    if is_scipy_sparse(weights):
        coo = weights.tocoo()
        return coo.row, coo.col, coo.data, int(coo.shape[0])
    dense = np.asarray(weights)
    rows, cols = np.nonzero(dense)
    return rows, cols, dense[rows, cols], int(dense.shape[0])


def values_at_slots(matrix: Any, ell: EllWeights) -> np.ndarray:
    """Entries of an ``(n, n)`` matrix (dense, BCOO or scipy.sparse) on the
    slots of ``ell``: ``(n, w)``, 0 where the matrix stores nothing.

    Used for per-edge data (delays) given with the layout of the weights; a
    sparse matrix is looked up by its stored ``(row, col)`` keys, never
    densified. Duplicate keys: the first stored entry is read.
    """
    indices = np.asarray(ell.indices, dtype=np.int64)
    n, w = indices.shape
    rows = np.broadcast_to(np.arange(n)[:, None], (n, w))
    if not (is_bcoo(matrix) or is_scipy_sparse(matrix)):
        return np.asarray(matrix)[rows, indices]
    r, c, v, _ = _coo_of(matrix)
    keys = np.asarray(r, dtype=np.int64) * n + np.asarray(c, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    keys, v = keys[order], np.asarray(v)[order]
    if keys.size == 0:
        return np.zeros((n, w))
    want = rows * n + indices
    pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
    return np.where(keys[pos] == want, v[pos], 0)


def as_ell(weights: Any, dtype: Any = None) -> EllWeights:
    """Convert ``(n, n)`` weights (BCOO, scipy.sparse, dense) to :class:`EllWeights`.

    Runs eagerly on the host, once per problem build. Explicit zeros stored in a
    sparse input are dropped.

    Raises:
        ValueError: the weights are not a square 2-D matrix.
    """
    if isinstance(weights, EllWeights):
        return weights
    shape = tuple(getattr(weights, "shape", np.shape(weights)))
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] == 0:
        raise ValueError(
            f"weights must be a square (n_nodes, n_nodes) matrix indexed "
            f"[target, source]; got shape {shape}"
        )
    rows, cols, vals, n = _coo_of(weights)
    keep = vals != 0
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    if dtype is None:
        dtype = jnp.result_type(float)
    if not np.issubdtype(vals.dtype, np.inexact):
        vals = vals.astype(dtype)
    indices, values, _ = ell_from_coo(rows, cols, vals, n)
    return EllWeights(jnp.asarray(indices), jnp.asarray(values))


def read_edges_ell(
    values: jax.Array, t: Any, steps: jax.Array, indices: jax.Array
) -> jax.Array:
    """Delayed source values of the stored edges only (the sparse ``read_edges``).

    ``out[c, i, s] = values[(t - steps[i, s]) % H, c, indices[i, s]]`` for a
    ring buffer ``values (H, n_cvar, n)``, integer ``steps (n, w)`` and sources
    ``indices (n, w)``: ``n * w`` reads instead of the dense ``n * n``.
    Returns ``(n_cvar, n, w)``.
    """
    horizon = values.shape[0]
    slots = jnp.mod(t - steps, horizon)
    # Advanced indices on axes 0 and 2 move to the front: (n, w, n_cvar).
    picked = values[slots, :, indices]
    return jnp.moveaxis(picked, -1, 0)


def available_bytes() -> int | None:
    """Physical memory of this host in bytes (None where it cannot be read)."""
    try:
        import os

        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def check_dense_fits(
    what: str, n_bytes: int, hint: str, limit: int | None = None
) -> None:
    """Raise ``MemoryError`` when a dense array of ``n_bytes`` cannot fit.

    ``limit`` defaults to the host's physical memory. The message names the
    array, the memory it needs and what to use instead (``hint``).
    """
    limit = available_bytes() if limit is None else limit
    if limit is not None and n_bytes > limit:
        raise MemoryError(
            f"{what} needs {n_bytes / 2**30:.1f} GiB but this machine has "
            f"{limit / 2**30:.1f} GiB of memory; {hint}"
        )
