"""Run a Lyapunov computation until its error bars are small enough.

``run_until_converged`` advances a problem chunk by chunk with
``lyapunov_spectrum(..., resume=checkpoint)`` (each chunk continues the previous
one exactly, and after the first chunk every call reuses one compiled program)
and stops when every exponent's batch-means standard error is below ``tol`` or
the step budget is spent. It is an eager Python loop, not a traced function.

With ``checkpoint=PATH`` the run is saved to ``PATH`` (a NumPy ``.npz``
archive, written atomically: its format is
:mod:`lyapax._internal.converge_file`'s, see also the guide
docs/long_runs.md) after every chunk; the same call after a kill, a
pre-emption or a Ctrl-C continues from the last chunk saved and ends with
the numbers of an uninterrupted run. The run keeps a bounded summary of its
history (the accumulated log-growth at ``BINS`` bin edges, bins merging
pairwise as the run grows), so a save costs the same at any length; the
process holds a lock on ``PATH.lock`` for the call's lifetime (one owner per
checkpoint, :mod:`lyapax._internal.lock`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from lyapax.__version__ import __version__
from lyapax._engine import progress as _progress
from lyapax._engine import stats, validate
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.problem import as_problem, is_problem, plain_problem
from lyapax._engine.progress import TextSink
from lyapax._engine.run import LyapunovResult, check_multiple
from lyapax._engine.summary import column_order
from lyapax._internal.checkpoint import CheckpointError
from lyapax._internal.converge_file import RunFile, SavedRun
from lyapax._internal.lock import CheckpointLocked
from lyapax.core import lyapunov_spectrum

__all__ = [
    "CheckpointError",
    "CheckpointLocked",
    "ConvergedRun",
    "ConvergenceProgress",
    "run_until_converged",
]


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

    ``result``: a :class:`~lyapax.core.LyapunovResult` for the whole run
    (``exponents`` and ``checkpoint`` of the last chunk, which continue the
    whole run; ``stderr`` by batch means over every block, batches of whole
    bins of the bounded summary; ``history``/``times``: the last chunk's
    rows, or every row with ``history="all"``); ``converged``: every
    ``stderr < tol``; ``reason``: ``"tol"``, ``"max_steps"`` or ``"callback"``;
    ``n_steps`` measured steps run; ``n_chunks`` calls made.
    """

    result: LyapunovResult
    converged: bool
    reason: str
    n_steps: int
    n_chunks: int


@holds_one_blas_thread
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
    checkpoint: str | os.PathLike[str] | None = None,
    history: str = "last",
    lock_wait: float = 0.0,
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
        progress: True for a progress bar (tqdm) on stderr, or a text file to
            draw it in: steps done of ``max_steps``, the worst ``stderr /
            tol`` and the remaining time, after each chunk.
        checkpoint: a file path (``.npz``): the run is saved there after every
            chunk, atomically, and a call with a path that holds a checkpoint
            continues from it (a finished run returns at once). The file must
            come from the same problem, settings (``k``, ``renorm_every``,
            ``t_transient``, ``seed``, ``chunk_steps``) and lyapax version;
            ``tol``, ``max_steps`` and ``min_blocks`` may change between
            calls (e.g. to extend the budget). Its folder must exist. The
            file's size is bounded (engine state, a summary of ``BINS + 1``
            rows of ``k`` numbers, the last chunk's rows). The call holds a
            lock on ``PATH.lock``; in a multi-process job the path must hold
            ``{process}`` (each process its own file).
        history: ``"last"`` (the result's ``history``/``times`` are the last
            chunk's rows: memory and checkpoint bounded) or ``"all"`` (every
            row, in memory; with a checkpoint also on disk, one append-only
            segment file per chunk in ``PATH.history/``).
        lock_wait: seconds to wait when another process owns ``checkpoint``
            (``float("inf")``: until it ends); 0 refuses at once.
        spectrum_fn: the engine, ``lyapunov_spectrum`` by default; any function
            with its arguments and checkpoint/resume contract works.

    Returns:
        :class:`ConvergedRun`.

    Raises:
        ValueError: ``tol`` not positive, ``max_steps`` or ``chunk_steps`` < 1,
            ``chunk_steps`` not a multiple of ``renorm_every``, ``min_blocks``
            < 2, a ``checkpoint`` folder that does not exist, ``history`` not
            ``"last"``/``"all"``, ``lock_wait`` < 0; plus the engine's own
            argument errors.
        CheckpointLocked: (a ``CheckpointError``) another live process owns
            ``checkpoint``; the message names its process id, host and start.
        CheckpointError: (a ``ValueError``) the file at ``checkpoint`` is
            truncated, unreadable, of another problem, settings, format or
            lyapax version; the file is left unchanged (a file of format 1,
            the whole history, is read and continued in the bounded format).
        OSError: the checkpoint cannot be written (raised before any work
            when its folder is not writable; on a failed write, e.g. a full
            disk, the previous checkpoint is kept).
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
    if history not in HISTORY:
        raise ValueError(f"history must be one of {HISTORY}; got {history!r}")
    lock_wait = float(lock_wait)
    if not lock_wait >= 0:
        raise ValueError(f"lock_wait must be >= 0 seconds (or inf); got {lock_wait!r}")
    call = _caller(step_fn_or_problem, state0, dt, spectrum_fn)
    store = None
    if checkpoint is not None:
        settings = {
            "k": k,
            "renorm_every": renorm_every,
            "t_transient": float(t_transient),
            "seed": int(seed),
            "chunk_steps": chunk_steps,
        }
        problem = (
            as_problem(step_fn_or_problem)
            if is_problem(step_fn_or_problem)
            else plain_problem(step_fn_or_problem, state0, dt)
        )
        store = RunFile(
            _own_path(checkpoint),
            problem,
            k,
            settings,
            history,
            version=__version__,
            bins=BINS,
        )
    with contextlib.ExitStack() as owner:
        if store is None:
            state = _Chunks.fresh(history)
        else:
            owner.enter_context(store.owned(lock_wait))
            state = _Chunks.restored(store.load(), history, renorm_every)
        chunk = functools.partial(call, k=k, renorm_every=renorm_every, seed=seed)
        reason = _advance(
            state,
            chunk,
            store,
            t_transient=t_transient,
            max_steps=max_steps,
            chunk_steps=chunk_steps,
            renorm_every=renorm_every,
            min_blocks=min_blocks,
            tol_arr=tol_arr,
            callback=callback,
            progress=progress,
        )
    merged = state.result(renorm_every)
    assert merged is not None  # max_steps >= renorm_every: one chunk at least
    return ConvergedRun(merged, reason == "tol", reason, state.done, state.n_chunks)


