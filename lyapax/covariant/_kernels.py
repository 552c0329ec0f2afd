"""The compiled programs of Ginelli's method: forward segments and the backward pass.

Ginelli et al. (2007), "Characterizing dynamics with covariant Lyapunov
vectors", PRL 99, 130601. The forward Benettin pass writes, for every
renormalisation block ``j``, the factor ``R_j`` of ``J_j Q_{j-1} = Q_j R_j``
(``J_j`` the tangent map over the block, ``diag R_j > 0``), and at the saved
blocks the frame ``Q_j`` and the state. The backward pass iterates the
coefficients ``C_{j-1} = R_j^{-1} C_j`` (upper triangular, columns normalised)
from ``C_N = I``; the covariant vectors are ``V_j = Q_j C_j`` and the column
norms removed at block ``j`` are the vectors' growth over that block.

Every run length is int32 data: one program per step structure, shapes and
buffer capacities, whatever ``n_steps``, ``renorm_every`` or ``save_every``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from lyapax._engine.abstract import as_step, check_step_output
from lyapax._engine.benettin import qr_factor
from lyapax._engine.precision import einsum, growth_log, matmul
from lyapax._engine.tree import merge_static

__all__ = [
    "backward_pass",
    "combine",
    "combine_rows",
    "forward_segment",
    "place_rows",
    "positive_qr",
    "upper_inverse",
]


def positive_qr(Y: jax.Array, qr: str) -> tuple[jax.Array, jax.Array]:
    """Thin QR ``Y = Q R`` with ``diag R >= 0`` whichever QR computes it.

    The backward pass needs the ``R`` that belongs to the ``Q`` carried on: a
    sign flipped in one but not the other would reverse a vector's direction
    between blocks. The engine's spectrum kernel flips ``Q`` the same way, so
    both runs carry the same frames.
    """
    Q, R = qr_factor(Y, qr)
    sign = jnp.where(jnp.diagonal(R) < 0, -1.0, 1.0).astype(Y.dtype)
    return Q * sign, R * sign[:, None]


@partial(jax.jit, static_argnames=("static", "blocks_cap", "saves_cap", "qr"))
def forward_segment(
    dynamic: list[Any],
    state: jax.Array,
    Y: jax.Array,
    step: jax.Array,
    lengths: Any,
    *,
    static: Any,
    blocks_cap: int,
    saves_cap: int,
    qr: str,
) -> dict[str, Any]:
    """One segment of the forward pass: ``m`` saving intervals of ``s`` blocks
    each (the frame and state saved after each), then ``tail`` blocks unsaved.

    Args:
        dynamic, static: the step split by :func:`~lyapax._engine.tree.split_static`.
        state ``(d,)``, Y ``(d, k)`` orthonormal, step: the carry at the start.
        lengths: int32 ``(4,)`` = ``[m, s, tail, renorm_every]``, with
            ``m <= saves_cap`` and ``m * s + tail <= blocks_cap``.

    Returns:
        ``{"state", "Y", "step"}`` at the end; ``"R" (blocks_cap, k, k)``, row
        ``j`` the factor of the segment's block ``j`` (rows past the last
        block unspecified); ``"Q" (saves_cap + 1, d, k)`` and
        ``"X" (saves_cap + 1, d)``, row ``i < m`` after interval ``i`` (the
        extra row takes the tail's unsaved write).
    """
    step_fn = as_step(merge_static(dynamic, static))
    check_step_output(step_fn, state)
    indexed = step_fn.uses_step_index
    m, s, tail, every = (lengths[i] for i in range(4))

    def advance(_, c):
        x, V = step_fn.tangent(c[0], c[1], c[2])
        return x, V, c[2] + 1 if indexed else c[2]

    def block(j, loop):
        carry, R_rows = loop
        x, V, n = jax.lax.fori_loop(0, every, advance, carry)
        if not indexed:
            n = n + every
        Q, R = positive_qr(V, qr)
        return (x, Q, n), jax.lax.dynamic_update_index_in_dim(R_rows, R, j, 0)

    def interval(i, loop):
        carry, R_rows, Qs, Xs, first = loop
        # Intervals 0..m-1 run s blocks and are saved; interval m runs the tail.
        count = jnp.where(i < m, s, tail)
        carry, R_rows = jax.lax.fori_loop(first, first + count, block, (carry, R_rows))
        Qs = jax.lax.dynamic_update_index_in_dim(Qs, carry[1], i, 0)
        Xs = jax.lax.dynamic_update_index_in_dim(Xs, carry[0], i, 0)
        return carry, R_rows, Qs, Xs, first + count

    d, k = Y.shape
    dtype = Y.dtype
    R_rows = jnp.zeros((blocks_cap, k, k), dtype)
    Qs = jnp.zeros((saves_cap + 1, d, k), dtype)
    Xs = jnp.zeros((saves_cap + 1, d), dtype)
    carry = (state, Y, jnp.asarray(step, jnp.int32))
    loop = (carry, R_rows, Qs, Xs, jnp.int32(0))
    carry, R_rows, Qs, Xs, _ = jax.lax.fori_loop(0, m + 1, interval, loop)
    return {
        "state": carry[0],
        "Y": carry[1],
        "step": carry[2],
        "R": R_rows,
        "Q": Qs,
        "X": Xs,
    }


@partial(jax.jit, donate_argnames=("R",))
def place_rows(R: jax.Array, rows: jax.Array, first: Any, n: Any) -> jax.Array:
    """``R`` with rows ``first .. first + n - 1`` replaced by ``rows[:n]``.

    A forward segment returns its factors in a buffer of its own (so one
    program serves every run length); this copies them into the window's
    buffer ``R (capacity, k, k)``, which is donated and updated in place: the
    factors never leave the device.
    """

    def put(j, R):
        return jax.lax.dynamic_update_index_in_dim(R, rows[j], first + j, 0)

    return jax.lax.fori_loop(0, n, put, R)


def upper_inverse(R: jax.Array) -> jax.Array:
    """Inverse of upper-triangular ``R (..., k, k)`` by halving blocks:
    ``[[A, B], [0, D]]^-1 = [[A^-1, -A^-1 B D^-1], [0, D^-1]]``.

    Matrix products only, batched over the leading axes: XLA's CPU
    triangular solve runs ~50x slower on the ``(k, k)`` factors of a run
    (measured 250 us per 40 x 40 solve); this costs ``k^3 / 3`` flops in a
    few large products. Stable for triangular factors (Higham, Accuracy and
    Stability of Numerical Algorithms, sec. 14.2).
    """
    k = R.shape[-1]
    if k == 1:
        return 1.0 / R
    h = k // 2
    Ai = upper_inverse(R[..., :h, :h])
    Di = upper_inverse(R[..., h:, h:])
    top = -matmul(matmul(Ai, R[..., :h, h:]), Di)
    zeros = jnp.zeros((*R.shape[:-2], k - h, h), R.dtype)
    return jnp.concatenate(
        [jnp.concatenate([Ai, top], -1), jnp.concatenate([zeros, Di], -1)], -2
    )


@partial(jax.jit, static_argnames=("saves_cap",))
def backward_pass(R: jax.Array, lengths: Any, *, saves_cap: int) -> dict[str, Any]:
    """Ginelli's backward iteration over the ``n_blocks`` factors of ``R``.

    Args:
        R: ``(capacity, k, k)``, row ``j`` the factor of block ``j + 1``
            (positive diagonal); rows from ``n_blocks`` on are ignored.
        lengths: int32 ``(3,)`` = ``[n_blocks, s, n_saved]``: the vectors are
            saved at blocks ``s, 2 s, ..., n_saved * s``.

    Returns:
        ``"C" (saves_cap + 1, k, k)``: row ``i < n_saved`` the coefficients at
        block ``(i + 1) s`` (unit columns, positive diagonal); ``"growth"
        (capacity, k)``: row ``j`` the log-growth of each covariant vector
        over block ``j + 1``; ``"logs" (capacity, k)``: ``log diag R`` (the
        exponents' block growths, so only these leave the device).
    """
    n_blocks, s, n_saved = (lengths[i] for i in range(3))
    k = R.shape[-1]
    rows = jnp.arange(R.shape[0])[:, None, None]
    # Unused rows become the identity: their inverse stays finite.
    inverse = upper_inverse(jnp.where(rows < n_blocks, R, jnp.eye(k, dtype=R.dtype)))

    def body(t, loop):
        C, Cs, G = loop
        j = n_blocks - 1 - t  # C is C_{j+1}, the coefficients after block j + 1
        index = (j + 1) // s - 1
        saved = ((j + 1) % s == 0) & (index < n_saved)
        Cs = jax.lax.dynamic_update_index_in_dim(
            Cs, C, jnp.where(saved, index, saves_cap), 0
        )
        # Both factors are upper triangular with exact zeros below the
        # diagonal (upper_inverse writes them), so the product is too.
        step_back = matmul(inverse[j], C)  # R_{j+1}^{-1} C_{j+1}
        norms = jnp.linalg.norm(step_back, axis=0)
        G = jax.lax.dynamic_update_index_in_dim(G, -growth_log(norms), j, 0)
        return step_back / norms, Cs, G

    C0 = jnp.eye(k, dtype=R.dtype)
    Cs = jnp.zeros((saves_cap + 1, k, k), R.dtype)
    G = jnp.zeros(R.shape[:2], R.dtype)
    _, Cs, G = jax.lax.fori_loop(0, n_blocks, body, (C0, Cs, G))
    logs = growth_log(jnp.diagonal(R, axis1=1, axis2=2))
    return {"C": Cs, "growth": G, "logs": logs}


@jax.jit
def combine(Q: jax.Array, C: jax.Array) -> jax.Array:
    """``V = Q C`` row by row: ``(n, d, k) x (n, k, k) -> (n, d, k)``."""
    return einsum("ndk,nkl->ndl", Q, C)


@jax.jit
def combine_rows(
    Q: jax.Array, C: jax.Array, first: jax.Array, order: jax.Array
) -> jax.Array:
    """``V = Q C`` for one segment's frames ``Q (n, d, k)``, against rows
    ``first .. first + n - 1`` of the window's coefficients ``C (m, k, k)``
    (rows past its end read as zeros), columns permuted by ``order (k,)``."""
    rows = first + jnp.arange(Q.shape[0])
    C = jnp.take(C, rows, axis=0, mode="fill", fill_value=0)
    return einsum("ndk,nkl->ndl", Q, C[:, :, order])
