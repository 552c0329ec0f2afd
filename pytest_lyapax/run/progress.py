"""Progress of a multi-backend run, shown by the controller while it runs.

One line per backend: the test it runs (i of n, the benchmark and its size),
the time since its phase began and ``~`` the time left, as its worker
estimated it after its last test (``timeleft.py``: the cost model and the
budget for sized benchmarks, the mean test wall for the others), counted down
since.  On a terminal each line is a tqdm bar at a fixed ``position`` below
pytest's own line, redrawn after every report; when the output is not a
terminal, under ``-q`` or where ``CI`` is set, plain lines without control
characters are written at most every :data:`PLAIN_EVERY_S` seconds per
backend, and when a backend's phase ends.  Only the controller of a
``--jax-backend`` run shows them, and only through pytest's terminal
reporter (nothing with ``-p no:terminal``).
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
from pytest_lyapax.run.timeleft import LEFT_ATTR

PLAIN_EVERY_S = 30.0
BAR_FORMAT = "|{bar:12}| {desc}"


@dataclass
class _Backend:
    label: str
    started: float | None = None
    current: str = ""
    done: int = 0
    ended: bool = False
    last_plain: float = 0.0
    left_s: float | None = None  # the worker's estimate ...
    left_at: float = 0.0  # ... received then


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


class _Echo:
    """pytest's terminal file, wrapped: before pytest writes, the bars are
    cleared, and the text of pytest's current line (with pytest's own colour
    codes) is kept, so that after drawing the bars the cursor is put back
    where pytest left it by writing that text again."""

    def __init__(self, file: Any, before_write: Callable[[], None]) -> None:
        self.file = file
        self.before_write = before_write
        self.tail = ""

    def write(self, text: str) -> int:
        self.before_write()
        cut = max(text.rfind("\n"), text.rfind("\r"))
        self.tail = text[cut + 1 :] if cut >= 0 else self.tail + text
        return self.file.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.file, name)


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
        self.bars: dict[str, Any] = {}  # label -> tqdm bar, on a terminal
        self.echo: _Echo | None = None
        self.drawn = False

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
        if state.left_s is not None and not state.ended:
            left = max(state.left_s - (now - state.left_at), 0.0)
            text += f", ~{_duration(left)} left"
        return text

    def _terminal(self) -> Any | None:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    def _live(self, reporter: Any) -> bool:
        return live_wanted(self.config, bool(getattr(reporter, "isatty", False)))

    def _active(self) -> list[str]:
        return [label for label, s in self.backends.items() if s.started is not None]

    # -- the live bars (tqdm) -----------------------------------------------
    def _draw(self, reporter: Any) -> None:
        tw = reporter._tw
        if self.echo is None:
            self.echo = _Echo(tw._file, self._clear)
            # What pytest wrote of its line so far (as text, without colour).
            self.echo.tail = getattr(tw, "_current_line", "")
            tw._file = self.echo
        width = max(20, tw.fullwidth - 1)
        if tw.width_of_current_line >= width:
            return  # a wrapped line: the cursor could not be put back
        file = self.echo.file
        now = self.clock()
        for position, label in enumerate(self._active(), start=1):
            state = self.backends[label]
            text = self.line(label, now)
            bar = self.bars.get(label)
            if bar is None:
                bar = self.bars[label] = _bar(file, position, width)
            bar.total = max(self.session.expected.get(label, 0), 1)
            bar.n = state.done
            bar.ncols = width
            bar.set_description_str(text, refresh=False)
            bar.refresh()
        file.write("\r" + self.echo.tail)
        file.flush()
        self.drawn = bool(self.bars)

    def _clear(self) -> None:
        if self.drawn and self.echo is not None:
            self.drawn = False
            for bar in self.bars.values():
                bar.clear()
            self.echo.file.write("\r" + self.echo.tail)

    def _close(self, reporter: Any) -> None:
        if self.echo is None:
            return
        for bar in self.bars.values():
            bar.close()  # leave=False: blanks its line
        self.bars.clear()
        self.echo.file.write("\r" + self.echo.tail)
        self.echo.file.flush()
        reporter._tw._file = self.echo.file
        self.echo, self.drawn = None, False

    def _plain(self, reporter: Any, label: str, force: bool) -> None:
        state = self.backends[label]
        now = self.clock()
        if force or now - state.last_plain >= PLAIN_EVERY_S:
            state.last_plain = now
            if reporter._tw.width_of_current_line:
                reporter._tw.line()  # after pytest's dots, on a line of its own
            reporter.write_line(f"pytest-lyapax progress: {self.line(label, now)}")

    # -- hooks --------------------------------------------------------------
    def _label_of(self, nodeid: str) -> str | None:
        """The backend whose worker runs the test ``nodeid``: the one its
        collection was handed to (xdist runs, interleaved or not), else the
        first in run order that has tests left (a run in this process)."""
        label = self.session.test_labels.get(nodeid)
        if label in self.backends:
            return label
        for label in self.session.order:
            state = self.backends[label]
            if self.session.expected.get(label, 0) and not state.ended:
                return label
        return None

    # trylast: after pytest's terminal reporter wrote its part, so the bars
    # drawn here stay up while the test runs.
    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        label = self._label_of(nodeid)
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
            self._draw(reporter)
        else:
            self._plain(reporter, label, force=False)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        reporter = self._terminal()
        live = reporter is not None and self._live(reporter)
        # Counted by the backend whose worker ran it: the first backend's
        # worker also skips the tests of backends that cannot run.
        node = getattr(report, "node", None)
        label = node_label(self.session, node) if node is not None else None
        label = label or getattr(report, LABEL_ATTR, None)
        state = self.backends.get(label) if isinstance(label, str) else None
        if state is not None and report.when == "teardown":
            state.done += 1
            left = getattr(report, LEFT_ATTR, None)
            if isinstance(left, int | float):
                state.left_s, state.left_at = float(left), self.clock()
            if state.done >= self.session.expected.get(label, 0):
                state.ended = True
                state.current = ""
                if reporter is not None and not live:
                    self._plain(reporter, label, force=True)
        if live:
            self._draw(reporter)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        reporter = self._terminal()
        if reporter is not None:
            self._close(reporter)


def _bar(file: Any, position: int, width: int) -> Any:
    """A tqdm bar drawn only when asked (``refresh``), at a fixed line below
    the cursor's."""
    import shutil

    from tqdm import tqdm

    # tqdm draws nothing at a position at or below the terminal's height;
    # a terminal that reports no height (a bare pty) is taken as 24 rows.
    rows = shutil.get_terminal_size((width, 24)).lines
    rows = rows if rows > position + 1 else max(24, position + 2)

    class _Bar(tqdm):  # type: ignore[type-arg,misc]
        monitor_interval = 0  # no monitor thread: nothing redraws on its own

    return _Bar(
        total=1,
        file=file,
        position=position,
        leave=False,
        ncols=width,
        nrows=rows,
        bar_format=BAR_FORMAT,
        mininterval=0,
        dynamic_ncols=False,
        delay=0,
    )