def _own_path(checkpoint: Any) -> Path:
    """The checkpoint path of this process: in a multi-process job each process
    writes its own file, named by ``{process}`` in the path."""
    text = os.fspath(checkpoint)
    if jax.process_count() > 1:
        if "{process}" not in str(text):
            raise ValueError(
                f"checkpoint={str(text)!r}: in a multi-process job every process "
                "writes its own checkpoint; put '{process}' in the path (e.g. "
                "'run-{process}.npz'), it becomes the process index"
            )
        text = str(text).replace("{process}", str(jax.process_index()))
    return Path(text)


def _advance(
    state: _Chunks,
    chunk: Callable[..., LyapunovResult],
    store: RunFile | None,
    *,
    t_transient: float,
    max_steps: int,
    chunk_steps: int,
    renorm_every: int,
    min_blocks: int,
    tol_arr: np.ndarray,
    callback: Callable[[ConvergenceProgress], Any] | None,
    progress: bool | TextSink,
) -> str:
    """Run chunks until converged, out of budget or stopped; the reason."""
    start = time.perf_counter()

    def converged() -> bool:
        return state.n_blocks >= min_blocks and bool(
            np.all(state.stderr(renorm_every) < tol_arr)
        )

    bar = _progress.Bar(
        progress, max_steps, "run_until_converged", "step", initial=state.done
    )
    with bar:
        if state.last is not None:
            if converged():
                return "tol"
            _show(bar, state.stderr(renorm_every), tol_arr)
        while True:
            n = min(
                chunk_steps, (max_steps - state.done) // renorm_every * renorm_every
            )
            if n <= 0:
                return "max_steps"
            res = chunk(
                n_steps=n,
                t_transient=t_transient if state.last is None else 0.0,
                resume=None if state.last is None else state.last.checkpoint,
            )
            state.add(res, n)
            stderr = state.stderr(renorm_every)
            if store is not None:
                store.save(state.as_saved(), stderr)
            info = ConvergenceProgress(
                state.done,
                max_steps,
                np.asarray(res.exponents),
                stderr,
                np.broadcast_to(tol_arr, stderr.shape),
                state.n_chunks - 1,
                time.perf_counter() - start,
            )
            _show(bar, stderr, tol_arr)
            bar.to(state.done)
            stop = callback is not None and callback(info) is True
            if converged():
                return "tol"
            if stop:
                return "callback"


def _show(bar: _progress.Bar, stderr: np.ndarray, tol: np.ndarray) -> None:
    bar.postfix(f"max stderr/tol {float(np.max(stderr / tol)):.3g}")


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


#: Bins of the history summary. The error bar's batches are made of whole
#: bins, and the bins merge pairwise whenever all are full, so the summary
#: (and the checkpoint) hold at most ``(BINS + 1) x k`` numbers at any length.
BINS = 512

#: What ``history=`` accepts.
HISTORY = ("last", "all")


