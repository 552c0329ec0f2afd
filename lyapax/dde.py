"""Lyapunov spectra of delay differential equations with fixed delays.

Method of steps on a ring buffer (Farmer 1982): the history the delayed terms
read, ``horizon`` samples of the coupled variables, is carried with the present
state, and the pair ``(state, buffer)`` flattened is the phase space of a map.
Its tangent vectors are pushed through both by ``jax.jvp`` batched with
``jax.vmap`` and QR-renormalised as for ODEs (Benettin et al. 1980), so the
spectrum is that of the discretised history. Directions that the map discards
(the present value stored twice, stale derivative slots, slots older than the
largest delay) have exponent ``-inf``; ask for fewer exponents than those.

Buffer time convention and initial-history slot order: see
:mod:`lyapax._history` (slot ``m % horizon`` holds time ``m * dt``; at ``t = 0``
slot 0 is now and slot ``horizon - j`` is ``j`` steps ago).

Two ways to read the delayed values:

* grid (default): ``tau`` is rounded to whole steps (:func:`resolve_tau_steps`
  warns and says which delay is used) and read once per step; **first order in
  dt**, whatever the integrator;
* ``interpolate=True``: cubic Hermite interpolation of stored values and
  derivatives at every Runge-Kutta stage's own time, so ``tau`` is used exactly
  (``tau >= dt``) and the integrator keeps its order (at most 4, the
  interpolant's).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from lyapax import _dde_build as b
from lyapax import _validate as v
from lyapax import core
from lyapax._dde_compat import (
    constant_history_buf0,
    make_scalar_delayed_step_fn,
    make_step_fn,
    scalar_delayed_history0,
)
from lyapax._dde_step import CarryStep, FlatStep, NetworkField, RingStep, ScalarField
from lyapax._delays import resolve_tau_steps, tau_eff
from lyapax._edge_coupling import (
    EdgeCoupling,
    as_edge_coupling,
    edge_kuramoto_coupling,
    edge_linear_coupling,
    pairwise_edge_coupling,
)

__all__ = [
    "DDECheckpoint",
    "DDEProblem",
    "EdgeCoupling",
    "as_edge_coupling",
    "constant_history_buf0",
    "dde_problem",
    "edge_kuramoto_coupling",
    "edge_linear_coupling",
    "lyapunov_spectrum_dde",
    "make_scalar_delayed_step_fn",
    "make_step_fn",
    "network_dde_problem",
    "pairwise_edge_coupling",
    "resolve_tau_steps",
    "scalar_delayed_history0",
    "tau_eff",
]


class DDEProblem(NamedTuple):
    """A delay equation ready for :func:`lyapunov_spectrum_dde`.

    ``step_fn(carry, _) -> (new_carry, new_state)`` with ``carry = (state, buf,
    t, params)``; ``state0 (n_sv, n)`` (``(m, 1)`` for a scalar/vector DDE);
    ``buf0`` the initial ring buffer; ``params``; ``dt``; ``tau`` as requested;
    ``tau_steps`` the delay in steps (int in grid mode, ``tau / dt`` when
    interpolating; ``(n, n)`` per edge); ``tau_eff`` the delay simulated (time
    units); ``horizon`` buffer slots; ``interpolate``.
    """

    step_fn: Any
    state0: Any
    buf0: Any
    params: Any
    dt: Any
    tau: Any
    tau_steps: Any
    tau_eff: Any
    horizon: int
    interpolate: bool


class DDECheckpoint(NamedTuple):
    """Everything needed to continue a DDE run exactly.

    ``state`` present state, ``buf`` ring buffer, ``t`` ring-buffer step
    counter, ``Y (d, k)`` frame over the flattened ``(state, buf)`` phase space
    (raw column order), ``cum_log_growth (k,)``, ``elapsed_time``, ``dt``.
    """

    state: Any
    buf: Any
    t: Any
    Y: Any
    cum_log_growth: Any
    elapsed_time: Any
    dt: Any


def dde_problem(
    rhs_delayed: Callable[[Any, Any], Any],
    state0: Any,
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
    method = b.method_name(integrator)
    dt = b.as_dt(dt)
    X0 = b.scalar_state0(state0)
    delays = b.uniform_delays(tau, dt, bool(interpolate), stacklevel=3)
    cvar = tuple(range(X0.shape[0]))
    field = ScalarField(rhs_delayed)
    b.check_field(field, X0, X0.shape, {}, "rhs_delayed(x_now, x_delayed)")
    buf0 = b.initial_buffer(history, X0, cvar, delays.horizon, dt, bool(interpolate))
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
            ``pairwise_edge_coupling``, or any object with ``edge_aware = True``).
            Plain couplings are evaluated per target node on the network as that
            node sees it (sources delayed, itself now): exact, but ``n`` times
            the cost; edge-aware ones cost what the undelayed coupling costs.
        params: parameters passed to ``dfun`` and the coupling (``G`` read by
            the built-in couplings).
        state0: ``(n_sv, n)``, flat ``(n_sv * n,)``, or ``(n,)`` for one variable.
        dt: time step.
        tau: one delay for every edge (time units), or an ``(n, n)`` matrix of
            per-edge delays; None to use ``network.delay_steps``.
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
    """
    method = b.method_name(integrator)
    dt = b.as_dt(dt)
    params = b.as_params(params)
    W = b.dense_weights(network.weights)
    n = W.shape[0]
    X0 = b.network_state0(state0, n)
    cvar = b.check_cvar(network.cvar_indices, X0.shape[0])
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
    if tau is not None and np.ndim(tau) == 0:
        delays = b.uniform_delays(tau, dt, interpolate, stacklevel=3)
    else:
        delays = b.edge_delays(
            W,
            dt,
            tau=tau,
            delay_steps=delay_steps,
            interpolate=interpolate,
            stacklevel=3,
        )
    field = NetworkField(dfun, as_edge_coupling(coupling), W, cvar, delays.edges)
    D_shape = (len(cvar), n, n) if delays.edges else (len(cvar), n)
    b.check_field(field, X0, D_shape, params, "dfun(state, coupling, params)")
    buf0 = b.initial_buffer(history, X0, cvar, delays.horizon, dt, interpolate)
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


