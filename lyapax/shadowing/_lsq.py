"""The least-squares problem of NILSS and the sensitivity it gives.

Within segment ``i`` the shadowing direction is ``v_i = v*_i + W_i a_i``.
Continuity at the boundary between segments ``i`` and ``i + 1`` (after the
flow direction is projected out) reads ``a_{i+1} = R_i a_i + b_i``; among
these the least-squares shadowing direction minimises
``sum_i (a_i^T C_i a_i + 2 d_i^T a_i)``, ``C_i = int W_i^T W_i dt`` and
``d_i = int W_i^T v*_i dt`` (Ni & Wang 2017, eqs. 32-35). Its KKT system is
solved by the Schur complement on the multipliers, which is block
tridiagonal and symmetric positive definite: a block Cholesky factorisation in
two ``lax.scan`` passes, ``O(K m^3)`` for ``K`` segments.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from lyapax._engine.precision import einsum, matmul
from lyapax.shadowing._segments import Segments


def _spd_inverse(c: jax.Array) -> jax.Array:
    """Inverse of a symmetric positive definite ``(m, m)`` matrix (Cholesky)."""
    factor = jsl.cho_factor(0.5 * (c + c.T), lower=True)
    return jsl.cho_solve(factor, jnp.eye(c.shape[0], dtype=c.dtype))


def _block_tridiagonal_solve(
    diag: jax.Array, lower: jax.Array, rhs: jax.Array
) -> jax.Array:
    """Solve ``S x = rhs`` for SPD block-tridiagonal ``S``.

    Args:
        diag: ``(n, m, m)`` diagonal blocks ``S_ii``.
        lower: ``(n - 1, m, m)`` sub-diagonal blocks ``S_{i+1, i}``.
        rhs: ``(n, m, P)``.
    """
    m = diag.shape[1]
    eye = jnp.eye(m, dtype=diag.dtype)

    def forward(carry: Any, blocks: Any) -> Any:
        l_prev, y_prev = carry
        s_ii, s_low, r = blocks
        # M = S_{i,i-1} L_{i-1}^{-T}
        mm = jsl.solve_triangular(l_prev, s_low.T, lower=True).T
        li = jnp.linalg.cholesky(s_ii - matmul(mm, mm.T))
        yi = jsl.solve_triangular(li, r - matmul(mm, y_prev), lower=True)
        return (li, yi), (li, mm, yi)

    l0 = jnp.linalg.cholesky(diag[0])
    y0 = jsl.solve_triangular(l0, rhs[0], lower=True)
    _, (ls, ms, ys) = jax.lax.scan(forward, (l0, y0), (diag[1:], lower, rhs[1:]))
    ls = jnp.concatenate([l0[None], ls])
    ys = jnp.concatenate([y0[None], ys])
    ms = jnp.concatenate([jnp.zeros_like(eye)[None], ms])  # ms[i] couples i, i-1

    def backward(x_next: Any, blocks: Any) -> Any:
        li, y, m_next = blocks
        xi = jsl.solve_triangular(li.T, y - matmul(m_next.T, x_next), lower=False)
        return xi, xi

    m_next = jnp.concatenate([ms[1:], jnp.zeros_like(eye)[None]])
    x_last = jnp.zeros_like(rhs[0])
    _, xs = jax.lax.scan(backward, x_last, (ls, ys, m_next), reverse=True)
    return xs


def shadowing_coefficients(seg: Segments) -> jax.Array:
    """The coefficients ``a (K, m, P)`` of the least-squares shadowing direction."""
    k, m = seg.C.shape[0], seg.C.shape[1]
    n_p = seg.D.shape[2]
    if m == 0:
        return jnp.zeros((k, 0, n_p), seg.D.dtype)
    dinv = jax.vmap(_spd_inverse)(seg.C)  # (K, m, m)
    if k == 1:
        return -matmul(dinv[0], seg.D[0][None])
    r, b = seg.R[:-1], seg.b[:-1]  # the K - 1 interior boundaries
    rdr = einsum("kij,kjl,kml->kim", r, dinv[:-1], r)
    diag = rdr + dinv[1:]
    lower = -matmul(r[1:], dinv[1:-1])  # S_{i+1,i} = -R_{i+1} D_{i+1}
    bdd = -matmul(r, matmul(dinv[:-1], seg.D[:-1])) + matmul(dinv[1:], seg.D[1:])
    lam = _block_tridiagonal_solve(diag, lower, -(b + bdd))
    # (B^T lam)_i = -R_i^T lam_i (i < K - 1) + lam_{i-1} (i > 0)
    zero = jnp.zeros_like(lam[:1])
    bt = jnp.concatenate([-matmul(jnp.swapaxes(r, 1, 2), lam), zero]) + jnp.concatenate(
        [zero, lam]
    )
    return -matmul(dinv, seg.D + bt)


def segment_sensitivities(
    seg: Segments, a: jax.Array, objective_ends: jax.Array, average: jax.Array
) -> jax.Array:
    """Each segment's share ``(K, P)`` of ``T * d average / d params``.

    ``int (J_u v + J_s) dt`` over the segment plus the time-dilation term of
    its end boundary, ``c_i (J(t_{i+1}) - average)``, where ``c_i f`` is the
    flow component removed there (none after the last segment).
    """
    jv = seg.jv + einsum("km,kmp->kp", seg.jw, a)
    removed = seg.xv + einsum("km,kmp->kp", seg.xw, a)
    c = -removed.at[-1].set(0.0)
    return jv + c * (objective_ends[:, None] - average)
