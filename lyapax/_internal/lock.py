"""One owner per checkpoint: an advisory lock on a sidecar file.

A run that writes a checkpoint holds ``fcntl.flock`` on a sidecar file
(``PATH.lock`` beside a file, ``FOLDER/.lock`` in a sweep's folder) for its
whole lifetime. The operating system drops the lock when the process ends,
however it ends (SIGKILL included), so a killed run never leaves a stale lock;
the sidecar file itself stays (removing it would let two processes lock two
different files). The owner writes its process id, host and start time into
the sidecar, and a second process that finds the lock taken is refused with
them (:class:`CheckpointLocked`), or waits up to ``wait`` seconds first.

Where the file system has no locks (some network file systems; Windows, which
has no ``fcntl``), taking the lock fails with an ``OSError`` that says so; the
environment variable ``LYAPAX_CHECKPOINT_LOCK=none`` then runs without one,
and the user keeps one process per checkpoint.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from lyapax._internal.checkpoint import CheckpointError, host_name

__all__ = ["ENV", "CheckpointLocked", "hold"]

#: Set to ``none`` to run without locks where the file system has none.
ENV = "LYAPAX_CHECKPOINT_LOCK"


class CheckpointLocked(CheckpointError):
    """Another live process owns the checkpoint (holds its lock); the message
    names the path, the owner's process id and host and since when."""


def _owner(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(os.pread(fd, 4096, 0).decode())
        return f"process {info['pid']} on host {info['host']!r}, since {info['since']}"
    return "a process that has not recorded itself yet"


@contextlib.contextmanager
def hold(lock_path: Path, target: Path, wait: float = 0.0) -> Iterator[None]:
    """Own ``target`` through the lock on ``lock_path`` while the block runs.

    Args:
        lock_path: the sidecar file (created if missing, never removed).
        target: the checkpoint it guards (named in messages).
        wait: seconds to wait for a busy lock (``inf``: until it is free).

    Raises:
        CheckpointLocked: another process holds the lock after ``wait``.
        OSError: the file system has no locks (and ``LYAPAX_CHECKPOINT_LOCK``
            is not ``none``), or the sidecar cannot be created.
    """
    if os.environ.get(ENV, "").lower() == "none":
        yield
        return
    try:
        import fcntl
    except ImportError:  # Windows
        raise OSError(
            errno.ENOLCK,
            f"cannot lock the checkpoint {str(target)!r}: this system has no "
            f"fcntl locks; set {ENV}=none to run without one (then make sure "
            "only one process uses this checkpoint)",
        ) from None
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    waited = f" (waited {wait:g} s)" if wait > 0 else ""
                    raise CheckpointLocked(
                        f"checkpoint {str(target)!r} is in use by {_owner(fd)}"
                        f"{waited}: one process owns a checkpoint. Wait for that "
                        "run to end (or stop it), pass another checkpoint path, "
                        "or ask to wait for the lock"
                    ) from None
                time.sleep(min(0.1, left))
            except OSError as e:
                raise OSError(
                    e.errno,
                    f"cannot lock the checkpoint {str(target)!r} ({e.strerror}): "
                    f"the file system has no locks; set {ENV}=none to run "
                    "without one (then make sure only one process uses this "
                    "checkpoint)",
                ) from e
        since = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        record = json.dumps({"pid": os.getpid(), "host": host_name(), "since": since})
        os.ftruncate(fd, 0)
        os.pwrite(fd, record.encode(), 0)
        yield
    finally:
        os.close(fd)  # drops the lock
