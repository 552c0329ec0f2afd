"""Fixed-step explicit Runge-Kutta integrators.

Each builder ``X_step(rhs, dt)`` turns an autonomous vector field
``rhs(state) -> d state/dt`` into a one-step map ``state -> state``. The returned
step is a pytree (``rhs`` and ``dt`` are leaves), so rebuilding it with new
numbers reuses compiled programs.

Orders: Euler 1, Heun 2, classical RK4 4, RK6 6 (Verner's 9-stage "most
efficient" 6(5) pair, the same tableau as Julia's ``Vern6``; only its
8 stages of the 6th-order solution are evaluated here).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax

from lyapax._engine.abstract import AbstractStep

__all__ = [
    "AbstractStepBuilder",
    "ButcherTableau",
    "IncompatibleIntegratorError",
    "TABLEAUS",
    "euler_step",
    "heun_step",
    "rk4_step",
    "rk6_step",
    "ode_step",
    "get_integrator",
    "fixed_stage_method",
    "rk_stage_update",
    "TimedODEStep",
]


class ButcherTableau(NamedTuple):
    """Explicit Runge-Kutta coefficients (rows of ``a`` are lower-triangular)."""

    name: str
    order: int
    a: tuple[tuple[float, ...], ...]
    b: tuple[float, ...]
    c: tuple[float, ...]


_EULER = ButcherTableau("euler", 1, ((),), (1.0,), (0.0,))
_HEUN = ButcherTableau("heun", 2, ((), (1.0,)), (0.5, 0.5), (0.0, 1.0))
_RK4 = ButcherTableau(
    "rk4",
    4,
    ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0)),
    (1 / 6, 1 / 3, 1 / 3, 1 / 6),
    (0.0, 0.5, 0.5, 1.0),
)
# Verner (2010), "Numerically optimal Runge-Kutta pairs with interpolants",
# 6(5) "most efficient" pair; the 6th-order weights are its FSAL row.
_RK6 = ButcherTableau(
    "rk6",
    6,
    (
        (),
        (0.06,),
        (0.019239962962962962, 0.07669337037037037),
        (0.035975, 0.0, 0.107925),
        (1.3186834152331484, 0.0, -5.042058063628562, 4.220674648395414),
        (
            -41.87259166432751,
            0.0,
            159.43256216313748,
            -122.11921356501004,
            5.531743066200053,
        ),
        (
            -54.430156935316504,
            0.0,
            207.06725136501848,
            -158.61081378459,
            6.991816585950242,
            -0.01859723106220323,
        ),
        (
            -54.66374178728198,
            0.0,
            207.95280625538936,
            -159.2889574744995,
            7.018743740796944,
            -0.018338785905045722,
            -0.0005119484997882099,
        ),
    ),
    (
        0.03438957868357036,
        0.0,
        0.0,
        0.25826245556335037,
        0.4209371189673537,
        4.40539646966931,
        -176.48311902429865,
        172.36413340141507,
    ),
    (0.0, 0.06, 0.09593333333333333, 0.1439, 0.4973, 0.9725, 0.9995, 1.0),
)

TABLEAUS: dict[str, ButcherTableau] = {t.name: t for t in (_EULER, _HEUN, _RK4, _RK6)}


def _combine(y: Any, dt: Any, coeffs: tuple[float, ...], ks: list[Any]) -> Any:
    """y + dt * sum_j coeffs[j] * ks[j], skipping zero coefficients (pytrees)."""
    terms = [(c, k) for c, k in zip(coeffs, ks, strict=False) if c != 0.0]
    if not terms:
        return y

    def add(y_leaf, *k_leaves):
        acc = terms[0][0] * k_leaves[0]
        for (c, _), k_leaf in zip(terms[1:], k_leaves[1:], strict=True):
            acc = acc + c * k_leaf
        return y_leaf + dt * acc

    return jax.tree.map(add, y, *[k for _, k in terms])


def rk_stage_update(
    tableau: ButcherTableau,
    f: Callable[[Any, int], Any],
    y: Any,
    dt: Any,
) -> Any:
    """One explicit RK step of ``y`` (any pytree) under ``f(y_stage, stage_index)``.

    ``f`` receives the stage index so that time-dependent inputs (delayed history
    read at ``t + c_i dt``) can be evaluated at every stage.
    """
    ks: list[Any] = []
    for i, row in enumerate(tableau.a):
        ks.append(f(_combine(y, dt, row, ks), i))
    return _combine(y, dt, tableau.b, ks)


class ODEStep(AbstractStep):
    """``state -> state`` map: one step of ``tableau`` on ``rhs`` with step ``dt``.

    ``rhs`` and ``dt`` are pytree children (numbers traced), ``method`` static.
    """

    uses_step_index: ClassVar[bool] = False

    rhs: Callable[[Any], Any]
    dt: Any
    method: str = eqx.field(static=True)

    def __call__(self, state: Any) -> Any:
        tableau = TABLEAUS[self.method]
        return rk_stage_update(tableau, lambda y, _i: self.rhs(y), state, self.dt)

    def vector_field(self) -> Callable[[Any], Any]:
        """``rhs``, the field this step integrates."""
        return self.rhs

    def __repr__(self) -> str:
        return f"ODEStep(rhs={self.rhs!r}, dt={self.dt!r}, method={self.method!r})"


# --- time-dependent right-hand sides -------------------------------
class TimedODEStep(AbstractStep):
    """``(state, step_index) -> state``: one step of ``tableau`` on ``rhs(t, x)``
    from ``t = t0 + step_index * dt``, each stage at its own time ``t + c_i dt``.

    Declares ``uses_step_index``, so the engine passes its step counter (kept
    in the checkpoint: a resumed run continues at the right time). ``dt < 0``
    steps backward in time.
    """

    uses_step_index: ClassVar[bool] = True

    rhs: Callable[[Any, Any], Any]
    dt: Any
    t0: Any
    method: str = eqx.field(static=True)

    def __call__(self, state: Any, step: Any) -> Any:
        tableau = TABLEAUS[self.method]
        t = self.t0 + step * self.dt
        c, dt = tableau.c, self.dt
        return rk_stage_update(
            tableau, lambda y, i: self.rhs(t + c[i] * dt, y), state, dt
        )


def timed_ode_step(
    rhs: Callable[..., Any], dt: Any, t0: Any, integrator: Any = "rk4"
) -> TimedODEStep:
    """:class:`TimedODEStep` by integrator name.

    Raises:
        ValueError: ``integrator`` not a tableau name (builders and adaptive
            steps do not know the stage times).
    """
    if not isinstance(integrator, str):
        raise ValueError(
            f"integrator={integrator!r}: a time-dependent rhs(t, x) needs a "
            f"fixed-step tableau name ({', '.join(sorted(_BUILDERS))}), whose "
            "stages are evaluated at their own times"
        )
    method = fixed_stage_method(integrator, "ode_problem(time_dependent=True)")
    return TimedODEStep(rhs, dt, t0, method)


# --- end of time-dependent right-hand sides ----------------------------------


def euler_step(rhs: Callable[[Any], Any], dt: float) -> ODEStep:
    """Forward Euler step (order 1)."""
    return ODEStep(rhs, dt, "euler")


def heun_step(rhs: Callable[[Any], Any], dt: float) -> ODEStep:
    """Heun's (explicit trapezoidal) step (order 2)."""
    return ODEStep(rhs, dt, "heun")


