"""Run a Lyapunov computation until its error bars are small enough.

``run_until_converged`` advances a problem chunk by chunk with
``lyapunov_spectrum(..., resume=checkpoint)`` (each chunk continues the previous
one exactly, and after the first chunk every call reuses one compiled program)
and stops when every exponent's batch-means standard error is below ``tol`` or
the step budget is spent. It is an eager Python loop, not a traced function.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax
import numpy as np

from lyapax._engine import stats, validate
from lyapax._engine.problem import is_problem
from lyapax._engine.run import LyapunovResult, check_multiple
from lyapax.core import lyapunov_spectrum

__all__ = ["ConvergedRun", "ConvergenceProgress", "run_until_converged"]


@runtime_checkable
class TextSink(Protocol):
    """Where a progress bar goes: anything with ``write(str)`` and
    ``flush()`` (a text file, ``sys.stderr``, ``io.StringIO``)."""

    def write(self, text: str, /) -> Any: ...

    def flush(self) -> Any: ...


class ConvergenceProgress(NamedTuple):
    """What a progress callback receives after each chunk.

    ``n_steps`` measured so far of ``max_steps``; ``exponents (k,)`` and
    ``stderr (k,)`` (NumPy) after this chunk; ``tol``; ``chunk`` index from 0;
    ``wall_time`` seconds since the start.
    """

    n_steps: int
    max_steps: int
    exponents: np.ndarray
    stderr: np.ndarray
    tol: np.ndarray
    chunk: int
    wall_time: float


class ConvergedRun(NamedTuple):
    """Outcome of :func:`run_until_converged`.

    ``result``: a :class:`~lyapax.core.LyapunovResult` for the whole run (the
    chunks joined: ``history``/``times`` over every block, ``stderr`` pooled
    over every block, ``checkpoint`` to continue further); ``converged``: every
    ``stderr < tol``; ``reason``: ``"tol"``, ``"max_steps"`` or ``"callback"``;
    ``n_steps`` measured steps run; ``n_chunks`` calls made.
    """

    result: LyapunovResult
    converged: bool
    reason: str
    n_steps: int
    n_chunks: int


def run_until_converged(
    step_fn_or_problem: Any,
    state0: Any = None,
    dt: Any = None,
    *,
    tol: Any,
    max_steps: int,
    chunk_steps: int,
    k: int | None = None,
    renorm_every: int = 1,
    t_transient: float = 0.0,
    seed: int = 0,
    min_blocks: int = 100,
    callback: Callable[[ConvergenceProgress], Any] | None = None,
    progress: bool | TextSink = False,
    spectrum_fn: Callable[..., LyapunovResult] = lyapunov_spectrum,
) -> ConvergedRun:
    """Advance in chunks until every exponent's standard error is below ``tol``.

    Args:
        step_fn_or_problem, state0, dt: as in :func:`lyapax.lyapunov_spectrum`
            (a problem, or a step function with ``state0`` and ``dt``).
        tol: absolute tolerance on the standard error (1/time units), a number
            or one per exponent ``(k,)``.
        max_steps: budget of measured steps (the transient is extra).
        chunk_steps: steps per call, a multiple of ``renorm_every``; the last
            chunk is cut to the budget (rounded down to ``renorm_every``).
        k, renorm_every, t_transient, seed: as in ``lyapunov_spectrum``; the
            transient runs once, in the first chunk.
        min_blocks: renormalisation blocks required before convergence is
            declared, so that a short run's noisy error estimate cannot stop
            it (100 blocks = 10 batches under the square-root rule).
        callback: called with a :class:`ConvergenceProgress` after each chunk;
            returning True stops the run (reason ``"callback"``).
        progress: True for a text progress bar on stderr, or a file to write
            it to.
        spectrum_fn: the engine, ``lyapunov_spectrum`` by default; any function
            with its arguments and checkpoint/resume contract works.

    Returns:
        :class:`ConvergedRun`.

    Raises:
        ValueError: ``tol`` not positive, ``max_steps`` or ``chunk_steps`` < 1,
            ``chunk_steps`` not a multiple of ``renorm_every``, ``min_blocks``
            < 2; plus the engine's own argument errors.
    """
    tol_arr = np.asarray(tol, dtype=float)
    if tol_arr.ndim > 1 or not np.all(tol_arr > 0) or not np.all(np.isfinite(tol_arr)):
        raise ValueError(
            f"tol must be a positive number or a 1-D array of them; got {tol!r}"
        )
    max_steps = validate.as_int("max_steps", max_steps, minimum=1)
    chunk_steps = validate.as_int("chunk_steps", chunk_steps, minimum=1)
    renorm_every = validate.as_int("renorm_every", renorm_every, minimum=1)
    min_blocks = validate.as_int("min_blocks", min_blocks, minimum=2)
    check_multiple("chunk_steps", chunk_steps, renorm_every)
    if max_steps < renorm_every:
        raise ValueError(
            f"max_steps={max_steps} must be at least renorm_every={renorm_every}"
        )
    call = _caller(step_fn_or_problem, state0, dt, spectrum_fn)
    bar = _ProgressBar(progress)
    start = time.perf_counter()
    chunks: list[LyapunovResult] = []
    done, reason = 0, "max_steps"
    checkpoint = None
    while True:
        n = min(chunk_steps, (max_steps - done) // renorm_every * renorm_every)
        if n == 0:
            break
        first = checkpoint is None
        res = call(
            n_steps=n,
            k=k,
            renorm_every=renorm_every,
            t_transient=t_transient if first else 0.0,
            seed=seed,
            resume=checkpoint,
        )
        chunks.append(res)
        checkpoint = res.checkpoint
        done += n
        merged = _join(chunks, renorm_every)
        stderr = np.asarray(merged.stderr)
        info = ConvergenceProgress(
            done,
            max_steps,
            np.asarray(merged.exponents),
            stderr,
            np.broadcast_to(tol_arr, stderr.shape),
            len(chunks) - 1,
            time.perf_counter() - start,
        )
        bar.update(info)
        stop = callback is not None and callback(info) is True
        if merged.history.shape[0] >= min_blocks and bool(np.all(stderr < tol_arr)):
            reason = "tol"
            break
        if stop:
            reason = "callback"
            break
    bar.close()
    return ConvergedRun(merged, reason == "tol", reason, done, len(chunks))


def _caller(step_fn_or_problem, state0, dt, spectrum_fn):
    """``call(**kwargs)`` running one chunk, for either call form."""
    if is_problem(step_fn_or_problem):
        if state0 is not None:
            raise TypeError(
                "run_until_converged(problem, ...) takes no state0: the problem "
                "carries it (pass max_steps=/chunk_steps= by keyword)"
            )
        return lambda **kw: spectrum_fn(step_fn_or_problem, dt=dt, **kw)
    return lambda **kw: spectrum_fn(step_fn_or_problem, state0, dt, **kw)


def _host(res: LyapunovResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(history, times, cum)`` on the host, history columns in raw order."""
    cum = np.asarray(res.checkpoint.cum_log_growth)
    # The engine sorts columns by the final estimate cum / T, i.e. by cum.
    inverse = np.argsort(np.argsort(-cum, kind="stable"), kind="stable")
    return np.asarray(res.history)[:, inverse], np.asarray(res.times), cum


