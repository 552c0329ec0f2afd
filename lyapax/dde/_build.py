"""Shared pieces of the DDE problem builders: states, delays, initial buffers.

Every check here runs eagerly, before anything is traced, and names the
argument, the value received and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax._internal import history as _history
from lyapax._internal.checks import as_weights
from lyapax._internal.sparse import EllWeights, check_dense_fits, values_at_slots
from lyapax.dde import _delays
from lyapax.dde._step import SlotDelays, _cvar_rows
from lyapax.integrators import fixed_stage_method


class Delays(NamedTuple):
    """Resolved delays: what the step reads, the buffer length, and reports."""

    delay: Any  # int / float (uniform) or (n, n) array (per edge), in steps
    horizon: int
    tau_steps: Any  # delay in steps, as reported on the problem
    tau_eff: Any  # delay actually simulated, model time units
    edges: bool


def method_name(integrator: Any) -> str:
    """The tableau name behind ``integrator`` (names only for delay equations)."""
    return fixed_stage_method(integrator, "a delay-equation builder")


def scalar_state0(state0: Any) -> jax.Array:
    """``state0`` of a scalar/vector DDE as the ``(m, 1)`` carry state."""
    x = jnp.asarray(state0)
    if x.ndim == 0:
        x = x[None]
    return validate.as_state("state0", x)[:, None]


def network_weights(weights: Any, densify: bool, per_edge: bool, n_cvar: int) -> Any:
    """The weights a delayed network uses: neighbour list or dense ``(n, n)``.

    Sparse weights (:class:`EllWeights`) stay sparse unless ``densify`` (the
    caller asks for it where a path needs the matrix: per-edge delays read by
    Hermite interpolation, generic couplings evaluated per target node).
    Dense per-edge delays hold ``(n_cvar, n, n)`` delayed values, so a size
    that cannot fit raises before anything is allocated.

    Raises:
        MemoryError: dense per-edge delays for an ``n`` that cannot fit.
    """
    if isinstance(weights, EllWeights) and not densify:
        return weights
    n = int(weights.shape[0])
    if per_edge:
        check_dense_fits(
            f"per-edge delays on dense ({n}, {n}) weights",
            (3 + n_cvar) * n * n * 8,
            "pass sparse weights (BCOO or scipy.sparse): per-edge delays then "
            "cost n * (edges per node)",
        )
    return as_weights(weights, dense=True)


def sparse_edge_delays(W: EllWeights, dt: Any, *, tau: Any, delay_steps: Any) -> Delays:
    """Grid per-edge delays on the slots of sparse weights (``tau`` or
    ``delay_steps``: an ``(n, n)`` dense or sparse matrix, read on the edges)."""
    steps = _delays.edge_delay_steps(
        np.asarray(W.values),
        dt,
        tau=tau,
        delay_steps=delay_steps,
        interpolate=False,
        at=lambda matrix: values_at_slots(matrix, W),
    )
    horizon = _delays.horizon_for(float(np.max(steps, initial=0.0)))
    delay = SlotDelays(jnp.asarray(steps, dtype=jnp.int32), W.indices)
    return Delays(delay, horizon, steps, steps * float(dt), True)


def uniform_delays(tau: Any, dt: Any, interpolate: bool) -> Delays:
    """One delay ``tau`` (model time) shared by every edge."""
    dt_value = float(dt)
    if interpolate:
        q = _delays.interpolated_tau_steps(tau, dt)
        return Delays(q, _delays.horizon_for(q), q, q * dt_value, False)
    s = _delays.resolve_tau_steps(tau, dt)
    return Delays(s, s + 1, s, s * dt_value, False)


def edge_delays(
    W: jax.Array,
    dt: Any,
    *,
    tau: Any = None,
    delay_steps: Any = None,
    interpolate: bool,
) -> Delays:
    """Per-edge delays from ``tau (n, n)`` (time) or ``delay_steps (n, n)``."""
    steps = _delays.edge_delay_steps(
        np.asarray(W),
        dt,
        tau=tau,
        delay_steps=delay_steps,
        interpolate=interpolate,
    )
    horizon = _delays.horizon_for(float(np.max(steps, initial=0.0)))
    delay = jnp.asarray(steps, dtype=float if interpolate else jnp.int32)
    return Delays(delay, horizon, steps, steps * float(dt), True)


def check_horizon(horizon: Any, needed: int) -> int:
    horizon = validate.as_int("horizon", horizon, minimum=1)
    if horizon < needed:
        raise ValueError(
            f"horizon={horizon} ring-buffer slots cannot hold the largest delay: it "
            f"needs at least {needed} (largest delay in steps, rounded up, + 1)"
        )
    return horizon


def initial_buffer(
    history: Any,
    X0: jax.Array,
    cvar: tuple[int, ...],
    horizon: int,
    dt: Any,
    interpolate: bool,
) -> jax.Array:
    """The ring buffer at ``t = 0`` (slot order: see :mod:`lyapax._internal.history`).

    ``history`` is None (constant history equal to ``X0``), a callable
    ``history(t)`` returning the state at time ``t <= 0`` (shape of ``X0`` or
    flat), or a ready ring buffer of exactly the buffer's shape.
    """
    now = _cvar_rows(X0, cvar)
    shape = _history.buffer_shape(horizon, now.shape, interpolate)
    if history is None:
        return _history.constant_history_buf0(now, horizon, interpolate)
    if callable(history):

        def cvar_of(x):
            try:
                x = jnp.reshape(x, X0.shape)
            except (TypeError, ValueError):
                raise ValueError(
                    f"history(t) must return the state at time t, of shape "
                    f"{X0.shape} (or {X0.size} values); got shape {jnp.shape(x)}"
                ) from None
            return _cvar_rows(x, cvar)

        buf = _history.sampled_history_buf0(
            history,
            cvar_of,
            now,
            horizon,
            validate.concrete_float("dt", dt, why=""),
            interpolate,
        )
    else:
        buf = jnp.asarray(history, dtype=X0.dtype)
        if buf.shape != shape:
            raise ValueError(
                f"history array must be the ring buffer itself, of shape {shape} "
                "(horizon slots of the coupled variables; slot 0 = now, slot "
                "horizon - j = j steps ago"
                + (", [:, 0] value, [:, 1] derivative" if interpolate else "")
                + f"); got shape {buf.shape}. Or pass a function history(t)."
            )
    if not validate.is_traced(buf) and not bool(jnp.all(jnp.isfinite(buf))):
        raise ValueError("the initial history must be finite; it holds nan or inf")
    return buf


def check_field(
    field: Callable[..., Any],
    X0: jax.Array,
    D_shape: tuple[int, ...],
    params: Any,
    what: str,
) -> None:
    """Trace the field once on shapes only, so a bad rhs fails here, clearly."""
    D = jax.ShapeDtypeStruct(D_shape, X0.dtype)
    out = jax.eval_shape(field, X0, D, params)
    if getattr(out, "shape", None) != X0.shape:
        raise ValueError(
            f"{what} returned shape {getattr(out, 'shape', None)}; expected "
            f"{X0.shape}, the shape of the state"
        )
