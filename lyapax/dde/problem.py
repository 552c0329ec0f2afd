"""Delay problems: :class:`DDEProblem`, its checkpoint and its two builders.

The method (ring buffer, grid and interpolated reads) is described in
:mod:`lyapax.dde`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

from lyapax._engine import validate
from lyapax._engine.abstract import AbstractProblem, EngineView
from lyapax._engine.shapes import Scalar
from lyapax._internal.checks import as_cvar_indices, state_rows
from lyapax._internal.sparse import EllWeights
from lyapax.dde import _build as build
from lyapax.dde._step import (
    CarryStep,
    FlatStep,
    NetworkField,
    RingStep,
    ScalarField,
    presum_edges,
)
from lyapax.network.edge_coupling import PerTargetCoupling, as_edge_coupling

__all__ = ["DDECheckpoint", "DDEProblem", "dde_problem", "network_dde_problem"]


class _DDEProblemFields(NamedTuple):
    """The fields of :class:`DDEProblem` (its published ``NamedTuple`` form)."""

    step_fn: Callable[..., Any]
    state0: Float[ArrayLike, "n_sv n"]
    buf0: Float[ArrayLike, "horizon ..."]
    params: Any
    dt: Scalar
    tau: Any
    tau_steps: Any
    tau_eff: Any
    horizon: int
    interpolate: bool


class DDEProblem(_DDEProblemFields, AbstractProblem):
    """A delay equation ready for :func:`lyapunov_spectrum_dde`.

    ``step_fn(carry, _) -> (new_carry, new_state)`` with ``carry = (state, buf,
    t, params)``; ``state0 (n_sv, n)`` (``(m, 1)`` for a scalar/vector DDE);
    ``buf0`` the initial ring buffer; ``params``; ``dt``; ``tau`` as requested;
    ``tau_steps`` the delay in steps (int in grid mode, ``tau / dt`` when
    interpolating; ``(n, n)`` per edge); ``tau_eff`` the delay simulated (time
    units); ``horizon`` buffer slots; ``interpolate``.
    """

    __slots__ = ()

    def for_engine(self) -> EngineView:
        """The flat map of ``(state, buffer)`` with the ring-buffer step counter;
        a fresh run passes one history length (``horizon`` steps) first."""
        X0 = validate.finite_array("state0", self.state0)
        buf0 = validate.finite_array("buf0", self.buf0, X0.dtype)
        dt = validate.positive_dt(self.dt)
        params = {} if self.params is None else validate.float_params(self.params)
        flat = FlatStep(self.step_fn, params, X0.shape, buf0.shape)

        def checkpoint(z, Y, cum, step, elapsed_time, dt):
            state, buf = flat.split(z)
            return DDECheckpoint(state, buf, step, Y, cum, elapsed_time, dt)

        def resume_point(resume: Any):
            state = jnp.asarray(resume.state, dtype=X0.dtype)
            buf = jnp.asarray(resume.buf, dtype=X0.dtype)
            if state.shape != X0.shape or buf.shape != buf0.shape:
                raise ValueError(
                    f"resume checkpoint holds a state {state.shape} and buffer "
                    f"{buf.shape}, but this problem has {X0.shape} and {buf0.shape}"
                )
            return jnp.concatenate([state.ravel(), buf.ravel()]), resume.t

        z0 = jnp.concatenate([X0.ravel(), buf0.ravel()])
        n_history = int(buf0.shape[0])
        return EngineView(
            flat,
            z0,
            dt,
            int(X0.size),
            n_history,
            checkpoint,
            resume_point,
            DDECheckpoint,
        )

    def with_params(self, params: Any) -> DDEProblem:
        """The problem with ``params``; a dict updates the problem's own dict."""
        base = self.params or {}
        if isinstance(base, dict) and isinstance(params, dict):
            return self._replace(params={**base, **params})
        return self._replace(params=params)

    def with_state(self, state0: Any) -> DDEProblem:
        raise ValueError(
            "state0_batch cannot be used with a delay problem: its initial "
            "history buffer belongs to its state0. Sweep initial states with "
            "problem_family(lambda x0: dde_problem(..., state0=x0, ...)) and "
            "params_batch=x0s instead"
        )


