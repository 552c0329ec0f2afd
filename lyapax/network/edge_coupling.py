"""Edge-aware couplings: the form delay equations call.

``coupling(delayed (n_cvar, n, n), current (n_cvar, n), weights, params) ->
(n_cvar, n)``, each edge reading its source one edge delay ago
(``delayed[c, i, j] = x_j(t - tau_ij)``) and each target now, plus
``uniform``, the same when every edge has one delay. Delay equations call a
coupling through :func:`as_edge_coupling`, whose result is an
:class:`EdgeCoupling`; a plain coupling without delayed forms is evaluated
once per target node on the network as that node sees it
(:class:`PerTargetCoupling`): exact, at ``n`` times the plain coupling's cost.
Published from :mod:`lyapax.dde` and :mod:`lyapax.network.coupling`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from lyapax._engine import _legacy
from lyapax._engine.validate import float_leaf
from lyapax.network._couplings import (
    AbstractDelayedCoupling,
    AbstractSummedCoupling,
    Edges,
    KuramotoCoupling,
    LinearCoupling,
    Rows,
    edge_sum,
    read_G,
)

__all__ = [
    "EdgeCoupling",
    "PairwiseEdgeCoupling",
    "PerTargetCoupling",
    "as_edge_coupling",
    "edge_kuramoto_coupling",
    "edge_linear_coupling",
    "pairwise_edge_coupling",
]


class EdgeCoupling(abc.ABC):
    """Base class of edge-aware couplings (subclass it for your own).

    A subclass defines ``__call__(delayed (n_cvar, n, n), current (n_cvar, n),
    weights, params) -> (n_cvar, n)``; :meth:`uniform`, the form with one
    delay for every edge, defaults to broadcasting the delayed sources.
    ``summable`` (False here) declares the form ``combine(sum_j w_ij
    sources(x_j))`` with the methods ``sources``, ``combine`` and
    ``source_slopes``, whose per-edge sums the delay engine forms once per
    stored sample.
    """

    edge_aware: ClassVar[bool] = True
    summable: ClassVar[bool] = False

    @abc.abstractmethod
    def __call__(self, delayed, current, weights, params):
        """The coupling of every target from the delayed sources."""

    def uniform(self, delayed_src: Rows, current: Rows, weights: Any, params: Any):
        n = current.shape[-1]
        delayed = jnp.broadcast_to(
            delayed_src[:, None, :], (delayed_src.shape[0], n, n)
        )
        return self(delayed, current, weights, params)


class _EdgeForm(EdgeCoupling, eqx.Module):
    """A built-in coupling called in its delayed forms (``edges``, ``uniform``)."""

    coupling: Any

    def __call__(self, delayed: Edges, current: Rows, weights: Any, params: Any):
        return self.coupling.edges(delayed, current, weights, params)

    def uniform(self, delayed_src: Rows, current: Rows, weights: Any, params: Any):
        return self.coupling.uniform(delayed_src, current, weights, params)

    @property
    def summable(self) -> bool:  # type: ignore[override]
        """The coupling is ``combine(sum_j w_ij sources(x_j))`` (all built-ins)."""
        return isinstance(self.coupling, AbstractSummedCoupling)

    def sources(self, x: Rows) -> Any:
        return self.coupling.sources(x)

    def combine(self, sums: Any, current: Rows, weights: Any, params: Any) -> Rows:
        return self.coupling.combine(sums, current, weights, params)

    def source_slopes(self, terms: Any, n_cvar: int) -> Any:
        """The wrapped coupling's ``source_slopes`` (None: by ``jax.jvp``)."""
        return self.coupling.source_slopes(terms, n_cvar)


class _AdoptedEdgeCoupling(EdgeCoupling, eqx.Module):
    """An undeclared edge-aware coupling (see :mod:`lyapax._engine._legacy`)."""

    coupling: Any

    def __call__(self, delayed: Edges, current: Rows, weights: Any, params: Any):
        return self.coupling(delayed, current, weights, params)

    def uniform(self, delayed_src: Rows, current: Rows, weights: Any, params: Any):
        return self.coupling.uniform(delayed_src, current, weights, params)


