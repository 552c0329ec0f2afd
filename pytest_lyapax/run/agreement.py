"""Results compared across backends: the options, and the worker's and the
controller's hooks.

Each worker attaches what a test recorded (``jax_results.record``, and a
benchmark's return value unless ``--jax-no-agree``) to the test's call
report.  The controller keeps the reference backend's entries per test and
compares every other backend's with them as their reports arrive
(:mod:`pytest_lyapax.report.agreement`): a disagreement turns that report
into a failure, before pytest's own reporting sees it, so the terminal, the
exit status and ``--junitxml`` all count it.  A benchmark's return value that
disagrees is a warning in the summary unless ``--jax-agree-strict``.  Each
test of the reference runs first (its worker takes the first turn, and the
backends' tests alternate) unless ``--jax-reference-backend`` names a later
backend or the workers' collections differ; then the comparison waits for
the reference's report, and a disagreement found then fails the session
(listed in the summary) instead of the test, whose report has already been
shown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

# The recorder of results in the workers and the comparison in the controller.
from pytest_lyapax.measuring import agreement as recorder
from pytest_lyapax.report import agreement as comparison
from pytest_lyapax.report.precision import Precision
from pytest_lyapax.run.items import LABEL_ATTR
from pytest_lyapax.run.options import Settings
from pytest_lyapax.run.session import CONTROLLER, LyapaxSession

MARKER = "jax_agree"


def marker_line() -> str:
    return (
        f"{MARKER}(rtol=None, atol=None, z=4): tolerance of this test's results "
        "compared across backends (default by dtype; z for results with stderr)"
    )


def check_reference(settings: Settings) -> None:
    """The reference label must be one of the backends.

    Raises:
        pytest.UsageError: a reference label that is not one of the backends.
    """
    labels = settings.labels
    reference = settings.agree.reference
    if reference not in labels:
        raise pytest.UsageError(
            f"--jax-reference-backend={reference!r} is not one of the backends of "
            f"--jax-backend ({', '.join(labels)})"
        )


@dataclass
class AgreeState:
    """The agreement's part of the run (filled by the controller's
    :class:`AgreeController`, read by the report's composer, run/output.py)."""

    # Results compared across backends, per test.
    agreement: list[dict[str, Any]] = field(default_factory=list)
    # Each label's results against its rerun's (--jax-rerun).
    determinism: list[dict[str, Any]] = field(default_factory=list)
    # Each passed test's recorded results, so runs of two machines can be
    # compared later.
    recorded: list[dict[str, Any]] = field(default_factory=list)
    # What the terminal summary's composer (views/explain.report_sections)
    # shows at the end: --jax-agree-strict warnings, and disagreements found
    # after their test's report went out, as text.
    warnings: list[str] = field(default_factory=list)
    late_failures: list[str] = field(default_factory=list)


STATE_KEY = pytest.StashKey[AgreeState]()


def state_of(stash: pytest.Stash) -> AgreeState:
    """The run's agreement state (empty where nothing compared)."""
    return stash.setdefault(STATE_KEY, AgreeState())


def worker_hooks(config: pytest.Config, session: LyapaxSession) -> AgreeWorker:
    """A worker's agreement hooks; its recorded arrays go to the run's store."""
    agree = session.settings.agree
    config.stash[recorder.STORE_KEY] = agree.store
    return AgreeWorker(agree.benchmarks)


def controller_hooks(
    config: pytest.Config, session: LyapaxSession
) -> AgreeController | None:
    """The controller's agreement hooks (None in the other roles, which only
    check the reference label: it is checked in every role)."""
    check_reference(session.settings)
    return AgreeController(config, session) if session.role == CONTROLLER else None


def marker_tolerance(item: pytest.Item) -> comparison.Tolerance:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return comparison.Tolerance()
    if marker.args:
        raise ValueError(
            f"@pytest.mark.{MARKER} takes keywords only (rtol=, atol=, z=), got "
            f"{marker.args!r}"
        )
    return comparison.check_tolerance(marker.kwargs)


