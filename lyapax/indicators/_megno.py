"""MEGNO: the mean exponential growth factor of nearby orbits.

Cincotta & Simó (2000), "Simple tools to study global dynamics in
non-axisymmetric galactic potentials - I", A&AS 147, 205. For a deviation
vector ``δ(t)`` of an orbit,

    Y(t) = (2/t) ∫_0^t s (δ'/δ)(s) ds,      <Y>(t) = (1/t) ∫_0^t Y(s) ds.

``<Y>`` tends to 0 on a stable periodic orbit of an isochronous system (``δ``
stays bounded), to 2 on a quasi-periodic orbit (``δ`` grows linearly, by
shear), and grows like ``λ t / 2`` on a chaotic one (``λ`` the largest
Lyapunov exponent).

On a step map (a symplectic step, any step) the integrals become sums over
steps (Cincotta, Giordano & Simó 2003, Physica D 182, 151, the discrete form):
after step ``k`` of ``dt``, with ``r_k = |δ_k| / |δ_{k-1}|`` the growth of
one step of the tangent map (the deviation vector is renormalised to unit
length every step),

    Y_N = (2/N) sum_{k=1}^{N} k ln r_k,      <Y>_N = (1/N) sum_{m=1}^{N} Y_m.

``dt`` cancels from both; it enters only the exponent estimate. As REBOUND's
``sim.lyapunov()``, the slope of ``<Y>`` against time is fitted by least
squares over every step of the run (``cov(<Y>, t) / var(t)``, accumulated
online); REBOUND returns that slope itself, which tends to ``λ/2`` by the
relation above, and ``MEGNOResult.lyapunov`` is twice it, an estimate of
``λ`` in inverse model-time units. Verdict: an orbit is chaotic when its
final ``<Y>`` exceeds ``threshold`` (2.5 by default: above the regular
values 0 and 2 by a margin that their finite-time oscillations stay under)
or is not finite (an orbit that escaped or overflowed).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, PyTree, Shaped

from lyapax._engine import validate
from lyapax._engine.abstract import AbstractProblem
from lyapax._engine.benettin import capacity, initial_basis
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.precision import growth_log
from lyapax._engine.shapes import Scalar, Seed, StateLike, StepFn
from lyapax._internal.rows import ProblemFamily, row_view, run_rows, unbatch
from lyapax.indicators._orbits import record, resolve_orbit_rows

__all__ = ["MEGNO_MIN_STEPS", "MEGNOResult", "megno"]

#: Fewest steps a run may have: ``<Y>`` is an average over the run, and its
#: verdict and slope mean nothing over a handful of steps.
MEGNO_MIN_STEPS = 100


class MEGNOResult(NamedTuple):
    """MEGNO of one orbit (or a batch: a leading axis on every array).

    ``megno (n_saved,)``: ``Y`` every ``save_every`` steps, at ``times
    (n_saved,)``; ``mean_megno (n_saved,)``: ``<Y>`` at the same times (its
    last value is the run's MEGNO, REBOUND's ``sim.megno()``); ``lyapunov``:
    twice the least-squares slope of ``<Y>`` against time over every step
    (REBOUND's ``sim.lyapunov()`` times 2: an estimate of the largest
    exponent, 1/time); ``verdict``: ``"chaotic"`` or ``"regular"`` (see the
    module docstring); ``chaotic``: the same as booleans; ``threshold``: as
    asked.
    """

    megno: Float[np.ndarray, "*batch n_saved"]
    mean_megno: Float[np.ndarray, "*batch n_saved"]
    lyapunov: Float[np.ndarray, " *batch"]
    verdict: Any
    chaotic: Any
    times: Float[np.ndarray, " n_saved"]
    threshold: float


@holds_one_blas_thread
def megno(
    step_fn_or_problem: AbstractProblem | StepFn | ProblemFamily,
    state0: StateLike | int | None = None,
    dt: Scalar | None = None,
    n_steps: int | None = None,
    *,
    save_every: int | None = None,
    threshold: float = 2.5,
    seed: Seed = 0,
    params_batch: PyTree[Shaped[ArrayLike, "n ..."]] | None = None,
    state0_batch: Float[ArrayLike, "n d"] | Sequence[Any] | None = None,
    batch_size: int | None = None,
    devices: Any = None,
) -> MEGNOResult:
    """MEGNO ``Y``, ``<Y>``, the exponent from its slope and a verdict, for
    one orbit or a batch of orbits in one program.

    Call forms: ``(problem, n_steps)`` or ``(step_fn, state0, dt, n_steps)``
    (maps: ``dt=1.0``); ``step_fn(state, params)`` with ``params_batch``. A
    stability map is ``megno(problem, n, state0_batch=points,
    save_every=n)``: one row per initial condition, all rows in one vmapped
    program, chunked by ``batch_size`` and split over ``devices`` like the
    sweeps.

    Args:
        n_steps: steps of the run, at least :data:`MEGNO_MIN_STEPS`.
        save_every: steps between saved values of ``Y`` and ``<Y>`` (default
            ``max(1, n_steps // 1000)``; ``n_steps`` keeps only the last).
        threshold: final ``<Y>`` above it is ``"chaotic"`` (> 2).
        seed: seed of the random unit deviation vector (one per row).
        params_batch, state0_batch, batch_size, devices: the batch, as in
            :func:`lyapax.sweep.sweep_lyapunov_spectrum`.

    Returns:
        :class:`MEGNOResult` (NumPy arrays).

    Raises:
        TypeError / ValueError: a missing or out-of-range argument, naming
            it; ``n_steps`` < :data:`MEGNO_MIN_STEPS`; a driven problem
            whose inputs are shorter than ``n_steps``.
    """
    rows, n_steps = resolve_orbit_rows("megno", locals())
    if n_steps < MEGNO_MIN_STEPS:
        raise ValueError(
            f"n_steps={n_steps} is too short for MEGNO: <Y> is a time average "
            f"over the run; use n_steps >= {MEGNO_MIN_STEPS} (regular orbits "
            "settle near 0 or 2 only after many periods)"
        )
    rows.check_length(n_steps)
    every = max(1, n_steps // 1000) if save_every is None else save_every
    every = validate.as_int("save_every", every, minimum=1)
    if every > n_steps:
        raise ValueError(
            f"save_every must be <= n_steps={n_steps}; got save_every={every}"
        )
    threshold = validate.positive_float(
        "threshold", threshold, why="(an option of the indicator)"
    )
    if threshold <= 2:
        raise ValueError(
            "threshold must be > 2 (<Y> -> 2 on quasi-periodic orbits); got "
            f"threshold={threshold!r}"
        )
    n_saved = n_steps // every
    lengths = np.array([n_steps, every], np.int32)
    raw = run_rows(rows, _kernel, (lengths,), capacity=capacity(n_saved))
    dt_value = float(np.asarray(rows.dt))
    mean = np.asarray(raw.mean_megno)[:, :n_saved]
    final = mean[:, -1]
    chaotic = ~(final <= threshold)  # nan: an orbit that blew up
    fields = _Rows(
        megno=np.asarray(raw.megno)[:, :n_saved],
        mean_megno=mean,
        lyapunov=2.0 * np.asarray(raw.slope) / dt_value,
        verdict=np.where(chaotic, "chaotic", "regular"),
        chaotic=chaotic,
    )
    out = unbatch(fields, rows)
    if not rows.batched:
        out = out._replace(verdict=str(out.verdict), chaotic=bool(out.chaotic))
    times = dt_value * every * np.arange(1, n_saved + 1)
    return MEGNOResult(**out._asdict(), times=times, threshold=threshold)


class _Rows(NamedTuple):
    megno: Any
    mean_megno: Any
    lyapunov: Any
    verdict: Any
    chaotic: Any


class _Raw(NamedTuple):
    megno: Any
    mean_megno: Any
    slope: Any  # d<Y>/d(step), least squares over every step


class _Sums(NamedTuple):
    """Running sums after step ``k``: ``weighted`` = sum k ln r_k, ``y_sum``
    = sum Y_m; the online least-squares fit of ``<Y>`` against ``k``."""

    weighted: Any
    y_sum: Any
    mean_k: Any
    mean_y: Any
    cov: Any
    var: Any


def _update(s: _Sums, k: jax.Array, log_growth: jax.Array) -> tuple[_Sums, Any, Any]:
    """The sums after step ``k`` (a float) with ``ln r_k``; also ``Y_k`` and
    ``<Y>_k``."""
    weighted = s.weighted + k * log_growth
    y = 2.0 * weighted / k
    y_sum = s.y_sum + y
    mean_y_k = y_sum / k
    # Welford's update of the covariance of (k, <Y>_k) and variance of k.
    dk = k - s.mean_k
    mean_k = s.mean_k + dk / k
    mean_y = s.mean_y + (mean_y_k - s.mean_y) / k
    cov = s.cov + dk * (mean_y_k - mean_y)
    var = s.var + dk * (k - mean_k)
    return _Sums(weighted, y_sum, mean_k, mean_y, cov, var), y, mean_y_k


@partial(jax.jit, static_argnames=("static", "capacity"))
def _kernel(dynamic, params, states, seeds, dt, lengths, *, static, capacity):
    """One orbit and one unit deviation vector per row; ``lengths`` =
    ``[n_steps, save_every]`` (data: a new length compiles nothing)."""
    n_steps, every = lengths[0], lengths[1]

    def one(p, x0, seed):
        view = row_view(dynamic, static, p, x0, dt)
        step, z0 = view.step, view.z0
        dtype = z0.dtype
        w0 = initial_basis(seed, d=z0.shape[0], k=1, dtype=dtype)
        zero = jnp.zeros((), dtype)
        buf = jnp.zeros((capacity,), dtype)

        def body(i, c):
            z, w, sums, hist, mhist = c
            z, w = step.tangent(z, w, i)
            norm = jnp.sqrt(jnp.sum(w * w))
            w = w / norm
            k = (i + 1).astype(dtype)
            sums, y, mean_y = _update(sums, k, growth_log(norm))
            hist, mhist = record((hist, mhist), (y, mean_y), i + 1, every)
            return z, w, sums, hist, mhist

        sums0 = _Sums(*(zero,) * 6)
        c = jax.lax.fori_loop(0, n_steps, body, (z0, w0, sums0, buf, buf))
        sums = c[2]
        return _Raw(c[3], c[4], sums.cov / sums.var)

    return jax.vmap(one)(params, states, seeds)