def rk4_step(rhs: Callable[[Any], Any], dt: float) -> ODEStep:
    """Classical fourth-order Runge-Kutta step."""
    return ODEStep(rhs, dt, "rk4")


def rk6_step(rhs: Callable[[Any], Any], dt: float) -> ODEStep:
    """Sixth-order Verner step (Vern6 tableau, 8 stages)."""
    return ODEStep(rhs, dt, "rk6")


_BUILDERS: dict[str, Callable[[Callable[[Any], Any], float], Any]] = {
    "euler": euler_step,
    "heun": heun_step,
    "rk4": rk4_step,
    "rk6": rk6_step,
}


class AbstractStepBuilder(eqx.Module):
    """An integrator given as an object: ``builder(rhs, dt) -> step``.

    ``fixed_stages`` declares whether its steps evaluate ``rhs`` at the fixed
    stages of a Runge-Kutta tableau. Networks and delay equations read their
    coupling and history at those stages, so they take tableau names only and
    refuse a builder without fixed stages (:func:`fixed_stage_method`).
    """

    fixed_stages: eqx.AbstractClassVar[bool]

    @abc.abstractmethod
    def __call__(self, rhs: Callable[[Any], Any], dt: Any) -> Any:
        """The step ``state -> state`` of ``rhs`` over ``dt``."""


