"""Symplectic steps of a separable Hamiltonian ``H(q, p) = T(p) + V(q)``.

Every integrator here is a symmetric composition of the Störmer–Verlet
(leapfrog) map in its drift–kick–drift form,

    q <- q + (a dt) dT/dp(p),    p <- p - (b dt) dV/dq(q),

so each sub-step is the exact flow of ``T`` or of ``V`` over part of ``dt``:
a symplectic map, and so is their composition. The weights of the
compositions are Yoshida's (1990), "Construction of higher order symplectic
integrators", Phys. Lett. A 150, 262: order 4 from three leapfrog steps of
weights ``(w1, w0, w1)``, order 6 from seven (his solution A). Adjacent
half-drifts of consecutive leapfrog steps are merged, so a composition of
``m`` leapfrog steps costs ``m`` evaluations of ``dV/dq`` and ``m + 1`` of
``dT/dp``.

The tangent map the engine pushes frames through is ``jax.jvp`` of this
step: the derivative of a symplectic map, symplectic itself (``J^T Ω J = Ω``
to rounding), whatever the step size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp

from lyapax._engine.abstract import AbstractStep

__all__ = ["SYMPLECTIC_ORDERS", "SymplecticStep", "composition"]


def _yoshida4() -> tuple[float, ...]:
    cube_root = 2.0 ** (1.0 / 3.0)
    w1 = 1.0 / (2.0 - cube_root)
    w0 = -cube_root / (2.0 - cube_root)
    return (w1, w0, w1)


def _yoshida6() -> tuple[float, ...]:
    # Yoshida (1990), Table 1, solution A.
    w1, w2, w3 = -1.17767998417887, 0.235573213359357, 0.784513610477560
    w0 = 1.0 - 2.0 * (w1 + w2 + w3)
    return (w3, w2, w1, w0, w1, w2, w3)


#: Leapfrog weights of each composition, and its order.
_WEIGHTS: dict[str, tuple[float, ...]] = {
    "leapfrog": (1.0,),
    "yoshida4": _yoshida4(),
    "yoshida6": _yoshida6(),
}
SYMPLECTIC_ORDERS: dict[str, int] = {"leapfrog": 2, "yoshida4": 4, "yoshida6": 6}


def composition(method: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(drifts, kicks)``: the fractions of ``dt`` of the ``m + 1`` drifts
    and ``m`` kicks of ``method`` (a composition of ``m`` leapfrog steps,
    neighbouring half-drifts merged)."""
    w = _WEIGHTS[method]
    drifts = [w[0] / 2]
    drifts += [(w[j] + w[j + 1]) / 2 for j in range(len(w) - 1)]
    drifts.append(w[-1] / 2)
    return tuple(drifts), w


class SymplecticStep(AbstractStep):
    """``z = (q, p) (2n,) -> z``: one symplectic step of ``method`` over
    ``dt`` for ``H = T(p) + V(q)``.

    ``grad_t(p) (n,) -> (n,)`` is ``dT/dp``, ``grad_v(q) (n,) -> (n,)`` is
    ``dV/dq``; both and ``dt`` are pytree children (their numbers traced),
    ``method`` is static.
    """

    uses_step_index: ClassVar[bool] = False

    grad_t: Callable[[Any], Any]
    grad_v: Callable[[Any], Any]
    dt: Any
    method: str = eqx.field(static=True)

    def __call__(self, z: Any, *step_index: Any) -> Any:
        n = z.shape[0] // 2
        q, p = z[:n], z[n:]
        drifts, kicks = composition(self.method)
        # Unrolled: at most 7 kicks, and XLA fuses the stages.
        for a, b in zip(drifts[:-1], kicks, strict=True):
            q = q + (a * self.dt) * self.grad_t(p)
            p = p - (b * self.dt) * self.grad_v(q)
        q = q + (drifts[-1] * self.dt) * self.grad_t(p)
        return jnp.concatenate([q, p])

    def __repr__(self) -> str:
        return (
            f"SymplecticStep(grad_t={self.grad_t!r}, grad_v={self.grad_v!r}, "
            f"dt={self.dt!r}, method={self.method!r})"
        )
