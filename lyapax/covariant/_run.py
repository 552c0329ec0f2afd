"""``covariant_vectors``: Ginelli's method on any problem the engine runs."""

from __future__ import annotations

import logging
import math
from functools import partial
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from lyapax._engine import run, validate
from lyapax._engine.abstract import AbstractProblem
from lyapax._engine.benettin import capacity, fresh_frame
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.options import RunOptions
from lyapax._engine.precision import as_run_time_values
from lyapax._engine.problem import resolve_step_call
from lyapax._engine.progress import Bar, TextSink
from lyapax._engine.shapes import Scalar, Seed, StateLike, StepFn
from lyapax._engine.stats import batch_means_stderr
from lyapax._engine.tree import split_static
from lyapax.covariant import _memory as memory
from lyapax.covariant._kernels import (
    backward_pass,
    combine,
    combine_rows,
    forward_segment,
    place_rows,
)

__all__ = ["CovariantResult", "covariant_vectors"]

log = logging.getLogger("lyapax")


class CovariantResult(NamedTuple):
    """Covariant Lyapunov vectors of a run.

    ``exponents (k,)`` descending (1/time units), those ``lyapunov_spectrum``
    gives for the same forward run, and ``stderr (k,)`` (batch means, same
    order); ``times (n_saved,)`` elapsed time of each saved vector since the
    transient; ``states (n_saved, d)`` the phase point there (flat as the
    problem's tangent space: networks ``(n_sv, n)`` row-major, delay
    equations with their history buffer); ``vectors (n_saved, d, k)`` unit
    covariant vectors at ``states[i]``, columns ordered like ``exponents``,
    each with a positive component along the Gram-Schmidt vector of its
    index; ``local_growth (n_saved, k)`` each vector's finite-time growth rate
    over the saving interval that ends at ``times[i]``; ``storage`` the mode
    that ran; ``t_backward`` the backward transient run (whole blocks);
    ``steps (n_saved,)`` the step counter at each saved state, transient
    included (a delay equation's ring-buffer slot ``steps[i] % horizon``
    holds the present value, slot ``(steps[i] - j) % horizon`` the value
    ``j`` steps back).

    Rows are NumPy arrays (JAX arrays inside a caller's ``jit``/``vmap``).
    Vectors of degenerate exponents are defined only as a subspace: compare
    them with :func:`~lyapax.covariant.subspace_angles`.
    """

    exponents: Float[Array, " k"]
    times: Any
    states: Any
    vectors: Any
    local_growth: Any
    stderr: Any
    storage: str
    t_backward: float
    steps: Any = None


class _Plan(NamedTuple):
    d: int
    k: int
    n_blocks: int
    n_transient: int
    every: int
    s: int
    n_backward: int
    n_saved: int
    dt: float

    @property
    def n_kept(self) -> int:
        """Blocks up to the last saved vector."""
        return self.n_saved * self.s


