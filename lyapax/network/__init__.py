"""Coupled networks of identical node models.

A network of ``n`` nodes with ``n_sv`` state variables per node evolves
``dx/dt = dfun(x, coupling(x[cvar_indices], weights, params), params)`` with
``x`` of shape ``(n_sv, n)``, flattened row-major into the state vector seen by
:func:`lyapax.core.lyapunov_spectrum` (``d = n_sv * n``). The coupling is
re-evaluated at every Runge-Kutta stage. Heun is the default integrator.

- :mod:`~lyapax.network.build`: :class:`Network` and the builders;
- :mod:`~lyapax.network.coupling`: the couplings and their declared bases;
- :mod:`~lyapax.network.edge_coupling`: the edge-aware couplings that delay
  equations call (published from :mod:`lyapax.dde` too);
- :mod:`~lyapax.network._step`: the step and its fused tangent form;
- :mod:`~lyapax.network._legacy`: the builders of lyapax 0.3.0;
- :mod:`~lyapax.network._msf`, :mod:`~lyapax.network._sync`: the master
  stability function and the Laplacian modes of synchronised networks.
"""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax.network._legacy import (
        make_network_step_fn,
        make_parametrized_network_step_fn,
    )
    from lyapax.network._msf import MSFResult, master_stability_function
    from lyapax.network._step import NetworkStep, ParametrizedNetworkStep
    from lyapax.network._sync import (
        ModeExponents,
        SyncReport,
        laplacian_spectrum,
        synchronisation,
        transversal_exponents,
    )
    from lyapax.network.build import (
        Network,
        network_problem,
        network_step,
        network_step_parametrized,
    )

__all__ = [
    "MSFResult",
    "ModeExponents",
    "Network",
    "NetworkStep",
    "ParametrizedNetworkStep",
    "SyncReport",
    "laplacian_spectrum",
    "master_stability_function",
    "make_network_step_fn",
    "make_parametrized_network_step_fn",
    "network_problem",
    "network_step",
    "network_step_parametrized",
    "synchronisation",
    "transversal_exponents",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.network._legacy": (
            "make_network_step_fn",
            "make_parametrized_network_step_fn",
        ),
        "lyapax.network._msf": ("MSFResult", "master_stability_function"),
        "lyapax.network._step": ("NetworkStep", "ParametrizedNetworkStep"),
        "lyapax.network._sync": (
            "ModeExponents",
            "SyncReport",
            "laplacian_spectrum",
            "synchronisation",
            "transversal_exponents",
        ),
        "lyapax.network.build": (
            "Network",
            "network_problem",
            "network_step",
            "network_step_parametrized",
        ),
    },
)
