"""The two passes over the time segments of a shadowing run.

The trajectory pass integrates the state alone and records, at every segment
boundary, what the tangent pass and the least-squares problem need: the
boundary states, the objective there, its integral over each segment and the
flow speed. The tangent pass integrates, beside the state, ``m`` homogeneous
tangents ``W`` (the unstable directions) and one inhomogeneous tangent per
parameter component ``v*`` (forced by ``d rhs / d params``), all as one
``(d, m + P)`` block advanced by ``jax.jvp`` of the step under ``jax.vmap``,
and renormalises them at each boundary (Ni & Wang 2017, section 3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from lyapax._engine.precision import growth_log, matmul, standard_normal
from lyapax._engine.qr import thin_qr
from lyapax.integrators import ode_step

Rhs = Callable[[jax.Array, Any], jax.Array]

#: Steps unrolled in the inner loops: a loop iteration costs about a
#: microsecond on CPU, more than a step of a small flow.
_UNROLL = 10
Objective = Callable[[jax.Array, Any], jax.Array]


def augmented_step(
    rhs: Rhs,
    objective: Objective,
    unravel: Callable[[jax.Array], Any],
    dt: Any,
    integrator: Any,
) -> Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]:
    """``(u (d,), p (P,)) -> (u_next, integral of the objective over the step)``.

    The objective's integral rides along as one more state component of the
    same Runge-Kutta step, so its quadrature (and, through ``jax.jvp``, that of
    ``J_u v + J_s``) has the integrator's order.
    """

    def step(u: jax.Array, p: jax.Array) -> tuple[jax.Array, jax.Array]:
        params = unravel(p)
        d = u.shape[0]

        def field(y: jax.Array) -> jax.Array:
            x = y[:d]
            rate = jnp.reshape(objective(x, params), (1,)).astype(y.dtype)
            return jnp.concatenate([rhs(x, params).astype(y.dtype), rate])

        y0 = jnp.concatenate([u, jnp.zeros((1,), u.dtype)])
        y1 = ode_step(field, dt, integrator)(y0)
        return y1[:d], y1[d]

    return step


class Trajectory(NamedTuple):
    """Per-boundary data of the trajectory pass (``K`` segments)."""

    states: jax.Array  # (K + 1, d) state at each boundary
    objective: jax.Array  # (K + 1,) objective at each boundary
    integrals: jax.Array  # (K,) integral of the objective over each segment
    speeds: jax.Array  # (K + 1,) |rhs| at each boundary


def trajectory_pass(
    step: Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]],
    rhs: Rhs,
    objective: Objective,
    unravel: Callable[[jax.Array], Any],
    u0: jax.Array,
    p: jax.Array,
    n_transient: Any,
    n_segments: int,
    segment_steps: int,
) -> Trajectory:
    """Transient (``n_transient`` steps, a runtime number), then ``n_segments``
    segments of ``segment_steps`` steps, state only."""
    params = unravel(p)
    u = jax.lax.fori_loop(0, n_transient, lambda _, x: step(x, p)[0], u0)

    def segment(x: jax.Array, _: Any) -> tuple[jax.Array, tuple[jax.Array, ...]]:
        def one(carry: tuple[jax.Array, jax.Array], _: Any) -> Any:
            y, q = carry
            y1, dq = step(y, p)
            return (y1, q + dq), None

        (x1, q), _ = jax.lax.scan(
            one,
            (x, jnp.zeros((), x.dtype)),
            length=segment_steps,
            unroll=min(segment_steps, _UNROLL),
        )
        return x1, (x1, q)

    _, (ends, integrals) = jax.lax.scan(segment, u, length=n_segments)
    states = jnp.concatenate([u[None], ends])
    values = jax.vmap(lambda x: objective(x, params))(states)
    speeds = jax.vmap(lambda x: jnp.linalg.norm(rhs(x, params)))(states)
    return Trajectory(states, values.astype(u.dtype), integrals, speeds)


def flow_projections(traj: Trajectory, segment_time: Any) -> jax.Array:
    """Boundaries ``(K + 1,)`` (traced bools) where the flow direction is
    treated as neutral and projected out of the tangents.

    An orbit on an equilibrium has no neutral direction, and projecting out a
    vanishing ``rhs`` would divide by it. So a boundary is projected only where
    the orbit moves there (``|rhs| * segment_time`` above 1e-6 of the state's
    size, far above rounding) and when the speed's fitted exponential trend
    over the window falls by less than ``e^5`` (a spiral into an equilibrium
    falls at its rate; the speed on a chaotic attractor or a cycle has no
    trend).
    """
    speeds = traj.speeds
    size = 1.0 + jnp.max(jnp.abs(traj.states), axis=1)
    moving = speeds * segment_time > 1e-6 * size
    t = jnp.linspace(0.0, 1.0, speeds.shape[0])
    logs = growth_log(jnp.maximum(speeds, jnp.finfo(speeds.dtype).tiny))
    tc = t - jnp.mean(t)
    trend = jnp.sum(tc * (logs - jnp.mean(logs))) / jnp.maximum(
        jnp.sum(tc * tc), 1e-300
    )
    return moving & (trend > -5.0)


class Segments(NamedTuple):
    """Per-segment data of the tangent pass (``m`` unstable, ``P`` parameters)."""

    R: jax.Array  # (K, m, m) R factor of the homogeneous tangents at the end
    b: jax.Array  # (K, m, P) their components of the inhomogeneous tangents
    C: jax.Array  # (K, m, m) integral of W^T W
    D: jax.Array  # (K, m, P) integral of W^T v*
    jw: jax.Array  # (K, m) integral of J_u W
    jv: jax.Array  # (K, P) integral of J_u v* + J_s
    xw: jax.Array  # (K, m) flow-direction component of W at the end
    xv: jax.Array  # (K, P) flow-direction component of v* at the end


def _boundary(
    frame: jax.Array, f: jax.Array, project: jax.Array, m: int
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Project the flow direction ``f`` out of the ``(d, m + P)`` tangents (when
    ``project``), orthonormalise the homogeneous ones and remove their span from
    the inhomogeneous ones. Returns the new frame, the removed flow components
    ``(m + P,)``, ``R (m, m)`` and ``b (m, P)``."""
    ff = jnp.sum(f * f)
    use = project & (ff > 0)
    xi = jnp.where(use, matmul(f, frame) / jnp.where(ff > 0, ff, 1.0), 0.0)
    frame = frame - f[:, None] * xi[None, :]
    w, v = frame[:, :m], frame[:, m:]
    if m == 0:
        return (
            v,
            xi,
            jnp.zeros((0, 0), frame.dtype),
            jnp.zeros((0, v.shape[1]), frame.dtype),
        )
    q, r = thin_qr(w, unroll=True)  # the program it was measured with
    b = matmul(q.T, v)
    return jnp.concatenate([q, v - matmul(q, b)], axis=1), xi, r, b


