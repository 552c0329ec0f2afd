"""Progress of a multi-backend run, shown by the controller while it runs.

One line per backend: tests done of its total, the test running now (its
benchmark and size), the time since its phase began and the time left,
estimated from the mean duration of its tests so far.  On a terminal the
lines are live (redrawn under pytest's own output after every report, the
text formatted by tqdm); when the output is not a terminal, under ``-q`` or
where ``CI`` is set, plain lines without control characters are written at
most every :data:`PLAIN_EVERY_S` seconds per backend, and when a backend's
phase ends.  Only the controller of a ``--jax-backend`` run shows them, and
only through pytest's terminal reporter (nothing with ``-p no:terminal``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_lyapax.run.items import LABEL_ATTR
from pytest_lyapax.run.scheduling import node_label
from pytest_lyapax.run.session import LyapaxSession

PLAIN_EVERY_S = 30.0


@dataclass
class _Backend:
    label: str
    started: float | None = None
    current: str = ""
    done: int = 0
    ended: bool = False
    last_plain: float = 0.0


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def _current(nodeid: str) -> str:
    """``test_x[cpu-200]`` -> ``test_x, size/params cpu-200`` (short)."""
    name = nodeid.rsplit("::", 1)[-1]
    base, _, params = name.partition("[")
    return f"{base} [{params}" if params else base


def live_wanted(config: pytest.Config, isatty: bool) -> bool:
    """Whether the live (redrawn) lines are shown, else the plain ones."""
    quiet = config.get_verbosity() < 0
    return isatty and not quiet and not os.environ.get("CI")


class BackendProgress:
    """The controller's progress lines (a plugin registered by ``runplan``)."""

    def __init__(
        self,
        config: pytest.Config,
        session: LyapaxSession,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.session = session
        self.clock = clock
        self.backends = {label: _Backend(label) for label in session.labels}
        self.drawn = 0  # live lines now under pytest's output

    # -- what is shown ------------------------------------------------------
    def line(self, label: str, now: float) -> str:
        state = self.backends[label]
        total = self.session.expected.get(label, 0)
        elapsed = now - state.started if state.started is not None else 0.0
        text = f"{label}: test {min(state.done + 1, total)} of {total}"
        if state.ended:
            text = f"{label}: {state.done} of {total} tests done"
        elif state.current:
            text += f", {state.current}"
        text += f", {_duration(elapsed)} elapsed"
        if state.done and not state.ended and total > state.done:
            left = elapsed / state.done * (total - state.done)
            text += f", about {_duration(left)} left"
        return text

    def _terminal(self) -> Any | None:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    def _live(self, reporter: Any) -> bool:
        return live_wanted(self.config, bool(getattr(reporter, "isatty", False)))

    def _active(self) -> list[str]:
        return [label for label, s in self.backends.items() if s.started is not None]

    def _draw(self, reporter: Any) -> None:
        from tqdm import tqdm

        tw = reporter._tw
        now = self.clock()
        width = max(20, tw.fullwidth - 1)
        text = ""
        for label in self._active():
            state = self.backends[label]
            total = max(self.session.expected.get(label, 0), 1)
            meter = tqdm.format_meter(
                state.done, total, 0, ncols=20, bar_format="{bar}"
            )
            text += "\n\r" + f"{meter} {self.line(label, now)}"[:width] + "\x1b[K"
        lines = text.count("\n")
        if not lines:
            return
        column = tw.width_of_current_line
        text += f"\x1b[{lines}A\r" + (f"\x1b[{column}C" if column else "")
        tw._file.write(text)
        tw.flush()
        self.drawn = lines

    def _clear(self, reporter: Any) -> None:
        if self.drawn:
            reporter._tw._file.write("\x1b[J")  # erase below the cursor
            self.drawn = 0

    def _plain(self, reporter: Any, label: str, force: bool) -> None:
        state = self.backends[label]
        now = self.clock()
        if force or now - state.last_plain >= PLAIN_EVERY_S:
            state.last_plain = now
            if reporter._tw.width_of_current_line:
                reporter._tw.line()  # after pytest's dots, on a line of its own
            reporter.write_line(f"pytest-lyapax progress: {self.line(label, now)}")

    # -- hooks --------------------------------------------------------------
    def _running(self) -> str | None:
        """The backend whose phase runs now: phases run one after another,
        in run order (see scheduling.py)."""
        for label in self.session.order:
            if not self.backends[label].ended:
                return label
        return None

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        label = self._running()
        if label is None:
            return
        state = self.backends[label]
        if state.started is None:
            state.started = self.clock()
            state.last_plain = state.started - PLAIN_EVERY_S
        state.current = _current(nodeid)
        reporter = self._terminal()
        if reporter is None:
            return
        if self._live(reporter):
            self._clear(reporter)
            self._draw(reporter)
        else:
            self._plain(reporter, label, force=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport):
        reporter = self._terminal()
        live = reporter is not None and self._live(reporter)
        if live:
            self._clear(reporter)  # pytest writes its own output next
        result = yield
        # Counted by the backend whose worker ran it: the first backend's
        # worker also skips the tests of backends that cannot run.
        node = getattr(report, "node", None)
        label = node_label(self.session, node) if node is not None else None
        label = label or getattr(report, LABEL_ATTR, None)
        state = self.backends.get(label) if isinstance(label, str) else None
        if state is not None and report.when == "teardown":
            state.done += 1
            if state.done >= self.session.expected.get(label, 0):
                state.ended = True
                state.current = ""
                if reporter is not None and not live:
                    self._plain(reporter, label, force=True)
        if live:
            self._draw(reporter)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        reporter = self._terminal()
        if reporter is not None and self.drawn:
            self._clear(reporter)
