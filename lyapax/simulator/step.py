"""Compatibility module of the simulator package: lyapax 0.3.0's
``lyapax.simulator.step``.

``make_step_fn`` (the carry step of a delay-coupled network) is built by the
delay engine, :mod:`lyapax.dde`; ``build_jax_dfun`` compiles a
:class:`~lyapax.simulator.ModelSpec` to the node ``dfun`` both take.

The four private ring-buffer helpers below keep the names lyapax 0.3.0 had
here, over :mod:`lyapax._internal.history` (same buffer layout and time
convention: slot ``m % horizon`` holds the sample of time ``m * dt``).
"""

from typing import Any

import jax
import jax.numpy as jnp

from lyapax._internal import history as _history
from lyapax.dde import make_step_fn
from lyapax.simulator._model import build_jax_dfun

__all__ = ["build_jax_dfun", "make_step_fn"]


def _write_ring(buf: jax.Array, t: Any, value: jax.Array, horizon: int) -> jax.Array:
    """``buf[t % horizon] = value`` for a grid buffer ``(horizon, n_cvar, n)``."""
    return _history.put(buf, jnp.mod(t, horizon), None, value)


def _write_ring_interp(
    buf: jax.Array, t: Any, value: jax.Array, deriv: jax.Array, horizon: int
) -> jax.Array:
    """Value and derivative into slot ``t % horizon`` of ``(horizon, 2, n_cvar, n)``."""
    slot = jnp.mod(t, horizon)
    return _history.put(_history.put(buf, slot, 0, value), slot, 1, deriv)


def _read_uniform_delayed_cvar(
    buf: jax.Array, t: Any, tau_steps: Any, horizon: int
) -> jax.Array:
    """Sample ``tau_steps`` whole steps before step ``t``: slot ``(t - tau_steps)``."""
    return _history.read_slot(buf[:horizon], t, tau_steps)


def _read_uniform_delayed_cvar_interp(
    buf: jax.Array, t: Any, tau_steps: Any, horizon: int, dt: Any
) -> jax.Array:
    """Cubic Hermite value ``tau_steps`` (real, >= 0) steps before step ``t``."""
    return _history.hermite_uniform(buf[:horizon], t, -jnp.asarray(tau_steps), dt)
