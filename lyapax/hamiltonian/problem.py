"""Separable Hamiltonian problems on a symplectic step.

``hamiltonian_problem(grad_t, grad_v, q0, p0, dt)`` turns ``H(q, p) = T(p) +
V(q)`` into a problem of the engine: the state is ``z = (q, p)``, positions
then momenta, one vector of length ``2n``; the step is a symplectic
composition (:mod:`lyapax.hamiltonian._step`), and the engine differentiates
it as it does any step, so spectra, covariant vectors, finite-time exponents,
sweeps, checkpoints and progress bars work unchanged, on a tangent map that
is itself symplectic.

The planar circular restricted three-body problem is not here: in the
rotating frame its Hamiltonian has the term ``q1 p2 - q2 p1`` that mixes
positions and momenta, so it is not ``T(p) + V(q)`` and these explicit
splittings do not apply (it needs an implicit step, or a splitting of its own
into a rotation and a kick, which this module does not provide).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp

from lyapax._engine import validate
from lyapax._engine.abstract import AbstractProblem, EngineView
from lyapax._engine.problem import LyapunovCheckpoint, ODEProblem, with_state0
from lyapax.hamiltonian._step import SYMPLECTIC_ORDERS, SymplecticStep

if TYPE_CHECKING:  # shape annotations only: jaxtyping costs ~0.1 s to import
    from jaxtyping import Array, ArrayLike, Float

__all__ = [
    "HamiltonianProblem",
    "SeparableHamiltonian",
    "hamiltonian_problem",
]

_NOT_SYMPLECTIC = ("euler", "heun", "rk4", "rk6")


class _HamiltonianProblemFields(NamedTuple):
    """The fields of :class:`HamiltonianProblem` (its published ``NamedTuple`` form)."""

    step_fn: SymplecticStep
    state0: Float[Array, " d"]
    dt: Any
    n_dof: int
    hamiltonian: Callable[[Any, Any], Any] | None = None


class HamiltonianProblem(_HamiltonianProblemFields, AbstractProblem):
    """A separable Hamiltonian on a symplectic step.

    ``step_fn``: the :class:`~lyapax.hamiltonian._step.SymplecticStep` of the
    state ``z = (q, p) (2n,)``; ``state0 (2n,)``; ``dt``: model time per
    step; ``n_dof``: ``n``; ``hamiltonian``: ``H(q, p) -> ()`` or None.
    """

    __slots__ = ()

    def for_engine(self) -> EngineView:
        """The symplectic step on ``(2n,)``, run as an ODE problem's."""
        return ODEProblem(self.step_fn, self.state0, self.dt).for_engine()

    def with_params(self, params: Any) -> HamiltonianProblem:
        raise ValueError(
            "params_batch was given with a hamiltonian_problem, whose parameters "
            "live inside its gradients; pass problem_family(lambda p: "
            "hamiltonian_problem(...)) to sweep parameters"
        )

    def with_state(self, state0: Any) -> HamiltonianProblem:
        return with_state0(self, state0, "problem's state (q, p)")

    def paired_start(self) -> LyapunovCheckpoint:
        """The start of a run whose exponents pair to rounding: ``state0``
        and the orthonormal frame of columns ``q_1, ..., q_n, p_n, ..., p_1``
        (``resume=`` of :func:`lyapax.lyapunov_spectrum`).

        In that order the frame is symplectic for the form that pairs column
        ``i`` with column ``2n + 1 - i``. The QR factor ``R`` of a matrix
        symplectic for that form satisfies ``R_ii R_{2n+1-i, 2n+1-i} = 1``
        (``R^{-T}`` conjugated by the form is again upper triangular with a
        positive diagonal, and QR is unique), so every step's growth factors
        pair exactly and ``λ_i + λ_{2n+1-i} = 0`` at any finite time, to
        rounding. A random frame (the engine's default) pairs only as the
        run grows, with an error of order ``1/t``.
        """
        n = self.n_dof
        columns = list(range(n)) + [2 * n - 1 - j for j in range(n)]
        frame = jnp.eye(2 * n, dtype=self.state0.dtype)[:, columns]
        zeros = jnp.zeros((2 * n,), self.state0.dtype)
        elapsed = jnp.zeros((), self.state0.dtype)
        return LyapunovCheckpoint(self.state0, frame, zeros, elapsed, self.dt)

    def energy(self, states: Float[ArrayLike, "*batch d"]) -> Float[Array, " *batch"]:
        """``H(q, p)`` of every state ``(..., 2n)``, such as a saved trajectory.

        Raises:
            ValueError: the problem was built without ``hamiltonian=``, or
                ``states`` do not end in ``2n``.
        """
        if self.hamiltonian is None:
            raise ValueError(
                "energy() needs the Hamiltonian: build the problem with "
                "hamiltonian_problem(..., hamiltonian=H) where H(q, p) -> ()"
            )
        z = jnp.asarray(states)
        if z.ndim == 0 or z.shape[-1] != 2 * self.n_dof:
            raise ValueError(
                f"states must have shape (..., {2 * self.n_dof}) (q then p); "
                f"got shape {z.shape}"
            )
        flat = z.reshape(-1, z.shape[-1])
        n, H = self.n_dof, self.hamiltonian
        values = jax.vmap(lambda x: H(x[:n], x[n:]))(flat)
        return values.reshape(z.shape[:-1])


