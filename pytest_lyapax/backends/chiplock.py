"""JAX's error when another process holds a TPU chip, in words.

libtpu takes a lock on :data:`LIBTPU_LOCKFILE` when a process opens the chip
and keeps it until that process ends; a second process fails with
"Internal error when accessing libtpu multi-process lockfile".  On the TPU v5e
machine we measured (jax 0.10.2) the lock is a POSIX (``fcntl``) one: a
``flock`` on the file succeeds while the chip is held, a ``lockf`` is refused;
a process killed with SIGKILL leaves the file behind, and there the next one
still opens the chip.  Whether a left-over file blocks depends on the libtpu
version, so the message says whether a process holds a lock on it now or the
file is only left over.
"""

from __future__ import annotations

import fcntl

LOCK_MESSAGE = "libtpu multi-process lockfile"
LIBTPU_LOCKFILE = "/tmp/libtpu_lockfile"


def is_lock_error(error: str) -> bool:
    """Whether ``error`` is JAX's error of a chip held by another process."""
    return LOCK_MESSAGE in error


def lockfile_state(path: str = LIBTPU_LOCKFILE) -> str:
    """What holds libtpu's lock file: "absent", "held" (a process holds a
    lock on it) or "stale" (it exists, and nobody holds it: left behind by a
    process that ended without removing it)."""
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except FileNotFoundError:
        return "absent"
    except OSError:
        return "held"  # another user's: assume it is in use
    with handle:
        # libtpu's is a POSIX lock (measured); a flock is checked as well.
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return "held"
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        try:
            fcntl.lockf(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return "held"
        fcntl.lockf(handle.fileno(), fcntl.LOCK_UN)
    return "stale"


def describe_lock_error(error: str, path: str = LIBTPU_LOCKFILE) -> str:
    """JAX's lock error, with what holds the chip in words."""
    first = error.strip().splitlines()[0] if error.strip() else error
    state = lockfile_state(path)
    if state == "stale":
        return (
            f"{first} ({path} was left behind by a process that ended without "
            f"releasing it, and no process holds it now: remove it with "
            f"rm {path} and run again)"
        )
    return f"another process holds the chip: {first}"
