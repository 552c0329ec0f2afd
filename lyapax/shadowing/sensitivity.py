"""Derivatives of long-time averages of chaotic flows by least-squares shadowing.

``jax.grad`` of a time average along a chaotic orbit grows like
``exp(lambda_1 T)``: it differentiates one trajectory, not the statistics.
Least-squares shadowing (LSS; Wang, Hu & Blonigan 2014, J. Comput. Phys. 267,
210-224) differentiates the average along a *shadowing* trajectory instead,
the perturbed orbit that stays close to the reference one, whose derivative
``v`` stays bounded. Its non-intrusive form (NILSS; Ni & Wang 2017,
J. Comput. Phys. 347, 56-77) writes ``v`` on each time segment as one
inhomogeneous tangent plus a combination of the ``n_unstable`` unstable
homogeneous tangents, the same QR-renormalised frames a Benettin run keeps, and
finds the combination from a small least-squares problem.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from lyapax._engine import validate
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.precision import growth_log
from lyapax._engine.stats import batch_means_stderr
from lyapax.core import lyapunov_spectrum, ode_problem
from lyapax.integrators import get_integrator
from lyapax.shadowing import _lsq, _segments

__all__ = ["ShadowingResult", "shadowing_sensitivity"]


class ShadowingResult(eqx.Module):
    """Result of :func:`shadowing_sensitivity`.

    Attributes:
        average: time average of ``objective`` along the run (after the
            transient), ``()``.
        gradient: ``d average / d params``, a pytree like ``params``.
        stderr: standard error of ``gradient`` (batch means over segments),
            a pytree like ``params``.
        exponents: ``(n_unstable,)`` growth rates (1/time) of the homogeneous
            tangents measured in this run; all should be positive.
        spectrum: the spectrum ``(d,)`` that chose ``n_unstable`` when it was
            not given, else None.
        flow_direction: whether the flow direction was treated as neutral
            (projected out at some segment boundary), a boolean array.
        n_unstable: number of homogeneous (unstable) tangents used.
        n_segments: number of time segments.
        segment_time: model time of one segment.
    """

    average: jax.Array
    gradient: Any
    stderr: Any
    exponents: jax.Array
    spectrum: jax.Array | None
    flow_direction: jax.Array
    n_unstable: int = eqx.field(static=True)
    n_segments: int = eqx.field(static=True)
    segment_time: float = eqx.field(static=True)


@partial(
    jax.jit,
    static_argnames=(
        "rhs",
        "objective",
        "integrator",
        "m",
        "n_segments",
        "segment_steps",
    ),
)
def _run(
    u0: jax.Array,
    params: Any,
    dt: Any,
    n_transient: Any,
    *,
    rhs: Callable[..., Any],
    objective: Callable[..., Any],
    integrator: Any,
    m: int,
    n_segments: int,
    segment_steps: int,
) -> tuple[jax.Array, ...]:
    """One compiled program: trajectory pass, tangent pass, least squares.
    Returns the average, the flat gradient and its error, the exponents and
    whether the flow direction was projected anywhere."""
    p, unravel = ravel_pytree(params)
    step = _segments.augmented_step(rhs, objective, unravel, dt, integrator)
    seg_time = segment_steps * dt
    total = n_segments * seg_time
    traj = _segments.trajectory_pass(
        step, rhs, objective, unravel, u0, p, n_transient, n_segments, segment_steps
    )
    project = _segments.flow_projections(traj, seg_time)
    seg = _segments.tangent_pass(
        step, rhs, unravel, traj.states, p, project, m, dt, segment_steps
    )
    average = jnp.sum(traj.integrals) / total
    a = _lsq.shadowing_coefficients(seg)
    shares = _lsq.segment_sensitivities(seg, a, traj.objective[1:], average)
    gradient = jnp.sum(shares, axis=0) / total
    stderr = batch_means_stderr(shares, seg_time, total)
    logs = growth_log(jnp.abs(jnp.diagonal(seg.R, axis1=1, axis2=2)))
    exponents = jnp.sum(logs, axis=0) / total
    return average, gradient, stderr, exponents, jnp.any(project[1:-1])


def _check_functions(rhs: Any, objective: Any, state0: jax.Array, params: Any) -> None:
    """Call-time checks of ``rhs`` and ``objective`` on abstract values."""
    for name, fn in (("rhs", rhs), ("objective", objective)):
        if not callable(fn):
            raise TypeError(f"{name} must be a callable {name}(x, params); got {fn!r}")
    try:
        out = jax.eval_shape(rhs, state0, params)
    except Exception as err:
        raise TypeError(
            f"params do not fit rhs: rhs(state0, params) failed with "
            f"{type(err).__name__}: {err}. params must be the pytree rhs(x, params) "
            f"reads; got params={params!r}"
        ) from err
    if getattr(out, "shape", None) != state0.shape:
        raise ValueError(
            f"rhs(state0, params) must return an array of the state's shape "
            f"{state0.shape}; got {getattr(out, 'shape', out)!r}"
        )
    try:
        value = jax.eval_shape(objective, state0, params)
    except Exception as err:
        raise TypeError(
            f"objective(state0, params) failed with {type(err).__name__}: {err}"
        ) from err
    if getattr(value, "shape", None) != ():
        raise ValueError(
            f"objective must return a scalar (shape ()); objective(state0, params) "
            f"has shape {getattr(value, 'shape', value)!r}"
        )


def _flat_params(params: Any) -> tuple[jax.Array, Callable[[jax.Array], Any]]:
    """``params`` as one flat float vector and the map back."""
    params = validate.float_params(params)
    leaves = jax.tree.leaves(params)
    if not leaves:
        raise ValueError(
            f"params must hold at least one number to differentiate; got {params!r}"
        )
    for leaf in leaves:
        if not jnp.issubdtype(jnp.result_type(leaf), jnp.inexact):
            raise TypeError(
                f"params must have floating-point leaves (the derivative is taken "
                f"with respect to them); got a leaf of dtype "
                f"{jnp.result_type(leaf)} in params={params!r}"
            )
    return ravel_pytree(params)


def _count_unstable(spectrum: np.ndarray, neutral: bool) -> int:
    """Positive exponents, the flow direction's (the one nearest zero) left out
    when the orbit moves along the flow."""
    positive = spectrum > 0
    if neutral and spectrum.size:
        positive[int(np.argmin(np.abs(spectrum)))] = False
    return int(np.sum(positive))


@holds_one_blas_thread
def shadowing_sensitivity(
    rhs: Callable[[jax.Array, Any], jax.Array],
    state0: Any,
    params: Any,
    objective: Callable[[jax.Array, Any], jax.Array],
    dt: float,
    n_segments: int,
    segment_steps: int,
    *,
    n_unstable: int | None = None,
    t_transient: float = 0.0,
    integrator: Any = "rk4",
) -> ShadowingResult:
    """Derivative of the long-time average of ``objective`` with respect to
    ``params`` by non-intrusive least-squares shadowing (NILSS).

    Args:
        rhs: vector field ``rhs(x (d,), params) -> (d,)``.
        state0: initial state ``(d,)``.
        params: pytree of floating-point parameters (the derivative is taken
            with respect to every leaf component).
        objective: ``objective(x (d,), params) -> ()``, the quantity averaged.
        dt: time step (model time units, > 0).
        n_segments: number of time segments ``K >= 1``; the window is
            ``K * segment_steps * dt`` long.
        segment_steps: steps per segment (>= 1); the tangents are
            renormalised at each segment's end. Segments of about one
            e-folding time of the leading exponent suit.
        n_unstable: number of unstable (positive-exponent) directions; None
            runs :func:`lyapax.lyapunov_spectrum` over the same window first
            and counts them (needs concrete ``params``: pass it under
            ``jax.vmap``/``jax.jit``).
        t_transient: time integrated before the window (discarded).
        integrator: ``"euler"``, ``"heun"``, ``"rk4"``, ``"rk6"`` or a
            builder ``(rhs, dt) -> step``.

    Returns:
        :class:`ShadowingResult`: ``average``, ``gradient`` and ``stderr``
        (pytrees like ``params``), the exponents and counts used.

    Raises:
        ValueError: ``n_segments`` or ``segment_steps`` < 1, a non-scalar
            objective, ``rhs`` not returning the state's shape, ``n_unstable``
            outside ``[0, d]``, ``dt`` not positive.
        TypeError: ``params`` that ``rhs`` cannot take, or non-float leaves;
            ``n_unstable=None`` under a JAX transformation.

    The flow direction (the neutral direction of an autonomous flow) is
    projected out of the tangents at each segment boundary and its removed
    component enters as a time dilation (Ni & Wang 2017, section 3.3); an
    orbit that settles on an equilibrium has no neutral direction and is left
    unprojected. ``n_segments``, ``segment_steps``, ``n_unstable``, the
    functions and the integrator are compiled in; new numbers (``params``,
    ``state0``, ``dt``, ``t_transient``) reuse the program. ``stderr`` is the
    batch-means error over the segments' shares
    of the gradient (the square-root rule of :mod:`lyapax._engine.stats`); it
    measures statistical scatter, not the ``O(1/T)`` bias of a finite window.
    """
    n_segments = validate.as_int("n_segments", n_segments, minimum=1)
    segment_steps = validate.as_int("segment_steps", segment_steps, minimum=1)
    state = validate.as_state("state0", state0)
    dt = validate.as_dt(dt)
    if isinstance(integrator, str):
        get_integrator(integrator)  # the name is checked now, not when traced
    flat, unravel = _flat_params(params)
    _check_functions(rhs, objective, state, unravel(flat))
    t_transient = _transient_time(t_transient)
    d = state.shape[0]
    spectrum = None
    if n_unstable is None:
        if validate.under_transformation(flat, state, dt):
            raise TypeError(
                "n_unstable=None runs a Lyapunov spectrum first and counts its "
                "positive exponents, which needs concrete values; inside "
                "jax.jit/jax.vmap/jax.grad pass n_unstable=<int>"
            )
        n_unstable, spectrum = _unstable_from_spectrum(
            rhs,
            state,
            unravel(flat),
            dt,
            n_segments,
            segment_steps,
            t_transient,
            integrator,
        )
    m = validate.as_int("n_unstable", n_unstable, minimum=0)
    if m > d:
        raise ValueError(f"n_unstable must be at most the state dimension {d}; got {m}")
    n_transient = jnp.round(jnp.asarray(t_transient) / dt).astype(jnp.int32)
    average, grad, err, exponents, neutral = _run(
        state,
        unravel(flat),
        dt,
        n_transient,
        rhs=rhs,
        objective=objective,
        integrator=integrator,
        m=m,
        n_segments=n_segments,
        segment_steps=segment_steps,
    )
    return ShadowingResult(
        average=average,
        gradient=unravel(grad),
        stderr=unravel(err),
        exponents=exponents,
        spectrum=spectrum,
        flow_direction=neutral,
        n_unstable=m,
        n_segments=n_segments,
        segment_time=float(segment_steps * dt)
        if not validate.is_traced(dt)
        else math.nan,
    )


def _transient_time(t_transient: Any) -> Any:
    """A finite ``t_transient >= 0`` (a traced value passes unchecked)."""
    if validate.is_traced(t_transient):
        return t_transient
    if isinstance(t_transient, bool | str | bytes) or t_transient is None:
        raise TypeError(f"t_transient must be a finite time >= 0; got {t_transient!r}")
    value = float(t_transient)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"t_transient must be a finite time >= 0; got {value!r}")
    return value


def _unstable_from_spectrum(
    rhs: Callable[..., Any],
    state: jax.Array,
    params: Any,
    dt: Any,
    n_segments: int,
    segment_steps: int,
    t_transient: Any,
    integrator: Any,
) -> tuple[int, jax.Array]:
    """``n_unstable`` from a full spectrum over the run's window."""
    # ODEProblem is an AbstractProblem at run time; its declared base is not
    # visible to mypy through the engine's re-export.
    problem: Any = ode_problem(lambda x: rhs(x, params), state, dt, integrator)
    res = lyapunov_spectrum(
        problem,
        n_steps=n_segments * segment_steps,
        renorm_every=segment_steps,
        t_transient=float(t_transient),
    )
    spectrum = np.asarray(res.exponents)
    # An orbit on an equilibrium has only negative exponents; otherwise the
    # exponent nearest zero is the flow direction's, whatever its sign.
    neutral = bool(np.max(spectrum) > 0)
    return _count_unstable(spectrum, neutral), res.exponents