def _join(chunks: list[LyapunovResult], renorm_every: int) -> LyapunovResult:
    """One result for consecutive resumed chunks, as if run in one call.

    Works on host copies: the arrays grow every chunk, and eager device ops on
    new shapes would each compile a small program.
    """
    last = chunks[-1]
    if len(chunks) == 1:
        return last
    raws, growths, times = [], [], []
    cum_start = np.zeros_like(np.asarray(chunks[0].checkpoint.cum_log_growth))
    for res in chunks:
        raw, t, cum = _host(res)
        raws.append(raw)
        times.append(t)
        growths.append(stats.block_growths(raw, t, cum_start))
        cum_start = cum
    order = np.argsort(-cum_start, kind="stable")
    all_times = np.concatenate(times)
    block_time = float(last.checkpoint.dt) * renorm_every
    stderr = stats.batch_means_stderr(
        np.concatenate(growths), block_time, float(all_times[-1])
    )
    history = np.concatenate(raws)[:, order]
    # Rows stay NumPy, as in a single run's result; device_put, not
    # jnp.asarray, for stderr: the latter compiles a copy per new shape.
    return last._replace(
        history=history, times=all_times, stderr=jax.device_put(stderr[order])
    )


class _ProgressBar:
    """A one-line text bar, rewritten in place with carriage returns."""

    WIDTH = 24

    def __init__(self, progress: bool | TextSink) -> None:
        if progress is True:
            self.out: TextSink | None = sys.stderr
        elif progress is False or progress is None:
            self.out = None
        else:
            self.out = progress

    def update(self, info: ConvergenceProgress) -> None:
        if self.out is None:
            return
        frac = info.n_steps / info.max_steps
        filled = int(round(frac * self.WIDTH))
        worst = float(np.max(info.stderr / info.tol))
        self.out.write(
            f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {100 * frac:5.1f}% "
            f"{info.n_steps}/{info.max_steps} steps  "
            f"max stderr/tol {worst:.3g}  {info.wall_time:.1f}s"
        )
        self.out.flush()

    def close(self) -> None:
        if self.out is not None:
            self.out.write("\n")
            self.out.flush()
