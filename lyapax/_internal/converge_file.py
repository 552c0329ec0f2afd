"""The checkpoint file of ``run_until_converged``: what it holds, how it is
written and read back as untrusted input, and the migration of format 1.

The archive and its header are :mod:`lyapax._internal.checkpoint`'s; this
module owns the arrays of the kind ``"run_until_converged"`` (the bounded
summary of the history, the last chunk and the engine's checkpoint, keys
documented in docs/long_runs.md), the consistency checks made on them, the
history segments of ``history="all"`` (``PATH.history/``) and the reading of
format-1 files (the whole history), whose chunks come back to be replayed.
The run's own state (the summary's bins, the error bar) stays in
:mod:`lyapax.converge`, which hands a :class:`SavedRun` in and takes one out.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from lyapax._engine import run
from lyapax._engine.run import LyapunovResult
from lyapax._engine.tree import merge_static, split_static
from lyapax._internal import checkpoint as ckpt_file
from lyapax._internal import lock
from lyapax._internal.checkpoint import CheckpointError

__all__ = ["RunFile", "SavedRun"]


class SavedRun(NamedTuple):
    """A ``run_until_converged`` run as its checkpoint holds it.

    ``done`` measured steps; ``n_chunks`` calls made; ``last`` the last chunk
    (its checkpoint continues the run; read back, its ``stderr`` is the
    run's); ``bin_width`` and ``bin_edges`` the history summary (the used
    edges, raw column order); ``pieces`` every chunk's ``(history, times)``
    (raw column order) with ``history="all"``, else None. Read from a
    format-1 file, ``bin_edges`` and ``bin_width`` are None and ``pieces``
    holds every chunk, to be replayed into a fresh summary.
    """

    done: int
    n_chunks: int
    last: LyapunovResult
    bin_width: int | None
    bin_edges: np.ndarray | None
    pieces: list[tuple[np.ndarray, np.ndarray]] | None


#: What a ``run_until_converged`` checkpoint holds besides the header and the
#: ``checkpoint.<field>`` arrays of the engine's checkpoint (kind letters).
_RUN_KEYS = {
    "n_steps": ((), "iu"),
    "n_chunks": ((), "iu"),
    "bin_width": ((), "iu"),
    "bin_edges": (None, "f"),
    "last_history": (None, "f"),
    "last_times": (None, "f"),
    "history_segments": ((), "iu"),
    "exponents": (None, "f"),
    "stderr": (None, "f"),
}
#: Format 1 (lyapax <= the bounded format): the whole history, rewritten at
#: every save; read once and migrated.
_RUN_KEYS_V1 = {
    "n_steps": ((), "iu"),
    "history": (None, "f"),
    "times": (None, "f"),
    "chunk_blocks": (None, "iu"),
    "chunk_cum": (None, "f"),
    "exponents": (None, "f"),
    "stderr": (None, "f"),
}
_SEGMENT_KEYS = {"index": ((), "iu"), "history": (None, "f"), "times": (None, "f")}


class RunFile:
    """The checkpoint file of one ``run_until_converged`` call (and, with
    ``history="all"``, its folder of history segments ``PATH.history/``).

    ``version`` is the lyapax version written and required; ``bins`` the
    most bins a summary holds.
    """

    KIND = "run_until_converged"
    SEGMENT = "run_history_segment"

    def __init__(
        self,
        path: Any,
        problem: Any,
        k: Any,
        settings: dict,
        history: str,
        *,
        version: str,
        bins: int,
    ) -> None:
        self.path = Path(os.fspath(path))
        if self.path.is_dir():
            raise ValueError(
                f"checkpoint={str(self.path)!r} is a directory; pass a file path "
                "(e.g. run.npz)"
            )
        ckpt_file.check_writable(self.path.parent, "run_until_converged(checkpoint=)")
        self.history, self.version, self.bins = history, version, bins
        self.saved = 0  # steps held by the file on disk
        self.saved_segments = 0  # history segments on disk
        self.segments = self.path.with_name(self.path.name + ".history")
        view = problem.for_engine()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the first chunk warns, if anything
            k = int(run.default_k(view, k, None))
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
        self.template = run.checkpoint_template(view, k)
        self.fields = {
            f"checkpoint.{name}": (tuple(leaf.shape), leaf.dtype.kind)
            for name, leaf in self.template._asdict().items()
            if leaf is not None
        }

    def owned(self, wait: float) -> Any:
        """The lock that makes this process the file's one owner."""
        return lock.hold(self.path.with_name(self.path.name + ".lock"), self.path, wait)

    def _segment(self, index: int) -> Path:
        return self.segments / f"segment-{index:06d}.npz"

    def save(self, run_: SavedRun, stderr: np.ndarray) -> None:
        """Write the chunks not yet saved as history segments (``"all"``), then
        the bounded checkpoint, which names how many segments are valid;
        ``stderr`` is the run's error bar (the engine's column order).

        Raises:
            OSError: a write failed; the message says up to which step the
                checkpoint on disk (unchanged) holds the run.
        """
        try:
            self._write(run_, stderr)
        except OSError as e:
            kept = (
                f"{str(self.path)!r} still holds the run's first {self.saved} "
                "steps, and the same call continues from there"
                if self.saved
                else "no checkpoint was kept"
            )
            raise OSError(
                e.errno,
                f"{e.strerror}; the run stopped after {run_.done} steps: {kept}",
            ) from e
        self.saved = run_.done

    def _write(self, run_: SavedRun, stderr: np.ndarray) -> None:
        last, width, edges = run_.last, run_.bin_width, run_.bin_edges
        assert width is not None and edges is not None  # a summary, not format 1
        if run_.pieces is not None:
            self.segments.mkdir(exist_ok=True)
            for index in range(self.saved_segments, len(run_.pieces)):
                raw, times = run_.pieces[index]
                arrays = {"index": np.int64(index), "history": raw, "times": times}
                ckpt_file.write(
                    self._segment(index),
                    self.SEGMENT,
                    self.version,
                    self.identity,
                    arrays,
                )
                self.saved_segments = index + 1
        arrays = {
            "n_steps": np.int64(run_.done),
            "n_chunks": np.int64(run_.n_chunks),
            "bin_width": np.int64(width),
            "bin_edges": edges,
            "last_history": np.asarray(last.history),
            "last_times": np.asarray(last.times),
            "history_segments": np.int64(self.saved_segments),
            "exponents": np.asarray(last.exponents),
            "stderr": stderr,
        }
        for name, value in last.checkpoint._asdict().items():
            if value is not None:
                arrays[f"checkpoint.{name}"] = np.asarray(value)
        ckpt_file.write(
            self.path,
            self.KIND,
            self.version,
            self.identity,
            arrays,
            keep_previous=True,
        )

    def load(self) -> SavedRun | None:
        """The run the file holds, checked (None where there is no file).

        Raises:
            CheckpointError: the file, or a history segment it names, cannot
                be used; it is left unchanged.
        """
        saved = self._load()
        self.saved = 0 if saved is None else saved.done
        return saved

    def _load(self) -> SavedRun | None:
        if not self.path.exists():
            return None
        version, data = ckpt_file.read_versioned(
            self.path,
            self.KIND,
            self.version,
            self.identity,
            {
                1: {**_RUN_KEYS_V1, **self.fields},
                ckpt_file.FORMAT_VERSION: {**_RUN_KEYS, **self.fields},
            },
        )
        return self._migrate(data) if version == 1 else self._rebuild(data)

    def _refuse(self, what: str) -> CheckpointError:
        return CheckpointError(
            f"checkpoint {str(self.path)!r} holds arrays whose sizes do not fit "
            f"together ({what}) for k={self.k}"
        )

    def _last(self, data: dict, history: np.ndarray, times: np.ndarray) -> Any:
        fields = {
            key.split(".", 1)[1]: value
            for key, value in data.items()
            if key.startswith("checkpoint.")
        }
        template = self.template._asdict()
        fields.update({key: None for key, leaf in template.items() if leaf is None})
        resume = type(self.template)(**fields)
        return LyapunovResult(
            jax.device_put(data["exponents"]),
            history,
            times,
            resume,
            None,
            None,
            jax.device_put(data["stderr"]),
        )

    def _rebuild(self, data: dict[str, np.ndarray]) -> SavedRun:
        k, edges = self.k, data["bin_edges"]
        width, n_chunks = int(data["bin_width"]), int(data["n_chunks"])
        n = int(data["n_steps"]) // self.renorm_every
        last_h, last_t = data["last_history"], data["last_times"]
        segments = int(data["history_segments"])
        written = "all" if segments > 0 else "last"
        if written != self.history:
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} was written by a run with other "
                f"settings (history: {written!r} there, {self.history!r} here)"
            )
        consistent = (
            edges.ndim == 2
            and edges.shape[1] == k
            and 2 <= edges.shape[0] <= self.bins + 1
            and width >= 1
            and width & (width - 1) == 0
            and (edges.shape[0] - 1) * width <= n < edges.shape[0] * width
            and int(data["n_steps"]) % self.renorm_every == 0
            and last_h.ndim == 2
            and last_h.shape[1] == k
            and 1 <= last_h.shape[0] <= n
            and last_t.shape == (last_h.shape[0],)
            and 1 <= n_chunks
            and segments == (n_chunks if self.history == "all" else 0)
            and data["exponents"].shape == (k,)
            and data["stderr"].shape == (k,)
        )
        if not consistent:
            raise self._refuse(
                f"bin_edges {edges.shape}, bin_width {width}, n_steps "
                f"{int(data['n_steps'])}, last_history {last_h.shape}, last_times "
                f"{last_t.shape}, history_segments {segments}, n_chunks {n_chunks}"
            )
        pieces = None
        if self.history == "all":
            pieces = [self._read_segment(i) for i in range(segments)]
            if sum(raw.shape[0] for raw, _ in pieces) != n:
                raise self._refuse(f"history segments of other lengths than {n}")
        self.saved_segments = segments
        last = self._last(data, last_h, last_t)
        return SavedRun(int(data["n_steps"]), n_chunks, last, width, edges, pieces)

    def _read_segment(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        path = self._segment(index)
        if not path.exists():
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} names history segment {str(path)!r}, "
                "which is missing: restore it, or delete the checkpoint to start "
                "afresh"
            )
        data = ckpt_file.read(
            path, self.SEGMENT, self.version, self.identity, _SEGMENT_KEYS
        )
        raw, times = data["history"], data["times"]
        if (
            int(data["index"]) != index
            or raw.ndim != 2
            or raw.shape[1] != self.k
            or times.shape != (raw.shape[0],)
        ):
            raise CheckpointError(
                f"history segment {str(path)!r} does not fit its checkpoint "
                f"(index {int(data['index'])}, history {raw.shape}, times "
                f"{times.shape})"
            )
        return raw, times

    def _migrate(self, data: dict[str, np.ndarray]) -> SavedRun:
        """A format-1 file (the whole history) as its chunks, to be replayed
        into the bounded summary, so the run continues bit-equal; every
        segment is written at the next save."""
        k = self.k
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
            raise self._refuse(
                f"history {history.shape}, times {times.shape}, chunk_blocks "
                f"{blocks.shape}, chunk_cum {cum.shape}"
            )
        ends = np.cumsum(blocks)
        chunks = [
            (history[a:b], times[a:b]) for a, b in zip(ends - blocks, ends, strict=True)
        ]
        self.saved_segments = 0  # written at the next save
        order = np.argsort(-cum[-1], kind="stable")
        last = self._last(data, history[-blocks[-1] :][:, order], times[-blocks[-1] :])
        return SavedRun(int(data["n_steps"]), len(chunks), last, None, None, chunks)
