"""Coupled networks of identical node models.

A network of ``n`` nodes with ``n_sv`` state variables per node evolves
``dx/dt = dfun(x, coupling(x[cvar_indices], weights, params), params)`` with
``x`` of shape ``(n_sv, n)``, flattened row-major into the state vector seen by
:func:`lyapax.core.lyapunov_spectrum` (``d = n_sv * n``). The coupling is
re-evaluated at every Runge-Kutta stage. Heun is the default integrator.

- :mod:`~lyapax.network.build`: :class:`Network` and the builders;
- :mod:`~lyapax.network.coupling`: the couplings and their declared bases;
- :mod:`~lyapax.network._step`: the step and its fused tangent form;
- :mod:`~lyapax.network._legacy`: the builders of lyapax 0.3.0.
"""

from lyapax.network._legacy import (
    make_network_step_fn,
    make_parametrized_network_step_fn,
)
from lyapax.network._step import NetworkStep, ParametrizedNetworkStep
from lyapax.network.build import (
    Network,
    network_problem,
    network_step,
    network_step_parametrized,
)

__all__ = [
    "Network",
    "NetworkStep",
    "ParametrizedNetworkStep",
    "make_network_step_fn",
    "make_parametrized_network_step_fn",
    "network_problem",
    "network_step",
    "network_step_parametrized",
]
