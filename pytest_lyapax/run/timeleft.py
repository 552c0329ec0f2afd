"""The time left of a backend's phase, estimated in its worker after every test.

The worker knows what the controller cannot: its remaining tests and the
sizes of each series already measured (``budget.py``).  After each test it
estimates the seconds its remaining tests take and sends the estimate with
the test's teardown report (:data:`LEFT_ATTR`); the controller's progress
lines (``progress.py``) show it as ``~... left``.  The rule, per backend:

- a remaining size of a sized benchmark whose series has two smaller sizes
  measured: the size's run cost (:func:`~pytest_lyapax.run.budget.size_cost`:
  warm-up, calibration call and rounds) at the seconds per call
  :func:`~pytest_lyapax.run.budget.predict` gives, plus the series' largest
  compile -- but the sizes of one series together never more than what is
  left of that series' two accounts (``--jax-budget``); nothing for the sizes
  a ``--jax-max-call`` stop skips;
- every other test (unsized tests and the first two sizes of each series): the
  mean wall time (set-up, call and teardown) of such tests done so far.  The
  mean, not the median: what is estimated is a sum, and in a suite of many
  quick tests and a few long compiles (tinygp 0.3.1's) the median said
  "test 34 of 150, ... ~10 s left" about 140 s before the backend finished.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pytest_lyapax.report.identity import is_size
from pytest_lyapax.run import budget
from pytest_lyapax.run.items import item_label

# Attribute of a teardown report: seconds left on its backend (a float).
LEFT_ATTR = "pytest_lyapax_left"

SeriesKey = tuple[str, str, str]
_WALL_KEY = pytest.StashKey[float]()


def estimate(
    sized: Sequence[tuple[SeriesKey, int]],
    others: int,
    series: Mapping[SeriesKey, budget.Series],
    other_walls_s: Sequence[float],
    budget_s: float | None,
    options: Mapping[str, Any],
    memo: dict[tuple[SeriesKey, int], tuple[int, float]] | None = None,
) -> float | None:
    """Seconds the remaining tests of one backend take (the module's rule).

    ``sized``: the remaining sized benchmarks (series, size), in run order;
    ``others``: how many other tests remain; ``series``: what each series
    measured so far; ``other_walls_s``: wall times of the tests done without
    a prediction; ``options``: pytest-benchmark's (rounds).
    Returns None while there is nothing to go by (no such test done yet).
    ``memo`` keeps each size's cost until its series measures another size
    (a worker asks after every test; a fit costs tens of milliseconds).
    """
    memo = {} if memo is None else memo
    total = 0.0
    left_of: dict[SeriesKey, float] = {}
    for key, size in sized:
        state = series.get(key)
        smaller = [m for m in state.measured if m.size < size] if state else []
        if state is None or len(smaller) < 2:
            others += 1  # the first two sizes of a series: no prediction yet
            continue
        if state.stopped and size > state.stopped_at:
            continue  # --jax-max-call: it will not run
        known = memo.get((key, size))
        if known is not None and known[0] == len(smaller):
            cost = known[1]
        else:
            per_call = budget.predict(smaller, size, key[0]).per_call_s
            cost = budget.size_cost(per_call, 0.0, options)
            memo[(key, size)] = (len(smaller), cost)
        compile_s = max(m.compile_s for m in smaller)
        if budget_s is not None:
            left = left_of.get(key, budget_s - state.spent_s)
            cost = min(cost, max(left, 0.0))
            left_of[key] = left - cost
            compile_key = (key[0], key[1], key[2] + " compile")
            left = left_of.get(compile_key, budget_s - state.compile_spent_s)
            compile_s = min(compile_s, max(left, 0.0))
            left_of[compile_key] = left - compile_s
        total += cost + compile_s
    if others:
        if not other_walls_s:
            return None
        total += others * (sum(other_walls_s) / len(other_walls_s))
    return total


class WorkerTimeLeft:
    """A worker's estimate of its time left, sent with each teardown report."""

    def __init__(
        self, config: pytest.Config, label: str | None, budget_s: float | None
    ) -> None:
        self.config = config
        self.label = label
        self.budget_s = budget_s
        self.position: dict[str, int] = {}
        self.sized: list[tuple[int, SeriesKey, int]] = []  # (position, key, size)
        self.others_after: list[int] = []  # other tests after each position
        self.walls: list[float] = []
        self.memo: dict[tuple[SeriesKey, int], tuple[int, float]] = {}

    def _plan(self, items: Sequence[pytest.Item]) -> None:
        from pytest_lyapax.measuring.points import series_of

        other = [False] * len(items)
        for index, item in enumerate(items):
            self.position.setdefault(item.nodeid, index)
            if item_label(item) != self.label:
                continue  # another backend's test, skipped here at once
            key, size = series_of(item, self.label or "")
            benchmarked = "benchmark" in getattr(item, "fixturenames", ())
            if benchmarked and is_size(size):
                self.sized.append((index, key, size))
            else:
                other[index] = True
        self.others_after = [0] * (len(items) + 1)
        for index in range(len(items) - 1, -1, -1):
            self.others_after[index] = self.others_after[index + 1] + other[index]

    def seconds_left(self, item: pytest.Item) -> float | None:
        """After ``item`` finished: the estimate for the tests after it."""
        if not self.position:
            self._plan(item.session.items)
        index = self.position.get(item.nodeid)
        if index is None:
            return None
        series = budget.series_state(self.config)
        if item_label(item) == self.label:
            key, size = _series_and_size(item, self.label)
            state = series.get(key) if key is not None else None
            smaller = state and any(m.size < size for m in state.measured)
            if not smaller:  # it had no prediction: it sets the others' price
                self.walls.append(item.stash.get(_WALL_KEY, 0.0))
        return estimate(
            [(k, s) for i, k, s in self.sized if i > index],
            self.others_after[index + 1],
            series,
            self.walls,
            self.budget_s,
            budget.benchmark_options(self.config),
            self.memo,
        )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        item.stash[_WALL_KEY] = item.stash.get(_WALL_KEY, 0.0) + call.duration
        if call.when == "teardown":
            left = self.seconds_left(item)
            if left is not None:
                setattr(report, LEFT_ATTR, left)
        return report


def _series_and_size(item: pytest.Item, label: str) -> tuple[SeriesKey | None, int]:
    from pytest_lyapax.measuring.points import series_of

    if "benchmark" not in getattr(item, "fixturenames", ()):
        return None, 0
    key, size = series_of(item, label)
    if not is_size(size):
        return None, 0
    return key, size
