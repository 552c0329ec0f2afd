"""The step of a hybrid system: Runge-Kutta flow, located events, resets.

One step of :class:`HybridStep` from ``x`` over ``dt``:

1. the Runge-Kutta step ``y = Phi_dt(x)`` of ``rhs`` (the step of
   ``ode_problem`` with the same integrator, bit for bit);
2. if ``event(x) > 0`` and ``event(y) <= 0``, the crossing time ``t*`` is the
   root of ``h(s) = event(Phi_s(x))`` on ``(0, dt]``, where ``Phi_s`` is the
   same Runge-Kutta step taken with size ``s`` (its natural continuous
   extension), found by Newton's method safeguarded by the bracket, to
   rounding; the state becomes ``reset(Phi_t*(x))`` and the step continues
   from there over the remaining ``dt - t*``, where a further crossing is
   handled the same way, up to ``max_events`` events in one step.

More crossings than ``max_events`` in one step (events accumulating: Zeno
behaviour, chattering on the switching surface) stop the run with an error
raised by :func:`equinox.error_if` (``equinox.EquinoxRuntimeError`` at run
time), never an endless loop.

Tangents: the root finder runs on constants (``stop_gradient``) and one
Newton correction ``t* = s - h(s, x) / h'(s)`` is added whose value is zero to
rounding and whose derivative is the implicit one, ``dt* = -(grad g . dx-) /
(grad g . f-)``. ``jax.jvp`` of the whole step then composes the flows with
the saltation matrix ``S = DR + (f+ - DR f-) grad g^T / (grad g . f-)``
(Mueller 1995), where ``f-``/``f+`` are the field before and after the reset.
The correction is plain arithmetic, so it also differentiates parameters a
caller's ``rhs`` closes over, in forward mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import lax

from lyapax._engine.abstract import AbstractStep
from lyapax.integrators import TABLEAUS, rk_stage_update

__all__ = ["DEFAULT_MAX_EVENTS", "HybridStep"]

#: Events one step may hold before the run is stopped as Zeno behaviour.
DEFAULT_MAX_EVENTS = 8
#: Iterations of the safeguarded Newton search for one crossing time (each
#: either a Newton step or a halving of the bracket: 60 halvings reach
#: rounding from any bracket in float64).
_ROOT_ITERATIONS = 60


class HybridStep(AbstractStep):
    """``x (d,) -> (d,)``: one step of ``rhs`` over ``dt`` with the events of
    ``event`` (from ``> 0`` to ``<= 0``) replaced by ``reset`` (see the module
    docstring). ``rhs``, ``event``, ``reset`` and ``dt`` are pytree children;
    ``method`` (a tableau name), ``max_events`` and ``saltation`` are static
    (``saltation=False`` holds the event time fixed under differentiation:
    the naive tangent ``DR``, wrong, kept to show the difference)."""

    uses_step_index: ClassVar[bool] = False

    rhs: Callable[[Any], Any]
    event: Callable[[Any], Any]
    reset: Callable[[Any], Any]
    dt: Any
    method: str = eqx.field(static=True)
    max_events: int = eqx.field(static=True, default=DEFAULT_MAX_EVENTS)
    saltation: bool = eqx.field(static=True, default=True)

    def flow(self, x: Any, s: Any) -> Any:
        """The Runge-Kutta step of size ``s`` from ``x``."""
        tableau = TABLEAUS[self.method]
        return rk_stage_update(tableau, lambda y, _i: self.rhs(y), x, s)

    def __call__(self, x: Any, *step_index: Any) -> Any:
        dt = jnp.asarray(self.dt, x.dtype)
        y = self.flow(x, dt)
        g_x, g_y = self.event(x), self.event(y)
        # A step that starts on the surface (an event ended the last step)
        # and leaves it into g > 0 may come back within the step; the slope
        # is only computed in that rare case.
        on_surface = lax.cond(
            (g_x <= 0) & (g_y <= 0),
            lambda x: self._leaves_surface(x, g_x),
            lambda x: jnp.bool_(False),
            x,
        )
        hit = ((g_x > 0) | on_surface) & (g_y <= 0)
        # Most steps hold no event: the cond keeps them at the cost of the
        # plain Runge-Kutta step and two event evaluations. Closures, not
        # bound methods: jax hashes branch functions, and a module's hash
        # reads its (traced) leaves.
        return lax.cond(
            hit, lambda x, t, y: self._with_events(x, t, y), lambda x, t, y: y, x, dt, y
        )

    def _leaves_surface(self, x: Any, g: Any) -> Any:
        """``x`` lies on the surface ``event = 0`` to rounding (within a few
        ulps of the step's time along the flow) and the flow carries it
        into ``event > 0``: a state just reset onto the surface."""
        slope = jax.jvp(self.event, (x,), (self.rhs(x),))[1]
        dt = jnp.asarray(self.dt, x.dtype)
        near = jnp.abs(g) <= 64 * jnp.finfo(x.dtype).eps * dt * jnp.abs(slope)
        return near & (slope > 0)

    def _with_events(self, x: Any, tau: Any, y: Any) -> Any:
        def one_event(_i, carry):
            x, tau, active, _y = carry

            def do(x, tau):
                t_star = self._crossing_time(x, tau)
                x_plus = self.reset(self.flow(x, t_star))
                rest = tau - t_star
                y = self.flow(x_plus, rest)
                g_plus = self.event(x_plus)
                starts = (g_plus > 0) | self._leaves_surface(x_plus, g_plus)
                return x_plus, rest, starts & (self.event(y) <= 0), y

            return lax.cond(active, do, lambda x, tau: carry, x, tau)

        carry = (x, tau, jnp.bool_(True), y)
        # A loop of fixed length (a scan): reverse mode differentiates it too.
        _x, _tau, active, y = lax.fori_loop(0, self.max_events, one_event, carry)
        return eqx.error_if(
            y,
            active,
            f"hybrid_problem: more than max_events={self.max_events} events in "
            "one step: events accumulate (Zeno behaviour, or the state chatters "
            "on the switching surface after a reset); use a smaller dt, a "
            "larger max_events, or a reset that leaves the surface",
        )

    def _crossing_time(self, x: Any, tau: Any) -> Any:
        """The root ``t*`` in ``(0, tau]`` of ``h(s) = event(flow(x, s))``,
        to rounding, with the implicit derivative (module docstring).

        A start on the surface (``h(0) <= 0``, leaving it) has the root
        ``s = 0`` deflated away: the search runs on ``h(s) / s``, whose root
        in ``(0, tau]`` is the next crossing.
        """
        x0 = lax.stop_gradient(x)
        tau0 = lax.stop_gradient(tau)

        def h(s, z):
            return self.event(self.flow(z, s))

        zero = jnp.zeros_like(tau0)
        h_a, slope_a = jax.jvp(lambda s: h(s, x0), (zero,), (jnp.ones_like(zero),))
        deflate = h_a <= 0

        def q(s):
            return h(s, x0) / jnp.where(deflate, s, 1.0)

        def q_and_slope(s):
            return jax.jvp(q, (s,), (jnp.ones_like(s),))

        q_a, q_b = jnp.where(deflate, slope_a, h_a), q(tau0)
        # Start from the secant through the bracket's ends.
        s0 = jnp.clip(tau0 * q_a / (q_a - q_b), 0.0, tau0)
        s0 = jnp.where(jnp.isfinite(s0) & (s0 > 0), s0, 0.5 * tau0)
        tol = 4 * jnp.finfo(x0.dtype).eps * tau0

        def cond(c):
            a, b, s, it, done = c
            return (~done) & (it < _ROOT_ITERATIONS)

        def body(c):
            a, b, s, it, _ = c
            qs, slope = q_and_slope(s)
            a, b = jnp.where(qs > 0, s, a), jnp.where(qs > 0, b, s)
            newton = s - qs / slope
            inside = jnp.isfinite(newton) & (newton > a) & (newton < b)
            s_new = jnp.where(inside, newton, 0.5 * (a + b))
            done = (qs == 0) | (b - a <= tol) | (jnp.abs(s_new - s) <= tol)
            return a, b, s_new, it + 1, done

        start = (zero, tau0, s0, 0, jnp.bool_(False))
        _a, _b, s, _it, _done = lax.while_loop(cond, body, start)
        s = lax.stop_gradient(s)
        if not self.saltation:
            return s
        # Zero to rounding in value; the implicit derivative in its tangent.
        slope = jax.jvp(lambda s: h(s, x0), (s,), (jnp.ones_like(s),))[1]
        correction = -h(s, x) / lax.stop_gradient(slope)
        return s + (correction - lax.stop_gradient(correction))
