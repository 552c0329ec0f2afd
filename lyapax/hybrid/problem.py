"""Hybrid systems: a flow with impacts, resets and switches.

``hybrid_problem(rhs, event, reset, state0, dt)`` integrates ``dx/dt =
rhs(x)`` on a fixed Runge-Kutta step; where ``event(x)`` crosses from ``> 0``
to ``<= 0`` inside a step the crossing time is located to rounding, the state
is replaced by ``reset(x)`` there and the step is completed
(:mod:`lyapax.hybrid._step`). The engine differentiates that step as any
other, and the tangents pick up the saltation matrix, so every entry point
(spectra, covariant vectors, finite-time exponents, sweeps, checkpoints) runs
hybrid systems unchanged.

A field that is discontinuous across a switching surface is written with a
mode coordinate in the state (``s = +-1``, ``ds/dt = 0``): ``rhs`` picks the
field by ``s``, ``event`` is ``s * g(x)`` (the distance into the present
side), and ``reset`` flips ``s``. Every Runge-Kutta stage then evaluates the
field of the side the step is on; the mode coordinate adds one exponent 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jax

from lyapax._engine import validate
from lyapax._engine.abstract import AbstractProblem, EngineView
from lyapax._engine.problem import ODEProblem, with_state0
from lyapax.hybrid._step import DEFAULT_MAX_EVENTS, HybridStep
from lyapax.integrators import fixed_stage_method

if TYPE_CHECKING:  # shape annotations only: jaxtyping costs ~0.1 s to import
    from jaxtyping import Array, Float

__all__ = ["HybridProblem", "hybrid_problem"]


class _HybridProblemFields(NamedTuple):
    """The fields of :class:`HybridProblem` (its published ``NamedTuple`` form)."""

    step_fn: HybridStep
    state0: Float[Array, " d"]
    dt: Any


class HybridProblem(_HybridProblemFields, AbstractProblem):
    """A flow with events and resets on a fixed step.

    ``step_fn``: the :class:`~lyapax.hybrid._step.HybridStep`; ``state0
    (d,)``; ``dt``: model time per step.
    """

    __slots__ = ()

    def for_engine(self) -> EngineView:
        """The hybrid step on ``(d,)``, run as an ODE problem's."""
        return ODEProblem(self.step_fn, self.state0, self.dt).for_engine()

    def with_params(self, params: Any) -> HybridProblem:
        raise ValueError(
            "params_batch was given with a hybrid_problem, whose parameters live "
            "inside rhs, event and reset; pass problem_family(lambda p: "
            "hybrid_problem(...)) to sweep parameters"
        )

    def with_state(self, state0: Any) -> HybridProblem:
        return with_state0(self, state0, "hybrid problem's state0")


def _check_shapes(rhs: Any, event: Any, reset: Any, state0: Any) -> None:
    """Trace ``rhs``, ``event`` and ``reset`` on ``state0``'s shape once."""
    spec = jax.ShapeDtypeStruct(state0.shape, state0.dtype)
    for name, fn, want, what in (
        ("rhs", rhs, state0.shape, f"the state's shape {state0.shape}"),
        ("event", event, (), "a scalar, shape ()"),
        ("reset", reset, state0.shape, f"the state's shape {state0.shape}"),
    ):
        out = jax.eval_shape(fn, spec)
        shape = getattr(out, "shape", None)
        if shape != want:
            raise ValueError(
                f"{name}(x) must return {what} for a state of shape "
                f"{state0.shape}; it returned {shape if shape is not None else out!r}"
            )


def hybrid_problem(
    rhs: Callable[[Float[Array, " d"]], Float[Array, " d"]],
    event: Callable[[Float[Array, " d"]], Float[Array, ""]],
    reset: Callable[[Float[Array, " d"]], Float[Array, " d"]],
    state0: Any,
    dt: float,
    integrator: str = "rk4",
    *,
    max_events: int = DEFAULT_MAX_EVENTS,
    saltation: bool = True,
) -> HybridProblem:
    """A flow ``dx/dt = rhs(x)`` with events and resets, on a fixed step.

    Args:
        rhs: vector field ``(d,) -> (d,)``.
        event: ``(d,) -> ()``; an event happens where it crosses from ``> 0``
            to ``<= 0`` (located inside the step to rounding). A crossing
            back and forth within one step is not seen.
        reset: ``(d,) -> (d,)``, the state just after the event from the
            state just before it.
        state0: initial state ``(d,)``.
        dt: time step (model time units, > 0).
        integrator: ``"euler"``, ``"heun"``, ``"rk4"`` or ``"rk6"`` (a tableau:
            the crossing is searched on its step of variable size).
        max_events: most events in one step; more stop the run with an
            ``equinox.EquinoxRuntimeError`` saying that events accumulate
            (Zeno behaviour).
        saltation: False drops the saltation term from the tangents (the
            event time held fixed: the naive ``DR`` at each event). Wrong
            exponents; for comparison only.

    Raises:
        TypeError: ``rhs``, ``event`` or ``reset`` not callable; ``integrator``
            not a name; ``saltation`` not a bool.
        ValueError: ``dt`` not positive and finite; an unknown integrator;
            ``max_events < 1``; ``event`` not scalar, or ``rhs`` or ``reset``
            not returning the state's shape.
    """
    for name, fn in (("rhs", rhs), ("event", event), ("reset", reset)):
        if not callable(fn):
            raise TypeError(
                f"{name} must be callable (a function of the state (d,)); got "
                f"{type(fn).__name__}"
            )
    x0 = validate.as_state("state0", state0)
    dt = validate.positive_dt(dt)
    method = fixed_stage_method(integrator, "hybrid_problem")
    cap = validate.as_int("max_events", max_events, minimum=1)
    if not isinstance(saltation, bool):
        raise TypeError(f"saltation must be True or False; got {saltation!r}")
    _check_shapes(rhs, event, reset, x0)
    step = HybridStep(rhs, event, reset, dt, method, cap, saltation)
    return HybridProblem(step, x0, dt)