@holds_one_blas_thread
def covariant_vectors(
    step_fn_or_problem: AbstractProblem | StepFn,
    state0: StateLike | int | None = None,
    dt: Scalar | None = None,
    n_steps: int | None = None,
    k: int | None = None,
    renorm_every: int = 1,
    t_transient: float = 0.0,
    seed: Seed = 0,
    t_backward: float | None = None,
    save_every: int | None = None,
    storage: str = "auto",
    qr: str = "auto",
    *,
    progress: bool | TextSink = False,
) -> CovariantResult:
    """Covariant Lyapunov vectors by Ginelli's method.

    Call forms and run arguments as :func:`lyapax.lyapunov_spectrum`: a problem
    of any kind (ODE or map, network, delay equation) and ``n_steps``, or
    ``step_fn, state0, dt, n_steps``. The forward pass is a Benettin run of
    ``n_steps`` steps after ``t_transient`` (QR every ``renorm_every`` steps,
    ``diag R > 0``); the backward pass iterates ``C_{n-1} = R_n^{-1} C_n``
    from the end of the window, and ``V = Q C``.

    Args:
        n_steps: steps of the window (forward pass), a multiple of
            ``renorm_every``; the vectors cover its first ``n_steps * dt -
            t_backward`` time units.
        k: number of vectors and exponents, ``1 <= k <= d`` (default: the
            present state's size, as ``lyapunov_spectrum``).
        t_backward: model time of the backward transient at the end of the
            window, in whole blocks (rounded up), ``0 <= t_backward < n_steps
            * dt``. Default: ``t_transient`` when given (backward vectors
            converge at the rates of the exponent gaps, as the forward frame
            does), else a quarter of the window; at most half the window.
        save_every: steps between saved vectors, a multiple of
            ``renorm_every`` (default ``renorm_every``).
        storage: where the forward pass keeps its frames: ``"device"``,
            ``"host"``, ``"recompute"`` (checkpoints only; segments replayed
            in the backward pass) or ``"auto"`` (``"device"`` while the
            predicted bytes are below half the free device memory, else
            ``"host"``; ``result.storage`` says which). The vectors agree to
            rounding whatever the mode.
        qr: as for ``lyapunov_spectrum``.
        progress: True for a progress bar (tqdm) on stderr, or a text file to
            draw it in, moved after each forward segment (ignored, with a
            warning, under ``jax.jit``/``vmap``/``grad``).

    Returns:
        :class:`CovariantResult`.

    Raises:
        TypeError / ValueError: bad arguments, naming each and its value.
        MemoryError: before running, when the request cannot fit in the
            chosen mode (``"auto"``: in any mode), with the bytes it needs.
    """
    problem, n_steps = resolve_step_call(
        "covariant_vectors", step_fn_or_problem, state0, dt, n_steps
    )
    if not isinstance(storage, str) or storage not in memory.STORAGE_MODES:
        raise ValueError(
            f"storage must be one of {memory.STORAGE_MODES}; got storage={storage!r}"
        )
    view = problem.for_engine()
    z0 = view.z0
    d = int(z0.shape[0])
    options = RunOptions.of(
        k=k,
        renorm_every=renorm_every,
        t_transient=t_transient,
        seed=seed,
        qr=qr,
        progress=progress,
    )
    args, method = run.setup_run(options, view, n_steps=n_steps, batched=False)
    plan = _plan(args, d, view.dt, t_backward, save_every)
    Y0, _ = fresh_frame(seed, d=d, k=plan.k, dtype=z0.dtype)
    dynamic, static = split_static(view.step)
    if validate.under_transformation(dynamic, z0, Y0, view.dt):
        if options.progress is not None:
            run.warn_traced_progress("covariant_vectors")
        return _traced(dynamic, static, z0, Y0, plan, method)
    seg = memory.segments(d, plan.k, plan.n_saved, z0.dtype.itemsize)
    need = memory.footprints(
        d=d,
        k=plan.k,
        n_blocks=plan.n_blocks,
        n_saved=plan.n_saved,
        seg=seg,
        itemsize=z0.dtype.itemsize,
    )
    mode = memory.choose_storage(storage, need, memory.available_bytes())
    if storage == "auto":
        log.info(
            "covariant_vectors: storage='auto' chose %r (predicted %d device "
            "bytes, %d host bytes)",
            mode,
            need[mode].device,
            need[mode].host,
        )
    kernel = partial(
        forward_segment,
        dynamic,
        static=static,
        blocks_cap=seg.blocks_cap,
        saves_cap=seg.saves_cap,
        qr=method,
    )
    total = (plan.n_transient + plan.n_blocks) * plan.every
    with Bar(options.progress, total, "covariant_vectors", "step") as bar:
        return _run(kernel, z0, Y0, plan, seg, mode, bar)


