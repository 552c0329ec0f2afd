"""GALI_k and SALI: regular or chaotic, from how fast deviation vectors align.

Skokos, Bountis & Antonopoulos (2007), "Geometrical properties of local
dynamics in Hamiltonian systems: the Generalized Alignment Index (GALI)
method"; Skokos (2001) for SALI. ``k`` deviation vectors (an orthonormal
random frame from the seed) are pushed through the step's tangent map
(:meth:`~lyapax._engine.abstract.AbstractStep.tangent`: ``jax.jvp`` batched
by ``jax.vmap``) and normalised to unit length after every step. GALI_k is
the volume of the parallelepiped they span, the product of the singular
values of the ``(d, k)`` frame, computed as ``|prod diag R|`` of its QR
factor (for ``k = 2`` as ``|w1 - w2| |w1 + w2| / 2``, exact for unit
vectors down to rounding); SALI is ``min(|w1 - w2|, |w1 + w2|)`` of the
first two. On a chaotic orbit GALI_k decays like ``exp(-sum_i (lambda_1 -
lambda_i) t)`` (i = 2..k); on a regular one it stays bounded away from zero
or decays by a power law. The verdict is threshold based: an orbit is
chaotic when GALI_k falls below ``threshold`` within the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Bool, Float, Int, PyTree, Shaped

from lyapax._engine import validate
from lyapax._engine.abstract import AbstractProblem
from lyapax._engine.benettin import capacity, initial_basis, qr_factor
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.shapes import Scalar, Seed, StateLike, StepFn
from lyapax._internal.rows import ProblemFamily, row_view, run_rows, unbatch
from lyapax.indicators._orbits import record, resolve_orbit_rows

__all__ = ["GALIOptions", "GALIResult", "gali"]


class GALIOptions(NamedTuple):
    """``k`` deviation vectors; ``threshold`` of the chaotic verdict;
    ``record_every`` steps between recorded values (0: none recorded, and an
    orbit stops once it is classified chaotic)."""

    k: int
    threshold: float
    record_every: int

    @classmethod
    def of(cls, k: Any, threshold: Any, record_every: Any, d: int) -> GALIOptions:
        """Checked options for a phase space of size ``d``.

        Raises:
            ValueError: ``k`` outside ``2..d``, ``threshold`` outside (0, 1),
                ``record_every`` < 0.
        """
        k = validate.as_int("k", k)
        if not 2 <= k <= d:
            raise ValueError(
                f"k must satisfy 2 <= k <= d={d} (GALI_k needs at least two "
                f"deviation vectors, at most one per dimension); got k={k}"
            )
        threshold = validate.positive_float(
            "threshold", threshold, why="(an option of the indicator)"
        )
        if threshold >= 1:
            raise ValueError(
                "threshold must lie in (0, 1) (GALI_k <= 1); got "
                f"threshold={threshold!r}"
            )
        every = 0 if record_every is None else record_every
        every = validate.as_int("record_every", every, minimum=0)
        return cls(k, threshold, every)


class GALIResult(NamedTuple):
    """GALI_k of one orbit (or a batch: a leading axis on every array).

    ``gali``, ``sali``: the values at the end of the run (or when the orbit
    was classified chaotic, if nothing is recorded); ``chaotic``: GALI_k fell
    below ``threshold``; ``steps_to_threshold``: the step at which it did
    (-1: never); ``time_to_threshold``: the same in model time (nan: never);
    ``history (n_records,)`` / ``sali_history``: values every
    ``record_every`` steps at ``times (n_records,)`` (empty unless
    ``record_every`` was given); ``k``, ``threshold``: as asked.
    """

    gali: Float[np.ndarray, " *batch"]
    sali: Float[np.ndarray, " *batch"]
    chaotic: Bool[np.ndarray, " *batch"]
    steps_to_threshold: Int[np.ndarray, " *batch"]
    time_to_threshold: Float[np.ndarray, " *batch"]
    history: Float[np.ndarray, "*batch n_records"]
    sali_history: Float[np.ndarray, "*batch n_records"]
    times: Float[np.ndarray, " n_records"]
    k: int
    threshold: float


@holds_one_blas_thread
def gali(
    step_fn_or_problem: AbstractProblem | StepFn | ProblemFamily,
    state0: StateLike | int | None = None,
    dt: Scalar | None = None,
    n_steps: int | None = None,
    k: int = 2,
    *,
    threshold: float = 1e-12,
    record_every: int | None = None,
    seed: Seed = 0,
    params_batch: PyTree[Shaped[ArrayLike, "n ..."]] | None = None,
    state0_batch: Float[ArrayLike, "n d"] | Sequence[Any] | None = None,
    batch_size: int | None = None,
    devices: Any = None,
) -> GALIResult:
    """GALI_k and SALI of an orbit, or of a batch of orbits in one program.

    Call forms: ``(problem, n_steps=...)`` or ``(step_fn, state0, dt,
    n_steps)`` (maps: ``dt=1.0``); ``step_fn(state, params)`` with
    ``params_batch``. A GALI map of a phase-space region is
    ``gali(step_fn, None, 1.0, n, state0_batch=points)``.

    Args:
        n_steps: steps to run at most.
        k: deviation vectors, ``2 <= k <= d``.
        threshold: GALI_k below it classifies the orbit as chaotic (1e-12,
            ChaosTools' default).
        record_every: record GALI_k and SALI every that many steps (then
            every orbit runs all ``n_steps``); None records nothing and an
            orbit stops once it is classified (a batch runs until every orbit
            has stopped or ``n_steps``).
        seed: seed of the random orthonormal initial frame (one per row).
        params_batch, state0_batch, batch_size, devices: the batch, as in
            :func:`lyapax.sweep.sweep_lyapunov_spectrum`.

    Returns:
        :class:`GALIResult` (NumPy arrays).

    Raises:
        TypeError / ValueError: a missing or out-of-range argument, naming
            it; a driven problem whose inputs are shorter than the run.
    """
    rows, n_steps = resolve_orbit_rows("gali", locals())
    rows.check_length(n_steps)
    options = GALIOptions.of(k, threshold, record_every, rows.d)
    every = options.record_every
    n_records = n_steps // every if every else 0
    lengths = np.array([n_steps, every], np.int32)
    raw = run_rows(
        rows,
        _kernel,
        (lengths, options.threshold),
        k=options.k,
        capacity=capacity(n_records) if n_records else 0,
    )
    dt_value = float(np.asarray(rows.dt))
    steps = np.asarray(raw.steps_to_threshold)
    fields = {
        "gali": raw.gali,
        "sali": raw.sali,
        "chaotic": steps >= 0,
        "steps_to_threshold": steps,
        "time_to_threshold": np.where(steps >= 0, steps * dt_value, np.nan),
        "history": np.asarray(raw.history)[:, :n_records],
        "sali_history": np.asarray(raw.sali_history)[:, :n_records],
    }
    out = unbatch(_Rows(**fields), rows)
    times = dt_value * every * np.arange(1, n_records + 1)
    return GALIResult(
        **out._asdict(), times=times, k=options.k, threshold=options.threshold
    )


class _Rows(NamedTuple):
    gali: Any
    sali: Any
    chaotic: Any
    steps_to_threshold: Any
    time_to_threshold: Any
    history: Any
    sali_history: Any


def alignment(W: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(GALI_k, SALI)`` of unit columns ``W (d, k)``."""
    minus = jnp.linalg.norm(W[:, 0] - W[:, 1])
    plus = jnp.linalg.norm(W[:, 0] + W[:, 1])
    sali = jnp.minimum(minus, plus)
    if W.shape[1] == 2:
        return minus * plus / 2, sali
    R = qr_factor(W, "lapack")[1]
    return jnp.abs(jnp.prod(jnp.diagonal(R))), sali


def below(W: jax.Array, threshold: jax.Array) -> jax.Array:
    """GALI_k of unit columns ``W`` below ``threshold`` (for ``k = 2``
    without a square root: ``|w1 - w2|^2 |w1 + w2|^2 < 4 threshold^2``;
    this test runs every step)."""
    if W.shape[1] > 2:
        return alignment(W)[0] < threshold
    minus, plus = W[:, 0] - W[:, 1], W[:, 0] + W[:, 1]
    return jnp.sum(minus * minus) * jnp.sum(plus * plus) < 4 * threshold**2


class _Raw(NamedTuple):
    gali: Any
    sali: Any
    steps_to_threshold: Any
    history: Any
    sali_history: Any


@partial(jax.jit, static_argnames=("static", "k", "capacity"))
def _kernel(
    dynamic, params, states, seeds, dt, lengths, threshold, *, static, k, capacity
):
    """One orbit with ``k`` deviation vectors per row; ``lengths`` =
    ``[n_steps, record_every]`` (data)."""
    n_steps, every = lengths[0], lengths[1]
    stop_when_chaotic = every == 0

    def one(p, x0, seed):
        view = row_view(dynamic, static, p, x0, dt)
        step, z0 = view.step, view.z0
        W0 = initial_basis(seed, d=z0.shape[0], k=k, dtype=z0.dtype)
        buf = jnp.zeros((capacity,), z0.dtype)

        def running(c):
            i, crossed = c[0], c[3]
            return (i < n_steps) & ~(stop_when_chaotic & (crossed >= 0))

        def body(c):
            i, z, W, crossed, hist, shist = c
            z, W = step.tangent(z, W, i)
            W = W * jax.lax.rsqrt(jnp.sum(W * W, axis=0))
            i = i + 1
            crossed = jnp.where((crossed < 0) & below(W, threshold), i, crossed)
            if capacity:
                hist, shist = record((hist, shist), alignment(W), i, every)
            return i, z, W, crossed, hist, shist

        start = (jnp.zeros((), jnp.int32), z0, W0, jnp.full((), -1, jnp.int32))
        c = jax.lax.while_loop(running, body, (*start, buf, buf))
        # A stopped orbit keeps its frame: the values at its classification.
        g, s = alignment(c[2])
        return _Raw(g, s, c[3], c[4], c[5])

    return jax.vmap(one)(params, states, seeds)