def _start(resume, X0, buf0, d, k, dt, t_transient):
    """``(z0, Y0, cum0, t0, step0)`` for a fresh or a resumed run."""
    if resume is None:
        z0 = jnp.concatenate([X0.ravel(), buf0.ravel()])
        return z0, None, None, 0.0, 0
    if not isinstance(resume, DDECheckpoint):
        raise TypeError(
            "resume must be the DDECheckpoint of a lyapunov_spectrum_dde result "
            f"(result.checkpoint); got {type(resume).__name__}"
        )
    core._check_resume(resume, d, k, dt, t_transient)
    state = jnp.asarray(resume.state, dtype=X0.dtype)
    buf = jnp.asarray(resume.buf, dtype=X0.dtype)
    if state.shape != X0.shape or buf.shape != buf0.shape:
        raise ValueError(
            f"resume checkpoint holds a state {state.shape} and buffer {buf.shape}, "
            f"but this problem has {X0.shape} and {buf0.shape}"
        )
    z0 = jnp.concatenate([state.ravel(), buf.ravel()])
    Y0 = jnp.asarray(resume.Y, dtype=X0.dtype)
    cum0 = jnp.asarray(resume.cum_log_growth, dtype=X0.dtype)
    return z0, Y0, cum0, resume.elapsed_time, resume.t


def lyapunov_spectrum_dde(
    step_fn_or_problem: Any,
    state0: Any = None,
    dt: Any = None,
    n_steps: int | None = None,
    k: int | None = None,
    renorm_every: int = 1,
    t_transient: float = 0.0,
    seed: int = 0,
    check_finite: bool = False,
    resume: DDECheckpoint | None = None,
    save_states: bool = False,
    decimate: int = 1,
    buf0: Any = None,
    params: Any = None,
) -> core.LyapunovResult:
    """Leading ``k`` Lyapunov exponents of a delay equation.

    Arguments and result as :func:`lyapax.core.lyapunov_spectrum`, with these
    differences:

    Args:
        step_fn_or_problem: a :class:`DDEProblem` (then a second positional
            argument is ``n_steps``), or a carry step ``step(carry, _) ->
            (new_carry, new_state)`` with ``carry = (state, buf, t, params)``
            (e.g. from :func:`make_step_fn`), which needs ``state0, buf0, dt,
            n_steps``.
        k: number of exponents. Default: the size of the present state, with a
            warning, because the phase space (state + buffer) is usually far
            larger than the exponents of interest. At most ``d = state.size +
            buf.size``.
        t_transient: at least one history length (``horizon`` steps, rounded up
            to whole renormalisation blocks) is always run first on a fresh
            run, so that the initial history, which need not solve the
            equation, has left the buffer before averaging.
        resume: a :class:`DDECheckpoint`: continues exactly, including the ring
            buffer and its step counter.
        buf0: initial ring buffer (plain form; overrides ``problem.buf0``).
        params: the carry's parameters (plain form; overrides
            ``problem.params``).

    Returns:
        :class:`lyapax.core.LyapunovResult` whose checkpoint is a
        :class:`DDECheckpoint`; ``trajectory`` (``save_states``) holds the
        present state flattened, ``(n_steps // decimate, state.size)``.

    Raises:
        TypeError / ValueError: as ``lyapunov_spectrum``, plus a missing ``buf0``
            or a checkpoint that does not match the problem.
    """
    step, X0, buf0, params, dt, n_steps = b.resolve_call(
        step_fn_or_problem, state0, dt, n_steps, buf0, params
    )
    X0 = b.finite_array("state0", X0)
    buf0 = b.finite_array("buf0", buf0, X0.dtype)
    dt = v.positive_dt(dt)
    params = {} if params is None else b.as_params(params)
    d_state = int(X0.size)
    d = d_state + int(buf0.size)
    if k is None and resume is not None:
        k = int(jnp.shape(resume.Y)[1])
    elif k is None:
        k = min(d_state, d)
        warnings.warn(
            f"k not given: computing the leading k={k} exponents (the size of the "
            f"present state); the discretised phase space (state + history "
            f"buffer) has dimension {d}. Pass k= to choose.",
            UserWarning,
            stacklevel=2,
        )
    args = core._check_run_args(
        d=d,
        dt=dt,
        n_steps=n_steps,
        k=k,
        renorm_every=renorm_every,
        t_transient=t_transient,
        save_states=save_states,
        decimate=decimate,
        dtype=X0.dtype,
        min_transient_steps=0 if resume is not None else int(buf0.shape[0]),
    )
    flat = FlatStep(step, params, X0.shape, buf0.shape)
    z0, Y0, cum0, t0, step0 = _start(resume, X0, buf0, d, args.k, dt, args.t_transient)

    def make_checkpoint(carry, t_end):
        state, buf = flat.split(carry.state)
        return DDECheckpoint(state, buf, carry.step, carry.Y, carry.cum, t_end, dt)

    return core._run_and_assemble(
        flat,
        z0,
        Y0,
        cum0,
        seed,
        dt,
        t0,
        args,
        save_states=save_states,
        check_finite=check_finite,
        make_checkpoint=make_checkpoint,
        step0=step0,
        n_state=d_state,
    )
