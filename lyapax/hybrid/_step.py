"""The step of a hybrid system: Runge-Kutta flow, located events, resets.

One step of :class:`HybridStep` from ``x`` over ``dt``:

1. the Runge-Kutta step ``y = Phi_dt(x)`` of ``rhs`` (the step of
   ``ode_problem`` with the same integrator, bit for bit);
2. if ``event(x) > 0`` (or ``x`` lies on the surface, put there by a reset,
   and the flow leaves it into ``event > 0``) and ``event(y) <= 0``,
   the crossing time ``t*`` is the
   root of ``h(s) = event(Phi_s(x))`` on ``(0, dt]``, where ``Phi_s`` is the
   same Runge-Kutta step taken with size ``s`` (its natural continuous
   extension), found by Newton's method safeguarded by the bracket, to
   rounding; the state becomes ``reset(Phi_t*(x))`` and the step continues
   from there over the remaining ``dt - t*``, where a further crossing is
   handled the same way, up to ``max_events`` events in one step.

More crossings than ``max_events`` in one step (events accumulating: Zeno
behaviour, chattering on the switching surface) stop the run with an error
raised by :func:`equinox.error_if` inside the compiled run (an
``equinox.EquinoxRuntimeError``, or JAX's runtime error carrying the message
outside ``equinox.filter_jit``), never an endless loop.

Tangents: the crossing time is a ``jax.custom_jvp`` function whose
derivative is the implicit one, ``dt* = -(grad g . dx-) / (grad g . f-)``
(closed-over parameters of ``rhs`` and ``event`` are made explicit
arguments by ``jax.closure_convert``, so they are differentiated too).
``jax.jvp`` of the whole step then composes the flows with the saltation
matrix ``S = DR + (f+ - DR f-) grad g^T / (grad g . f-)`` (Mueller 1995),
where ``f-``/``f+`` are the field before and after the reset. The loops are
``lax.while_loop`` s: forward mode only (``jax.jvp``, ``jax.jacfwd``).
"""

from __future__ import annotations

