"""What watches a benchmark's timed rounds: turns between backends, and observers.

Every round pytest-benchmark runs (calibration, warm-up and timed rounds,
``benchmark`` and ``pedantic`` alike) goes through the runner that
:class:`RoundsWatch` wraps, outside the timed region:

- **Turns.**  With several backends interleaved (the default; see
  ``run/turns.py``), only the worker that holds the turn runs anything, so
  two backends never share cores; a worker gives the turn away between two
  rounds once it has held it for :attr:`Turns.slice_s`, and waits for it to
  come back.  The global number of each turn is recorded per timed round
  (``extra_info["turns"]``), so that the rounds of two backends taken in
  neighbouring turns can be compared as pairs (``report/stats.py``).
- **Observers.**  A measurement that needs to see the rounds (the machine's
  state, compiles during the rounds) is a :class:`RoundObserver`: it is told
  when this worker's rounds start running and when they stop (a turn given
  away, the rounds done), and writes its ``extra_info`` entry at the end.
  ``observers.observers_for`` is the one list of them.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar


class Turns(abc.ABC):
    """Who may run now, among the workers of one session.

    ``hold`` blocks until this worker has the turn; ``release`` gives it back;
    ``ticket`` is the global number of the turn held (0 when turns are off).
    """

    slice_s: ClassVar[float] = 0.05  # seconds a worker runs rounds before yielding
    ticket: int = 0
    waited_s: float = 0.0  # seconds spent waiting for turns, in total

    @abc.abstractmethod
    def hold(self) -> None: ...

    @abc.abstractmethod
    def release(self) -> None: ...

    @property
    @abc.abstractmethod
    def mode(self) -> str:
        """``"interleaved"`` or ``"sequential"``, as the report names it."""

    @property
    def held(self) -> bool:
        return False


class NoTurns(Turns):
    """One worker at a time anyway (backends run one after another, or one
    backend): nothing to wait for."""

    def hold(self) -> None:
        return None

    def release(self) -> None:
        return None

    @property
    def mode(self) -> str:
        return "sequential"


class RoundObserver(abc.ABC):
    """Watches one benchmark's rounds in this worker.

    ``start``/``stop`` bracket each stretch of rounds run without a pause
    (between them the worker may have waited for its turn: what happened
    then is another backend's); ``record`` writes the observer's entry.
    """

    key: ClassVar[str]  # its extra_info entry

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    def round_done(self) -> None:
        """After each round (cheap: called inside the rounds' loop)."""
        return None

    @abc.abstractmethod
    def record(self, extra_info: dict[str, Any], data: Sequence[float]) -> None:
        """Write ``extra_info[self.key]``; ``data`` the timed rounds' seconds
        per call."""


class RoundsWatch:
    """One benchmark's rounds: the turn they run in and their observers."""

    def __init__(self, turns: Turns, observers: Sequence[RoundObserver] = ()) -> None:
        self.turns = turns
        self.observers = list(observers)
        self.round_turns: list[int] = []
        self._running = False
        self._since = 0.0

    def _begin(self) -> None:
        if not self.turns.held:
            self.turns.hold()
        self._since = time.perf_counter()
        for observer in self.observers:
            observer.start()
        self._running = True

    def _pause(self) -> None:
        for observer in self.observers:
            observer.stop()
        self._running = False

    def before_round(self) -> None:
        if not self._running:
            self._begin()

    def after_round(self) -> None:
        self.round_turns.append(self.turns.ticket)
        for observer in self.observers:
            observer.round_done()
        if time.perf_counter() - self._since >= self.turns.slice_s:
            self._pause()
            if self.turns.mode == "interleaved":
                self.turns.release()
                self.turns.hold()

    def wrap(self, runner: Callable[..., Any]) -> Callable[..., Any]:
        """pytest-benchmark's round runner, watched."""

        def watched(*args: Any, **kwargs: Any) -> Any:
            self.before_round()
            try:
                return runner(*args, **kwargs)
            finally:
                self.after_round()

        return watched

    def finish(self, extra_info: dict[str, Any], data: Sequence[float]) -> None:
        """Write the observers' entries and the turn of each timed round
        (the last ``len(data)`` rounds run: calibration and warm-up rounds
        come first)."""
        if self._running:
            self._pause()
        extra_info["rounds_mode"] = self.turns.mode
        if self.turns.mode == "interleaved" and data:
            extra_info["turns"] = self.round_turns[-len(data) :]
        for observer in self.observers:
            observer.record(extra_info, data)
