"""Coupled networks of identical node models: :class:`Network` and its builders.

A network of ``n`` nodes with ``n_sv`` state variables per node evolves
``dx/dt = dfun(x, coupling(x[cvar_indices], weights, params), params)`` with
``x`` of shape ``(n_sv, n)``, flattened row-major into the state vector seen by
:func:`lyapax.core.lyapunov_spectrum` (``d = n_sv * n``). The coupling is
re-evaluated at every Runge-Kutta stage. Heun is the default integrator.

The steps built here are pytrees whose numbers (weights, parameters, ``dt``)
are leaves, so a problem rebuilt with new numbers of the same shapes reuses the
compiled program; they carry a fused ``tangent_step`` that evaluates the
coupling for the state and all tangent directions in one pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax._engine.problem import ODEProblem
from lyapax._engine.tree import assemble
from lyapax._internal.checks import as_cvar_indices, as_weights, state_rows
from lyapax.integrators import fixed_stage_method
from lyapax.network._checks import check_shapes
from lyapax.network._step import NetworkStep, ParametrizedNetworkStep

__all__ = [
    "Network",
    "NetworkStep",
    "ParametrizedNetworkStep",
    "network_problem",
    "network_step",
    "network_step_parametrized",
]


class Network(eqx.Module):
    """Connectivity of a network.

    Args:
        weights: ``(n, n)`` coupling weights indexed ``[target, source]``:
            dense, ``jax.experimental.sparse.BCOO`` or ``scipy.sparse``. Sparse
            ones are converted here, once, to a padded neighbour list
            (``lyapax._internal.sparse.EllWeights``: one row gather per edge
            slot per product, no ``(n, n)`` array).
        cvar_indices: state rows (``0 <= i < n_sv``) that the coupling reads;
            row ``r`` of the coupling array belongs to ``cvar_indices[r]``.
        delay_steps: optional ``(n, n)`` integer per-edge delays in steps (used
            by the delay engine; the instantaneous builders here reject them).
        sparse: ``None`` (default): sparse input becomes a neighbour list,
            dense input stays dense (BLAS products); ``True``: dense input too
            (worth it when rows hold a few percent nonzeros or fewer);
            ``False``: keep the input as it is (BCOO products).

    Raises:
        ValueError: non-square weights, bad ``cvar_indices`` or ``delay_steps``.
        TypeError: ``sparse`` is not None or a bool.
    """

    weights: Any
    delay_steps: Any
    cvar_indices: tuple[int, ...] = eqx.field(static=True)

    def __init__(
        self,
        weights: Any,
        cvar_indices: Any,
        delay_steps: Any = None,
        sparse: bool | None = None,
    ) -> None:
        self.weights = as_weights(weights, sparse)
        self.cvar_indices = as_cvar_indices(cvar_indices)
        if delay_steps is not None and not isinstance(delay_steps, jax.core.Tracer):
            steps = np.asarray(delay_steps)
            n = self.n_nodes
            if steps.shape != (n, n):
                raise ValueError(
                    f"delay_steps must have the shape of weights ({n}, {n}); "
                    f"got {steps.shape}"
                )
            if not np.issubdtype(steps.dtype, np.integer) or np.any(steps < 0):
                raise ValueError("delay_steps must hold integers >= 0 (steps of dt)")
            delay_steps = jnp.asarray(steps, dtype=jnp.int32)
        self.delay_steps = delay_steps

    @property
    def n_nodes(self) -> int:
        """Number of nodes ``n``."""
        return int(self.weights.shape[0])

    def __repr__(self) -> str:
        delayed = "" if self.delay_steps is None else ", with delay_steps"
        return (
            f"Network(n_nodes={self.n_nodes}, cvar_indices={self.cvar_indices}"
            f"{delayed})"
        )


def _as_network(network: Any) -> Network:
    if not isinstance(network, Network):
        raise TypeError(
            f"network must be a lyapax.network.Network; got {type(network).__name__}"
        )
    if network.delay_steps is not None and np.any(np.asarray(network.delay_steps)):
        raise ValueError(
            "network has non-zero delay_steps; use lyapax.dde.network_dde_problem "
            "for delayed coupling"
        )
    return network


def network_step(
    dfun: Callable[..., Any],
    network: Network,
    coupling: Callable[..., Any],
    params: Any,
    dt: float,
    integrator: str = "heun",
) -> NetworkStep:
    """Step ``state (n_sv * n,) -> state`` of the network (see module docstring).

    Args:
        dfun: ``(state (n_sv, n), coupling (n_cvar, n), params) -> (n_sv, n)``.
        network: :class:`Network` (weights and ``cvar_indices``).
        coupling: ``(cvar_state (n_cvar, n), weights, params) -> (n_cvar, n)``.
        params: parameters passed to ``dfun`` and ``coupling`` (a mapping;
            ``G`` is the global coupling strength).
        dt: time step (model time units).
        integrator: ``"euler"``, ``"heun"`` (default), ``"rk4"`` or ``"rk6"``.

    Raises:
        ValueError: see :func:`network_problem`.
    """
    network = _as_network(network)
    n_sv = getattr(dfun, "n_sv", None)
    return _checked_step(
        dfun, network, coupling, params, dt, integrator, n_sv, jnp.result_type(float)
    )


def _checked_step(dfun, network, coupling, params, dt, integrator, n_sv, dtype):
    """The :class:`NetworkStep`, after the checks of :func:`check_shapes`."""
    # Each field is checked here or by Network; check_shapes traces the rest.
    step = assemble(
        NetworkStep,
        dfun=dfun,
        coupling=coupling,
        weights=network.weights,
        params=validate.float_params(params),
        dt=validate.as_dt(dt),
        integrator=fixed_stage_method(integrator, "a network builder"),
        cvar_indices=network.cvar_indices,
    )
    check_shapes(step, n_sv, dtype)
    return step


def network_problem(
    dfun: Callable[..., Any],
    network: Network,
    coupling: Callable[..., Any],
    params: Any,
    state0: Any,
    dt: float,
    integrator: str = "heun",
) -> ODEProblem:
    """Lyapunov problem of a network, for :func:`lyapax.core.lyapunov_spectrum`.

    Args:
        dfun, network, coupling, params, dt, integrator: as :func:`network_step`.
        state0: ``(n_sv, n)`` or flat ``(n_sv * n,)`` (``(n,)`` for a
            one-variable model).

    Returns:
        :class:`lyapax.core.ODEProblem` with a flat ``state0``.

    Raises:
        ValueError: non-square weights or a ``state0`` that does not match the
            node count, ``cvar_indices`` out of range, a coupling or ``dfun``
            returning the wrong shape, a parameter missing with no default, an
            unknown integrator or a non-positive ``dt`` (each message names the
            argument).
    """
    network = _as_network(network)
    x0, n_sv = state_rows(state0, network.n_nodes, dfun)
    step = _checked_step(
        dfun, network, coupling, params, dt, integrator, n_sv, x0.dtype
    )
    return ODEProblem(step, x0, step.dt)


def network_step_parametrized(
    dfun: Callable[..., Any],
    network: Network,
    coupling: Callable[..., Any],
    dt: float,
    integrator: str = "heun",
) -> ParametrizedNetworkStep:
    """Step ``(state, params) -> state`` with parameters given at call time.

    Meant for parameter sweeps (``jax.vmap`` over ``params``); ``.bind(params)``
    gives the plain :class:`NetworkStep`.

    Raises:
        ValueError: non-square weights, unknown integrator, bad ``dt``.
    """
    network = _as_network(network)
    as_cvar_indices(network.cvar_indices, getattr(dfun, "n_sv", None))
    return ParametrizedNetworkStep(
        dfun,
        coupling,
        network.weights,
        validate.as_dt(dt),
        fixed_stage_method(integrator, "a network builder"),
        network.cvar_indices,
    )
