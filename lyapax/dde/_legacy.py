"""Compatibility code of the delay package: the builders of lyapax 0.3.0.

The published lower-level DDE builders (and ``tau_eff``, the delay of a
number of steps) keep their names, arguments and meaning here, so that the
real modules read as the design.

They return the carry step ``step(carry, _) -> (new_carry, new_state)`` with
``carry = (state (n_sv, n_nodes), buf, t (int32 step counter), params)`` that
the plain form of :func:`lyapax.dde.lyapunov_spectrum_dde` runs. The ring
buffer follows the convention of :mod:`lyapax._internal.history`: slot ``m % horizon``
holds time ``m * dt``; at step ``t`` delay ``s`` reads slot ``(t - s) % horizon``
before the new state is written to slot ``(t + 1) % horizon``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax._internal import history as _history
from lyapax._internal.checks import as_cvar_indices, as_weights
from lyapax.dde import _build as build
from lyapax.dde._delays import _concrete_dt
from lyapax.dde._step import (
    CarryStep,
    NetworkField,
    RingStep,
    ScalarField,
    presum_edges,
)
from lyapax.network.edge_coupling import as_edge_coupling, edge_linear_coupling


def make_scalar_delayed_step_fn(
    rhs_delayed: Callable[[Any, Any], Any],
    m: int,
    tau_steps: int,
    dt: float,
    integrator: str = "heun",
    interpolate: bool = False,
) -> CarryStep:
    """Carry step of ``dx/dt = rhs_delayed(x(t) (m,), x(t - tau_steps*dt) (m,))``.

    The carry state is ``(m, 1)``; the buffer has ``tau_steps + 1`` slots of all
    ``m`` variables (see :func:`scalar_delayed_history0`). Grid mode reads the
    delayed value once per step (first order in ``dt``); ``interpolate=True``
    reads it at every stage's time by cubic Hermite interpolation.

    Raises:
        ValueError: ``m < 1``, ``tau_steps < 1``, non-positive ``dt``, unknown
            integrator.
    """
    m = validate.as_int("m", m, minimum=1)
    s = validate.as_int("tau_steps", tau_steps, minimum=1)
    dt = validate.as_dt(dt)
    delay = float(s) if interpolate else s
    ring = RingStep(
        ScalarField(rhs_delayed),
        dt,
        delay,
        build.method_name(integrator),
        s + 1,
        tuple(range(m)),
        bool(interpolate),
        False,
    )
    return CarryStep(ring)


def scalar_delayed_history0(
    state0_now: Any, tau_steps: int, interpolate: bool = False
) -> tuple[jax.Array, jax.Array]:
    """``(state0 (m, 1), buf0)`` for a constant history equal to ``state0_now``.

    ``buf0`` has ``tau_steps + 1`` slots, ``(tau_steps + 1, m, 1)`` (or
    ``(tau_steps + 1, 2, m, 1)`` with derivatives for interpolation).
    """
    s = validate.as_int("tau_steps", tau_steps, minimum=1)
    X0 = build.scalar_state0(state0_now)
    return X0, _history.constant_history_buf0(X0, s + 1, interpolate)


def make_step_fn(
    dfun: Callable[..., Any],
    weights: Any,
    has_delays: bool,
    horizon: int,
    n_nodes: int,
    cvar_indices: Any,
    dt: float,
    delay_steps: Any = None,
    G_default: float = 1.0,
    coup_a: float = 1.0,
    coup_b: float = 0.0,
    integrator: str = "heun",
    coupling_fn: Callable[..., Any] | None = None,
    tau_steps: int | None = None,
    interpolate: bool = False,
) -> CarryStep:
    """Carry step of a delay-coupled network (published ``make_step_fn``).

    Args:
        dfun: ``dfun(state (n_sv, n), coupling (n_cvar, n), params) -> (n_sv, n)``.
        weights: ``(n_nodes, n_nodes)`` indexed ``[target, source]``.
        has_delays: False gives the undelayed network (the coupling reads each
            stage's state; the buffer is still written).
        horizon: ring-buffer slots (largest delay in steps + 1 at least).
        n_nodes: node count (checked against ``weights``).
        cvar_indices: state-variable rows that are coupled (and buffered).
        dt: time step.
        delay_steps: integer ``(n, n)`` per-edge delays in steps.
        G_default, coup_a, coup_b: with ``coupling_fn=None`` the coupling is
            ``G*coup_a*sum_j w_ij x_j(t - delay_ij) + coup_b``,
            ``G = params.get("G", G_default)``.
        integrator: ``euler``, ``heun``, ``rk4`` or ``rk6``.
        coupling_fn: another coupling: plain ``(cvar, weights, params)`` or
            edge-aware (:mod:`lyapax.network.edge_coupling`); with
            ``tau_steps`` it sees one uniform delay, with ``delay_steps``
            per-edge delays.
        tau_steps: uniform delay in steps.
        interpolate: buffer ``(horizon, 2, n_cvar, n)`` of values and
            derivatives; delays read at every stage's time.

    Raises:
        ValueError: shapes that disagree, a horizon too short for the delays,
            delays missing while ``has_delays=True``, bad delay entries.
    """
    W = as_weights(weights, dense=True)
    n = validate.as_int("n_nodes", n_nodes, minimum=1)
    if W.shape != (n, n):
        raise ValueError(f"weights has shape {W.shape}; n_nodes={n} needs ({n}, {n})")
    cvar = as_cvar_indices(cvar_indices)
    dt = validate.as_dt(dt)
    if coupling_fn is None:
        coupling = edge_linear_coupling(coup_a, coup_b, G_default)
    else:
        coupling = as_edge_coupling(coupling_fn)
    if not has_delays:
        delay, edges = None, False
        horizon = validate.as_int("horizon", horizon, minimum=1)
    elif delay_steps is not None:
        d = build.edge_delays(W, dt, delay_steps=delay_steps, interpolate=interpolate)
        delay, edges = d.delay, True
        horizon = build.check_horizon(horizon, d.horizon)
    elif tau_steps is not None:
        s = validate.as_int("tau_steps", tau_steps, minimum=1)
        delay, edges = (float(s) if interpolate else s), False
        horizon = build.check_horizon(horizon, s + 1)
    else:
        raise ValueError(
            "has_delays=True needs delay_steps (per-edge (n, n) steps) or "
            "tau_steps (one delay in steps)"
        )
    presum = presum_edges(coupling, W, horizon, bool(interpolate), edges)
    field = NetworkField(dfun, coupling, W, cvar, edges, presum)
    ring = RingStep(
        field,
        dt,
        delay,
        build.method_name(integrator),
        horizon,
        cvar,
        bool(interpolate),
        edges,
    )
    return CarryStep(ring)


def constant_history_buf0(
    cvar_state0: Any, horizon: int, interpolate: bool = False
) -> jax.Array:
    """Ring buffer of a constant history: every slot holds ``cvar_state0``.

    Args:
        cvar_state0: ``(n_cvar, n_nodes)`` present coupled variables.
        horizon: slots (largest delay in steps + 1).
        interpolate: add zero derivatives: ``(horizon, 2, n_cvar, n_nodes)``.
    """
    return _history.constant_history_buf0(
        jnp.asarray(cvar_state0), horizon, interpolate
    )


def tau_eff(tau_steps: float, dt: float) -> float:
    """The delay ``tau_steps * dt`` (time units) of a delay of ``tau_steps`` steps.

    The lyapax 0.3.0 signature; :func:`effective_tau` answers the same from a
    requested ``tau``.

    Raises:
        ValueError: ``tau_steps`` negative or not finite, ``dt`` not > 0.
    """
    steps = validate.concrete_float("tau_steps", tau_steps, why="to compute a delay")
    if not np.isfinite(steps) or steps < 0:
        raise ValueError(f"tau_steps must be a finite number >= 0; got {tau_steps!r}")
    return steps * _concrete_dt(dt)
