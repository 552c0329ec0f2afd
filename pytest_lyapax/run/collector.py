"""Hooks of the process that gathers results: the xdist controller, or the
single process of a run without xdist.

Benchmark results arrive attached to test reports (see ``measuring/benchmarks.py``),
so they are all here before pytest-benchmark writes its own files at session
finish, and a worker that crashes later cannot take them with it.  Each
report also carries its item's backend label (see ``items.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_lyapax.backends.labels import CRASHED
from pytest_lyapax.measuring.benchmarks import (
    RECORD_ATTR,
    fold_process,
    hand_to_benchmark_session,
)
from pytest_lyapax.measuring.points import POINT_ATTR
from pytest_lyapax.report.compare import ComparisonResult
from pytest_lyapax.report.schema import REPORT_KEY
from pytest_lyapax.run import output, stopsignal
from pytest_lyapax.run.items import LABEL_ATTR, item_label
from pytest_lyapax.run.scheduling import node_label
from pytest_lyapax.run.session import CONTROLLER, INPROCESS, LyapaxSession

if TYPE_CHECKING:
    from pytest_lyapax.views.document import ReportView


class ResultCollector:
    """Merges per-test results, writes the reports, prints the summary."""

    def __init__(self, config: pytest.Config, session: LyapaxSession) -> None:
        self.config = config
        self.session = session
        self.compared: ComparisonResult | None = None
        self.written: list[Path] = []
        self.view: ReportView | None = None  # the report, analysed once
        self.info: dict[str, Any] = {}
        # Records by full id: a second one comes from another process of the
        # same backend (--jax-processes) and is pooled into the first.
        self.by_fullname: dict[str, dict[str, Any]] = {}

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        parts = []
        for label, state in self.session.states.items():
            text = f"{label} (JAX_PLATFORMS={state.backend.platform}): {state.status}"
            parts.append(text)
        mode = "in this process only"
        if self.session.role == CONTROLLER:
            order = (
                "one backend at a time"
                if self.session.settings.sequential
                else "rounds interleaved"
            )
            mode = f"one xdist worker per backend, {order}"
        lines = [f"pytest-lyapax: {'; '.join(parts)} [{mode}]"]
        return lines + [f"pytest-lyapax: {note}" for note in self.session.notes]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if self.session.role == INPROCESS:
            self.session.expected.clear()
            for item in items:
                self.session.expected[item_label(item)] += 1

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo) -> None:
        # xdist stops a -x run with a KeyboardInterrupt subclass; only a real
        # Ctrl-C makes a backend "interrupted" rather than "partial".
        self.session.interrupted = excinfo.type is KeyboardInterrupt

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)
        label = getattr(report, LABEL_ATTR, None)
        runner = node_label(self.session, node) if node is not None else label
        if report.when == "???" and label is None:
            label = runner  # xdist's report for a test its worker died in
        state = self.session.states.get(label)
        if state is not None and getattr(report, "count_towards_summary", True):
            # The category pytest's own summary line counts the report under
            # ("passed", "error", "subtests passed", "rerun", ...; "" for a
            # set-up or teardown that passed), so the two agree.
            status = self.config.hook.pytest_report_teststatus(
                report=report, config=self.config
            )
            category = status[0] if status else _category(report)
            if category:
                state.outcomes[category] += 1
        if report.when in ("teardown", "???") and runner is not None:
            self.session.finished[runner] += 1
        point = getattr(report, POINT_ATTR, None)
        if point:
            entry = json.loads(point)
            if entry not in self.session.points:  # another process (--jax-processes)
                self.session.points.append(entry)
        raw = getattr(report, RECORD_ATTR, None)
        if raw:
            record = json.loads(raw)
            first = self.by_fullname.get(record["fullname"])
            if first is not None:
                fold_process(first, record)  # in place: also pytest-benchmark's
                return
            self.by_fullname[record["fullname"]] = record
            self.session.records.append(record)
            if self.session.role == CONTROLLER:
                hand_to_benchmark_session(self.config, record)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        output.settle_statuses(self.session)
        self.info = output.machine_info(self.config)
        self.compared = output.check_regressions(self.session, self.info)
        try:
            with stopsignal.holding():
                self.view, self.written = output.write_reports(
                    self.config, self.session, self.info, self.compared
                )
        except OSError as exc:
            self.session.figure_error = f"could not write the reports: {exc}"
            self.view = output.compose(self.session, self.info, self.compared)[1]
        if self.session.collection_errors:
            # What pytest does without xdist: nothing ran, the run is interrupted.
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        crashed = any(s.status == CRASHED for s in self.session.states.values())
        if self.session.gate_refused and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.TESTS_FAILED,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
        elif (self.session.gate_failures or crashed) and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        # The one terminal summary of the run: the report's sections, the
        # agreement and remote hosts' facts included (views/explain.py).
        from pytest_lyapax.views.render import write_terminal

        if self.view is None:  # the session's finish did not get this far
            self.view = output.compose(self.session, self.info, self.compared)[1]
        sections = output.terminal_sections(
            self.session, self.view, self.compared, self.written
        )
        write_terminal(terminalreporter, sections)

    @pytest.hookimpl(optionalhook=True)
    def pytest_benchmark_update_json(
        self, config: pytest.Config, benchmarks: Any, output_json: dict[str, Any]
    ) -> None:
        # pytest-benchmark's own --benchmark-json/--benchmark-save get the
        # backend states too.
        output_json[REPORT_KEY] = {"backends": output.backend_summary(self.session)}


def _category(report: pytest.TestReport) -> str:
    """pytest's own category of a report where no plugin gives one (the
    terminal plugin does; ``-p no:terminal`` leaves none)."""
    if report.when == "call":
        return report.outcome
    return "error" if report.failed else "skipped" if report.skipped else ""