import functools
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
            hit,
            lambda x, t, y, hit: self._with_events(x, t, y, hit),
            lambda x, t, y, hit: y,
            x,
            dt,
            y,
            hit,
        )

    def _leaves_surface(self, x: Any, g: Any, residual: Any = 0.0) -> Any:
        """``x`` lies on the surface ``event = 0`` to rounding (within a few
        ulps of the step's time along the flow, or within a few times the
        ``residual`` of ``event`` at the located crossing before the reset)
        and the flow carries it into ``event > 0``: a state just reset onto
        the surface."""
        slope = jax.jvp(self.event, (x,), (self.rhs(x),))[1]
        dt = jnp.asarray(self.dt, x.dtype)
        ulps = 64 * jnp.finfo(x.dtype).eps * dt * jnp.abs(slope)
        near = jnp.abs(g) <= jnp.maximum(ulps, 4 * jnp.abs(residual))
        return near & (slope > 0)

    def _with_events(self, x: Any, tau: Any, y: Any, hit: Any) -> Any:
        """The step from ``x`` over ``tau`` whose plain Runge-Kutta step ``y``
        crosses the surface (``hit``; under ``vmap`` some lanes may not)."""

        def more(carry):
            _x, _tau, active, _y, count = carry
            return active & (count < self.max_events)

        def one_event(carry):
            x, tau, active, y_old, count = carry
            t_star = self._crossing_time(x, tau, active)
            x_minus = self.flow(x, t_star)
            x_plus = self.reset(x_minus)
            rest = tau - t_star
            y = self.flow(x_plus, rest)
            g_plus = self.event(x_plus)
            residual = lax.stop_gradient(self.event(x_minus))
            starts = (g_plus > 0) | self._leaves_surface(x_plus, g_plus, residual)
            again = starts & (self.event(y) <= 0)
            # Lanes of a vmapped call that had no event keep their state.
            keep = lambda new, old: jnp.where(active, new, old)  # noqa: E731
            return (
                keep(x_plus, x),
                keep(rest, tau),
                active & again,
                keep(y, y_old),
                count + 1,
            )

        # A while loop bounded by max_events: under vmap (sweeps) it runs
        # only as long as some lane has an event.
        carry = (x, tau, hit, y, 0)
        _x, _tau, active, y, _n = lax.while_loop(more, one_event, carry)
        return eqx.error_if(
            y,
            active,
            f"hybrid_problem: more than max_events={self.max_events} events in "
            "one step: events accumulate (Zeno behaviour, or the state chatters "
            "on the switching surface after a reset); use a smaller dt, a "
            "larger max_events, or a reset that leaves the surface",
        )

    def _crossing_time(self, x: Any, tau: Any, active: Any = True) -> Any:
        """The root ``t*`` in ``(0, tau]`` of ``h(s) = event(flow(x, s))``,
        to rounding, differentiated implicitly (:func:`_event_time`).
        ``active`` False (a vmapped lane without an event) skips the search."""

        def h(s, z):
            return self.event(self.flow(z, s))

        # Closed-over numbers (parameters of rhs or event) become explicit
        # arguments, so the custom derivative sees them.
        h_explicit, consts = jax.closure_convert(h, tau, x)
        t_star = _event_time(h_explicit, x, tau, jnp.asarray(active), *consts)
        return t_star if self.saltation else lax.stop_gradient(t_star)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _event_time(h: Callable[..., Any], x: Any, tau: Any, active: Any, *consts: Any):
    """The root in ``(0, tau]`` of ``s -> h(s, x, *consts)``, given ``h > 0``
    at ``s = 0`` (or ``h`` leaving 0 upwards there) and ``h <= 0`` at ``tau``.

    Newton's method safeguarded by the bracket (a halving whenever a Newton
    step would leave it), to rounding. A start on the surface (``h(0) <=
    0``) has the root ``s = 0`` deflated away: the search runs on ``h(s) /
    s``, whose root in ``(0, tau]`` is the next crossing.
    """

    def q_raw(s):
        return h(s, x, *consts)

    zero = jnp.zeros_like(tau)
    h_a, slope_a = jax.jvp(q_raw, (zero,), (jnp.ones_like(zero),))
    deflate = h_a <= 0

    def q(s):
        return q_raw(s) / jnp.where(deflate, s, 1.0)

    q_a, q_b = jnp.where(deflate, slope_a, h_a), q(tau)
    # Start from the secant through the bracket's ends.
    s0 = jnp.clip(tau * q_a / (q_a - q_b), 0.0, tau)
    s0 = jnp.where(jnp.isfinite(s0) & (s0 > 0), s0, 0.5 * tau)
    tol = 4 * jnp.finfo(tau.dtype).eps * tau

    def cond(c):
        _a, _b, _s, it, done = c
        return (~done) & (it < _ROOT_ITERATIONS)

    def body(c):
        a, b, s, it, _ = c
        qs, slope = jax.jvp(q, (s,), (jnp.ones_like(s),))
        a, b = jnp.where(qs > 0, s, a), jnp.where(qs > 0, b, s)
        newton = s - qs / slope
        inside = jnp.isfinite(newton) & (newton > a) & (newton < b)
        # An exact root stays where it is (it is also the bracket's end ``b``,
        # so no Newton step lies inside).
        s_new = jnp.where(qs == 0, s, jnp.where(inside, newton, 0.5 * (a + b)))
        done = (qs == 0) | (b - a <= tol) | (jnp.abs(s_new - s) <= tol)
        return a, b, s_new, it + 1, done

    start = (zero, tau, s0, 0, ~active)
    return lax.while_loop(cond, body, start)[2]


@_event_time.defjvp
def _event_time_jvp(h, primals, tangents):
    """Implicit derivative of the root of ``h(t*, x, p) = 0``: ``dt* =
    -(dh/dx dx + dh/dp dp) / (dh/ds)``. It uses ``t*`` itself (this rule
    again under a second differentiation), so derivatives of every order
    are those of the located root. The root does not move with ``tau``."""
    x, tau, active, *consts = primals
    dx, _dtau, _dactive, *dconsts = tangents
    t_star = _event_time(h, x, tau, active, *consts)
    _, dh = jax.jvp(lambda x, *c: h(t_star, x, *c), (x, *consts), (dx, *dconsts))
    _, slope = jax.jvp(lambda s: h(s, x, *consts), (t_star,), (jnp.ones_like(t_star),))
    return t_star, -dh / slope
