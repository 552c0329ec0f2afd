"""The network couplings and their declared bases (published from
:mod:`lyapax.network.coupling`, which describes the forms a coupling takes).

The edge-aware wrappers that delay equations call are in
:mod:`lyapax.network.edge_coupling`, over this module.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from lyapax._engine import _legacy
from lyapax._engine.precision import float_cos, float_sin
from lyapax._engine.validate import float_leaf
from lyapax._internal.fusion import computed_apart

__all__ = [
    "AbstractCoupling",
    "AbstractDelayedCoupling",
    "AbstractSummedCoupling",
    "KuramotoCoupling",
    "LinearCoupling",
    "SigmoidalCoupling",
    "coupling_jvp",
    "kuramoto_coupling",
    "linear_coupling",
    "sigmoidal_coupling",
]

Rows = Float[Array, "n_cvar n"]
Tangents = Float[Array, "n_cvar n k"]
Edges = Float[Array, "n_cvar n n"]


def read_G(params: Any, default: Any) -> Any:
    """``params["G"]`` when ``params`` is a mapping holding it, else ``default``."""
    if isinstance(params, Mapping):
        return params.get("G", default)
    return default


def _cols(x: Rows) -> Float[Array, "n n_cvar"]:
    """``(n_cvar, n) -> (n, n_cvar)``: node axis first, for ``weights @``."""
    return x.T


def _tangent_cols(dx: Tangents) -> Float[Array, "n m"]:
    """``(n_cvar, n, k) -> (n, n_cvar * k)``; free for one coupled variable."""
    n_cvar, n, k = dx.shape
    return jnp.moveaxis(dx, 0, 1).reshape(n, n_cvar * k)


def _tangent_rows(p: Float[Array, "n m"], n_cvar: int) -> Tangents:
    """Inverse of :func:`_tangent_cols` on a product ``(n, n_cvar * k)``."""
    n = p.shape[0]
    return jnp.moveaxis(p.reshape(n, n_cvar, -1), 1, 0)


def _weighted_sum(weights: Any, x: Rows) -> Rows:
    """``sum_j w_ij x[c, j]`` for ``x (n_cvar, n)``.

    Written as ``W @ x.T``: the equal ``x @ W.T`` makes XLA transpose the
    weights at every step when they are a runtime argument (about 40x slower
    for n = 500 on CPU).
    """
    return (weights @ x.T).T


def edge_sum(weights: Any, values: Edges) -> Rows:
    """``sum_j w_ij values[c, i, j]``."""
    return jnp.sum(weights[None] * values, axis=-1)


def _number(default: float) -> Any:
    """A numeric field (a traced leaf; a Python int is stored as a float)."""
    return eqx.field(default=default, converter=float_leaf)


def _generic_jvp(coupling: Callable[..., Any], x, dx, weights, params):
    """``(c, dc)`` by ``jax.jvp`` batched over the ``k`` directions."""

    def one(v):
        return jax.jvp(lambda y: coupling(y, weights, params), (x,), (v,))

    return jax.vmap(one, in_axes=2, out_axes=(None, 2))(dx)


class AbstractCoupling(eqx.Module):
    """A network coupling: ``coupling(cvar_state (n_cvar, n), weights, params)
    -> (n_cvar, n)`` (see the module docstring)."""

    @abc.abstractmethod
    def __call__(self, x: Rows, weights: Any, params: Any) -> Rows:
        """The coupling of every node."""

    def batched_jvp(
        self, x: Rows, dx: Tangents, weights: Any, params: Any
    ) -> tuple[Rows, Tangents]:
        """Coupling and its derivative along ``dx (n_cvar, n, k)``."""
        return _generic_jvp(self, x, dx, weights, params)


class AbstractDelayedCoupling(AbstractCoupling):
    """A coupling with delayed forms (``edges``, ``uniform``)."""

    @abc.abstractmethod
    def edges(self, delayed: Edges, current: Rows, weights: Any, params: Any) -> Rows:
        """Each edge reads its source one edge delay ago, each target now."""

    @abc.abstractmethod
    def uniform(
        self, delayed_src: Rows, current: Rows, weights: Any, params: Any
    ) -> Rows:
        """:meth:`edges` when every edge has one delay (sources ``(n_cvar, n)``)."""


class AbstractSummedCoupling(AbstractDelayedCoupling):
    """``c_i = combine(sum_j w_ij sources(x_j), x_i)``: the delayed forms follow
    from :meth:`sources` and :meth:`combine`."""

    @abc.abstractmethod
    def sources(self, x: Any) -> Any:
        """Per-source terms summed over the edges, ``(C, ...)``."""

    @abc.abstractmethod
    def combine(self, sums: Any, current: Rows, weights: Any, params: Any) -> Rows:
        """The coupling from ``sums[c, i] = sum_j w_ij sources(x_j)[c]``."""

    def source_slopes(self, terms: Any, n_cvar: int) -> Any:
        """Slopes of :meth:`sources` from its values, or None to differentiate
        them by ``jax.jvp`` (see :mod:`lyapax.dde._edge_sums`)."""
        return None

    def edges(self, delayed: Edges, current: Rows, weights: Any, params: Any) -> Rows:
        # The (n, n) sums depend on the delayed values only, so with grid reads
        # (held over a step) they are computed once per step, not once per stage.
        sums = edge_sum(weights, self.sources(delayed))
        return self.combine(sums, current, weights, params)

    def uniform(
        self, delayed_src: Rows, current: Rows, weights: Any, params: Any
    ) -> Rows:
        sums = _weighted_sum(weights, self.sources(delayed_src))
        return self.combine(sums, current, weights, params)


class LinearCoupling(AbstractSummedCoupling):
    """``c_i = G a sum_j w_ij x_j + b`` for every coupled variable ``x``.

    Delayed: ``x_j`` is read one edge delay ago.
    """

    a: Any = _number(1.0)
    b: Any = _number(0.0)
    G_default: Any = _number(1.0)

    def _gain(self, params: Any) -> Any:
        return read_G(params, self.G_default) * self.a

    def __call__(self, x: Rows, weights: Any, params: Any) -> Rows:
        return self._gain(params) * (weights @ _cols(x)).T + self.b

    def batched_jvp(self, x: Rows, dx: Tangents, weights: Any, params: Any):
        """Coupling and its derivative along ``dx (n_cvar, n, k)``: one product."""
        n_cvar = x.shape[0]
        gain = self._gain(params)
        p = weights @ jnp.concatenate([_cols(x), _tangent_cols(dx)], axis=1)
        c = gain * p[:, :n_cvar].T + self.b
        return c, gain * _tangent_rows(p[:, n_cvar:], n_cvar)

    def sources(self, x: Rows) -> Rows:
        """Per-source terms summed over the edges: ``x`` itself."""
        return x

    def combine(self, sums: Rows, current: Rows, weights: Any, params: Any) -> Rows:
        """The coupling from ``sums[c, i] = sum_j w_ij sources(x_j)[c]``."""
        return self._gain(params) * sums + self.b


class SigmoidalCoupling(AbstractSummedCoupling):
    """``c_i = G a / (1 + exp(-(u_i - midpoint) / sigma)) + b``, ``u = W x``.

    The sigmoid acts on the summed input (after the weights), as in the
    sigmoidal coupling of The Virtual Brain; delayed, ``u`` sums the delayed
    sources.
    """

    a: Any = _number(1.0)
    b: Any = _number(0.0)
    midpoint: Any = _number(0.0)
    sigma: Any = _number(1.0)
    G_default: Any = _number(1.0)

    def _out(self, u: Rows, params: Any) -> tuple[Rows, Rows]:
        """Coupling of the summed input ``u`` and its slope in ``u``."""
        gain = read_G(params, self.G_default) * self.a
        s = jax.nn.sigmoid((u - self.midpoint) / self.sigma)
        return gain * s + self.b, gain * s * (1.0 - s) / self.sigma

    def __call__(self, x: Rows, weights: Any, params: Any) -> Rows:
        return self._out((weights @ _cols(x)).T, params)[0]

    def batched_jvp(self, x: Rows, dx: Tangents, weights: Any, params: Any):
        """Coupling and its derivative along ``dx (n_cvar, n, k)``: one product."""
        n_cvar = x.shape[0]
        p = weights @ jnp.concatenate([_cols(x), _tangent_cols(dx)], axis=1)
        c, slope = self._out(p[:, :n_cvar].T, params)
        return c, slope[..., None] * _tangent_rows(p[:, n_cvar:], n_cvar)

    def sources(self, x: Rows) -> Rows:
        """Per-source terms summed over the edges: ``x`` itself."""
        return x

    def combine(self, sums: Rows, current: Rows, weights: Any, params: Any) -> Rows:
        """The coupling from ``sums[c, i] = sum_j w_ij sources(x_j)[c]``."""
        return self._out(sums, params)[0]


def _sin_cos(theta: Rows) -> tuple[Rows, Rows]:
    return float_sin(theta), float_cos(theta)


class KuramotoCoupling(AbstractSummedCoupling):
    """``c_i = (G / N) sum_j w_ij sin(theta_j - theta_i + alpha)``, N = node count.

    Evaluated as ``cos(theta_i) (W sin(theta + alpha))_i - sin(theta_i) (W
    cos(theta + alpha))_i``, so only ``n``-sized sines and cosines are formed,
    never an ``(n, n)`` array of phase differences. Delayed, ``theta_j`` is
    read one edge delay ago and ``theta_i`` now.
    """

    alpha: Any = _number(0.0)
    G_default: Any = _number(1.0)

    def _trig(self, theta: Rows, weights: Any):
        # Apart: fused, sin and cos were evaluated again for every element of
        # each (n, k) tangent term that reads them.
        sin, cos = computed_apart(_sin_cos, weights, theta)
        ca, sa = float_cos(self.alpha), float_sin(self.alpha)
        # sin/cos(theta + alpha) by the addition theorem: no extra transcendentals.
        return sin, cos, sin * ca + cos * sa, cos * ca - sin * sa

    def _gain(self, weights: Any, params: Any) -> Any:
        return read_G(params, self.G_default) / weights.shape[0]

    def __call__(self, theta: Rows, weights: Any, params: Any) -> Rows:
        m = theta.shape[0]
        sin, cos, sin_a, cos_a = self._trig(theta, weights)
        p = weights @ jnp.concatenate([_cols(sin_a), _cols(cos_a)], axis=1)
        ws, wc = p[:, :m].T, p[:, m:].T
        return self._gain(weights, params) * (cos * ws - sin * wc)

    def batched_jvp(self, theta: Rows, dtheta: Tangents, weights: Any, params: Any):
        """Coupling and its derivative along ``dtheta (n_cvar, n, k)``.

        ``d c_i = g [cos th_i (W (cos(th+a) v))_i + sin th_i (W (sin(th+a) v))_i
        - v_i (sin th_i (W sin(th+a))_i + cos th_i (W cos(th+a))_i)]`` with
        ``g = G/N``: all four weighted sums come from one product of ``weights``
        with an ``(n, n_cvar (2 + 2k))`` block.
        """
        m = theta.shape[0]
        sin, cos, sin_a, cos_a = self._trig(theta, weights)
        block = [
            _cols(sin_a),
            _cols(cos_a),
            _tangent_cols(cos_a[..., None] * dtheta),
            _tangent_cols(sin_a[..., None] * dtheta),
        ]
        p = weights @ jnp.concatenate(block, axis=1)
        k = dtheta.shape[2]
        ws, wc = p[:, :m].T, p[:, m : 2 * m].T
        wcv = _tangent_rows(p[:, 2 * m : 2 * m + m * k], m)
        wsv = _tangent_rows(p[:, 2 * m + m * k :], m)
        g = self._gain(weights, params)
        c = g * (cos * ws - sin * wc)
        diag = (sin * ws + cos * wc)[..., None]
        dc = g * (cos[..., None] * wcv + sin[..., None] * wsv - diag * dtheta)
        return c, dc

    def sources(self, theta: Rows) -> Float[Array, "two_n_cvar ..."]:
        """Per-source terms summed over the edges: ``sin``, ``cos`` of
        ``theta + alpha`` stacked on the first axis (``2 n_cvar`` rows)."""
        shifted = theta + self.alpha
        return jnp.concatenate([float_sin(shifted), float_cos(shifted)], axis=0)

    def source_slopes(self, terms: Any, n_cvar: int) -> Any:
        """Slopes of :meth:`sources` from its values ``terms (..., 2 m, n)``:
        ``d sin / d theta = cos``, ``d cos / d theta = -sin``, per coupled
        variable ``(m, ..., 2 m, n)`` (zero across variables)."""
        m = n_cvar
        sin, cos = terms[..., :m, :], terms[..., m:, :]
        own = jnp.concatenate([cos, -sin], axis=-2)  # (..., 2m, n)
        if m == 1:
            return own[None]
        # Row r of the slopes in variable v is nonzero only for r in {v, m + v}.
        rows = jnp.arange(2 * m) % m
        mask = (rows[None, :] == jnp.arange(m)[:, None]).astype(terms.dtype)
        return mask.reshape((m,) + (1,) * (terms.ndim - 2) + (2 * m, 1)) * own

    def combine(self, sums: Rows, current: Rows, weights: Any, params: Any) -> Rows:
        """The coupling from ``sums[c, i] = sum_j w_ij sources(theta_j)[c]``:
        ``sin(a - b) = sin a cos b - cos a sin b``."""
        m = current.shape[0]
        g = self._gain(weights, params)
        return g * (float_cos(current) * sums[:m] - float_sin(current) * sums[m:])


def linear_coupling(a: Any = 1.0, b: Any = 0.0, G_default: Any = 1.0) -> LinearCoupling:
    """Linear coupling ``G a sum_j w_ij x_j + b`` (see :class:`LinearCoupling`)."""
    return LinearCoupling(a, b, G_default)


def sigmoidal_coupling(
    a: Any = 1.0,
    b: Any = 0.0,
    midpoint: Any = 0.0,
    sigma: Any = 1.0,
    G_default: Any = 1.0,
) -> SigmoidalCoupling:
    """Sigmoid of the summed input (see :class:`SigmoidalCoupling`)."""
    return SigmoidalCoupling(a, b, midpoint, sigma, G_default)


def kuramoto_coupling(alpha: Any = 0.0, G_default: Any = 1.0) -> KuramotoCoupling:
    """Kuramoto(-Sakaguchi) phase coupling (see :class:`KuramotoCoupling`)."""
    return KuramotoCoupling(alpha, G_default)


def coupling_jvp(
    coupling: Callable[..., Any],
    x: Rows,
    dx: Tangents,
    weights: Any,
    params: Any,
) -> tuple[Rows, Tangents]:
    """``(c, dc)``: the coupling at ``x (n_cvar, n)`` and along ``dx (n_cvar, n, k)``.

    An :class:`AbstractCoupling` answers with its ``batched_jvp``; a plain
    callable is differentiated by ``jax.jvp`` batched over the ``k``
    directions by ``jax.vmap`` (or by its own ``batched_jvp``, see
    :mod:`lyapax._engine._legacy`).
    """
    if isinstance(coupling, AbstractCoupling):
        return coupling.batched_jvp(x, dx, weights, params)
    fused = _legacy.fused_jvp(coupling)
    if fused is not None:
        return fused(x, dx, weights, params)
    return _generic_jvp(coupling, x, dx, weights, params)
