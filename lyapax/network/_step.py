"""One Runge-Kutta step of a coupled network, with a fused tangent form.

The state is ``(n_sv, n_nodes)`` flattened row-major. At every stage the
coupling is evaluated on the coupled rows and passed to the node ``dfun``.

``NetworkStep.tangent_step`` advances the state and a tangent frame ``Y (d, k)``
together: the pair ``(x, V)`` is pushed through the same Butcher tableau with
the variational right-hand side ``(f(x), Df(x) V)``. For an explicit RK method
this is exactly the JVP of the step, but each stage evaluates the coupling and
its ``k`` directional derivatives jointly (:func:`lyapax.coupling.coupling_jvp`),
which for the built-in couplings is one product of the weights with an
``(n, m)`` block instead of ``1 + k`` separate products.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import numpy as np
from jaxtyping import Array, Float

from lyapax._engine.abstract import AbstractStep
from lyapax._engine.tree import assemble
from lyapax.integrators import TABLEAUS, rk_stage_update
from lyapax.network.coupling import coupling_jvp

__all__ = ["NetworkStep", "ParametrizedNetworkStep", "take_rows"]


def take_rows(x: jax.Array, rows: tuple[int, ...]) -> jax.Array:
    """Rows ``rows`` of ``x`` along axis 0; a slice when they are contiguous."""
    start = rows[0]
    if rows == tuple(range(start, start + len(rows))):
        return x[start : start + len(rows)]
    return x[np.asarray(rows)]


class _Network(eqx.Module):
    """What both network steps share: the node model, the coupling, the
    weights and the step. ``dfun``, ``coupling``, ``weights`` and ``dt`` are
    pytree children (their numbers are traced leaves; functions stay static),
    the integrator name and ``cvar_indices`` are static."""

    dfun: Callable[..., Any]
    coupling: Callable[..., Any]
    weights: Any
    dt: Any
    integrator: str = eqx.field(static=True)
    cvar_indices: tuple[int, ...] = eqx.field(static=True)

    @property
    def n_nodes(self) -> int:
        return int(self.weights.shape[0])

    def _describe(self) -> str:
        return (
            f"dfun={self.dfun!r}, coupling={self.coupling!r}, n_nodes={self.n_nodes}, "
            f"cvar_indices={self.cvar_indices}, integrator={self.integrator!r}"
        )


class NetworkStep(_Network, AbstractStep):
    """``state (n_sv * n,) -> state``: one step of a coupled network, with the
    fused tangent form :meth:`tangent_step`."""

    uses_step_index: ClassVar[bool] = False
    params: Any

    def __init__(
        self,
        dfun: Callable[..., Any],
        coupling: Callable[..., Any],
        weights: Any,
        params: Any,
        dt: Any,
        integrator: str,
        cvar_indices: tuple[int, ...],
    ) -> None:
        self.dfun, self.coupling, self.weights = dfun, coupling, weights
        self.params, self.dt = params, dt
        self.integrator, self.cvar_indices = integrator, cvar_indices

    def rhs(self, x: Float[Array, "n_sv n"]) -> Float[Array, "n_sv n"]:
        """Network vector field on ``x (n_sv, n)``."""
        cvar_state = take_rows(x, self.cvar_indices)
        c = self.coupling(cvar_state, self.weights, self.params)
        return self.dfun(x, c, self.params)

    def __call__(self, state: Float[Array, " d"]) -> Float[Array, " d"]:
        x = state.reshape(-1, self.n_nodes)
        tableau = TABLEAUS[self.integrator]
        x_new = rk_stage_update(tableau, lambda y, _i: self.rhs(y), x, self.dt)
        return x_new.reshape(state.shape)

    def _variational_rhs(self, xv: tuple[jax.Array, jax.Array], _stage: int):
        """``(f(x), Df(x) V)`` for ``x (n_sv, n)`` and ``V (n_sv, n, k)``."""
        x, V = xv
        rows = self.cvar_indices
        c, dc = coupling_jvp(
            self.coupling,
            take_rows(x, rows),
            take_rows(V, rows),
            self.weights,
            self.params,
        )

        def node(y, cy):
            return self.dfun(y, cy, self.params)

        def one(dx, dcx):
            return jax.jvp(node, (x, c), (dx, dcx))

        # dfun acts node by node: batching its JVP over k costs O(n k).
        return jax.vmap(one, in_axes=(2, 2), out_axes=(None, 2))(V, dc)

    def tangent_step(
        self, state: Float[Array, " d"], Y: Float[Array, "d k"]
    ) -> tuple[Float[Array, " d"], Float[Array, "d k"]]:
        """Advance ``state (d,)`` and push ``Y (d, k)`` through the step's JVP."""
        n = self.n_nodes
        x = state.reshape(-1, n)
        V = Y.reshape(x.shape[0], n, Y.shape[1])
        tableau = TABLEAUS[self.integrator]
        x_new, V_new = rk_stage_update(tableau, self._variational_rhs, (x, V), self.dt)
        return x_new.reshape(state.shape), V_new.reshape(Y.shape)

    def tangent(
        self, z: Float[Array, " d"], Y: Float[Array, "d k"], step: Any
    ) -> tuple[Float[Array, " d"], Float[Array, "d k"]]:
        """The engine's tangent step: :meth:`tangent_step`."""
        return self.tangent_step(z, Y)

    def vector_field(self) -> Callable[[Any], Any]:
        """:meth:`rhs` on the flat state ``(n_sv * n,)``."""
        return _FlatRhs(self)

    def __repr__(self) -> str:
        return f"NetworkStep({self._describe()})"


class _FlatRhs(eqx.Module):
    """A network's vector field on the flat state ``(n_sv * n,)``."""

    step: NetworkStep

    def __call__(self, z: Float[Array, " d"]) -> Float[Array, " d"]:
        return self.step.rhs(z.reshape(-1, self.step.n_nodes)).reshape(z.shape)


class ParametrizedNetworkStep(_Network):
    """``(state, params) -> state``: a :class:`NetworkStep` with late ``params``.

    ``bind(params)`` returns the :class:`NetworkStep` (with its fused
    ``tangent_step``) for one set of parameters.
    """

    def bind(self, params: Any) -> NetworkStep:
        """The step with ``params`` fixed."""
        # The fields were checked when this step was built.
        return assemble(
            NetworkStep,
            dfun=self.dfun,
            coupling=self.coupling,
            weights=self.weights,
            params=params,
            dt=self.dt,
            integrator=self.integrator,
            cvar_indices=self.cvar_indices,
        )

    def __call__(self, state: Float[Array, " d"], params: Any) -> Float[Array, " d"]:
        return self.bind(params)(state)

    def __repr__(self) -> str:
        return f"ParametrizedNetworkStep({self._describe()})"