class SeparableHamiltonian(NamedTuple):
    """A system ``H(q, p) = T(p) + V(q)`` given by its parts (what the
    builders of :mod:`lyapax.systems` return): ``grad_t(p)``, ``grad_v(q)``
    and ``hamiltonian(q, p)``, each a pytree whose numbers are leaves."""

    grad_t: Callable[[Any], Any]
    grad_v: Callable[[Any], Any]
    hamiltonian: Callable[[Any, Any], Any]

    def problem(
        self,
        q0: Float[ArrayLike, " n"],
        p0: Float[ArrayLike, " n"],
        dt: float,
        integrator: str = "yoshida4",
    ) -> HamiltonianProblem:
        """:func:`hamiltonian_problem` of this system from ``(q0, p0)``."""
        return hamiltonian_problem(
            self.grad_t, self.grad_v, q0, p0, dt, integrator, self.hamiltonian
        )


def _check_integrator(integrator: Any) -> str:
    if isinstance(integrator, str) and integrator.lower() in SYMPLECTIC_ORDERS:
        return integrator.lower()
    names = ", ".join(SYMPLECTIC_ORDERS)
    if isinstance(integrator, str) and integrator.lower() in _NOT_SYMPLECTIC:
        raise ValueError(
            f"integrator={integrator!r} is not symplectic: hamiltonian_problem "
            f"takes {names} (for a Runge-Kutta step of Hamilton's equations use "
            "ode_problem with their vector field)"
        )
    raise ValueError(f"integrator={integrator!r} is not known; valid names: {names}")


def hamiltonian_problem(
    grad_t: Callable[[Any], Any],
    grad_v: Callable[[Any], Any],
    q0: Float[ArrayLike, " n"],
    p0: Float[ArrayLike, " n"],
    dt: float,
    integrator: str = "yoshida4",
    hamiltonian: Callable[[Any, Any], Any] | None = None,
) -> HamiltonianProblem:
    """Problem of the separable Hamiltonian ``H(q, p) = T(p) + V(q)`` on a
    symplectic step.

    Args:
        grad_t: ``dT/dp``, ``p (n,) -> (n,)`` (``p / m`` for ``T = p²/2m``).
        grad_v: ``dV/dq``, ``q (n,) -> (n,)``.
        q0, p0: initial positions and momenta, both ``(n,)``.
        dt: time step (model time units, > 0).
        integrator: ``"leapfrog"`` (Störmer–Verlet, order 2), ``"yoshida4"``
            or ``"yoshida6"`` (Yoshida 1990 compositions, orders 4 and 6;
            3 and 7 evaluations of ``grad_v`` per step).
        hamiltonian: optional ``H(q, p) -> ()`` for :meth:`~HamiltonianProblem.energy`.

    Returns:
        :class:`HamiltonianProblem`; its state is ``z = concat(q, p)``
        ``(2n,)``, and every engine entry point accepts it.

    Raises:
        TypeError: ``grad_t``, ``grad_v`` or ``hamiltonian`` not callable.
        ValueError: ``q0``/``p0`` not 1-D, of different shapes or not
            finite; ``dt`` not a finite number > 0; an integrator that is not
            one of the symplectic names (a Runge-Kutta name included).
    """
    for name, fn in (("grad_t", grad_t), ("grad_v", grad_v)):
        if not callable(fn):
            raise TypeError(
                f"{name} must be callable ((n,) -> (n,)); got {type(fn).__name__}"
            )
    if hamiltonian is not None and not callable(hamiltonian):
        raise TypeError(
            "hamiltonian must be callable H(q, p) -> () or None; got "
            f"{type(hamiltonian).__name__}"
        )
    method = _check_integrator(integrator)
    q = validate.as_state("q0", q0)
    p = validate.as_state("p0", p0)
    if q.shape != p.shape:
        raise ValueError(
            f"q0 and p0 must have the same shape (n,); got q0 {q.shape} and "
            f"p0 {p.shape}"
        )
    dt = validate.as_dt(dt)
    z0 = jnp.concatenate([q, p]).astype(jnp.result_type(q, p))
    step = SymplecticStep(grad_t, grad_v, dt, method)
    return HamiltonianProblem(step, z0, dt, int(q.shape[0]), hamiltonian)