def _plan(args: run.RunArgs, d: int, dt: Any, t_backward: Any, save_every: Any):
    """Blocks of the window, of the backward transient and between saves."""
    every = args.renorm_every
    if save_every is None:
        save_every = every
    save_every = validate.as_int("save_every", save_every, minimum=1)
    if save_every % every:
        raise ValueError(
            f"save_every={save_every} must be a multiple of renorm_every={every}"
        )
    dt_value = validate.concrete_float("dt", dt, why="for covariant_vectors")
    block_time = dt_value * every
    window = args.n_blocks * block_time
    if t_backward is None:
        t_backward = min(args.t_transient or window / 4, window / 2)
    if validate.is_traced(t_backward):
        raise TypeError("t_backward must be a concrete number, not a traced value")
    t_backward = float(t_backward)
    if not np.isfinite(t_backward) or not 0 <= t_backward < window:
        raise ValueError(
            f"t_backward must satisfy 0 <= t_backward < n_steps * dt = {window!r} "
            f"(the window); got t_backward={t_backward!r}"
        )
    n_backward = math.ceil(t_backward / block_time - 1e-9)
    s = save_every // every
    n_saved = (args.n_blocks - n_backward) // s
    if n_saved < 1:
        raise ValueError(
            f"no vector to save: the window of {args.n_blocks} blocks less "
            f"t_backward={t_backward!r} ({n_backward} blocks) is shorter than "
            f"save_every={save_every} steps; lengthen n_steps or shorten "
            "t_backward or save_every"
        )
    return _Plan(
        d,
        args.k,
        args.n_blocks,
        args.n_transient_blocks,
        every,
        s,
        n_backward,
        n_saved,
        dt_value,
    )


