"""The trajectory loop: iterate a step, drop a transient, keep every n-th state;
and its result, :class:`Trajectory` (public as :class:`lyapax.utils.Trajectory`).

Used by :func:`lyapax.utils.simulate_trajectory` and by trajectory sweeps.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from lyapax._engine.abstract import as_step


class Trajectory(NamedTuple):
    """``times (n,)`` and ``states (n, d)``; unpacks as ``times, states``.

    Indexing and array conversion act on ``states``, so code written for
    lyapax 0.3.0 (which returned the state array) keeps working:
    ``traj[a:b, 0]``, ``traj.shape``, ``np.asarray(traj)``.
    """

    times: Float[Array, "*batch n_saved"]
    states: Float[Array, "*batch n_saved d"] | np.ndarray

    def __getitem__(self, index: Any) -> Any:
        return self.states[index]

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of ``states``."""
        return self.states.shape

    @property
    def ndim(self) -> int:
        """Number of dimensions of ``states``."""
        return self.states.ndim

    @property
    def dtype(self) -> Any:
        """dtype of ``states``."""
        return self.states.dtype

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return np.asarray(self.states, dtype=dtype)

    def __jax_array__(self) -> jax.Array:
        return jnp.asarray(self.states)


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
