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
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import pytest


class _Interrupter:
    """A SIGTERM handler that raises ``KeyboardInterrupt`` once.  A second
    SIGTERM (a process group signalled again, a scheduler's reminder) arrived
    on the TPU machine while pytest was handling the first interrupt, and the
    second ``KeyboardInterrupt`` ended pytest there, before the report: the
    run is stopping already, so later ones are ignored (SIGKILL remains for a
    run that must end now).  While the reports are written (:func:`holding`)
    a SIGTERM raises nothing: the run is ending anyway, and on the TPU machine
    one that arrived there stopped the figure half drawn."""

    def __init__(self) -> None:
        self.asked: list[int] = []
        self.holding = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.asked:
            return
        self.asked.append(signum)
        if self.holding:
            sys.stderr.write(
                f"pytest-lyapax: {signal.Signals(signum).name} while writing the "
                "reports: finishing them first\n"
            )
            return
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@contextmanager
def holding() -> Iterator[None]:
    """Within this block a SIGTERM does not interrupt (the reports being
    written); a no-op where :func:`install` did not install the handler."""
    handler = signal.getsignal(signal.SIGTERM)
    if not isinstance(handler, _Interrupter):
        yield
        return
    handler.holding = True
    try:
        yield
    finally:
        handler.holding = False


def install(config: pytest.Config) -> bool:
    """Turn SIGTERM into ``KeyboardInterrupt`` until ``config`` is cleaned up;
    False (nothing done) off the main thread or where a handler is set."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    handler = _Interrupter()
    signal.signal(signal.SIGTERM, handler)

    def restore() -> None:
        if signal.getsignal(signal.SIGTERM) is handler:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    config.add_cleanup(restore)
    return True
