"""Hooks of the process that gathers results: the xdist controller, or the
single process of a run without xdist.

Benchmark results arrive attached to test reports (see ``benchmarks.py``),
so they are all here before pytest-benchmark writes its own files at session
finish, and a worker that crashes later cannot take them with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from . import report
from .analysis import Comparison
from .benchmarks import RECORD_ATTR, hand_to_benchmark_session
from .session import CONTROLLER, LyapaxSession, PytestLyapaxWarning


class ResultCollector:
    """Merges per-test results, writes the reports, prints the summary."""

    def __init__(self, config: pytest.Config, session: LyapaxSession) -> None:
        self.config = config
        self.session = session
        self.comparisons: list[Comparison] = []
        self.written: list[Path] = []

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        parts = []
        for label, state in self.session.states.items():
            text = f"{label} (JAX_PLATFORMS={state.backend.platform}): {state.status}"
            parts.append(text)
        mode = {
            CONTROLLER: "one xdist worker per backend, one backend at a time",
        }.get(self.session.role, "in this process only")
        return [f"pytest-lyapax: {'; '.join(parts)} [{mode}]"]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        label = self.session.label_of(report.nodeid)
        if label is not None:
            outcomes = self.session.states[label].outcomes
            if report.when == "call" or (
                report.when != "teardown" and not report.passed
            ):
                outcomes[report.outcome] += 1
            elif report.when == "teardown" and report.failed:
                outcomes["error"] += 1
        raw = getattr(report, RECORD_ATTR, None)
        if raw:
            record = json.loads(raw)
            self.session.records.append(record)
            if self.session.role == CONTROLLER:
                hand_to_benchmark_session(self.config, record)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.comparisons = report.check_regressions(self.session)
        try:
            self.written = report.write_reports(self.config, self.session)
        except OSError as exc:
            self.config.issue_config_time_warning(
                PytestLyapaxWarning(
                    f"pytest-lyapax could not write its reports: {exc}"
                ),
                stacklevel=2,
            )
        if self.session.regressions and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        sections = report.summary_lines(self.session, self.comparisons, self.written)
        for title, lines in sections:
            terminalreporter.write_sep("-", title)
            for line in lines:
                terminalreporter.write_line(line)
        if self.session.regressions:
            threshold = self.session.settings.compare_fail
            terminalreporter.write_sep(
                "=",
                f"pytest-lyapax: performance regressed beyond {threshold} in "
                f"{len(self.session.regressions)} benchmark(s)",
                red=True,
            )

    @pytest.hookimpl(optionalhook=True)
    def pytest_benchmark_update_json(
        self, config: pytest.Config, benchmarks: Any, output_json: dict[str, Any]
    ) -> None:
        # pytest-benchmark's own --benchmark-json/--benchmark-save get the
        # backend states too.
        output_json[report.REPORT_KEY] = {
            "backends": report.backend_summary(self.session)
        }
