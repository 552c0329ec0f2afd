"""Model specifications and connectomes for network simulations.

- :class:`StateVar`, :class:`Parameter`, :class:`ModelSpec`,
  :func:`build_jax_dfun`: a node model written as expression strings, compiled
  (without ``exec``/``eval``) to the network ``dfun``
  ``(state (n_sv, n), coupling (n_cvar, n), params) -> (n_sv, n)``.
- :class:`Connectivity`: weights plus tract lengths and conduction speed, giving
  per-edge integer delays ``delay_steps(dt)``.
- :func:`make_step_fn` (in :mod:`lyapax.simulator.step`, built by the delay
  engine :mod:`lyapax.dde`): the carry step of a delay-coupled network.
"""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax.simulator._model import ModelDfun, ModelSpec, Parameter, StateVar
    from lyapax.simulator.connectivity import Connectivity
    from lyapax.simulator.step import build_jax_dfun, make_step_fn

__all__ = [
    "Connectivity",
    "ModelDfun",
    "ModelSpec",
    "Parameter",
    "StateVar",
    "build_jax_dfun",
    "make_step_fn",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.simulator._model": ("ModelDfun", "ModelSpec", "Parameter", "StateVar"),
        "lyapax.simulator.connectivity": ("Connectivity",),
        "lyapax.simulator.step": ("build_jax_dfun", "make_step_fn"),
    },
)
