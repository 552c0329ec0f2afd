"""What both sweeps share: the batch checked and its rows described once."""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import jax
import numpy as np

from lyapax._engine import validate
from lyapax._internal import batching
from lyapax.sweep._rows import Probe, StepRows, builder_for, probe

#: Saved trajectories larger than this many bytes (on the device per call, or
#: on the host in total) trigger a ``UserWarning`` before they are allocated.
TRAJECTORY_WARN_BYTES = 2**30


def _key_data(leaf: Any) -> Any:
    dtype = getattr(leaf, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return jax.random.key_data(leaf)
    return leaf


class Setup(NamedTuple):
    n: int
    builder: Any
    batched: tuple
    probe: Probe
    dt: Any
    plan: batching.Plan


def setup(step_fn, state0, params_batch, dt, state0_batch, seed, plan_args):
    """Validate the batch and describe its rows (shared by both sweeps)."""
    if validate.is_traced((params_batch, state0, state0_batch, dt)):
        raise TypeError(
            "sweeps are eager entry points (they jit and shard internally); call "
            "them outside jax.jit/vmap, or vmap lyapunov_spectrum yourself"
        )
    # Typed PRNG keys (a batch of realisations) travel as their raw data: the
    # batch is sliced and padded with NumPy, which cannot hold key arrays.
    params_batch = jax.tree.map(_key_data, params_batch)
    n, _ = batching.batch_size_of(params_batch, state0_batch, seed)
    builder = builder_for(step_fn, params_batch is not None, state0_batch is not None)
    if isinstance(builder, StepRows):
        states = batching.state_batch(state0, state0_batch, n)
        validate.positive_dt(dt)
    else:
        if state0 is not None:
            raise TypeError(
                "a problem (or problem_family) carries its own state0; pass "
                "state0=None, or state0_batch to sweep initial states"
            )
        states = np.zeros((n, 1))
        if state0_batch is not None:
            states = batching.state_batch(None, state0_batch, n)
    found = probe(builder, params_batch, states)
    if found.dt is not None:
        validate.same_dt(dt, found.dt)
        dt = validate.positive_dt(found.dt)
    plan = batching.Plan(n, *plan_args)
    return Setup(
        n,
        builder,
        (params_batch, states, batching.seed_batch(seed, n)),
        found,
        dt,
        plan,
    )


def min_transient(found: Probe) -> int:
    return 0 if found.view is None else found.view.min_transient_steps


def warn_trajectory(
    plan: batching.Plan, n_saved: int, d: int, dtype: Any, to_host: bool
):
    itemsize = np.dtype(dtype).itemsize
    host_bytes = plan.n * n_saved * d * itemsize
    device_bytes = plan.padded * n_saved * d * itemsize
    if not to_host and plan.chunk < plan.n:
        device_bytes = host_bytes  # chunks stay on the device until joined
    biggest, where = (host_bytes, "host") if to_host else (device_bytes, "device")
    if biggest > TRAJECTORY_WARN_BYTES:
        warnings.warn(
            f"saving states will allocate {biggest / 2**30:.2f} GiB of trajectory "
            f"on the {where} ({plan.n} rows x {n_saved} saved states x d={d}); "
            "increase decimate, or pass batch_size with trajectory_to_host=True "
            "to keep one chunk at a time on the device",
            UserWarning,
            stacklevel=3,
        )
