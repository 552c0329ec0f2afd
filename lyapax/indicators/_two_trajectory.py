"""The largest Lyapunov exponent from two nearby trajectories (Benettin 1976).

A reference orbit ``z`` and a perturbed orbit ``w = z + d0 u`` (``u`` a random
unit vector from the seed) are iterated side by side with the user's step
only: no tangent, no derivative, so any step works, differentiable or not
(piecewise maps, event-driven models, a simulator called through
``jax.pure_callback``). Every ``check_every`` steps the distance ``d = |w -
z|`` is measured; when it leaves ``[d_lower, d_upper]``, ``ln(d / d0)`` is
added to the accumulated growth and ``w`` is pulled back to distance ``d0``
along ``w - z``. The accumulated log-growth at the end of each check block,
``L_j = sum of the rescalings + ln(d_j / d0)``, is the record the spectrum
keeps per renormalisation block, so the estimate ``L_n / T`` and its
batch-means standard error come from the spectrum's own code
(:func:`lyapax._engine.stats.running_stderr`). The transient runs both
orbits (with rescaling), so the separation points along the fastest-growing
direction when averaging starts.

Distances are Euclidean in the flat state (for delay equations, the state and
its history buffer): scale the coordinates first if they differ by orders of
magnitude. ``d0`` must stay far above the rounding of the state (``|x| *
2.2e-16``): the separation carries about ``d0 / (|x| eps)`` distinct values,
and an orbit pair that rounds onto one point gives a non-finite estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, Int, PyTree, Shaped

from lyapax._engine import validate
from lyapax._engine.abstract import AbstractProblem
from lyapax._engine.benettin import capacity
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.precision import growth_log, standard_normal
from lyapax._engine.run import transient_blocks
from lyapax._engine.shapes import Scalar, Seed, StateLike, StepFn
from lyapax._engine.stats import running_stderr
from lyapax._internal.rows import ProblemFamily, row_view, run_rows, unbatch
from lyapax.indicators._orbits import resolve_orbit_rows

__all__ = ["TwoTrajectoryOptions", "TwoTrajectoryResult", "two_trajectory_exponent"]

_WHY = "(an option of the indicator)"


class TwoTrajectoryOptions(NamedTuple):
    """Separation ``d0`` and the band ``[d_lower, d_upper]`` it may wander
    in before it is rescaled; ``check_every`` steps between checks (also the
    block of the standard error)."""

    d0: float
    d_lower: float
    d_upper: float
    check_every: int

    @classmethod
    def of(
        cls, d0: Any, d_lower: Any, d_upper: Any, check_every: Any
    ) -> TwoTrajectoryOptions:
        """Checked options; ``d_lower``/``d_upper`` default to ``d0 / 1e3``
        and ``d0 * 1e3``.

        Raises:
            ValueError: a non-positive value, or not ``d_lower <= d0 <= d_upper``.
        """
        d0 = validate.positive_float("d0", d0, why=_WHY)
        lower = (
            d0 * 1e-3
            if d_lower is None
            else validate.positive_float("d_lower", d_lower, why=_WHY)
        )
        upper = (
            d0 * 1e3
            if d_upper is None
            else validate.positive_float("d_upper", d_upper, why=_WHY)
        )
        if not lower <= d0 <= upper:
            raise ValueError(
                "need d_lower <= d0 <= d_upper; got "
                f"d_lower={lower!r}, d0={d0!r}, d_upper={upper!r}"
            )
        every = validate.as_int("check_every", check_every, minimum=1)
        return cls(d0, lower, upper, every)


class TwoTrajectoryResult(NamedTuple):
    """``exponent`` (1/time units) and its batch-means ``stderr``;
    ``history (n_blocks,)``: the running estimate after each check block, at
    ``times (n_blocks,)`` (model time since the transient); ``rescalings``:
    how many times the perturbed orbit was pulled back; ``state``: the
    reference orbit's final point ``(d,)``. A batch adds a leading axis to
    every field."""

    exponent: Float[np.ndarray, " *batch"]
    stderr: Float[np.ndarray, " *batch"]
    history: Float[np.ndarray, "*batch n_blocks"]
    times: Float[np.ndarray, "*batch n_blocks"]
    rescalings: Int[np.ndarray, " *batch"]
    state: Float[np.ndarray, "*batch d"]


@holds_one_blas_thread
def two_trajectory_exponent(
    step_fn_or_problem: AbstractProblem | StepFn | ProblemFamily,
    state0: StateLike | int | None = None,
    dt: Scalar | None = None,
    n_steps: int | None = None,
    *,
    d0: float = 1e-9,
    d_lower: float | None = None,
    d_upper: float | None = None,
    check_every: int = 1,
    t_transient: float = 0.0,
    seed: Seed = 0,
    params_batch: PyTree[Shaped[ArrayLike, "n ..."]] | None = None,
    state0_batch: Float[ArrayLike, "n d"] | Sequence[Any] | None = None,
    batch_size: int | None = None,
    devices: Any = None,
) -> TwoTrajectoryResult:
    """Largest Lyapunov exponent from a reference and a perturbed trajectory.

    Call forms: ``(problem, n_steps=...)`` or ``(step_fn, state0, dt,
    n_steps)`` (maps: ``dt=1.0``); ``step_fn(state, params)`` with
    ``params_batch``. The step is only called, never differentiated.

    Args:
        n_steps: measured steps, a multiple of ``check_every``.
        d0: initial and rescaled separation (state units).
        d_lower, d_upper: the band the separation may wander in (defaults
            ``d0 / 1e3`` and ``d0 * 1e3``, as ChaosTools' ``lyapunov``).
        check_every: steps between distance checks (>= 1).
        t_transient: model time both orbits run first (growth discarded).
        seed: seed of the initial perturbation's direction (one per row).
        params_batch, state0_batch: a batch of rows, one orbit pair each, in
            one vmapped program (``batch_size`` chunks it; ``devices`` as in
            the sweeps).

    Returns:
        :class:`TwoTrajectoryResult` (NumPy arrays).

    Raises:
        TypeError / ValueError: a missing or out-of-range argument, naming
            it; a driven problem whose inputs are shorter than the run.
    """
    options = TwoTrajectoryOptions.of(d0, d_lower, d_upper, check_every)
    rows, n_steps = resolve_orbit_rows("two_trajectory_exponent", locals())
    every = options.check_every
    if n_steps % every:
        raise ValueError(f"n_steps={n_steps} must be a multiple of check_every={every}")
    _, n_tr_blocks = transient_blocks(t_transient, rows.dt, every)
    n_blocks = n_steps // every
    rows.check_length(n_tr_blocks * every + n_steps)
    lengths = np.array([n_blocks, n_tr_blocks * every, every], np.int32)
    # In the state's dtype: float64 bounds made a float32 run's sums float64.
    bounds = np.array([options.d0, options.d_lower, options.d_upper], rows.dtype)
    raw = run_rows(rows, _kernel, (lengths, bounds), capacity=capacity(n_blocks))
    raw = raw._replace(
        history=np.asarray(raw.history)[:, :n_blocks],
        times=np.asarray(raw.times)[:, :n_blocks],
    )
    return unbatch(raw, rows)


def _separate(z, w, d0):
    """``(distance, w rescaled to distance d0 along w - z)``."""
    diff = w - z
    dist = jnp.sqrt(jnp.sum(diff * diff))
    return dist, z + diff * (d0 / dist)


@partial(jax.jit, static_argnames=("static", "capacity"))
def _kernel(dynamic, params, states, seeds, dt, lengths, bounds, *, static, capacity):
    """One orbit pair per row; ``lengths`` = ``[blocks, transient steps,
    check_every]``, ``bounds`` = ``[d0, d_lower, d_upper]`` (data)."""
    n_blocks, n_tr, every = lengths[0], lengths[1], lengths[2]
    d0, lower, upper = bounds[0], bounds[1], bounds[2]

    def one(p, x0, seed):
        view = row_view(dynamic, static, p, x0, dt)
        step, z0 = view.step, view.z0
        u = standard_normal(jax.random.PRNGKey(seed), z0.shape, z0.dtype)
        zero = jnp.zeros((), z0.dtype)

        def advance(_, c):
            z, w, log_rescaled, count, i = c
            return step.advance(z, i), step.advance(w, i), log_rescaled, count, i + 1

        def check(c):
            """Rescale when the distance left the band; the distance before."""
            z, w, log_rescaled, count, i = c
            dist, pulled = _separate(z, w, d0)
            out = (dist < lower) | (dist > upper)
            log_rescaled = log_rescaled + jnp.where(out, growth_log(dist / d0), 0.0)
            w = jnp.where(out, pulled, w)
            return (z, w, log_rescaled, count + out.astype(jnp.int32), i), dist, out

        def transient(_, c):
            return check(advance(0, c))[0]

        w0 = z0 + d0 * u / jnp.sqrt(jnp.sum(u * u))
        zero_i = jnp.zeros((), jnp.int32)
        carry = jax.lax.fori_loop(0, n_tr, transient, (z0, w0, zero, zero_i, zero_i))
        # Averaging starts from distance d0 exactly.
        z, w, _, count, i = carry
        carry = (z, _separate(z, w, d0)[1], zero, count, i)

        def block(j, loop):
            c, buf = loop
            c, dist, out = check(jax.lax.fori_loop(0, every, advance, c))
            # After a rescaling the separation is d0 again: ln(d0 / d0) = 0.
            total = c[2] + jnp.where(out, 0.0, growth_log(dist / d0))
            return c, buf.at[j, 0].set(total)

        buf = jnp.zeros((capacity, 1), z0.dtype)
        carry, buf = jax.lax.fori_loop(0, n_blocks, block, (carry, buf))
        block_time = dt * every
        elapsed = block_time * n_blocks
        times = block_time * jnp.arange(1, capacity + 1, dtype=z0.dtype)
        cum0 = jnp.zeros((1,), z0.dtype)
        stderr = running_stderr(buf, cum0, n_blocks, block_time, elapsed)
        return TwoTrajectoryResult(
            buf[n_blocks - 1, 0] / elapsed,
            stderr[0],
            buf[:, 0] / times,
            times,
            carry[3],
            carry[0],
        )

    return jax.vmap(one)(params, states, seeds)
