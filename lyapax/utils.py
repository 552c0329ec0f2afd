"""Trajectory utilities."""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from lyapax._engine import validate
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.shapes import StateLike, StepFn
from lyapax._engine.trajectory import iterate
from lyapax._engine.tree import merge_static, split_static

__all__ = ["Trajectory", "simulate_trajectory"]


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


@partial(jax.jit, static_argnames=("static", "n_saved", "decimate", "n_transient"))
def _simulate(dynamic, state0, *, static, n_saved, decimate, n_transient):
    return iterate(
        merge_static(dynamic, static),
        state0,
        n_transient=n_transient,
        n_saved=n_saved,
        decimate=decimate,
    )


@holds_one_blas_thread
def simulate_trajectory(
    step_fn: StepFn,
    state0: StateLike,
    n_steps: int,
    dt: float | None = None,
    decimate: int = 1,
    n_transient: int = 0,
) -> Trajectory:
    """Iterate ``step_fn`` and keep every ``decimate``-th state.

    After ``n_transient`` discarded steps, runs ``n_steps`` steps and returns the
    states after steps ``decimate, 2*decimate, ...`` with their times (``dt``
    per step; step counts when ``dt`` is None).

    Raises:
        ValueError: ``n_steps`` < 1, ``decimate`` < 1 or not dividing
            ``n_steps``, ``n_transient`` < 0, bad ``state0``.
    """
    state0 = validate.as_state("state0", state0)
    n_steps = validate.as_int("n_steps", n_steps, minimum=1)
    decimate = validate.as_int("decimate", decimate, minimum=1)
    n_transient = validate.as_int("n_transient", n_transient, minimum=0)
    if n_steps % decimate:
        raise ValueError(f"decimate={decimate} must divide n_steps={n_steps}")
    step = 1.0 if dt is None else validate.positive_dt(dt)
    dynamic, static = split_static(step_fn)
    states = _simulate(
        dynamic,
        state0,
        static=static,
        n_saved=n_steps // decimate,
        decimate=decimate,
        n_transient=n_transient,
    )
    times = step * decimate * jnp.arange(1, n_steps // decimate + 1)
    return Trajectory(times, states)