def _lengths(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


def _chunks(n: int, size: int):
    for start in range(0, n, size):
        yield min(size, n - start)


def _run(kernel, z0, Y0, plan: _Plan, seg: memory.Segments, mode: str, bar: Bar):
    """The forward pass in segments, the backward pass, then ``V = Q C``;
    ``bar`` moves after each forward segment.

    The ``R`` factors stay on the device (each segment's copied into one
    buffer for the window); only ``log diag R``, the growth rates and the vectors
    come to the host (and, in ``"host"`` mode, the frames and ``C``)."""
    k, s, every = plan.k, plan.s, plan.every
    carry = (z0, Y0, np.int32(0))
    R = jnp.zeros((capacity(plan.n_blocks), k, k), z0.dtype)
    done = [0]

    def advance(carry, call, forward=True):
        m, s_call, tail = call
        out = kernel(*carry, _lengths(m, s_call, tail, every))
        if forward:
            done[0] += (m * s_call + tail) * every
            bar.done(done[0], out["state"])
        return (out["state"], out["Y"], out["step"]), out

    def place(R, out, row, n):
        return place_rows(R, out["R"], np.int32(row), np.int32(n))

    for n in _chunks(plan.n_transient, seg.blocks_cap):
        carry, _ = advance(carry, (0, 1, n))
    row = 0
    kept: list[
        tuple[int, int, Any]
    ] = []  # per segment: (first saved index, count, what the mode keeps)
    vectors = np.empty((plan.n_saved, plan.d, k), z0.dtype)
    states = np.empty((plan.n_saved, plan.d), z0.dtype)
    for i0, p, calls in memory.saved_calls(plan.n_saved, s, seg):
        start = carry
        for m, s_call, tail in calls:
            carry, out = advance(carry, (m, s_call, tail))
            n = m * s_call + tail
            R = place(R, out, row, n)
            row += n
        if mode == "device":
            kept.append((i0, p, (out["Q"], out["X"])))
        elif mode == "host":
            vectors[i0 : i0 + p] = np.asarray(out["Q"])[:p]
            states[i0 : i0 + p] = np.asarray(out["X"])[:p]
            kept.append((i0, p, None))
        else:
            kept.append((i0, p, (start, calls)))
        del out
    for n in _chunks(plan.n_blocks - plan.n_kept, seg.blocks_cap):
        carry, out = advance(carry, (0, 1, n))
        R = place(R, out, row, n)
        row += n
        del out
    back = backward_pass(
        R,
        _lengths(plan.n_blocks, s, plan.n_saved),
        saves_cap=capacity(plan.n_saved),
    )
    est = _estimates(np.asarray(back["logs"])[: plan.n_blocks], plan)
    order = est["order"]
    growth = np.asarray(back["growth"])[: plan.n_blocks][:, order]
    C = back["C"]
    if mode == "host":
        C = np.asarray(C)[: plan.n_saved][:, :, order]
    while kept:
        i0, p, payload = kept.pop()
        rows = slice(i0, i0 + p)
        if mode == "host":
            vectors[rows] = np.matmul(vectors[rows], C[rows])
            continue
        if mode == "recompute":
            replay, calls = payload
            for call in calls:
                replay, out = advance(replay, call, forward=False)
            payload = (out["Q"], out["X"])
            del out, replay
        Q, X = payload
        vectors[rows] = np.asarray(combine_rows(Q, C, np.int32(i0), order))[:p]
        states[rows] = np.asarray(X)[:p]
        del Q, X, payload
    return CovariantResult(
        est["exponents"],
        plan.dt * every * s * np.arange(1, plan.n_saved + 1, dtype=z0.dtype),
        states,
        vectors,
        _local_growth(growth, plan),
        est["stderr"],
        mode,
        plan.n_backward * plan.dt * every,
        _steps(plan),
    )


def _steps(plan: _Plan) -> np.ndarray:
    """Step counter at each saved state (NumPy int64)."""
    saved = plan.n_transient + plan.s * np.arange(1, plan.n_saved + 1)
    return saved * plan.every


def _estimates(logs: np.ndarray, plan: _Plan) -> dict[str, Any]:
    """Exponents as the spectrum engine forms them: the sequential sum of
    the blocks' ``log diag R`` ``(n_blocks, k)`` over the window divided by
    the elapsed time."""
    block_time = plan.dt * plan.every
    elapsed = block_time * plan.n_blocks
    rates = np.cumsum(logs, axis=0)[-1] / elapsed
    order = np.argsort(-rates, kind="stable")
    stderr = batch_means_stderr(logs, block_time, elapsed)
    return {
        "exponents": jnp.asarray(rates[order]),
        "stderr": jnp.asarray(stderr[order]),
        "order": order,
    }


def _local_growth(growth: Any, plan: _Plan) -> Any:
    """Growth rate of each vector over each saving interval ``(n_saved, k)``."""
    xp = np if isinstance(growth, np.ndarray) else jnp
    n, s = plan.n_kept, plan.s
    per_save = growth[:n].reshape(plan.n_saved, s, plan.k).sum(axis=1)
    return per_save / xp.asarray(plan.dt * plan.every * s, growth.dtype)


def _traced(dynamic, static, z0, Y0, plan: _Plan, qr: str) -> CovariantResult:
    """The whole computation inside a caller's trace (``jit``/``vmap``): one
    forward segment for the transient, one for the window (buffers of the
    exact sizes), the backward pass and ``V = Q C`` on the device."""
    s, every = plan.s, plan.every
    dynamic, z0, Y0 = as_run_time_values((dynamic, z0, Y0))
    fwd = partial(forward_segment, dynamic, static=static, qr=qr)
    state, Y, step = z0, Y0, jnp.int32(0)
    if plan.n_transient:
        out = fwd(
            state,
            Y,
            step,
            _lengths(0, 1, plan.n_transient, every),
            blocks_cap=plan.n_transient,
            saves_cap=0,
        )
        state, Y, step = out["state"], out["Y"], out["step"]
    tail = plan.n_blocks - plan.n_kept
    out = fwd(
        state,
        Y,
        step,
        _lengths(plan.n_saved, s, tail, every),
        blocks_cap=plan.n_blocks,
        saves_cap=plan.n_saved,
    )
    back = backward_pass(
        out["R"], _lengths(plan.n_blocks, s, plan.n_saved), saves_cap=plan.n_saved
    )
    logs = back["logs"]
    block_time = plan.dt * every
    elapsed = block_time * plan.n_blocks
    rates = jnp.cumsum(logs, axis=0)[-1] / elapsed
    order = jnp.argsort(-rates)
    C = back["C"][: plan.n_saved][:, :, order]
    growth = back["growth"][:, order]
    return CovariantResult(
        rates[order],
        block_time * s * jnp.arange(1, plan.n_saved + 1, dtype=z0.dtype),
        out["X"][: plan.n_saved],
        combine(out["Q"][: plan.n_saved], C),
        _local_growth(growth, plan),
        batch_means_stderr(logs, block_time, elapsed)[order],
        "device",
        plan.n_backward * block_time,
        _steps(plan),
    )
