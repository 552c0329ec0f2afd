"""The trajectory loop: iterate a step, drop a transient, keep every n-th state.

Used by :func:`lyapax.utils.simulate_trajectory` and by trajectory sweeps.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


def iterate(
    step: Any,
    z0: Float[Array, " d"],
    *,
    n_transient: int,
    n_saved: int,
    decimate: int,
) -> Float[Array, "n_saved d"]:
    """States after steps ``n_transient + decimate * (1, ..., n_saved)``.

    ``step(z) -> z``, or ``step(z, step_index)`` when it declares
    ``uses_step_index = True`` (the index counts from 0 at ``z0``). Traceable
    (two ``lax.scan`` s); the caller jits.
    """
    indexed = getattr(step, "uses_step_index", False)

    def advance(carry, _):
        z, i = carry
        return ((step(z, i) if indexed else step(z)), i + 1), None

    carry, _ = jax.lax.scan(advance, (z0, jnp.int32(0)), None, length=n_transient)

    def group(carry, _):
        carry, _ = jax.lax.scan(advance, carry, None, length=decimate)
        return carry, carry[0]

    _, saved = jax.lax.scan(group, carry, None, length=n_saved)
    return saved
