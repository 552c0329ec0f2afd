"""Network couplings: one class per coupling, with its undelayed and delayed forms.

Plain (undelayed) form, what a network step calls at every Runge-Kutta stage::

    coupling(cvar_state (n_cvar, n), weights, params) -> (n_cvar, n)

Row ``r`` of ``cvar_state`` is the ``r``-th coupled variable at every node;
``weights[i, j]`` is the weight of the edge from source ``j`` to target ``i``
(a dense array or a ``jax.experimental.sparse.BCOO`` matrix). The global
coupling strength is ``G = params.get("G", G_default)``. Any callable with
that signature is a coupling.

What a coupling can do is declared by its base class (``equinox.Module`` s:
their numbers are pytree leaves, so new values reuse compiled programs):

* :class:`AbstractCoupling`: the plain form, and ``batched_jvp(cvar_state,
  tangents (n_cvar, n, k), weights, params)``, the coupling and its derivative
  along ``k`` tangent directions (by default ``jax.jvp`` batched by
  ``jax.vmap``; the built-ins get both from a *single* product of ``weights``
  with an ``(n, m)`` block);
* :class:`AbstractDelayedCoupling`: also the delayed forms ``edges(delayed
  (n_cvar, n_target, n_source), current (n_cvar, n), weights, params)``, each
  edge reading its source one edge delay ago (``delayed[c, i, j] = x_j(t -
  tau_ij)``) and each target now, and ``uniform(delayed_src (n_cvar, n),
  current, weights, params)``, the same when every edge has one delay;
* :class:`AbstractSummedCoupling`: a coupling of the form ``combine(sum_j w_ij
  sources(x_j), x_i)`` (all built-ins: :class:`LinearCoupling`,
  :class:`SigmoidalCoupling`, :class:`KuramotoCoupling`), whose delayed forms
  follow from ``sources`` and ``combine`` and whose per-edge delayed sums are
  formed once per stored sample (:mod:`lyapax.dde._edge_sums`).

Delay equations call a coupling through :func:`as_edge_coupling`, whose result
is an :class:`EdgeCoupling`: ``coupling(delayed, current, weights, params)``
plus ``uniform``. A plain coupling without delayed forms is evaluated once per
target node on the network as that node sees it (:class:`PerTargetCoupling`):
exact, at ``n`` times the plain coupling's cost. Plain callables work wherever
a coupling is taken (:mod:`lyapax._engine._legacy` recognises the older
undeclared forms).
"""

from lyapax.network import _couplings, edge_coupling
from lyapax.network._couplings import *  # noqa: F403
from lyapax.network.edge_coupling import *  # noqa: F403

# One list of names per module: the couplings and their bases, then the
# edge-aware forms of delay equations.
__all__ = [*_couplings.__all__, *edge_coupling.__all__]
