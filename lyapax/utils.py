"""Trajectory utilities."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from lyapax._engine import validate
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.shapes import StateLike, StepFn
from lyapax._engine.trajectory import Trajectory, iterate
from lyapax._engine.tree import merge_static, split_static

__all__ = ["Trajectory", "simulate_trajectory"]


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
