"""What watches a benchmark's timed rounds: turns between backends, and observers.

Every round pytest-benchmark runs (calibration, warm-up and timed rounds,
``benchmark`` and ``pedantic`` alike) goes through the runner that
:class:`RoundsWatch` wraps, outside the timed region:

- **Turns.**  With several backends interleaved (the default; see
  ``run/turns.py``), only the worker that holds the turn runs anything, so
  two backends never share cores; a worker gives the turn away between two
  rounds once it has held it for :attr:`Turns.slice_s`, or once it has run
  its share of the rounds pytest-benchmark planned (:meth:`RoundsWatch.plan`:
  the rounds spread over at least :attr:`Turns.min_turns` turns), and waits
  for it to come back.  The share matters when the calibration's single
  call was slower than the rounds (a cold first call, a moment of load):
  pytest-benchmark then plans a fraction of ``--benchmark-max-time``, and
  time slices alone would give too few turns to pair.  The global number
  of each turn is recorded per timed round (``extra_info["turns"]``), so
  that the rounds of two backends taken in neighbouring turns can be
  compared as pairs (``report/stats.py``).
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

from pytest_lyapax.measuring.observer import RoundObserver


class Turns(abc.ABC):
    """Who may run now, among the workers of one session.

    ``hold`` blocks until this worker has the turn; ``release`` gives it back;
    ``ticket`` is the global number of the turn held (0 when turns are off).
    """

    slice_s: ClassVar[float] = 0.02  # seconds a worker runs rounds before yielding
    # Turns over which a benchmark's planned rounds are spread at least: twice
    # the pairs report/stats.py needs for a verdict (MIN_PAIRS).
    min_turns: ClassVar[int] = 16
    ticket: int = 0
    waited_s: float = 0.0  # seconds spent waiting for turns, in total
    progress: int = 0  # tests this worker has started: the furthest behind goes first

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

    def ended(self) -> None:
        """This worker ended a test: its reports are on their way."""
        return None

    def finish(self) -> None:
        """This worker has run its last test: no one need wait for it."""
        return None


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


class RoundsWatch:
    """One benchmark's rounds: the turn they run in and their observers."""

    def __init__(self, turns: Turns, observers: Sequence[RoundObserver] = ()) -> None:
        self.turns = turns
        self.observers = list(observers)
        self.round_turns: list[int] = []
        self._running = False
        self._since = 0.0
        self._per_turn = 0  # rounds per turn at most (0: no plan, time slices only)
        self._in_turn = 0
        self._left = 0  # planned rounds not run yet

    def plan(self, rounds: int) -> None:
        """pytest-benchmark will run ``rounds`` rounds (its calibration is
        done, or ``pedantic`` was asked for them): in interleaved mode, each
        turn runs at most ``rounds / min_turns`` of them.  After the last
        one the turn is kept, whatever the time, to end the test: a worker
        that gave it away there would wait while the other backend, behind
        in turns, ran all its rounds, and the two tests would end in the
        other order."""
        self._per_turn = max(1, rounds // self.turns.min_turns)
        self._in_turn = 0
        self._left = rounds

    def _begin(self) -> None:
        if not self.turns.held:
            self.turns.hold()
        self._since = time.perf_counter()
        self._in_turn = 0
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
        interleaved = self.turns.mode == "interleaved"
        self._in_turn += 1
        last = self._left == 1
        self._left = max(self._left - 1, 0)
        if last:
            return  # the last planned round: the test ends in this turn
        # Rounds beyond the plan (none expected) yield by time alone.
        share_done = interleaved and self._left > 0 and self._per_turn <= self._in_turn
        if share_done or time.perf_counter() - self._since >= self.turns.slice_s:
            self._pause()
            if interleaved:
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

    def close(self) -> None:
        """Stop the observers of rounds that ended early (a round raised):
        nothing is recorded."""
        if self._running:
            self._pause()

    def finish(
        self,
        extra_info: dict[str, Any],
        data: Sequence[float],
        *,
        iterations: int = 1,
        test: str = "",
    ) -> None:
        """Write the observers' entries and the turn of each timed round
        (the last ``len(data)`` rounds run: calibration and warm-up rounds
        come first); ``iterations`` calls per timed round, ``test`` the
        benchmark's full name (both told to the observers)."""
        if self._running:
            self._pause()
        extra_info["rounds_mode"] = self.turns.mode
        if self.turns.mode == "interleaved" and data:
            extra_info["turns"] = self.round_turns[-len(data) :]
        for observer in self.observers:
            observer.iterations, observer.test = iterations, test
            observer.record(extra_info, data)
