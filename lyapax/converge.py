"""Run a Lyapunov computation until its error bars are small enough.

``run_until_converged`` advances a problem chunk by chunk with
``lyapunov_spectrum(..., resume=checkpoint)`` (each chunk continues the previous
one exactly, and after the first chunk every call reuses one compiled program)
and stops when every exponent's batch-means standard error is below ``tol`` or
the step budget is spent. It is an eager Python loop, not a traced function.

With ``checkpoint=PATH`` the run is saved to ``PATH`` (a NumPy ``.npz``
archive, written atomically: see :mod:`lyapax._internal.checkpoint` and the
guide docs/long_runs.md) after every chunk; the same call after a kill, a
pre-emption or a Ctrl-C continues from the last chunk saved and ends with
the numbers of an uninterrupted run.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lyapax.__version__ import __version__
from lyapax._engine import progress as _progress
from lyapax._engine import run, stats, validate
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.problem import as_problem, is_problem, plain_problem
from lyapax._engine.progress import TextSink
from lyapax._engine.run import LyapunovResult, check_multiple
from lyapax._engine.tree import merge_static, split_static
from lyapax._internal import checkpoint as ckpt_file
from lyapax._internal.checkpoint import CheckpointError
from lyapax.core import lyapunov_spectrum

__all__ = [
    "CheckpointError",
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
            calls (e.g. to extend the budget). Its folder must exist.
        spectrum_fn: the engine, ``lyapunov_spectrum`` by default; any function
            with its arguments and checkpoint/resume contract works.

    Returns:
        :class:`ConvergedRun`.

    Raises:
        ValueError: ``tol`` not positive, ``max_steps`` or ``chunk_steps`` < 1,
            ``chunk_steps`` not a multiple of ``renorm_every``, ``min_blocks``
            < 2, a ``checkpoint`` folder that does not exist; plus the
            engine's own argument errors.
        CheckpointError: (a ``ValueError``) the file at ``checkpoint`` is
            truncated, unreadable, of another problem, settings, format or
            lyapax version; the file is left unchanged.
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
        store = _RunFile(checkpoint, problem, k, settings)
    state = _Chunks.fresh() if store is None else store.load()
    start = time.perf_counter()
    reason = "max_steps"

    def converged(merged: LyapunovResult) -> bool:
        return merged.history.shape[0] >= min_blocks and bool(
            np.all(np.asarray(merged.stderr) < tol_arr)
        )

    bar = _progress.Bar(
        progress, max_steps, "run_until_converged", "step", initial=state.done
    )
    with bar:
        merged = state.merged(renorm_every)
        if merged is not None:
            _show(bar, np.asarray(merged.stderr), tol_arr)
        while merged is None or not converged(merged):
            n = min(
                chunk_steps, (max_steps - state.done) // renorm_every * renorm_every
            )
            if n <= 0:
                break
            res = call(
                n_steps=n,
                k=k,
                renorm_every=renorm_every,
                t_transient=t_transient if state.last is None else 0.0,
                seed=seed,
                resume=None if state.last is None else state.last.checkpoint,
            )
            state.add(res, n)
            if store is not None:
                store.save(state)
            merged = joined = state.joined(renorm_every)
            stderr = np.asarray(joined.stderr)
            info = ConvergenceProgress(
                state.done,
                max_steps,
                np.asarray(joined.exponents),
                stderr,
                np.broadcast_to(tol_arr, stderr.shape),
                state.n_chunks - 1,
                time.perf_counter() - start,
            )
            _show(bar, stderr, tol_arr)
            bar.to(state.done)
            stop = callback is not None and callback(info) is True
            if stop and not converged(joined):
                reason = "callback"
                break
    assert merged is not None  # max_steps >= renorm_every: one chunk at least
    if converged(merged):
        reason = "tol"
    return ConvergedRun(merged, reason == "tol", reason, state.done, state.n_chunks)


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


class _Chunks:
    """The chunks run so far, on the host: each chunk's raw history rows
    (engine column order undone), times and accumulated log-growth at its
    end, and the last chunk's result (its checkpoint continues the run)."""

    def __init__(self, pieces: list, last: LyapunovResult | None, done: int) -> None:
        self.pieces = pieces
        self.last = last
        self.done = done

    @classmethod
    def fresh(cls) -> _Chunks:
        return cls([], None, 0)

    @property
    def n_chunks(self) -> int:
        return len(self.pieces)

    def add(self, res: LyapunovResult, n_steps: int) -> None:
        self.pieces.append(_host(res))
        self.last = res
        self.done += n_steps

    def merged(self, renorm_every: int) -> LyapunovResult | None:
        """The chunks joined (:func:`_join`), None before the first."""
        if self.last is None:
            return None
        return _join(self.pieces, self.last, renorm_every)

    def joined(self, renorm_every: int) -> LyapunovResult:
        merged = self.merged(renorm_every)
        assert merged is not None, "no chunk run yet"
        return merged


