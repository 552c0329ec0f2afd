"""From the kernel's output buffers to the arrays of a result.

The kernel (:mod:`~lyapax._engine.benettin`) writes the accumulated
log-growth of each block, and the saved states, into buffers with room for
more rows than the run produced, so that runs of different lengths share one
compiled program. Here the produced rows are kept and turned into running
estimates, times and error bars. Outside a trace this runs in NumPy on host
copies and returns NumPy arrays, which the caller places on its devices
(``jax.device_put`` compiles nothing): an eager device op on a new shape would
compile a small program of its own, which would cost more than the run for
short runs. Under a trace (a user's ``jit``) the same code runs in
``jax.numpy``. Leading axes (the rows of a sweep) are kept.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from lyapax._engine.stats import batch_means_stderr, block_growths
from lyapax._engine.validate import is_traced

__all__ = ["estimates", "saved_states"]


def _xp(*arrays: Any) -> Any:
    return jnp if any(is_traced(a) for a in arrays) else np


def estimates(
    cum: Any, cum0: Any, *, n_blocks: int, dt: Any, renorm_every: int, t0: Any
) -> dict[str, Any]:
    """Running estimates of a run from its growth buffer.

    Args:
        cum: ``(..., capacity, k)`` accumulated log-growth after each block
            (raw column order); rows past ``n_blocks`` are ignored.
        cum0: ``(..., k)`` accumulated log-growth at the start.
        n_blocks: measured blocks.
        dt: model time per step; ``renorm_every`` steps per block.
        t0: elapsed model time at the start (a checkpoint's, else 0).

    Returns:
        ``history (..., n_blocks, k)`` (columns ordered by the final estimate,
        descending), ``times (..., n_blocks)``, ``exponents (..., k)``,
        ``elapsed (...)`` and ``stderr (..., k)`` (see
        :func:`~lyapax._engine.stats.batch_means_stderr`).
    """
    xp = _xp(cum, cum0, dt, t0)
    if xp is np:
        # An overflowed run gives inf - inf: reported by check_finite, not here.
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return _estimates(np, cum, cum0, n_blocks, dt, renorm_every, t0)
    return _estimates(jnp, cum, cum0, n_blocks, dt, renorm_every, t0)


def _estimates(xp, cum, cum0, n_blocks, dt, renorm_every, t0):
    cum = xp.asarray(cum)[..., :n_blocks, :]
    lead, k = cum.shape[:-2], cum.shape[-1]
    dtype = cum.dtype
    dt, t0 = xp.asarray(dt, dtype), xp.asarray(t0, dtype)
    times = t0 + dt * renorm_every * xp.arange(1, n_blocks + 1, dtype=dtype)
    times = xp.broadcast_to(times, (*lead, n_blocks))
    raw = cum / times[..., None]
    last = -raw[..., -1, :]
    order = np.argsort(last, axis=-1, kind="stable") if xp is np else jnp.argsort(last)
    history = xp.take_along_axis(raw, order[..., None, :], axis=-1)
    start = xp.broadcast_to(xp.asarray(cum0, dtype), (*lead, k))
    growth = block_growths(history, times, xp.take_along_axis(start, order, axis=-1))
    elapsed = times[..., -1]
    stderr = batch_means_stderr(growth, dt * renorm_every, elapsed)
    return {
        "history": history,
        "times": times,
        "exponents": history[..., -1, :],
        "elapsed": elapsed,
        "stderr": stderr,
    }


def saved_states(
    saved: Any,
    *,
    n_saved: int,
    n_state: int,
    dt: Any,
    decimate: int,
    t0: Any,
) -> tuple[Any, Any]:
    """``(trajectory (..., n_saved, n_state), save_times (..., n_saved))`` from
    the kernel's saved-state buffer ``(..., capacity, d)``: the first
    ``n_state`` coordinates are the present state."""
    xp = _xp(saved, dt, t0)
    trajectory = xp.asarray(saved)[..., :n_saved, :n_state]
    dtype = trajectory.dtype
    dt, t0 = xp.asarray(dt, dtype), xp.asarray(t0, dtype)
    every = dt * decimate
    times = t0 + every * xp.arange(1, n_saved + 1, dtype=dtype)
    times = xp.broadcast_to(times, trajectory.shape[:-1])
    return trajectory, times
