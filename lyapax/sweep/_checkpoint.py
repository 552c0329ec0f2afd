"""Sweeps chunk by chunk: a checkpoint folder and a progress bar.

With ``checkpoint=FOLDER`` every chunk of rows (``batch_size``) is saved,
once computed, to ``FOLDER/chunk-NNNNN.npz`` (written atomically, see
:mod:`lyapax._internal.checkpoint`); the same call after a kill loads the
chunks found there, checked against the sweep's fingerprint and the shapes
its program returns, and computes only the others. The result equals the
uninterrupted sweep's: every chunk is the output of the same program on the
same rows. The call holds a lock on ``FOLDER/.lock`` for its lifetime (one
owner per folder, :mod:`lyapax._internal.lock`): a second sweep on the same
folder is refused at start with the owner's process id, host and start time.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import jax
import numpy as np

from lyapax.__version__ import __version__
from lyapax._engine import progress
from lyapax._internal import batching, lock
from lyapax._internal import checkpoint as ckpt_file

KIND = "sweep_chunk"


class ChunkHook:
    """The hook of :meth:`~lyapax._internal.batching.Plan.run`: loads or
    computes (and saves) each chunk, and moves the progress bar.

    Args:
        folder: the checkpoint folder, or None.
        bar: a :class:`~lyapax._engine.progress.Bar` over the ``n`` rows.
        identity: the sweep's :class:`~lyapax._internal.checkpoint.Identity`.
        template: ``jax.eval_shape`` of one padded chunk's output.
        to_host: fields kept as NumPy arrays (not placed on a device).
    """

    def __init__(
        self,
        folder: Path | None,
        bar: progress.Bar,
        identity: ckpt_file.Identity | None,
        template: Any,
        to_host: tuple[str, ...],
    ) -> None:
        self.folder, self.bar, self.identity = folder, bar, identity
        self.leaves, self.treedef = jax.tree.flatten(template)
        self.to_host = to_host

    def __call__(self, index: int, start: int, stop: int, compute: Any) -> Any:
        path = None if self.folder is None else self.folder / f"chunk-{index:05d}.npz"
        if path is not None and path.exists():
            out = self._load(path, start, stop)
        else:
            out = compute()
            if path is not None:
                self._save(path, out, start, stop)
        return self.bar.done(stop, out)

    def _save(self, path: Path, out: Any, start: int, stop: int) -> None:
        assert self.identity is not None
        arrays = {
            f"leaf_{i:04d}": np.asarray(x) for i, x in enumerate(jax.tree.leaves(out))
        }
        arrays["rows"] = np.array([start, stop], np.int64)
        ckpt_file.write(path, KIND, __version__, self.identity, arrays)

    def _load(self, path: Path, start: int, stop: int) -> Any:
        assert self.identity is not None
        n = stop - start
        expect: dict[str, tuple[tuple[int, ...] | None, str]] = {"rows": ((2,), "iu")}
        for i, leaf in enumerate(self.leaves):
            expect[f"leaf_{i:04d}"] = ((n, *leaf.shape[1:]), leaf.dtype.kind)
        # Chunk files kept their layout from format 1 to 2: both are read.
        _, data = ckpt_file.read_versioned(
            path, KIND, __version__, self.identity, {1: expect, 2: expect}
        )
        if data["rows"].tolist() != [start, stop]:
            raise ckpt_file.CheckpointError(
                f"checkpoint {str(path)!r} holds rows {data['rows'].tolist()}, "
                f"not rows [{start}, {stop}] of this sweep"
            )
        leaves = []
        for i, leaf in enumerate(self.leaves):
            arr = data[f"leaf_{i:04d}"]
            if arr.dtype != leaf.dtype:
                raise ckpt_file.CheckpointError(
                    f"checkpoint {str(path)!r}: leaf_{i:04d} has dtype {arr.dtype}, "
                    f"expected {leaf.dtype}"
                )
            leaves.append(arr)
        out = jax.tree.unflatten(self.treedef, leaves)
        kept = {f: getattr(out, f) for f in self.to_host}
        out = jax.device_put(out)
        return out._replace(**kept) if kept else out


def chunk_hook(
    checkpoint: Any,
    bar: progress.Bar,
    plan: batching.Plan,
    kernel: Any,
    args: tuple,
    batched: tuple,
    settings: dict[str, Any],
    to_host: tuple[str, ...],
    owner: contextlib.ExitStack,
) -> Any:
    """The hook for a sweep with a checkpoint folder (a :class:`ChunkHook`),
    or with a bar only (:meth:`~lyapax._engine.progress.Bar.by_chunks`); None
    when neither is asked for.

    ``kernel(*args)`` is the sweep's program on the first chunk's rows,
    traced (not compiled) for the fingerprint and the output shapes;
    ``batched`` the whole batch, hashed with the fingerprint's values;
    ``owner`` holds the folder's lock until the sweep ends.

    Raises:
        ValueError: ``checkpoint`` is a file, or the sweep spans several
            processes. OSError: the folder cannot be created or written.
        CheckpointLocked: another process is sweeping into the folder.
    """
    if checkpoint is None:
        return progress.chunks_hook(bar)
    template = jax.eval_shape(kernel, *args)
    folder = identity = None
    if checkpoint is not None:
        if jax.process_count() > 1:
            raise ValueError(
                "checkpoint= is supported in single-process sweeps only; in a "
                "multi-process job save each process's results yourself"
            )
        folder = Path(os.fspath(checkpoint))
        if folder.exists() and not folder.is_dir():
            raise ValueError(
                f"checkpoint={str(folder)!r} is a file; sweeps take a folder (one "
                "file per chunk of rows)"
            )
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OSError(
                e.errno, f"cannot create the checkpoint folder {str(folder)!r}: {e}"
            ) from e
        ckpt_file.check_writable(folder, "sweep checkpoint")
        owner.enter_context(lock.hold(folder / ".lock", folder))
        settings = {**settings, "rows": plan.n, "chunk": plan.chunk}
        settings.update(padded=plan.padded, devices=len(plan.devices))
        identity = ckpt_file.fingerprint(kernel, args, settings, batched)
    return ChunkHook(folder, bar, identity, template, to_host)