class AgreeWorker:
    """A worker's hooks: check the marker, attach the results to the report."""

    def __init__(self, benchmarks: bool) -> None:
        self.benchmarks = benchmarks

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        try:
            marker_tolerance(item)
        except ValueError as exc:
            pytest.fail(f"{item.nodeid}: {exc}", pytrace=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if call.when == "call":
            try:
                tolerance = marker_tolerance(item).to_json()
            except ValueError:
                tolerance = {}
            payload = recorder.payload_of(item, tolerance, self.benchmarks)
            if payload is not None:
                setattr(report, recorder.RESULTS_ATTR, payload)
        return report


def test_key(nodeid: str, label: str) -> str:
    """The test's id without its backend: the same on every backend."""
    head, sep, params = nodeid.rpartition("[")
    if not sep or not params.endswith("]"):
        return nodeid
    parts = params[:-1].split("-")
    if label in parts:
        parts.reverse()
        parts.remove(label)
        parts.reverse()
    return f"{head}[{'-'.join(parts)}]" if parts else head


@dataclass
class _Seen:
    passed: bool
    entries: list[dict[str, Any]]
    tolerance: comparison.Tolerance


class AgreeController:
    """The controller's hooks: compare each backend's results with the reference."""

    def __init__(self, config: pytest.Config, session: LyapaxSession) -> None:
        self.config = config
        self.session = session
        self.settings = session.settings.agree
        self.seen: dict[str, dict[str, _Seen]] = {}
        self.pending: dict[str, list[str]] = {}
        self.state = state_of(session.stash)
        # Each label run twice (--jax-rerun): its rerun's label.
        self.reruns = {
            b.rerun_of: b.label for b in session.settings.backends if b.rerun_of
        }

    def _reference(self, label: str) -> str:
        """The label whose results ``label``'s are compared with: the
        reference, or for a device-count label (--jax-devices) the
        reference's first device-count label, which runs the same tests."""
        ref = self.settings.reference
        if not self.session.backend(label).devices:
            return ref
        split = [
            b.label
            for b in self.session.settings.backends
            if b.devices_of == ref and not b.rerun_of
        ]
        return split[0] if split else ref

    def _ran_before(self, label: str) -> bool:
        """Whether the reference's phase came before ``label``'s (never, when
        the backends' tests interleave: the reference's report may come later)."""
        order = self.session.order
        ref = self._reference(label)
        if not self.session.settings.sequential:
            return False
        return ref in order and label in order and order.index(ref) < order.index(label)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        label = getattr(report, LABEL_ATTR, None)
        if label is None:
            return
        key = test_key(report.nodeid, label)
        seen = self.seen.setdefault(key, {})
        if label in seen:
            return  # another process of the same backend (--jax-processes)
        raw = getattr(report, recorder.RESULTS_ATTR, None)
        data = json.loads(raw) if raw else {}
        seen[label] = _Seen(
            report.passed,
            list(data.get("entries", [])),
            comparison.Tolerance.from_json(data.get("tolerance")),
        )
        if seen[label].entries and report.passed:
            # In the report too, so runs of two machines can be compared later.
            self.state.recorded.append({"test": key, "backend": label, **data})
        self._compare_rerun(key, label)
        ref = self._reference(label)
        if label == ref:
            for other in self.pending.pop(key, []):
                self._compare(key, other, None)
        elif ref in seen:
            self._compare(key, label, report)
        elif not self._ran_before(label):
            self.pending.setdefault(key, []).append(label)

    def _compare_rerun(self, key: str, label: str) -> None:
        """A label's results against its rerun's, bit for bit, once both are in
        (not a failure: the determinism table says what differs)."""
        first = self.session.backend(label).rerun_of or label
        rerun = self.reruns.get(first)
        seen = self.seen[key]
        if rerun is None or first not in seen or rerun not in seen:
            return
        a, b = seen[first], seen[rerun]
        if not (a.passed and b.passed) or not (a.entries or b.entries):
            return
        names = comparison.identical_entries(a.entries, b.entries, comparison.load_file)
        self.state.determinism.append(
            {
                "test": key,
                "backend": first,
                "rerun": rerun,
                "identical": all(n["identical"] for n in names),
                "names": names,
            }
        )

    def _precision(self, label: str) -> Precision | None:
        """The label's precision as its probe found it (None: unknown)."""
        state = self.session.states.get(label)
        if state is None:
            return None
        return Precision.from_json(state.info.get("precision"), state.backend.expected)

    def _compare(self, key: str, label: str, report: pytest.TestReport | None) -> None:
        reference = self._reference(label)
        ref, other = self.seen[key][reference], self.seen[key][label]
        if not ref.entries and not other.entries:
            return
        if not (ref.passed and other.passed):
            return  # a failed test is reported as such; its results may be partial
        verdicts = comparison.compare_entries(
            ref.entries,
            other.entries,
            other.tolerance,
            comparison.load_file,
            widths_may_differ=comparison.precision_differs(
                self.session.backend(reference).env,
                self.session.backend(label).env,
            ),
            precisions=(self._precision(reference), self._precision(label)),
        )
        failing = [
            v
            for v in verdicts
            if not v.ok and (v.kind == comparison.RESULT or self.settings.strict)
        ]
        warned = [v for v in verdicts if not v.ok and v not in failing]
        self.state.agreement.append(
            {
                "test": key,
                "reference": reference,
                "backend": label,
                "agree": all(v.ok for v in verdicts),
                "failed": bool(failing),
                "names": [v.to_json() for v in verdicts],
            }
        )
        where = f"{key} on {label!r}"
        self.state.warnings += [
            f"{where}: benchmark result {v.name!r} disagrees with "
            f"{reference!r} (--jax-agree-strict fails it)"
            for v in warned
        ]
        if not failing:
            return
        from pytest_lyapax.views import agreement as agreement_view

        text = agreement_view.failure_text(key, label, reference, failing)
        if report is not None:
            report.outcome = "failed"
            report.longrepr = text
        else:
            self.state.late_failures.append(text)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # tryfirst: the reports written after this hold the late comparisons.
        if self.state.late_failures and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
