"""Compatibility code of the network package, kept in one place.

- The builders of lyapax 0.3.0, :func:`make_network_step_fn` and
  :func:`make_parametrized_network_step_fn` (same names, arguments and
  meaning), over :func:`~lyapax.network.network_step` and
  :func:`~lyapax.network.network_step_parametrized`.

Undeclared (duck-typed) couplings are recognised in :mod:`lyapax._engine._legacy`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lyapax.network.build import (
    Network,
    NetworkStep,
    ParametrizedNetworkStep,
    network_step,
    network_step_parametrized,
)


def make_network_step_fn(
    dfun: Callable[..., Any],
    weights: Any,
    cvar_indices: Any,
    params: Any,
    dt: float,
    coupling_fn: Callable[..., Any],
    integrator: str = "heun",
) -> NetworkStep:
    """Published-API builder: flat ``state -> state`` network step.

    Equivalent to ``network_step(dfun, Network(weights, cvar_indices),
    coupling_fn, params, dt, integrator)``.
    """
    return network_step(
        dfun, Network(weights, cvar_indices), coupling_fn, params, dt, integrator
    )


def make_parametrized_network_step_fn(
    dfun: Callable[..., Any],
    weights: Any,
    cvar_indices: Any,
    dt: float,
    coupling_fn: Callable[..., Any],
    integrator: str = "heun",
) -> ParametrizedNetworkStep:
    """Published-API builder: ``(state, params) -> state`` network step.

    Equivalent to ``network_step_parametrized(dfun, Network(weights,
    cvar_indices), coupling_fn, dt, integrator)``.
    """
    return network_step_parametrized(
        dfun, Network(weights, cvar_indices), coupling_fn, dt, integrator
    )
