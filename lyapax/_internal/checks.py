"""Argument checks shared by the network and delay builders: weights, coupled
rows and network states (eager, before anything is traced).

Each raises ``ValueError``/``TypeError`` naming the argument, what was received
and what is expected.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax._internal.sparse import EllWeights, as_ell, is_bcoo, is_scipy_sparse


def as_weights(weights: Any, layout: bool | None = None, dense: bool = False) -> Any:
    """Weights of shape ``(n, n)`` as the step will use them; raises on others.

    Sparse input (``jax.experimental.sparse.BCOO`` or ``scipy.sparse``) is
    converted once, here, to a padded neighbour list
    (:class:`lyapax._internal.sparse.EllWeights`): one row gather per edge slot
    and no scatter per product, measured faster than BCOO products on a CPU
    (``benchmarks/sparse_bench.py``). Dense input stays a dense float array
    (BLAS products). BCOO weights that are traced (inside ``jit`` or
    ``vmap``) stay BCOO. ``layout`` is :class:`lyapax.network.Network`'s
    ``sparse`` option: True converts dense input too, False keeps BCOO input
    as BCOO. ``dense``: always a dense array (paths that need the full grid).

    Raises:
        ValueError: not a non-empty square matrix.
        TypeError: ``layout`` is not None or a bool.
    """
    if layout is not None and not isinstance(layout, bool):
        raise TypeError(f"sparse must be None, True or False; got {layout!r}")
    if dense and (isinstance(weights, EllWeights) or is_bcoo(weights)):
        weights = weights.todense()
    if dense and is_scipy_sparse(weights):
        weights = weights.toarray()
    if isinstance(weights, EllWeights):
        return weights
    if is_scipy_sparse(weights) and layout is False:
        from jax.experimental import sparse  # only for scipy input, kept as BCOO

        weights = sparse.BCOO.from_scipy_sparse(weights)
    if not dense and not validate.is_traced(weights):
        if (
            is_scipy_sparse(weights)
            or (is_bcoo(weights) and layout is not False)
            or layout is True
        ):
            return as_ell(weights)
    if is_bcoo(weights):
        shape = tuple(weights.shape)
    else:
        if not isinstance(weights, jax.Array):
            weights = jnp.asarray(weights)
        shape = weights.shape
        if not jnp.issubdtype(weights.dtype, jnp.inexact):
            weights = weights.astype(jnp.result_type(float))
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] == 0:
        raise ValueError(
            f"weights must be a square (n_nodes, n_nodes) matrix indexed "
            f"[target, source]; got shape {shape}"
        )
    return weights


def as_cvar_indices(cvar_indices: Any, n_sv: int | None = None) -> tuple[int, ...]:
    """Distinct coupled state rows as a tuple (each ``< n_sv`` when given).

    Raises:
        ValueError: not a non-empty tuple of distinct rows in ``[0, n_sv)``.
    """
    if isinstance(cvar_indices, int | np.integer):
        cvar_indices = (cvar_indices,)
    try:
        out = tuple(validate.as_int("cvar_indices", i) for i in cvar_indices)
    except TypeError:
        raise ValueError(
            f"cvar_indices must be a tuple of state-variable rows; got {cvar_indices!r}"
        ) from None
    if not out or min(out) < 0 or len(set(out)) != len(out):
        raise ValueError(
            "cvar_indices must be a non-empty tuple of distinct rows >= 0; "
            f"got {cvar_indices!r}"
        )
    if n_sv is not None and max(out) >= n_sv:
        raise ValueError(
            f"cvar_indices={out} out of range for n_sv={n_sv} state variables "
            f"(valid rows 0..{n_sv - 1})"
        )
    return out


def state_rows(state0: Any, n: int, dfun: Any) -> tuple[jax.Array, int]:
    """Flat state ``(n_sv * n,)`` and ``n_sv`` from a flat or 2-D ``state0``."""
    if state0 is None:
        raise TypeError("state0 is required: shape (n_sv, n_nodes) or flat")
    x = state0 if isinstance(state0, jax.Array) else jnp.asarray(state0)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    n_sv_model = getattr(dfun, "n_sv", None)
    if x.ndim == 2:
        if x.shape[1] != n:
            raise ValueError(
                f"state0 has shape {x.shape} but weights have n_nodes={n}; "
                "state0 must be (n_sv, n_nodes) or flat (n_sv * n_nodes,)"
            )
        n_sv = x.shape[0]
    elif x.ndim == 1:
        if x.size == 0 or x.size % n:
            raise ValueError(
                f"state0 has {x.size} entries, not a multiple of n_nodes={n} "
                "(the size of weights); expected (n_sv * n_nodes,) or "
                "(n_sv, n_nodes)"
            )
        n_sv = x.size // n
    else:
        raise ValueError(f"state0 must be 1-D or (n_sv, n_nodes); got shape {x.shape}")
    if n_sv_model is not None and n_sv != n_sv_model:
        raise ValueError(
            f"state0 has shape {x.shape}, but the model has n_sv={n_sv_model} state "
            f"variables: expected ({n_sv_model}, {n}) or ({n_sv_model * n},)"
        )
    return (x if x.ndim == 1 else x.reshape(-1)), n_sv
