"""Sizes chosen by the plugin: the crossover search and the memory ceilings.

pytest collects every item before the first one runs, and each backend's
items run in that backend's own worker, so a size chosen from the verdicts
of two backends cannot be added to the run that measured them.  The search
runs after the marked sizes, in the controller, as *follow-up runs*
(run/followup.py): for each searched test, ``python -m pytest <test>
--jax-sizes=N`` with the run's own options (backends, platforms, variables,
budget), its report in a temporary folder.  Each follow-up run is an
ordinary run of the plugin: one worker per backend, rounds interleaved, the
noise test, out-of-memory caught.  Its records join the run's report marked
``extra_info["search"]`` (``crossover`` or ``ceiling``); the decisions are
pure functions (report/search.py).

A crossover search reads the verdicts as the report does: one whose rounds
ran on a busy machine (report/busy.py; not under ``--jax-busy=ignore``)
decides nothing, and a size the search needs again is measured again, its
new records replacing the busy ones.  Where a saved run (``--jax-compare``,
else the report folder's previous ``benchmark.json``) ended a search of the
same test, backends and precisions with a bracket, the search measures that
bracket's ends first.

The ceiling search runs each backend alone with ``PYTEST_LYAPAX_CEILING=1``:
its benchmark fixture compares the compiled program's memory analysis with
the device's limit before the real call (measuring/ceiling.py), and a size
that does not fit ends as an out-of-memory point.  Where the same saved run
ended a ceiling search of the same test and backend in the same conditions
(platform, precision, device kind, the label's variables), the search
confirms that ceiling's two sizes first, in one follow-up run, and goes on
from what they say.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_lyapax.measuring.ceiling import CEILING_ENV
from pytest_lyapax.report import search as plan
from pytest_lyapax.report.identity import bare_id, is_size, series_id
from pytest_lyapax.run import followup


@dataclass
class SearchState:
    """The searches' part of the run (the controller's): the report's
    sections they found, ``crossover_search`` and ``ceilings``."""

    sections: dict[str, Any] = field(default_factory=dict)


STATE_KEY = pytest.StashKey[SearchState]()


def state_of(stash: pytest.Stash) -> SearchState:
    """The run's search state (no sections where nothing was searched)."""
    return stash.setdefault(STATE_KEY, SearchState())


# The user property a worker attaches to a report: the marker's search bounds.
BOUNDS_PROPERTY = "jax_search"
# Every message of a bad search= starts so (the controller makes it exit 4).
BAD_SEARCH = "bad search bounds:"
# Without a budget, at most this many follow-up runs per test and backend pair
# (or backend, for the ceiling).
MAX_STEPS = 10
# Default bounds: the marked range / 16 ... * 16.
MAX_SPAN = 16
# A ceiling size needs one call, not a timing.
_ONE_ROUND = (
    "--benchmark-min-rounds=1",
    "--benchmark-max-time=0",
    "--jax-no-peaks",
)


def marker_bounds(marker: Any, where: str) -> tuple[int, int] | None:
    """The ``search=(lo, hi)`` of a ``jax_sizes`` marker (None without it);
    raises ValueError naming the test and the value."""
    if marker is None or "search" not in marker.kwargs:
        return None
    value = marker.kwargs["search"]
    ok = (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
        and value[0] < value[1]
    )
    if not ok:
        raise ValueError(
            f"{BAD_SEARCH} {where}: @pytest.mark.jax_sizes(..., search={value!r}): "
            "search takes two positive integers lo < hi, e.g. search=(2, 4000)"
        )
    return int(value[0]), int(value[1])


def check_marker(metafunc: pytest.Metafunc) -> None:
    """A ``search=`` that is malformed, or on a test without the ``jax_size``
    axis, is a collection error whose message the controller turns into a
    usage error (exit 4)."""
    where = metafunc.definition.nodeid
    marker = metafunc.definition.get_closest_marker("jax_sizes")
    try:
        bounds = marker_bounds(marker, where)
    except ValueError as exc:
        raise pytest.Collector.CollectError(str(exc)) from None
    if bounds is not None and "jax_size" not in metafunc.fixturenames:
        raise pytest.Collector.CollectError(
            f"{BAD_SEARCH} {where}: search={bounds!r} needs a size axis: the test "
            "does not use the jax_size fixture"
        )