def quadrature_stride(segment_steps: int) -> int:
    """Steps between the samples of the ``W^T W`` quadrature: about ten
    samples per segment (the integral only weighs the least-squares norm, so a
    coarse trapezoid rule serves and keeps the Gram products off most steps)."""
    target = max(1, segment_steps // 10)
    return max(s for s in range(1, target + 1) if segment_steps % s == 0)


def tangent_pass(
    step: Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]],
    rhs: Rhs,
    unravel: Callable[[jax.Array], Any],
    states: jax.Array,
    p: jax.Array,
    project: jax.Array,
    m: int,
    dt: Any,
    segment_steps: int,
) -> Segments:
    """The tangents over every segment, started from the boundary states of the
    trajectory pass (``states (K + 1, d)``), projecting the flow direction at
    the boundaries flagged in ``project (K + 1,)``."""
    d = states.shape[1]
    n_p = p.shape[0]
    params = unravel(p)
    # Parameter direction of each tangent column: none for W, e_j for v*_j.
    dp = jnp.concatenate([jnp.zeros((m, n_p), p.dtype), jnp.eye(n_p, dtype=p.dtype)])
    stride = quadrature_stride(segment_steps)
    n_samples = segment_steps // stride

    def advance(
        u: jax.Array, frame: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        def one(
            col: jax.Array, dcol: jax.Array
        ) -> tuple[jax.Array, jax.Array, jax.Array]:
            (u1, _), (du, dq) = jax.jvp(step, (u, p), (col, dcol))
            return u1, du, dq

        # The state does not depend on the batched tangent: computed once.
        return jax.vmap(one, in_axes=(1, 0), out_axes=(None, 1, 0))(frame, dp)

    def gram(frame: jax.Array) -> jax.Array:
        return matmul(frame[:, :m].T, frame)

    def segment(frame: jax.Array, xs: Any) -> tuple[jax.Array, tuple[jax.Array, ...]]:
        u0, project_end = xs

        def inner(carry: Any, _: Any) -> Any:
            u, fr, j = carry
            u1, fr1, dj = advance(u, fr)
            return (u1, fr1, j + dj), None

        def sample(carry: Any, _: Any) -> Any:
            (u, fr, j), g = carry
            (u, fr, j), _ = jax.lax.scan(
                inner, (u, fr, j), length=stride, unroll=min(stride, _UNROLL)
            )
            return ((u, fr, j), g + gram(fr)), None

        start = (u0, frame, jnp.zeros((m + n_p,), frame.dtype))
        g0 = gram(frame)
        ((u, fr, j), g), _ = jax.lax.scan(sample, (start, 0.5 * g0), length=n_samples)
        g = (g - 0.5 * gram(fr)) * (stride * dt)
        new, xi, r, b = _boundary(fr, rhs(u, params), project_end, m)
        out = (r, b, g[:, :m], g[:, m:], j[:m], j[m:], xi[:m], xi[m:])
        return new, out

    key = jax.random.key(0)
    start = standard_normal(key, (d, m + n_p), states.dtype)
    start = start.at[:, m:].set(0.0)
    frame, _, _, _ = _boundary(start, rhs(states[0], params), project[0], m)
    _, outs = jax.lax.scan(segment, frame, (states[:-1], project[1:]))
    return Segments(*outs)
