"""Network couplings ``(cvar_state (n_cvar, n), weights, params) -> (n_cvar, n)``.

Row ``r`` of ``cvar_state`` is the ``r``-th coupled variable at every node;
``weights[i, j]`` is the weight of the edge from source ``j`` to target ``i``
(a dense array or a ``jax.experimental.sparse.BCOO`` matrix). The global
coupling strength is ``G = params.get("G", G_default)``.

Any callable with that signature is a coupling. The built-in ones are pytrees
(their numbers are leaves, so new values reuse compiled programs) and also
provide ``batched_jvp(cvar_state, tangents (n_cvar, n, k), weights, params)``, which
returns the coupling and its derivative along ``k`` tangent directions from a
*single* product of ``weights`` with an ``(n, m)`` block: one matrix product
per Runge-Kutta stage for the state and all tangents together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp

__all__ = [
    "KuramotoCoupling",
    "LinearCoupling",
    "SigmoidalCoupling",
    "coupling_jvp",
    "kuramoto_coupling",
    "linear_coupling",
    "sigmoidal_coupling",
]


def read_G(params: Any, default: Any) -> Any:
    """``params["G"]`` when ``params`` is a mapping holding it, else ``default``."""
    if isinstance(params, Mapping):
        return params.get("G", default)
    return default


def _cols(x: jax.Array) -> jax.Array:
    """``(n_cvar, n) -> (n, n_cvar)``: node axis first, for ``weights @``."""
    return x.T


def _tangent_cols(dx: jax.Array) -> jax.Array:
    """``(n_cvar, n, k) -> (n, n_cvar * k)``; free for one coupled variable."""
    n_cvar, n, k = dx.shape
    return jnp.moveaxis(dx, 0, 1).reshape(n, n_cvar * k)


def _tangent_rows(p: jax.Array, n_cvar: int) -> jax.Array:
    """Inverse of :func:`_tangent_cols` on a product ``(n, n_cvar * k)``."""
    n = p.shape[0]
    return jnp.moveaxis(p.reshape(n, n_cvar, -1), 1, 0)


def _float(x: Any) -> Any:
    # Python ints would be static pytree leaves (one compile per value).
    return float(x) if isinstance(x, int) and not isinstance(x, bool) else x


class _Coupling:
    """Pytree plumbing shared by the built-in couplings (fields are leaves)."""

    _fields: tuple[str, ...] = ()

    def tree_flatten(self):
        return tuple(getattr(self, f) for f in self._fields), None

    @classmethod
    def tree_unflatten(cls, _aux, children):
        obj = object.__new__(cls)
        for f, value in zip(cls._fields, children, strict=True):
            setattr(obj, f, value)
        return obj

    def __repr__(self) -> str:
        args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({args})"


@jax.tree_util.register_pytree_node_class
class LinearCoupling(_Coupling):
    """``c_i = G a sum_j w_ij x_j + b`` for every coupled variable ``x``."""

    _fields = ("a", "b", "G_default")

    def __init__(self, a: Any = 1.0, b: Any = 0.0, G_default: Any = 1.0) -> None:
        self.a, self.b, self.G_default = _float(a), _float(b), _float(G_default)

    def __call__(self, x: jax.Array, weights: Any, params: Any) -> jax.Array:
        gain = read_G(params, self.G_default) * self.a
        return gain * (weights @ _cols(x)).T + self.b

    def batched_jvp(self, x: jax.Array, dx: jax.Array, weights: Any, params: Any):
        """Coupling and its derivative along ``dx (n_cvar, n, k)``: one product."""
        n_cvar = x.shape[0]
        gain = read_G(params, self.G_default) * self.a
        p = weights @ jnp.concatenate([_cols(x), _tangent_cols(dx)], axis=1)
        c = gain * p[:, :n_cvar].T + self.b
        return c, gain * _tangent_rows(p[:, n_cvar:], n_cvar)


@jax.tree_util.register_pytree_node_class
class SigmoidalCoupling(_Coupling):
    """``c_i = G a / (1 + exp(-(u_i - midpoint) / sigma)) + b``, ``u = W x``.

    The sigmoid acts on the summed input (after the weights), as in the
    sigmoidal coupling of The Virtual Brain.
    """

    _fields = ("a", "b", "midpoint", "sigma", "G_default")

    def __init__(
        self,
        a: Any = 1.0,
        b: Any = 0.0,
        midpoint: Any = 0.0,
        sigma: Any = 1.0,
        G_default: Any = 1.0,
    ) -> None:
        self.a, self.b = _float(a), _float(b)
        self.midpoint, self.sigma = _float(midpoint), _float(sigma)
        self.G_default = _float(G_default)

    def _out(self, u: jax.Array, params: Any):
        gain = read_G(params, self.G_default) * self.a
        s = jax.nn.sigmoid((u - self.midpoint) / self.sigma)
        return gain * s + self.b, gain * s * (1.0 - s) / self.sigma

    def __call__(self, x: jax.Array, weights: Any, params: Any) -> jax.Array:
        return self._out((weights @ _cols(x)).T, params)[0]

    def batched_jvp(self, x: jax.Array, dx: jax.Array, weights: Any, params: Any):
        """Coupling and its derivative along ``dx (n_cvar, n, k)``: one product."""
        n_cvar = x.shape[0]
        p = weights @ jnp.concatenate([_cols(x), _tangent_cols(dx)], axis=1)
        c, slope = self._out(p[:, :n_cvar].T, params)
        return c, slope[..., None] * _tangent_rows(p[:, n_cvar:], n_cvar)


@jax.tree_util.register_pytree_node_class
class KuramotoCoupling(_Coupling):
    """``c_i = (G / N) sum_j w_ij sin(theta_j - theta_i + alpha)``, N = node count.

    Evaluated as ``cos(theta_i) (W sin(theta + alpha))_i - sin(theta_i) (W
    cos(theta + alpha))_i``, so only ``n``-sized sines and cosines are formed,
    never an ``(n, n)`` array of phase differences.
    """

    _fields = ("alpha", "G_default")

    def __init__(self, alpha: Any = 0.0, G_default: Any = 1.0) -> None:
        self.alpha, self.G_default = _float(alpha), _float(G_default)

    def _trig(self, theta: jax.Array):
        sin, cos = jnp.sin(theta), jnp.cos(theta)
        ca, sa = jnp.cos(self.alpha), jnp.sin(self.alpha)
        # sin/cos(theta + alpha) by the addition theorem: no extra transcendentals.
        return sin, cos, sin * ca + cos * sa, cos * ca - sin * sa

    def _gain(self, weights: Any, params: Any) -> Any:
        return read_G(params, self.G_default) / weights.shape[0]

    def __call__(self, theta: jax.Array, weights: Any, params: Any) -> jax.Array:
        m = theta.shape[0]
        sin, cos, sin_a, cos_a = self._trig(theta)
        p = weights @ jnp.concatenate([_cols(sin_a), _cols(cos_a)], axis=1)
        ws, wc = p[:, :m].T, p[:, m:].T
        return self._gain(weights, params) * (cos * ws - sin * wc)

    def batched_jvp(
        self, theta: jax.Array, dtheta: jax.Array, weights: Any, params: Any
    ):
        """Coupling and its derivative along ``dtheta (n_cvar, n, k)``.

        ``d c_i = g [cos th_i (W (cos(th+a) v))_i + sin th_i (W (sin(th+a) v))_i
        - v_i (sin th_i (W sin(th+a))_i + cos th_i (W cos(th+a))_i)]`` with
        ``g = G/N``: all four weighted sums come from one product of ``weights``
        with an ``(n, n_cvar (2 + 2k))`` block.
        """
        m = theta.shape[0]
        sin, cos, sin_a, cos_a = self._trig(theta)
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
    x: jax.Array,
    dx: jax.Array,
    weights: Any,
    params: Any,
):
    """``(c, dc)``: the coupling at ``x (n_cvar, n)`` and along ``dx (n_cvar, n, k)``.

    Uses the coupling's own fused ``batched_jvp`` when it has one, otherwise
    ``jax.jvp`` batched over the ``k`` directions by ``jax.vmap``.
    """
    fused = getattr(coupling, "batched_jvp", None)
    if fused is not None:
        return fused(x, dx, weights, params)

    def one(v):
        return jax.jvp(lambda y: coupling(y, weights, params), (x,), (v,))

    return jax.vmap(one, in_axes=2, out_axes=(None, 2))(dx)