class DDECheckpoint(NamedTuple):
    """Everything needed to continue a DDE run exactly.

    ``state`` present state, ``buf`` ring buffer, ``t`` ring-buffer step
    counter, ``Y (d, k)`` frame over the flattened ``(state, buf)`` phase space
    (raw column order), ``cum_log_growth (k,)``, ``elapsed_time``, ``dt``.
    """

    state: Float[Array, "*batch n_sv n"]
    # (*batch, horizon, [2,] n_cvar, n): jaxtyping allows one variadic axis.
    buf: Float[Array, "*buffer_shape"]
    t: Int[Array, " *batch"]
    Y: Float[Array, "*batch d k"]
    cum_log_growth: Float[Array, "*batch k"]
    elapsed_time: Float[Array, " *batch"]
    dt: Any


def dde_problem(
    rhs_delayed: Callable[[Float[Array, " m"], Float[Array, " m"]], Float[Array, " m"]],
    state0: Float[ArrayLike, " m"] | float,
    tau: float,
    dt: float,
    history: Any = None,
    integrator: str = "heun",
    interpolate: bool = False,
) -> DDEProblem:
    """Problem for ``dx/dt = rhs_delayed(x(t), x(t - tau))``, ``x`` of shape ``(m,)``.

    Args:
        rhs_delayed: ``(x_now (m,), x_delayed (m,)) -> (m,)``.
        state0: present state ``x(0)``, ``(m,)`` or a scalar.
        tau: delay (model time units, > 0).
        dt: time step.
        history: past states: None (constant ``state0``), a function
            ``history(t) -> (m,)`` for ``t < 0``, or a ready ring buffer
            ``(horizon, m, 1)`` (``(horizon, 2, m, 1)`` interpolating).
        integrator: ``euler``, ``heun``, ``rk4`` or ``rk6``.
        interpolate: read ``x(t - tau)`` at every stage by cubic Hermite
            interpolation (exact ``tau``, needs ``tau >= dt``). Otherwise ``tau``
            is rounded to whole steps and read once per step (first order).

    Raises:
        ValueError: ``tau <= 0``, ``tau < dt`` with ``interpolate``, a history of
            the wrong shape, an ``rhs_delayed`` returning the wrong shape.
    """
    method = build.method_name(integrator)
    dt = validate.as_dt(dt)
    X0 = build.scalar_state0(state0)
    delays = build.uniform_delays(tau, dt, bool(interpolate))
    cvar = tuple(range(X0.shape[0]))
    field = ScalarField(rhs_delayed)
    build.check_field(field, X0, X0.shape, {}, "rhs_delayed(x_now, x_delayed)")
    buf0 = build.initial_buffer(
        history, X0, cvar, delays.horizon, dt, bool(interpolate)
    )
    ring = RingStep(
        field, dt, delays.delay, method, delays.horizon, cvar, bool(interpolate), False
    )
    return DDEProblem(
        CarryStep(ring),
        X0,
        buf0,
        {},
        dt,
        tau,
        delays.tau_steps,
        delays.tau_eff,
        delays.horizon,
        bool(interpolate),
    )