class SearchWorkerHooks:
    """In a worker (and in-process): the marker's bounds travel with each
    report, so that the controller knows them."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        marker = item.get_closest_marker("jax_sizes")
        try:
            bounds = marker_bounds(marker, item.nodeid)
        except ValueError:
            return
        if bounds is not None:
            item.user_properties.append((BOUNDS_PROPERTY, list(bounds)))


def worker_hooks(config: pytest.Config, session: Any) -> object | None:
    return SearchWorkerHooks()


def controller_hooks(config: pytest.Config, session: Any) -> object | None:
    if os.environ.get(followup.CHILD_ENV):
        return followup.FollowUpHooks(session, os.environ[followup.CHILD_ENV])
    return SearchHooks(config, session)


class SearchHooks:
    """The controller's searches, run when the marked sizes are done and
    before the report is written."""

    def __init__(self, config: pytest.Config, session: Any) -> None:
        self.config = config
        self.session = session
        self.state = state_of(session.stash)  # the report reads it (output.py)
        self.bounds: dict[str, tuple[int, int]] = {}
        self.bad: str | None = None
        self.crossover = session.settings.find_crossover
        self.ceiling = session.settings.find_ceiling
        # Set when a Ctrl-C or SIGTERM (stopsignal.py) stops a follow-up run:
        # the searches end there, and the report keeps what they found.
        self.stopped: str | None = None
        # Why the last follow-up run wrote no record ("": it wrote some).
        self.nothing_because = ""
        self._saved: tuple[Any, str] | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in getattr(report, "user_properties", ()):
            if name == BOUNDS_PROPERTY and isinstance(value, list) and len(value) == 2:
                self.bounds[bare_id(report.nodeid)] = (int(value[0]), int(value[1]))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and BAD_SEARCH in str(report.longrepr):
            lines = [x for x in str(report.longrepr).splitlines() if BAD_SEARCH in x]
            self.bad = lines[0].strip() if lines else BAD_SEARCH

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Any:
        if self.bad is None and not self.session.interrupted:
            if self.crossover or self.ceiling:
                self._end_workers()
            # The lists are the report's sections from the start, so that a
            # search stopped half-way still reports what it found.
            if self.crossover:
                found = self.state.sections["crossover_search"] = []
                self.search_crossovers(found)
            if self.ceiling and self.stopped is None:
                found = self.state.sections["ceilings"] = []
                self.search_ceilings(found)
        result = yield
        if self.bad is not None:
            self.session.notes.append(f"usage error: {self.bad}")
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        elif self.stopped is not None:
            self.session.notes.append(f"search {self.stopped}")
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        return result

    def _say(self, text: str) -> None:
        """One line of the searches' progress: each follow-up run starts a
        pytest process (and opens the device again), which takes seconds."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"pytest-lyapax search: {text}")

    # -- the follow-up runs ---------------------------------------------------

    def _end_workers(self) -> None:
        """Let the run's workers finish and exit before the first follow-up
        run: a TPU admits one process at a time, and a worker holds its chip
        until its process exits (workerend.py; the later wait finds none)."""
        dsession = self.config.pluginmanager.getplugin("dsession")
        group = getattr(getattr(dsession, "nodemanager", None), "group", None)
        if group is None or not self.session.worker_labels:
            return
        from pytest_lyapax.run.workerend import EndingWorker, await_workers, describe

        workers = [
            EndingWorker(
                node.gateway,
                describe(node.gateway, label),
                channel=getattr(node, "channel", None),
                finished=True,
            )
            for node, label in self.session.worker_labels.items()
        ]
        await_workers(group, workers, self.session.notes.append)

    def _budget_s(self, labels: int) -> float | None:
        """Seconds a search of one test may spend: the run's budget per series
        and backend, times the backends it measures."""
        budget = self.session.settings.budget_s
        return None if budget is None else budget * labels

    def follow_up(
        self,
        fullname: str,
        sizes: Sequence[int],
        labels: Sequence[str],
        env: dict[str, str],
        extra: Sequence[str] = (),
        timeout_s: float | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """:func:`followup.run`, with ``timeout_s`` what is left of the
        search's budget (None: no budget); why it measured nothing in
        :attr:`nothing_because`; a Ctrl-C or SIGTERM (stopsignal.py)
        ends the follow-up run and sets :attr:`stopped`."""
        try:
            records, points, self.nothing_because = followup.run(
                self.config, fullname, sizes, labels, env, extra, timeout_s
            )
        except KeyboardInterrupt as stop:
            # subprocess.run has ended the child (and so freed its chip).
            self.stopped = f"interrupted ({stop or 'Ctrl-C'}) during a follow-up run"
            return [], []
        return records, points

    def _mark(self, records: list[dict[str, Any]], key: str, how: str) -> list:
        kept = []
        for record in records:
            if series_id(record).benchmark != key:
                continue
            info = record.setdefault("extra_info", {})
            if isinstance(info, dict):
                info["search"] = how
            kept.append(record)
        return kept

    def search_crossovers(self, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Append to ``out`` one search entry per sized series of the first
        two backends, and return it."""
        from pytest_lyapax.report.precision import record_precision
        from pytest_lyapax.report.series import group_sized

        order = self.session.order
        saved, note = self._saved_report()
        for bench in group_sized(self.session.records, order):
            if self.stopped is not None:
                break
            pair = search_pair(order, bench.series)
            if pair is None:
                continue
            a, b = pair
            fullname = self._fullname(bench.key)
            if fullname is None:
                continue
            sizes = bench.sizes
            bounds = self.bounds.get(bare_id(fullname)) or (
                max(1, min(sizes) // MAX_SPAN),
                max(sizes) * MAX_SPAN,
            )
            start = plan.saved_bracket(
                saved,
                bench.key,
                (a, b),
                self._conditions(bench.key, record_precision),
                bounds,
            )
            out.append(self._search_one(bench.key, fullname, a, b, bounds, start, note))
        return out

    def _saved_report(self) -> tuple[Any, str]:
        """The saved run a search may start from: ``--jax-compare``'s, else
        the report folder's ``benchmark.json`` of the previous run, read as
        untrusted input; one that does not load is not used, and the second
        value says why.  Read once: the crossover and ceiling searches
        start from the same file."""
        if self._saved is None:
            self._saved = self._load_saved()
        return self._saved

    def _load_saved(self) -> tuple[Any, str]:
        from pytest_lyapax.report.schema import ReportError, load_report

        settings = self.session.settings
        if settings.compare_data is not None:
            return settings.compare_data, ""
        if settings.report_dir is None:
            return None, ""
        path = settings.report_dir / "benchmark.json"
        if not path.is_file():
            return None, ""
        try:
            return load_report(path).data, ""
        except ReportError as exc:
            return None, f"not started from the saved run: {exc}"

    def _conditions(
        self, key: str, of: Callable[[Mapping[str, Any]], str]
    ) -> dict[str, str]:
        """This run's conditions (``of`` a record: its precision, ...) per
        label of benchmark ``key``."""
        out: dict[str, str] = {}
        for record in self.session.records:
            sid = series_id(record)
            if sid.benchmark == key and sid.label is not None:
                out.setdefault(sid.label, of(record))
        return out

    def _fullname(self, key: str) -> str | None:
        for record in self.session.records:
            if series_id(record).benchmark == key:
                return str(record.get("fullname") or "")
        return None

    def _busy_sizes(self, bench: Any, crossover: Any) -> dict[int, str]:
        """The sizes whose verdict read a busy record, with why (none under
        ``--jax-busy=ignore``)."""
        from pytest_lyapax.report import busy

        if self.session.settings.busy == busy.IGNORE:
            return {}
        return busy.crossover_marks(bench, crossover, busy.index(self.session.records))

    def _search_one(
        self,
        key: str,
        fullname: str,
        a: str,
        b: str,
        bounds: tuple[int, int],
        start: tuple[int, int] | None = None,
        note: str = "",
    ) -> dict[str, Any]:
        budget = self._budget_s(2)
        spent = 0.0
        last = 0.0
        added: list[int] = []
        retried: list[int] = []
        tried: set[int] = set()
        # A saved bracket: its ends are measured first, in one follow-up run.
        first = [] if start is None else list(start)
        started: tuple[int, int] | None = None
        while True:
            decision, busy, measured = self._next_size(key, a, b, bounds, retried)
            if decision.status != plan.SEARCHING:
                break
            assert decision.size is not None
            pending, first = [s for s in first if s not in measured], []
            sizes = pending or [decision.size]
            again = sizes[0] in busy
            over_budget = budget is not None and spent + last > budget
            if (
                (sizes[0] in tried and not again)
                or len(added) + len(retried) >= MAX_STEPS
                or over_budget
            ):
                decision = _stopped(decision, "stopped after", len(added))
                break
            tried.update(sizes)
            self._say(
                f"{key}: {a} vs {b} at {', '.join(map(str, sizes))} "
                f"({decision.text or 'no bracket yet'}; {_spent(spent, budget)})"
            )
            begin = time.monotonic()
            records, _ = self.follow_up(
                fullname,
                sizes,
                [a, b],
                {},
                timeout_s=None if budget is None else budget - spent,
            )
            last = time.monotonic() - begin
            spent += last
            if self.stopped is not None:
                decision = _stopped(decision, f"{self.stopped}, after", len(added))
                break
            kept = self._mark(records, key, "crossover")
            if not kept:
                decision = plan.Decision(
                    plan.UNRELIABLE,
                    bracket=decision.bracket,
                    text=f"the follow-up run at {', '.join(map(str, sizes))} "
                    f"measured nothing ({self.nothing_because or 'no record of it'})",
                )
                break
            if again:
                self._drop(key, sizes[0], kept)
                retried.append(sizes[0])
            else:
                added.extend(sizes)
            started = start if pending else started
            self.session.records.extend(kept)
        entry = plan.search_entry(
            key, (a, b), decision, bounds, added, retried, started, note
        )
        self._say(f"{key}: {a} vs {b}: {decision.text or decision.status}")
        return entry

    def _next_size(
        self,
        key: str,
        a: str,
        b: str,
        bounds: tuple[int, int],
        retried: Sequence[int],
    ) -> tuple[plan.Decision, dict[int, str], tuple[int, ...]]:
        """What the search of ``key`` does next, from the verdicts measured
        so far; with the busy sizes and the sizes measured."""
        from pytest_lyapax.report.crossover import find_crossover
        from pytest_lyapax.report.series import group_sized

        bench = next(
            (x for x in group_sized(self.session.records, (a, b)) if x.key == key),
            None,
        )
        if bench is None:
            return plan.Decision(plan.UNRELIABLE, text="no series to search"), {}, ()
        pa, pb = bench.points(a), bench.points(b)
        c = find_crossover(a, b, pa, pb)
        logs = [
            math.log(pa[s].median / pb[s].median)
            if pa[s].median > 0 and pb[s].median > 0
            else 0.0
            for s in c.sizes
        ]
        busy = self._busy_sizes(bench, c)
        decision = plan.next_crossover_size(
            c.sizes,
            c.verdicts,
            logs,
            a,
            b,
            bounds,
            _axis(bench.size_label),
            busy,
            retried,
        )
        return decision, busy, c.sizes

    def _drop(self, key: str, size: int, new: list[dict[str, Any]]) -> None:
        """Take out ``key``'s records at ``size`` that ``new`` measures again."""
        labels = {series_id(r).label for r in new}
        self.session.records[:] = [
            r
            for r in self.session.records
            if not (
                series_id(r).benchmark == key
                and series_id(r).label in labels
                and r.get("extra_info", {}).get("size") == size
            )
        ]

    def search_ceilings(self, out: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Append to ``out`` one ceiling entry per sized series and backend,
        and return it."""
        from pytest_lyapax.report.series import group_sized

        saved, note = self._saved_report()
        for bench in group_sized(self.session.records, self.session.order):
            fullname = self._fullname(bench.key)
            if fullname is None:
                continue
            conditions = self._conditions(bench.key, plan.ceiling_conditions)
            for label in bench.series:
                if self.stopped is not None:
                    return out
                if label not in self.session.order:
                    continue
                start, why = plan.saved_ceiling(
                    saved, bench.key, label, conditions.get(label, "")
                )
                out.append(
                    self._ceiling_one(bench.key, fullname, label, start, why or note)
                )
        return out

    def _ceiling_one(
        self,
        key: str,
        fullname: str,
        label: str,
        start: Sequence[int] | None = None,
        note: str = "",
    ) -> dict[str, Any]:
        fits = [
            int(r["extra_info"]["size"])
            for r in self.session.records
            if series_id(r).benchmark == key
            and series_id(r).label == label
            and is_size(r.get("extra_info", {}).get("size"))
        ]
        too_big = _oom_sizes(self.session.points, key, label)
        budget = self._budget_s(1)
        spent = last = 0.0
        added: list[int] = []
        stopped = ""
        # A saved ceiling: its sizes that this run does not know yet are
        # confirmed first, in one follow-up run.
        first = [
            s for s in start or () if s > max(fits, default=0) and s not in too_big
        ]
        started: list[int] = []
        while True:
            sizes, saved, first = first, bool(first), []
            if not saved:
                size = plan.next_ceiling_size(fits, list(too_big))
                if size is None:
                    break
                sizes = [size]
            if len(added) >= MAX_STEPS or (
                budget is not None and spent + last > budget
            ):
                stopped = f"search stopped by the budget after {len(added)} sizes"
                break
            self._say(
                f"{key}: ceiling on {label}, trying {', '.join(map(str, sizes))} "
                f"({_spent(spent, budget)})"
            )
            begin = time.monotonic()
            fit, oom = self._ceiling_step(
                key,
                fullname,
                label,
                sizes,
                None if budget is None else budget - spent,
            )
            last = time.monotonic() - begin
            spent += last
            if self.stopped is not None:
                stopped = f"search {self.stopped}, after {len(added)} sizes"
                break
            added.extend(sizes)
            started = sizes if saved else started
            fits += fit
            too_big.update(oom)
            # A size above one that ran out of memory is skipped in the
            # worker (measuring/points.py): it does not fit either.
            lost = [
                s for s in sizes if s not in fits and not any(b <= s for b in too_big)
            ]
            if lost:
                stopped = f"the follow-up run at {lost[0]} measured nothing"
                if self.nothing_because:
                    stopped += f" ({self.nothing_because})"
                too_big[lost[0]] = stopped
                break
        entry = plan.ceiling_entry(
            key, label, fits, too_big, added, stopped, started, note
        )
        self._say(
            f"{key}: ceiling on {label}: fits up to {entry['largest_fitting']}"
            + (
                f", not at {entry['first_not_fitting']}"
                if entry["first_not_fitting"]
                else ""
            )
            + (f" ({entry['reason']})" if entry["reason"] else "")
        )
        return entry

    def _ceiling_step(
        self,
        key: str,
        fullname: str,
        label: str,
        sizes: Sequence[int],
        timeout_s: float | None,
    ) -> tuple[list[int], dict[int, str]]:
        """One follow-up run of a ceiling search: the sizes of ``sizes`` that
        fit, and those that ran out of memory (with why).  One quick round
        a size: whether it ran, not its time (its records are not kept)."""
        records, points = self.follow_up(
            fullname, sizes, [label], {CEILING_ENV: "1"}, _ONE_ROUND, timeout_s
        )
        fit = [
            int(r["extra_info"]["size"])
            for r in self._mark(records, key, "ceiling")
            if series_id(r).label == label and r["extra_info"].get("size") in sizes
        ]
        for entry in points:
            if isinstance(entry, dict):
                entry["search"] = "ceiling"
        self.session.points.extend(p for p in points if p.get("status") == "oom")
        return fit, _oom_sizes(points, key, label)


def search_pair(
    order: Sequence[str], measured: Iterable[str]
) -> tuple[str, str] | None:
    """The two backends whose crossing a series' search looks for: the first
    two of the run's order that measured it (the reference first).  Not
    simply the run's first two labels: a device-count twin such as
    ``cpu_1dev`` (perf_tests asks for them) measures other series, and the
    TPU's series were never searched (found on the lent chip)."""
    have = set(measured)
    labels = [label for label in order if label in have]
    return (labels[0], labels[1]) if len(labels) >= 2 else None


def _stopped(decision: plan.Decision, why: str, added: int) -> plan.Decision:
    """The search ends before a bracket: where it got, and why it stopped
    (``"stopped after"`` the budget, or an interruption)."""
    where = decision.text or "no bracket yet"
    return plan.Decision(
        plan.BUDGET,
        bracket=decision.bracket,
        text=f"{where}; {why} {added} added sizes",
    )


def _spent(spent: float, budget: float | None) -> str:
    if budget is None:
        return f"{spent:.0f} s spent"
    return f"{spent:.0f} s of its {budget:.0f} s budget spent"


def _axis(size_label: str) -> str:
    """The size axis in words: ``network size d`` from ``network size d
    (nodes)``, ``problem size`` from the default ``problem size (jax_size)``."""
    return size_label.split(" (", 1)[0].strip() or "size"


def _oom_sizes(
    points: Sequence[Mapping[str, Any]], key: str, label: str
) -> dict[int, str]:
    """Sizes of ``key``'s test that ran out of memory on ``label``, with the
    message (a point names its test, not its other parameters)."""
    out: dict[int, str] = {}
    for p in points:
        size = p.get("size")
        if p.get("status") != "oom" or p.get("backend") != label or not is_size(size):
            continue
        if bare_id(str(p.get("fullname") or "")) == bare_id(key):
            out[int(size)] = str(p.get("message") or "out of memory")
    return out
