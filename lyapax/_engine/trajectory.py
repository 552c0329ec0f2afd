"""The trajectory loop: iterate a step, drop a transient, keep every n-th state.

Used by :func:`lyapax.utils.simulate_trajectory` and by trajectory sweeps.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from lyapax._engine.abstract import as_step


def iterate(
    step: Any,
    z0: Float[Array, " d"],
    *,
    n_transient: int,
    n_saved: int,
    decimate: int,
) -> Float[Array, "n_saved d"]:
    """States after steps ``n_transient + decimate * (1, ..., n_saved)``.

    ``step``: a step (see :func:`~lyapax._engine.abstract.as_step`); one that
    uses the step index gets it counted from 0 at ``z0``. Traceable (two
    ``lax.scan`` s); the caller jits.
    """
    step = as_step(step)

    def advance(carry, _):
        z, i = carry
        return (step.advance(z, i), i + 1), None

    carry, _ = jax.lax.scan(advance, (z0, jnp.int32(0)), None, length=n_transient)

    def group(carry, _):
        carry, _ = jax.lax.scan(advance, carry, None, length=decimate)
        return carry, carry[0]

    _, saved = jax.lax.scan(group, carry, None, length=n_saved)
    return saved
