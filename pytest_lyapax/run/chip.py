"""Platforms whose device admits one process at a time (a TPU chip).

A TPU is held by the process that opened it until that process ends; a second
one fails with JAX's "libtpu multi-process lockfile" error.  So the labels on
such a platform (a label and its twins: ``--jax-rerun``, ``--jax-ab``, the
device counts of ``--jax-devices``) share one *chip* and take it one after
another:

- the scheduler starts a chip's next phase only once the previous phase's
  worker has finished (``scheduling.py``), while other backends go on;
- the worker of such a label does not start JAX at collection, and before its
  first test takes the plugin's own lock of the chip, an advisory lock on a
  file in a private folder of the controller that the previous worker holds
  until its process has ended (the kernel releases it then, also after a
  crash); only then does it open the device, retrying JAX's lock error while
  another process still holds the chip (:data:`CHIP_WAIT_S` at most);
- a label that still cannot get its chip skips its tests as unavailable, with
  the holder's error, instead of failing or crashing its worker.

The probes of such labels run one after another, each ending (and releasing
the chip) before the next starts (``backends/probe.py``).

Which platforms are exclusive: ``tpu`` unless ``--jax-exclusive`` (ini
``jax_exclusive``) names the labels (``gpu`` for a GPU one process must own)
or ``none``.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import pytest

from pytest_lyapax.backends.chiplock import describe_lock_error, is_lock_error
from pytest_lyapax.backends.labels import Backend

EXCLUSIVE_OPTION = "--jax-exclusive"
DEFAULT_EXCLUSIVE = frozenset({"tpu"})
# How long a worker waits for its chip (the previous holder's end, or another
# process's), in seconds.
CHIP_WAIT_S = 600.0


@dataclass
class ChipState:
    """The chip's part of a worker whose label's device admits one process
    at a time: the lock file of its chip (None: no such label; "" on another
    host: none), the lock once taken, and why the device could not be had
    ("" while it could)."""

    lock: str | None = None
    handle: Any = None
    error: str = ""


STATE_KEY = pytest.StashKey[ChipState]()


def state_of(stash: pytest.Stash) -> ChipState:
    """This process's chip state (``lock`` None: its label shares no chip)."""
    return stash.setdefault(STATE_KEY, ChipState())


def parse_exclusive(
    text: str, backends: Sequence[Backend], where: str = EXCLUSIVE_OPTION
) -> frozenset[str]:
    """The platforms named by ``--jax-exclusive``: ``none``, or requested
    labels (each stands for its platform).

    Raises:
        pytest.UsageError: a label that was not requested.
    """
    entries = [e.strip().lower() for e in text.split(",") if e.strip()]
    if entries == ["none"]:
        return frozenset()
    by_label = {b.label: b for b in backends}
    platforms = set()
    for entry in entries or [""]:
        backend = by_label.get(entry)
        if backend is None:
            raise pytest.UsageError(
                f"{where}: {entry!r} is not a requested label; give labels of "
                f"--jax-backend ({', '.join(by_label)}) whose device admits one "
                f"process at a time, e.g. {where}=gpu, or none"
            )
        platforms.add(platform_of(backend))
    return frozenset(platforms)


def platform_of(backend: Backend) -> str:
    return backend.platform.split(",")[0]


def chip_of(backend: Backend, exclusive: frozenset[str]) -> str | None:
    """The chip a label's worker holds (None: any number of processes may
    share its device): its platform on its host."""
    if platform_of(backend) not in exclusive:
        return None
    host = backend.host.text if backend.host is not None else ""
    return f"{host}|{platform_of(backend)}"


def chips_of(backends: Sequence[Backend], exclusive: frozenset[str]) -> dict[str, str]:
    """``label -> chip`` for the labels on an exclusive platform."""
    found = {b.label: chip_of(b, exclusive) for b in backends}
    return {label: chip for label, chip in found.items() if chip is not None}


class ChipLocks:
    """The controller's folder of chip lock files (mode 0700), one per chip."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="lyapax-chips-")

    def path(self, chip: str) -> str:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", chip).strip("_") or "chip"
        return os.path.join(self.folder, f"{name}.lock")

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def take(
    path: str,
    wait_s: float = CHIP_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> IO[bytes] | None:
    """Take the chip's lock for the rest of this process (the file stays open;
    the kernel releases the lock when the process ends); None if another
    process held it for ``wait_s`` seconds."""
    handle = open(path, "ab")  # noqa: SIM115 - held until the process ends
    waited = 0.0
    while True:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if waited >= wait_s:
                handle.close()
                return None
            sleep(0.2)
            waited += 0.2


def open_device(
    wait_s: float = CHIP_WAIT_S,
    start: Callable[[], object] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Start this process's JAX backend, retrying while another process holds
    the chip; "" once started, else why not (the holder's error).  Errors other
    than the lock are left to the per-test check of the backend."""
    if start is None:

        def start() -> object:
            import jax

            return jax.devices()

    waited = 0.0
    while True:
        try:
            start()
            return ""
        except Exception as exc:  # noqa: BLE001 - sorted below
            text = str(exc)
            if not is_lock_error(text):
                return ""
            if waited >= wait_s:
                return describe_lock_error(text)
        sleep(1.0)
        waited += 1.0
