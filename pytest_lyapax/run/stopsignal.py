"""A run stopped by SIGTERM still writes its report.

``timeout``, a batch scheduler or a CI runner ends a job with SIGTERM, whose
default action ends Python at once: every result measured so far was lost
(found on the lent TPU, a main job cut by ``timeout`` left no report). The
controller of an active run turns SIGTERM into a ``KeyboardInterrupt``, as a
Ctrl-C is, so pytest ends the session the usual way: the xdist workers are
stopped and the report of what finished is written. A handler the user set
is left alone, and the default is put back when the run ends.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType

import pytest


def _interrupter() -> Callable[[int, FrameType | None], None]:
    """A SIGTERM handler that raises ``KeyboardInterrupt`` once.  A second
    SIGTERM (a process group signalled again, a scheduler's reminder) arrived
    on the TPU machine while pytest was handling the first interrupt, and the
    second ``KeyboardInterrupt`` ended pytest there, before the report: the
    run is stopping already, so later ones are ignored (SIGKILL remains for a
    run that must end now)."""
    asked: list[int] = []

    def interrupt(signum: int, frame: FrameType | None) -> None:
        if asked:
            return
        asked.append(signum)
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    return interrupt


def install(config: pytest.Config) -> bool:
    """Turn SIGTERM into ``KeyboardInterrupt`` until ``config`` is cleaned up;
    False (nothing done) off the main thread or where a handler is set."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    handler = _interrupter()
    signal.signal(signal.SIGTERM, handler)

    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    config.add_cleanup(restore)
    return True
