"""Expansion entropy (Hunt & Ott 2015, "Defining chaos", Chaos 25, 097618).

For a map or flow ``F`` and a restraining region ``S``, ``E_T = (1/N) sum_x
G(DF^T(x))`` over sample points ``x`` of ``S`` whose orbit stays in ``S`` up
to time ``T`` (points that leave count 0), where ``G(A)`` is the product of
the singular values of ``A`` larger than 1 (the volume growth of the most
expanding directions). The expansion entropy is ``H_0 = lim ln E_T / T``; it
equals the topological entropy for the maps where both are known (ln 2 for
the tent map and the logistic map at r = 4). ``H_0 > 0`` means chaos in
``S``.

The Jacobian ``DF^T`` of each sample point is the frame of ``d`` tangent
vectors pushed through the step's tangent map
(:meth:`~lyapax._engine.abstract.AbstractStep.tangent`, ``jax.jvp`` batched
by ``jax.vmap``: the same tangents as the spectrum), not re-orthonormalised,
so ``ln G`` is computed from its singular values at every step; keep ``T``
short enough that the largest singular value stays in floating-point range
(``lambda_1 T < 700`` in float64). Sample points come in ``n_batches``
independent batches: ``ln E_T`` is computed per batch, the entropy is the
mean over batches of the slope of a least-squares line through ``ln E_T``
against ``T``, and its spread is their standard deviation.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from lyapax._engine import validate
from lyapax._engine.abstract import AbstractProblem
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.precision import growth_log
from lyapax._engine.shapes import Scalar, StepFn
from lyapax._internal.rows import ProblemFamily, resolve, row_view, run_rows

__all__ = ["ExpansionEntropy", "expansion_entropy"]


class ExpansionEntropy(NamedTuple):
    """Expansion entropy estimate.

    ``entropy``: mean over batches of the slope of ``ln E_T`` vs ``T`` over
    the fit window (1/time units); ``spread``: standard deviation of the
    batches' slopes (``ddof=1``); ``stderr``: ``spread / sqrt(n_batches)``;
    ``slopes (n_batches,)``; ``log_expansion (n_batches, n_steps)``: ``ln
    E_T`` per batch at ``times (n_steps,)`` (``-inf`` when every point of a
    batch left the region); ``fraction_inside (n_batches, n_steps)``: the
    share of sample points still inside; ``fit``: the ``(t_first, t_last)``
    window of the fit.
    """

    entropy: float
    spread: float
    stderr: float
    slopes: Float[np.ndarray, " n_batches"]
    log_expansion: Float[np.ndarray, "n_batches n_steps"]
    fraction_inside: Float[np.ndarray, "n_batches n_steps"]
    times: Float[np.ndarray, " n_steps"]
    fit: tuple[float, float]


@holds_one_blas_thread
def expansion_entropy(
    step_fn_or_problem: AbstractProblem | StepFn | ProblemFamily,
    points: Float[ArrayLike, "n_batches n_points d"],
    dt: Scalar | None = None,
    n_steps: int | None = None,
    *,
    inside: Any = None,
    fit_from: int = 1,
    batch_size: int | None = None,
    devices: Any = None,
) -> ExpansionEntropy:
    """Expansion entropy of a map or flow from batches of sample points.

    Args:
        step_fn_or_problem: ``step_fn(state (d,)) -> (d,)`` (with ``dt``;
            maps: ``dt=1.0``) or a problem (its ``state0`` is replaced by the
            sample points).
        points: ``(n_batches, n_points, d)`` sample points of the region,
            drawn from the reference measure (e.g. uniform); ``n_batches >= 2``
            for a spread.
        n_steps: ``T`` in steps; ``ln E_T`` is recorded after every step.
        inside: ``inside(state (d,)) -> bool``, the restraining region ``S``
            (traceable JAX code); None: everywhere (orbits only have to stay
            finite). A point counts for ``T`` only if its orbit stayed inside
            at every step up to ``T``.
        fit_from: first step of the fitted window (the window runs to
            ``n_steps``; at least two steps).
        batch_size, devices: chunks of sample points per program and the
            devices they are split over, as in the sweeps.

    Returns:
        :class:`ExpansionEntropy`.

    Raises:
        ValueError: ``points`` not ``(n_batches, n_points, d)`` or not finite,
            a fit window of fewer than two steps, ``n_steps`` < 2, a driven
            problem whose inputs are shorter than ``n_steps``.
        TypeError: ``inside`` not callable, or not returning a boolean scalar.
    """
    arr = np.asarray(points)
    if arr.ndim != 3 or 0 in arr.shape:
        raise ValueError(
            "points must have shape (n_batches, n_points, d): batches of sample "
            f"points of the region; got shape {arr.shape}"
        )
    n_batches, n_points, d = arr.shape
    if not np.issubdtype(arr.dtype, np.number) or not np.isfinite(arr).all():
        raise ValueError("points must be finite numbers; they hold nan or inf")
    n_steps = validate.as_int("n_steps", n_steps, minimum=2)
    fit_from = validate.as_int("fit_from", fit_from, minimum=1)
    if fit_from > n_steps - 1:
        raise ValueError(
            f"fit_from={fit_from} leaves fewer than two steps to fit before "
            f"n_steps={n_steps}; pass fit_from <= {n_steps - 1}"
        )
    if inside is not None and not callable(inside):
        raise TypeError(
            f"inside must be a function state -> bool; got {type(inside).__name__}"
        )
    rows = resolve(
        "expansion_entropy",
        step_fn_or_problem,
        None,
        dt,
        None,
        arr.reshape(-1, d),
        0,
        (batch_size, devices, True),
    )
    rows.check_length(n_steps)
    if inside is not None:
        out = jax.eval_shape(inside, jax.ShapeDtypeStruct((d,), rows.dtype))
        if getattr(out, "shape", None) != () or out.dtype != jnp.bool_:
            raise TypeError(
                "inside(state) must return a boolean scalar; it returned "
                f"shape {getattr(out, 'shape', None)} and dtype "
                f"{getattr(out, 'dtype', None)}"
            )
    log_g, kept = run_rows(
        rows,
        _kernel,
        (np.int32(n_steps),),
        inside=inside,
        capacity=record_capacity(n_steps),
    )
    log_g = np.asarray(log_g)[:, :n_steps].reshape(n_batches, n_points, n_steps)
    kept = np.asarray(kept)[:, :n_steps].reshape(n_batches, n_points, n_steps)
    log_e = _log_mean_exp(np.where(kept, log_g, -np.inf), n_points)
    dt_value = float(np.asarray(rows.dt))
    times = dt_value * np.arange(1, n_steps + 1)
    window = slice(fit_from - 1, n_steps)
    slopes = np.polyfit(times[window], log_e[:, window].T, 1)[0]
    spread = float(np.std(slopes, ddof=1)) if n_batches > 1 else float("nan")
    return ExpansionEntropy(
        float(np.mean(slopes)),
        spread,
        spread / np.sqrt(n_batches),
        slopes,
        log_e,
        kept.mean(axis=1),
        times,
        (float(times[window][0]), float(times[-1])),
    )


def _log_mean_exp(x: np.ndarray, n: int) -> np.ndarray:
    """``ln(sum_i exp(x_i) / n)`` over axis 1, without overflow; ``-inf``
    where every ``x_i`` is ``-inf`` (no point left inside)."""
    top = np.max(x, axis=1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        total = np.log(np.sum(np.exp(x - safe), axis=1))
    return total + safe[:, 0] - np.log(n)


def log_expanding_volume(Y: jax.Array) -> jax.Array:
    """``ln G(Y)``: the sum of ``ln sigma_i`` over singular values > 1."""
    sigma = jnp.linalg.svd(Y, compute_uv=False)
    return jnp.sum(growth_log(jnp.maximum(sigma, 1.0)))


def record_capacity(n_steps: int) -> int:
    """Columns compiled for ``n_steps`` records: the next power of two, so
    runs of nearby lengths share one program."""
    return 1 << (n_steps - 1).bit_length()


@partial(jax.jit, static_argnames=("static", "inside", "capacity"))
def _kernel(dynamic, params, states, seeds, dt, n_steps, *, static, inside, capacity):
    """``(ln G (n, capacity), inside so far (n, capacity))`` per sample point;
    the first ``n_steps`` (data) columns are recorded."""
    del seeds  # the frame is the identity: no random start

    def one(p, x0):
        view = row_view(dynamic, static, p, x0, dt)
        step, z0 = view.step, view.z0
        Y0 = jnp.eye(z0.shape[0], dtype=z0.dtype)

        def advance(i, c):
            z, Y, ok, log_gs, oks = c
            z, Y = step.tangent(z, Y, i)
            ok = ok & jnp.all(jnp.isfinite(z)) & jnp.all(jnp.isfinite(Y))
            if inside is not None:
                ok = ok & inside(z)
            log_g = jnp.where(ok, log_expanding_volume(jnp.where(ok, Y, 0.0)), 0.0)
            return z, Y, ok, log_gs.at[i].set(log_g), oks.at[i].set(ok)

        buffers = (jnp.zeros(capacity, z0.dtype), jnp.zeros(capacity, bool))
        start = (z0, Y0, jnp.array(True), *buffers)
        return jax.lax.fori_loop(0, n_steps, advance, start)[3:]

    return jax.vmap(one, in_axes=(0, 0))(params, states)
