"""Lyapunov spectra of delay differential equations with fixed delays.

- :mod:`~lyapax.dde.problem`: :class:`DDEProblem`, its checkpoint and builders;
- :mod:`~lyapax.dde.spectrum`: :func:`lyapunov_spectrum_dde`;
- :mod:`~lyapax.dde._step` (with ``_edge_sums``, ``_delays``, ``_build``): the
  method-of-steps step on the ring buffer of :mod:`lyapax._internal.history`;
- :mod:`~lyapax.dde._legacy`: the lower-level builders of lyapax 0.3.0.

Method of steps on a ring buffer (Farmer 1982): the history the delayed terms
read, ``horizon`` samples of the coupled variables, is carried with the present
state, and the pair ``(state, buffer)`` flattened is the phase space of a map.
Its tangent vectors are pushed through both by ``jax.jvp`` batched with
``jax.vmap`` and QR-renormalised as for ODEs (Benettin et al. 1980), so the
spectrum is that of the discretised history. Directions that the map discards
(the present value stored twice, stale derivative slots, slots older than the
largest delay) have exponent ``-inf``; ask for fewer exponents than those.

Buffer time convention and initial-history slot order: see
:mod:`lyapax._internal.history` (slot ``m % horizon`` holds time ``m * dt``;
at ``t = 0`` slot 0 is now and slot ``horizon - j`` is ``j`` steps ago).

Two ways to read the delayed values:

* grid (default): ``tau`` is rounded to whole steps (:func:`resolve_tau_steps`
  warns and says which delay is used) and read once per step; **first order in
  dt**, whatever the integrator;
* ``interpolate=True``: cubic Hermite interpolation of stored values and
  derivatives at every Runge-Kutta stage's own time, so ``tau`` is used exactly
  (``tau >= dt``) and the integrator keeps its order (at most 4, the
  interpolant's).
"""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax.dde._delays import effective_tau, resolve_tau_steps
    from lyapax.dde._legacy import (
        constant_history_buf0,
        make_scalar_delayed_step_fn,
        make_step_fn,
        scalar_delayed_history0,
        tau_eff,
    )
    from lyapax.dde.problem import (
        DDECheckpoint,
        DDEProblem,
        dde_problem,
        network_dde_problem,
    )
    from lyapax.dde.spectrum import lyapunov_spectrum_dde
    from lyapax.network.edge_coupling import (
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
    "effective_tau",
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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.dde._delays": ("effective_tau", "resolve_tau_steps"),
        "lyapax.dde._legacy": (
            "constant_history_buf0",
            "make_scalar_delayed_step_fn",
            "make_step_fn",
            "scalar_delayed_history0",
            "tau_eff",
        ),
        "lyapax.dde.problem": (
            "DDECheckpoint",
            "DDEProblem",
            "dde_problem",
            "network_dde_problem",
        ),
        "lyapax.dde.spectrum": ("lyapunov_spectrum_dde",),
        "lyapax.network.edge_coupling": (
            "EdgeCoupling",
            "as_edge_coupling",
            "edge_kuramoto_coupling",
            "edge_linear_coupling",
            "pairwise_edge_coupling",
        ),
    },
)