def network_dde_problem(
    dfun: Callable[..., Any],
    network: Any,
    coupling: Any,
    params: Any,
    state0: Any,
    dt: float,
    tau: Any = None,
    history: Any = None,
    integrator: str = "heun",
    interpolate: bool = False,
) -> DDEProblem:
    """Problem for a network with delayed coupling.

    ``dX/dt = dfun(X, c, params)`` with ``c_i`` the coupling of node ``i`` to
    the delayed coupled variables of its sources.

    Args:
        dfun: ``dfun(state (n_sv, n), coupling (n_cvar, n), params) -> (n_sv, n)``.
        network: :class:`lyapax.network.Network` (``weights (n, n)`` indexed
            ``[target, source]``, ``cvar_indices``, optional integer
            ``delay_steps (n, n)``).
        coupling: a plain coupling ``(cvar (n_cvar, n), weights, params)`` or an
            edge-aware one (``edge_linear_coupling``, ``edge_kuramoto_coupling``,
            ``pairwise_edge_coupling``, or any :class:`EdgeCoupling` subclass).
            Plain couplings are evaluated per target node on the network as that
            node sees it (sources delayed, itself now): exact, but ``n`` times
            the cost; edge-aware ones cost what the undelayed coupling costs.
        params: parameters passed to ``dfun`` and the coupling (``G`` read by
            the built-in couplings).
        state0: ``(n_sv, n)``, flat ``(n_sv * n,)``, or ``(n,)`` for one variable.
        dt: time step.
        tau: one delay for every edge (time units), or an ``(n, n)`` matrix of
            per-edge delays (dense, or BCOO / ``scipy.sparse`` with the weights'
            pattern); None to use ``network.delay_steps``. With sparse weights
            and grid delays a step reads only the ``n w`` delayed values of the
            stored edges (``w`` edges per node); per-edge delays with
            ``interpolate=True`` or a generic coupling use the dense matrix.
        history: None (constant ``state0``), ``history(t) -> state`` for
            ``t < 0``, or a ready ring buffer of the buffer's shape.
        integrator: ``euler``, ``heun``, ``rk4`` or ``rk6``.
        interpolate: read the delayed values at every stage by cubic Hermite
            interpolation (exact delays, each >= dt). Otherwise delays are
            rounded to whole steps and read once per step (first order in dt).

    Raises:
        ValueError: no delay given or two given, a delay matrix of the wrong
            shape, negative or non-finite delays, ``tau <= 0``, ``tau < dt``
            with ``interpolate``, a history or ``dfun`` output of the wrong shape.
        MemoryError: per-edge delays on dense weights of a size that cannot
            fit in memory (the message gives the size needed).
    """
    method = build.method_name(integrator)
    dt = validate.as_dt(dt)
    params = validate.float_params(params)
    n = int(network.weights.shape[0])
    x0, n_sv = state_rows(state0, n, dfun)
    X0 = x0.reshape(n_sv, n)
    cvar = as_cvar_indices(network.cvar_indices, n_sv)
    delay_steps = getattr(network, "delay_steps", None)
    if tau is None and delay_steps is None:
        raise ValueError(
            "no delay given: pass tau (a number or an (n, n) matrix) or a Network "
            "with delay_steps; for an undelayed network use "
            "lyapax.network.network_problem"
        )
    if tau is not None and delay_steps is not None:
        raise ValueError(
            "both tau and network.delay_steps are given; pass only one of them"
        )
    interpolate = bool(interpolate)
    edge_coupling = as_edge_coupling(coupling)
    per_edge = tau is None or np.ndim(tau) != 0
    generic = isinstance(edge_coupling, PerTargetCoupling)
    W = build.network_weights(
        network.weights, generic or (per_edge and interpolate), per_edge, len(cvar)
    )
    if not per_edge:
        delays = build.uniform_delays(tau, dt, interpolate)
    elif isinstance(W, EllWeights):
        delays = build.sparse_edge_delays(W, dt, tau=tau, delay_steps=delay_steps)
    else:
        delays = build.edge_delays(
            W,
            dt,
            tau=tau,
            delay_steps=delay_steps,
            interpolate=interpolate,
        )
    presum = presum_edges(edge_coupling, W, delays.horizon, interpolate, delays.edges)
    field = NetworkField(dfun, edge_coupling, W, cvar, delays.edges, presum)
    D_shape: tuple[int, ...]
    if not delays.edges:
        D_shape = (len(cvar), n)
    else:  # one delayed value per edge slot: n sources dense, w sparse
        D_shape = (len(cvar), n, W.width if isinstance(W, EllWeights) else n)
    build.check_field(field, X0, D_shape, params, "dfun(state, coupling, params)")
    buf0 = build.initial_buffer(history, X0, cvar, delays.horizon, dt, interpolate)
    ring = RingStep(
        field,
        dt,
        delays.delay,
        method,
        delays.horizon,
        cvar,
        interpolate,
        delays.edges,
    )
    return DDEProblem(
        CarryStep(ring),
        X0,
        buf0,
        params,
        dt,
        tau,
        delays.tau_steps,
        delays.tau_eff,
        delays.horizon,
        interpolate,
    )


def _plain_problem(step: Any, state0: Any, buf0: Any, params: Any, dt: Any):
    """The plain call form's carry step as a :class:`DDEProblem`."""
    horizon = int(np.shape(buf0)[0]) if np.ndim(buf0) else 0
    return DDEProblem(step, state0, buf0, params, dt, None, None, None, horizon, False)