class PairwiseEdgeCoupling(EdgeCoupling, eqx.Module):
    """``G * sum_j w_ij h(x_j(t - tau_ij), x_i(t))`` (divided by N if ``normalize``)."""

    G_default: Any
    h: Callable[[Any, Any], Any] = eqx.field(static=True)
    normalize: bool = eqx.field(static=True)

    def __init__(
        self,
        h: Callable[[Any, Any], Any],
        G_default: Any = 1.0,
        normalize: bool = False,
    ) -> None:
        self.G_default = float_leaf(G_default)
        self.h = h
        self.normalize = bool(normalize)

    def __call__(self, delayed: Edges, current: Rows, weights: Any, params: Any):
        G = read_G(params, self.G_default)
        total = edge_sum(weights, self.h(delayed, current[:, :, None]))
        return G * total / (current.shape[-1] if self.normalize else 1)


class PerTargetCoupling(EdgeCoupling, eqx.Module):
    """A plain network coupling made edge-aware by evaluating it per target.

    Row ``i`` is ``coupling(view_i, weights, params)[:, i]`` where ``view_i``
    holds every source as node ``i`` receives it (``x_j(t - tau_ij)``) and node
    ``i`` itself now (``x_i(t)``), so a self-loop ``w_ii`` is not delayed. Cost:
    ``n`` evaluations of the plain coupling per stage.
    """

    coupling: Any

    def __call__(self, delayed: Edges, current: Rows, weights: Any, params: Any):
        n = current.shape[-1]

        def row(i, view):
            view = view.at[:, i].set(current[:, i])
            return self.coupling(view, weights, params)[:, i]

        # delayed[:, i, :] is the network as target i sees it.
        rows = jax.vmap(row, in_axes=(0, 1))(jnp.arange(n), delayed)
        return rows.T


def edge_linear_coupling(
    a: float = 1.0, b: float = 0.0, G_default: float = 1.0
) -> EdgeCoupling:
    """Edge-aware linear coupling ``G*a*sum_j w_ij x_j(t - tau_ij) + b``."""
    return _EdgeForm(LinearCoupling(a, b, G_default))


def edge_kuramoto_coupling(alpha: float = 0.0, G_default: float = 1.0) -> EdgeCoupling:
    """Edge-aware Kuramoto-Sakaguchi coupling.

    ``(G/N) sum_j w_ij sin(theta_j(t - tau_ij) - theta_i(t) + alpha)``, ``N`` the
    node count, ``G = params.get("G", G_default)``.
    """
    return _EdgeForm(KuramotoCoupling(alpha, G_default))


def pairwise_edge_coupling(
    h: Callable[[Any, Any], Any], G_default: float = 1.0, normalize: bool = False
) -> PairwiseEdgeCoupling:
    """Edge-aware coupling ``G * sum_j w_ij h(source delayed, target now)``.

    ``h(x_src, x_tgt)`` is elementwise (broadcast over ``(n_cvar, n, n)``);
    ``normalize=True`` divides by the node count.
    """
    return PairwiseEdgeCoupling(h, G_default, normalize)


def as_edge_coupling(coupling: Any) -> EdgeCoupling:
    """An edge-aware coupling equivalent to ``coupling``.

    An :class:`EdgeCoupling` is returned as it is; an
    :class:`AbstractDelayedCoupling` (the built-ins) is called through its
    delayed forms; any other callable ``(cvar, weights, params) -> (n_cvar,
    n)`` is wrapped in :class:`PerTargetCoupling` (exact, ``n`` times the cost).

    Raises:
        TypeError: ``coupling`` is not callable.
    """
    if isinstance(coupling, EdgeCoupling):
        return coupling
    if isinstance(coupling, AbstractDelayedCoupling):
        return _EdgeForm(coupling)
    if _legacy.declares_edge_aware(coupling):
        return _AdoptedEdgeCoupling(coupling)
    if _legacy.has_delayed_forms(coupling):
        return _EdgeForm(coupling)
    if not callable(coupling):
        raise TypeError(
            "coupling must be a callable (cvar (n_cvar, n), weights, params) -> "
            "(n_cvar, n) or an edge-aware coupling from lyapax.dde; got "
            f"{type(coupling).__name__}"
        )
    return PerTargetCoupling(coupling)