class _Summary:
    """The accumulated log-growth (raw column order) after every ``width``-th
    block: ``edges[j]`` after block ``j * width`` (row 0 before the first), for
    ``j <= count``; what :func:`~lyapax._engine.stats.binned_stderr` needs."""

    def __init__(self, edges: np.ndarray, width: int, n_blocks: int) -> None:
        self.edges = np.zeros((BINS + 1, edges.shape[1]), edges.dtype)
        self.count = edges.shape[0] - 1
        self.edges[: self.count + 1] = edges
        self.width, self.n_blocks = width, n_blocks

    def add(self, cum: np.ndarray) -> None:
        """Take the accumulated log-growth ``(rows, k)`` after the next blocks."""
        end = self.n_blocks + cum.shape[0]
        while True:
            at = np.arange((self.count + 1) * self.width, end + 1, self.width)
            room = BINS - self.count
            put = at[:room]
            self.edges[self.count + 1 : self.count + 1 + put.size] = cum[
                put - self.n_blocks - 1
            ]
            self.count += put.size
            if at.size <= room:
                break
            # All bins full: merge them pairwise (keep every other edge).
            half = BINS // 2
            self.edges[: half + 1] = self.edges[::2].copy()
            self.count, self.width = half, 2 * self.width
        self.n_blocks = end

    def used(self) -> np.ndarray:
        return self.edges[: self.count + 1]

    def stderr(self, block_time: float, total_time: float) -> np.ndarray:
        return stats.binned_stderr(
            self.used(), self.width, self.n_blocks, block_time, total_time
        )


class _Chunks:
    """The run so far, on the host, in bounded memory: the history summary,
    the last chunk's result (its checkpoint continues the run) and, with
    ``history="all"``, every chunk's raw history rows and times."""

    def __init__(
        self,
        summary: _Summary | None,
        last: LyapunovResult | None,
        done: int,
        n_chunks: int,
        pieces: list | None,
    ) -> None:
        self.summary, self.last, self.done = summary, last, done
        self.n_chunks, self.pieces = n_chunks, pieces

    @classmethod
    def fresh(cls, history: str) -> _Chunks:
        return cls(None, None, 0, 0, [] if history == "all" else None)

    @classmethod
    def restored(
        cls, saved: SavedRun | None, history: str, renorm_every: int
    ) -> _Chunks:
        """The run a checkpoint held (:meth:`RunFile.load`; fresh for None):
        a file of format 1 gives its chunks, replayed into the summary."""
        if saved is None:
            return cls.fresh(history)
        if saved.bin_edges is None:
            state = cls.fresh(history)
            for raw, times in saved.pieces or ():
                state.extend(raw, times)
        else:
            assert saved.bin_width is not None
            n_blocks = saved.done // renorm_every
            summary = _Summary(saved.bin_edges, saved.bin_width, n_blocks)
            state = cls(summary, None, 0, saved.n_chunks, saved.pieces)
        state.last, state.done = saved.last, saved.done
        return state

    def as_saved(self) -> SavedRun:
        """The run as :meth:`RunFile.save` writes it."""
        assert self.last is not None and self.summary is not None
        summary = self.summary
        return SavedRun(
            self.done,
            self.n_chunks,
            self.last,
            summary.width,
            summary.used(),
            self.pieces,
        )

    @property
    def n_blocks(self) -> int:
        return 0 if self.summary is None else self.summary.n_blocks

    def add(self, res: LyapunovResult, n_steps: int) -> None:
        self.extend(*_host(res))
        self.last = res
        self.done += n_steps

    def extend(self, raw: np.ndarray, times: np.ndarray) -> None:
        """Take a chunk's history rows (raw column order) and times."""
        if self.summary is None:
            self.summary = _Summary(np.zeros((1, raw.shape[1]), raw.dtype), 1, 0)
        self.summary.add(raw * times[:, None])  # accumulated log-growth
        if self.pieces is not None:
            self.pieces.append((raw, times))
        self.n_chunks += 1

    def stderr(self, renorm_every: int) -> np.ndarray:
        """``(k,)`` in the engine's (sorted) column order."""
        assert self.last is not None and self.summary is not None
        times = np.asarray(self.last.times)
        block_time = float(self.last.checkpoint.dt) * renorm_every
        raw = self.summary.stderr(block_time, float(times[-1]))
        return raw[_order(self.last)]

    def result(self, renorm_every: int) -> LyapunovResult | None:
        """The run as one result (None before the first chunk): ``stderr``
        from the summary; ``history``/``times`` of the last chunk, or of every
        chunk with ``history="all"``."""
        if self.last is None:
            return None
        # device_put, not jnp.asarray: the latter compiles a copy per shape.
        out = self.last._replace(stderr=jax.device_put(self.stderr(renorm_every)))
        if self.pieces is None or len(self.pieces) == 1:
            return out
        order = _order(self.last)
        history = np.concatenate([raw for raw, _ in self.pieces])[:, order]
        return out._replace(
            history=history, times=np.concatenate([t for _, t in self.pieces])
        )


def _order(res: LyapunovResult) -> np.ndarray:
    """The engine's column order of ``res`` (:func:`summary.column_order`)."""
    checkpoint = res.checkpoint
    cum = np.asarray(checkpoint.cum_log_growth)
    return column_order(cum, np.asarray(checkpoint.elapsed_time), np)


def _host(res: LyapunovResult) -> tuple[np.ndarray, np.ndarray]:
    """``(history, times)`` on the host, history columns in raw order."""
    inverse = np.argsort(_order(res), kind="stable")
    return np.asarray(res.history)[:, inverse], np.asarray(res.times)