class IncompatibleIntegratorError(ValueError):
    """An integrator that the kind of problem cannot use (an adaptive ODE
    integrator given to a network or delay-equation builder)."""


def _unknown(name: Any, hint: str) -> str:
    return (
        f"integrator={name!r} is not known; valid names are "
        f"{', '.join(sorted(_BUILDERS))}{hint}"
    )


def get_integrator(name: str) -> Callable[[Callable[[Any], Any], float], Any]:
    """Return the step builder ``(rhs, dt) -> step`` called ``name``.

    Raises:
        ValueError: if ``name`` is not one of ``euler, heun, rk4, rk6``.
    """
    if not isinstance(name, str) or name.lower() not in _BUILDERS:
        raise ValueError(_unknown(name, " (or pass a (rhs, dt) -> step builder)"))
    return _BUILDERS[name.lower()]


def ode_step(
    rhs: Callable[[Any], Any],
    dt: float,
    integrator: str | Callable[[Callable[[Any], Any], float], Any] = "rk4",
) -> Any:
    """Build a step ``state -> state`` from ``rhs`` by name or by a builder.

    Raises:
        ValueError: unknown integrator name. TypeError: neither str nor callable.
    """
    if isinstance(integrator, str):
        return get_integrator(integrator)(rhs, dt)
    if callable(integrator):
        return integrator(rhs, dt)
    raise TypeError(
        f"integrator must be a name ({', '.join(sorted(_BUILDERS))}) or a callable "
        f"(rhs, dt) -> step; got {integrator!r} of type {type(integrator).__name__}"
    )


def fixed_stage_method(integrator: Any, where: str) -> str:
    """The tableau name behind ``integrator`` for a network or delay equation.

    These read their coupling and history at each fixed Runge-Kutta stage, so
    they take the names ``euler``, ``heun``, ``rk4``, ``rk6`` (any case) only.
    ``where`` names the builder that was called (for the message).

    Raises:
        IncompatibleIntegratorError: an adaptive builder (no fixed stages).
        TypeError: ``integrator`` is not a name.
        ValueError: an unknown name.
    """
    if isinstance(integrator, AbstractStepBuilder) and not integrator.fixed_stages:
        raise IncompatibleIntegratorError(
            f"integrator={integrator!r} is an adaptive ODE integrator "
            "(lyapax.adaptive.diffrax_adaptive_step): it is for ode_problem only, "
            f"not for network_problem or delay equations ({where} was called). "
            "These read coupling and history at each fixed Runge-Kutta stage; "
            "pass integrator='euler', 'heun', 'rk4' or 'rk6'."
        )
    if not isinstance(integrator, str):
        raise TypeError(
            f"integrator must be a name ({', '.join(sorted(_BUILDERS))}) for "
            "networks and delay equations, whose stages read the coupling and "
            f"the history at their own times; got {integrator!r}"
        )
    if integrator.lower() not in TABLEAUS:
        raise ValueError(_unknown(integrator, ""))
    return integrator.lower()
