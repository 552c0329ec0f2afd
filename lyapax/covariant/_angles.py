"""Principal angles between subspaces (for degenerate exponents and tests)."""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.precision import matmul

__all__ = ["subspace_angles"]


@holds_one_blas_thread
def subspace_angles(
    A: Float[ArrayLike, "*batch d p"], B: Float[ArrayLike, "*batch d q"]
) -> Float[Array, "*batch m"]:
    """Principal angles (radians, largest first) between the column spans of
    ``A (..., d, p)`` and ``B (..., d, q)``; ``m = min(p, q)``.

    Accurate for small angles too: each angle comes from its cosine (the
    singular values of ``Qa^T Qb``) when it is large and from its sine (the
    singular values of ``Qb - Qa Qa^T Qb``) when it is small (Knyazev &
    Argentati 2002). Leading axes broadcast; works under ``jit``/``vmap``.

    Raises:
        ValueError: ``A`` and ``B`` are not at least 2-D with the same ``d``.
    """
    A = jnp.asarray(A)
    B = jnp.asarray(B)
    if A.ndim < 2 or B.ndim < 2 or A.shape[-2] != B.shape[-2]:
        raise ValueError(
            "subspace_angles needs A (..., d, p) and B (..., d, q) with the same "
            f"d; got shapes {A.shape} and {B.shape}"
        )
    if A.shape[-1] < B.shape[-1]:
        A, B = B, A  # the sines below need q <= p
    Qa, _ = jnp.linalg.qr(A)
    Qb, _ = jnp.linalg.qr(B)
    M = matmul(jnp.swapaxes(Qa, -1, -2), Qb)
    cos = jnp.linalg.svd(M, compute_uv=False)  # descending: smallest angle first
    sin = jnp.linalg.svd(Qb - matmul(Qa, M), compute_uv=False)[..., ::-1]  # ascending
    small = cos**2 > 0.5
    angles = jnp.where(
        small,
        jnp.arcsin(jnp.clip(sin, 0.0, 1.0)),
        jnp.arccos(jnp.clip(cos, -1.0, 1.0)),
    )
    return angles[..., ::-1]