def _host(res: LyapunovResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(history, times, cum)`` on the host, history columns in raw order."""
    cum = np.asarray(res.checkpoint.cum_log_growth)
    return _raw(np.asarray(res.history), cum), np.asarray(res.times), cum


def _raw(history: np.ndarray, cum: np.ndarray) -> np.ndarray:
    # The engine sorts columns by the final estimate cum / T, i.e. by cum.
    inverse = np.argsort(np.argsort(-cum, kind="stable"), kind="stable")
    return history[:, inverse]


def _join(pieces: list, last: LyapunovResult, renorm_every: int) -> LyapunovResult:
    """One result for consecutive resumed chunks, as if run in one call.

    Works on host copies: the arrays grow every chunk, and eager device ops on
    new shapes would each compile a small program.
    """
    if len(pieces) == 1:
        return last
    raws, growths, times = [], [], []
    cum_start = np.zeros_like(pieces[0][2])
    for raw, t, cum in pieces:
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


#: What a ``run_until_converged`` checkpoint holds besides the header and the
#: ``checkpoint.<field>`` arrays of the engine's checkpoint (kind letters).
_RUN_KEYS = {
    "n_steps": ((), "iu"),
    "history": (None, "f"),
    "times": (None, "f"),
    "chunk_blocks": (None, "iu"),
    "chunk_cum": (None, "f"),
    "exponents": (None, "f"),
    "stderr": (None, "f"),
}


class _RunFile:
    """The checkpoint file of one ``run_until_converged`` call."""

    KIND = "run_until_converged"

    def __init__(self, path: Any, problem: Any, k: Any, settings: dict) -> None:
        self.path = Path(os.fspath(path))
        if self.path.is_dir():
            raise ValueError(
                f"checkpoint={str(self.path)!r} is a directory; pass a file path "
                "(e.g. run.npz)"
            )
        ckpt_file.check_writable(self.path.parent, "run_until_converged(checkpoint=)")
        view = problem.for_engine()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the first chunk warns, if anything
            k = int(run.default_k(view, k, None, stacklevel=1))
        d = int(view.z0.shape[0])
        dtype = view.z0.dtype
        dynamic, static = split_static(view.step)

        def tangent(dyn, z, Y, i, dt):
            del dt  # a number of the problem: hashed with the values
            return merge_static(dyn, static).tangent(z, Y, i)

        zeros, dt = np.zeros((d, k), dtype), np.asarray(view.dt, dtype)
        self.identity = ckpt_file.fingerprint(
            tangent, (dynamic, view.z0, zeros, np.int32(0), dt), settings
        )
        self.k, self.renorm_every = k, settings["renorm_every"]
        self.template = jax.eval_shape(
            view.checkpoint,
            jax.ShapeDtypeStruct((d,), dtype),
            jax.ShapeDtypeStruct((d, k), dtype),
            jax.ShapeDtypeStruct((k,), dtype),
            jax.ShapeDtypeStruct((), jnp.int32),
            jax.ShapeDtypeStruct((), dtype),
            jnp.asarray(view.dt, dtype),
        )
        self.fields = {
            f"checkpoint.{name}": (tuple(leaf.shape), leaf.dtype.kind)
            for name, leaf in self.template._asdict().items()
            if leaf is not None
        }

    def save(self, state: _Chunks) -> None:
        assert state.last is not None
        pieces = state.pieces
        merged = state.joined(self.renorm_every)
        arrays = {
            "n_steps": np.int64(state.done),
            "history": np.concatenate([p[0] for p in pieces]),
            "times": np.concatenate([p[1] for p in pieces]),
            "chunk_blocks": np.array([p[0].shape[0] for p in pieces], np.int64),
            "chunk_cum": np.stack([p[2] for p in pieces]),
            "exponents": np.asarray(state.last.exponents),
            "stderr": np.asarray(merged.stderr),
        }
        for name, value in state.last.checkpoint._asdict().items():
            if value is not None:
                arrays[f"checkpoint.{name}"] = np.asarray(value)
        ckpt_file.write(
            self.path, self.KIND, __version__, self.identity, arrays, keep_previous=True
        )

    def load(self) -> _Chunks:
        if not self.path.exists():
            return _Chunks.fresh()
        data = ckpt_file.read(
            self.path,
            self.KIND,
            __version__,
            self.identity,
            {**_RUN_KEYS, **self.fields},
        )
        return self._rebuild(data)

    def _rebuild(self, data: dict[str, np.ndarray]) -> _Chunks:
        name, k = str(self.path), self.k
        history, times = data["history"], data["times"]
        blocks, cum = data["chunk_blocks"], data["chunk_cum"]
        n = history.shape[0]
        consistent = (
            history.ndim == 2
            and history.shape[1] == k
            and times.shape == (n,)
            and blocks.ndim == 1
            and blocks.size >= 1
            and np.all(blocks >= 1)
            and int(blocks.sum()) == n
            and cum.shape == (blocks.size, k)
            and data["exponents"].shape == (k,)
            and data["stderr"].shape == (k,)
            and int(data["n_steps"]) == n * self.renorm_every
        )
        if not consistent:
            raise ckpt_file.CheckpointError(
                f"checkpoint {name!r} holds arrays whose sizes do not fit together "
                f"(history {history.shape}, times {times.shape}, chunk_blocks "
                f"{blocks.shape}, chunk_cum {cum.shape}) for k={k}"
            )
        ends = np.cumsum(blocks)
        pieces = [
            (history[a:b], times[a:b], cum[i])
            for i, (a, b) in enumerate(zip(ends - blocks, ends, strict=True))
        ]
        fields = {
            key.split(".", 1)[1]: value
            for key, value in data.items()
            if key.startswith("checkpoint.")
        }
        template = self.template._asdict()
        fields.update({key: None for key, leaf in template.items() if leaf is None})
        resume = type(self.template)(**fields)
        last = LyapunovResult(
            jax.device_put(data["exponents"]),
            history[-blocks[-1] :, :][:, np.argsort(-cum[-1], kind="stable")],
            times[-blocks[-1] :],
            resume,
            None,
            None,
            jax.device_put(data["stderr"]),
        )
        return _Chunks(pieces, last, int(data["n_steps"]))
