"""Edge-aware couplings: each edge sees its own delayed source value.

An edge-aware coupling is a callable with ``edge_aware = True``::

    coupling(delayed (n_cvar, n_target, n_source), current (n_cvar, n),
             weights (n, n), params) -> (n_cvar, n)

where ``delayed[c, i, j] = x_j(t - tau_ij)`` (coupled variable ``c`` of source
``j`` as it was one edge delay ago) and ``current[c, i] = x_i(t)`` (the target
now). An optional method ``uniform(delayed_src (n_cvar, n), current, weights,
params)`` is the same coupling when every edge has one delay; it avoids forming
the ``(n, n)`` array of delayed values when a cheaper form exists.

Any coupling of the plain network form ``coupling(cvar (n_cvar, n), weights,
params)`` is accepted too (:func:`as_edge_coupling`): the built-in linear,
sigmoidal and Kuramoto couplings of :mod:`lyapax.coupling` become their
edge-aware twins here (same parameters, same cost as undelayed); any other
plain coupling is evaluated once per target node on the network as that node
sees it (other nodes delayed, itself now), which is exact for every coupling
whose row ``i`` depends only on node ``i`` and its sources, at ``n`` times the
plain coupling's cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from lyapax._engine.tree import as_float_params
from lyapax.network import coupling as uniform


def _weighted_sum(weights: jax.Array, x: jax.Array) -> jax.Array:
    """``sum_j w_ij x[c, j]`` for ``x (n_cvar, n)``.

    Written as ``W @ x.T``: the equal ``x @ W.T`` makes XLA transpose the
    weights at every step when they are a runtime argument (about 40x slower
    for n = 500 on CPU).
    """
    return (weights @ x.T).T


def _G(params: Any, G_default: Any) -> Any:
    if isinstance(params, dict):
        return params.get("G", G_default)
    return G_default


class EdgeCoupling:
    """Base class: the uniform-delay form defaults to broadcasting the sources."""

    edge_aware = True

    def __call__(self, delayed, current, weights, params):  # pragma: no cover
        raise NotImplementedError

    def uniform(self, delayed_src, current, weights, params):
        n = current.shape[-1]
        delayed = jnp.broadcast_to(
            delayed_src[:, None, :], (delayed_src.shape[0], n, n)
        )
        return self(delayed, current, weights, params)


def _pytree(cls):
    """Register a coupling whose ``_fields`` are its (numeric) pytree leaves."""

    def flatten(obj):
        return tuple(getattr(obj, f) for f in cls._fields), getattr(
            obj, "_static", None
        )

    def unflatten(static, children):
        obj = object.__new__(cls)
        for f, c in zip(cls._fields, children, strict=True):
            setattr(obj, f, c)
        if static is not None:
            obj._static = static
        return obj

    jax.tree_util.register_pytree_node(cls, flatten, unflatten)
    return cls


@_pytree
class EdgeLinearCoupling(EdgeCoupling):
    """``G a sum_j w_ij x_j(t - tau_ij) + b``, ``G = params.get("G", G_default)``."""

    _fields = ("a", "b", "G_default")

    def __init__(self, a: Any = 1.0, b: Any = 0.0, G_default: Any = 1.0) -> None:
        p = as_float_params(a=a, b=b, G_default=G_default)
        self.a, self.b, self.G_default = p["a"], p["b"], p["G_default"]

    def __call__(self, delayed, current, weights, params):
        G = _G(params, self.G_default)
        return G * self.a * jnp.sum(weights[None] * delayed, axis=-1) + self.b

    def uniform(self, delayed_src, current, weights, params):
        G = _G(params, self.G_default)
        return G * self.a * _weighted_sum(weights, delayed_src) + self.b


@_pytree
class EdgeKuramotoCoupling(EdgeCoupling):
    """``(G/N) sum_j w_ij sin(theta_j(t - tau_ij) - theta_i(t) + alpha)``."""

    _fields = ("alpha", "G_default")

    def __init__(self, alpha: Any = 0.0, G_default: Any = 1.0) -> None:
        p = as_float_params(alpha=alpha, G_default=G_default)
        self.alpha, self.G_default = p["alpha"], p["G_default"]

    def __call__(self, delayed, current, weights, params):
        # sin(a - b) = sin a cos b - cos a sin b: the (n, n) sums depend on the
        # delayed values only, so with grid reads (held over a step) they are
        # computed once per step, not once per stage.
        G = _G(params, self.G_default)
        n = current.shape[-1]
        shifted = delayed + self.alpha
        s = jnp.sum(weights[None] * jnp.sin(shifted), axis=-1)
        c = jnp.sum(weights[None] * jnp.cos(shifted), axis=-1)
        return (G / n) * (jnp.cos(current) * s - jnp.sin(current) * c)

    def uniform(self, delayed_src, current, weights, params):
        # sin(a - b) = sin a cos b - cos a sin b turns the n^2 sines into two
        # matrix-vector products.
        G = _G(params, self.G_default)
        m, n = current.shape
        shifted = delayed_src + self.alpha
        # One product for both sums (and, under jvp, one for all tangents).
        trig = jnp.concatenate([jnp.sin(shifted), jnp.cos(shifted)], axis=0)
        sums = _weighted_sum(weights, trig)
        s, c = sums[:m], sums[m:]
        return (G / n) * (jnp.cos(current) * s - jnp.sin(current) * c)


@_pytree
class PairwiseEdgeCoupling(EdgeCoupling):
    """``G * sum_j w_ij h(x_j(t - tau_ij), x_i(t))`` (divided by N if ``normalize``)."""

    _fields = ("G_default",)

    def __init__(
        self,
        h: Callable[[Any, Any], Any],
        G_default: Any = 1.0,
        normalize: bool = False,
    ) -> None:
        self.G_default = as_float_params(G_default=G_default)["G_default"]
        self._static = (h, bool(normalize))

    def __call__(self, delayed, current, weights, params):
        h, normalize = self._static
        G = _G(params, self.G_default)
        total = jnp.sum(weights[None] * h(delayed, current[:, :, None]), axis=-1)
        return G * total / (current.shape[-1] if normalize else 1)


@_pytree
class EdgeSigmoidalCoupling(EdgeCoupling):
    """``G a sigmoid((u_i - midpoint) / sigma) + b`` of the delayed input ``u``.

    ``u_i = sum_j w_ij x_j(t - tau_ij)``.

    The sigmoid acts on the summed delayed input, as
    :class:`lyapax.coupling.SigmoidalCoupling` does on the undelayed one.
    """

    _fields = ("a", "b", "midpoint", "sigma", "G_default")

    def __init__(self, a=1.0, b=0.0, midpoint=0.0, sigma=1.0, G_default=1.0) -> None:
        p = as_float_params(
            a=a, b=b, midpoint=midpoint, sigma=sigma, G_default=G_default
        )
        for name in self._fields:
            setattr(self, name, p[name])

    def _out(self, u, params):
        G = _G(params, self.G_default)
        s = jax.nn.sigmoid((u - self.midpoint) / self.sigma)
        return G * self.a * s + self.b

    def __call__(self, delayed, current, weights, params):
        return self._out(jnp.sum(weights[None] * delayed, axis=-1), params)

    def uniform(self, delayed_src, current, weights, params):
        return self._out(_weighted_sum(weights, delayed_src), params)


@jax.tree_util.register_pytree_node_class
class PerTargetCoupling(EdgeCoupling):
    """A plain network coupling made edge-aware by evaluating it per target.

    Row ``i`` is ``coupling(view_i, weights, params)[:, i]`` where ``view_i``
    holds every source as node ``i`` receives it (``x_j(t - tau_ij)``) and node
    ``i`` itself now (``x_i(t)``), so a self-loop ``w_ii`` is not delayed. Cost:
    ``n`` evaluations of the plain coupling per stage.
    """

    def __init__(self, coupling: Callable[..., Any]) -> None:
        self.coupling = coupling

    def __call__(self, delayed, current, weights, params):
        n = current.shape[-1]

        def row(i, view):
            view = view.at[:, i].set(current[:, i])
            return self.coupling(view, weights, params)[:, i]

        # delayed[:, i, :] is the network as target i sees it.
        rows = jax.vmap(row, in_axes=(0, 1))(jnp.arange(n), delayed)
        return rows.T

    def tree_flatten(self):
        return (self.coupling,), None

    @classmethod
    def tree_unflatten(cls, _aux, children):
        return cls(*children)


def edge_linear_coupling(
    a: float = 1.0, b: float = 0.0, G_default: float = 1.0
) -> EdgeLinearCoupling:
    """Edge-aware linear coupling ``G*a*sum_j w_ij x_j(t - tau_ij) + b``."""
    return EdgeLinearCoupling(a, b, G_default)


def edge_kuramoto_coupling(
    alpha: float = 0.0, G_default: float = 1.0
) -> EdgeKuramotoCoupling:
    """Edge-aware Kuramoto-Sakaguchi coupling.

    ``(G/N) sum_j w_ij sin(theta_j(t - tau_ij) - theta_i(t) + alpha)``, ``N`` the
    node count, ``G = params.get("G", G_default)``.
    """
    return EdgeKuramotoCoupling(alpha, G_default)


def pairwise_edge_coupling(
    h: Callable[[Any, Any], Any], G_default: float = 1.0, normalize: bool = False
) -> PairwiseEdgeCoupling:
    """Edge-aware coupling ``G * sum_j w_ij h(source delayed, target now)``.

    ``h(x_src, x_tgt)`` is elementwise (broadcast over ``(n_cvar, n, n)``);
    ``normalize=True`` divides by the node count.
    """
    return PairwiseEdgeCoupling(h, G_default, normalize)


def _from_builtin(coupling: Any) -> EdgeCoupling | None:
    """The edge-aware twin of a built-in :mod:`lyapax.coupling` coupling."""
    kind = type(coupling)
    if kind is uniform.LinearCoupling:
        return EdgeLinearCoupling(coupling.a, coupling.b, coupling.G_default)
    if kind is uniform.KuramotoCoupling:
        return EdgeKuramotoCoupling(coupling.alpha, coupling.G_default)
    if kind is uniform.SigmoidalCoupling:
        return EdgeSigmoidalCoupling(
            coupling.a,
            coupling.b,
            coupling.midpoint,
            coupling.sigma,
            coupling.G_default,
        )
    return None


def as_edge_coupling(coupling: Any) -> EdgeCoupling:
    """An edge-aware coupling equivalent to ``coupling``.

    Edge-aware couplings are returned as they are; the built-in couplings of
    :mod:`lyapax.coupling` (linear, sigmoidal, Kuramoto) become their edge-aware
    twins; any other callable ``(cvar, weights, params) -> (n_cvar, n)`` is
    wrapped in :class:`PerTargetCoupling` (exact, ``n`` times the cost).

    Raises:
        TypeError: ``coupling`` is not callable.
    """
    if getattr(coupling, "edge_aware", False):
        return coupling
    twin = _from_builtin(coupling)
    if twin is not None:
        return twin
    if not callable(coupling):
        raise TypeError(
            "coupling must be a callable (cvar (n_cvar, n), weights, params) -> "
            "(n_cvar, n) or an edge-aware coupling from lyapax.dde; got "
            f"{type(coupling).__name__}"
        )
    return PerTargetCoupling(coupling)
