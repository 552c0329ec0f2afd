"""The controller's outputs: merged ``benchmark.json``, ``crossover.png``, summary.

Storage, in the report directory (written only by a run that measured at
least one benchmark; a run that measured nothing writes and creates nothing):

``benchmark.json``   the latest run (replaced by each run that measured)
``crossover.png``    its figure (written after the JSON; a figure failure
                     never costs the JSON); ``roofline.png`` and
                     ``scaling.png`` (``--jax-devices``) where they apply
``summary.md``       the report in GitHub-flavoured markdown, and
``report.html``      as one self-contained page (figure embedded); both are
                     drawn from the JSON alone, so ``pytest-lyapax summary``
                     and ``html`` regenerate them byte for byte
``runs/NNNN.json``   every run that measured, numbered from 0001, never
                     overwritten: the history that ``pytest-lyapax history``
                     reads

Each JSON follows pytest-benchmark's schema (``machine_info``,
``commit_info``, ``benchmarks``, ``datetime``, ``version``) so that
``pytest-benchmark compare`` reads it; the plugin adds a ``pytest_lyapax`` key
with each backend's status -- ok, partial (some of its tests did not run,
e.g. ``-x``), interrupted (Ctrl-C), crashed, unavailable, fallback or not-run
-- and the reason when it is not ok.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from pytest_lyapax.backends.labels import (
    CRASHED,
    INTERRUPTED,
    PARTIAL,
    RUNNABLE,
)
from pytest_lyapax.measuring import compilecache
from pytest_lyapax.report import ab, busy, roofline, stats
from pytest_lyapax.report.compare import ComparisonResult, compare_runs
from pytest_lyapax.report.crossover import crossovers
from pytest_lyapax.report.details import no_array_leaves
from pytest_lyapax.report.identity import record_label, worker_fields
from pytest_lyapax.report.schema import REPORT_KEY, SCHEMA_VERSION
from pytest_lyapax.run import ab as ab_run
from pytest_lyapax.run import agreement, remote, search
from pytest_lyapax.run.session import LyapaxSession
from pytest_lyapax.views import explain
from pytest_lyapax.views.document import ReportView, RunFacts, Section, view_of
from pytest_lyapax.views.figure import render_png
from pytest_lyapax.views.render import (
    HTML_NAME,
    SUMMARY_NAME,
    report_html,
    summary_markdown,
    text_lines,
)

JSON_NAME = "benchmark.json"
FIGURE_NAME = "crossover.png"
ROOFLINE_NAME = "roofline.png"
AB_FIGURE_NAME = "ab.png"
SCALING_NAME = "scaling.png"
RUNS_DIR = "runs"
_RUN_NAME = re.compile(r"^(\d{4,})\.json$")


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` so that ``path`` is either the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _from_benchmark(config: pytest.Config, what: str) -> dict[str, Any] | None:
    """pytest-benchmark's ``machine_info`` or ``commit_info`` through its
    generate and update hooks (None: pytest-benchmark is not loaded)."""
    generate = getattr(config.hook, f"pytest_benchmark_generate_{what}", None)
    if generate is None:
        return None
    info = generate(config=config)
    update = getattr(config.hook, f"pytest_benchmark_update_{what}")
    update(config=config, **{what: info})
    return info


def machine_info(config: pytest.Config) -> dict[str, Any]:
    """pytest-benchmark's machine description (through its hooks) if it is loaded."""
    info = _from_benchmark(config, "machine_info")
    if info is not None:
        return info
    return {
        "node": platform.node(),
        "processor": platform.processor(),
        "machine": platform.machine(),
        "python_version": platform.python_version(),
        "system": platform.system(),
    }


def commit_info(config: pytest.Config) -> dict[str, Any]:
    info = _from_benchmark(config, "commit_info")
    return {} if info is None else info


def backend_summary(session: LyapaxSession) -> list[dict[str, Any]]:
    """Each backend's status, filled in with device details from its records."""
    out = []
    for label, state in session.states.items():
        entry = state.to_json()
        mine = [r for r in session.records if record_label(r) == label]
        if mine:
            entry.update(worker_fields(mine[0]))
        entry["n_benchmarks"] = len(mine)
        out.append(entry)
    return out


def plugin_version() -> str:
    """The installed distribution's version (importing lyapax would import JAX)."""
    try:
        return metadata.version("lyapax")
    except metadata.PackageNotFoundError:
        return "unknown"


def settle_statuses(session: LyapaxSession) -> None:
    """Mark backends whose tests did not all run as partial or interrupted."""
    for label, state in session.states.items():
        if state.status not in RUNNABLE or label not in session.expected:
            continue
        done, expected = session.finished[label], session.expected[label]
        if done >= expected:
            continue
        if session.interrupted:
            state.status = INTERRUPTED
            why = "the run was interrupted (Ctrl-C or SIGTERM)"
        else:
            state.status = PARTIAL
            why = "the run stopped early (-x, --maxfail or a session failure)"
        state.reason = f"{why}: {done} of its {expected} tests finished"


def dispatch_only(session: LyapaxSession) -> list[str]:
    """Full ids of benchmarks whose result had no JAX array to wait for."""
    return [str(r["fullname"]) for r in session.records if no_array_leaves(r)]


def ab_section(session: LyapaxSession) -> dict[str, Any]:
    """The A/B of the run (--jax-ab): what A and B are, and each benchmark's
    B/A verdict (report/ab.py)."""
    twins = {b.label: b.ab_of for b in session.settings.backends if b.ab_of}
    return {
        **(ab_run.state_of(session.stash).sides or {}),
        "comparisons": ab.compare(session.records, twins, session.settings.busy),
    }


def compose(
    session: LyapaxSession,
    info: dict[str, Any] | None,
    compared: ComparisonResult | None = None,
    commit: dict[str, Any] | None = None,
) -> tuple[bytes, ReportView]:
    """The merged report in pytest-benchmark's JSON schema, as stored, and its
    view: the document analysed once, as ``pytest-lyapax`` reads it back.

    The crossovers and cost models stored in the JSON are the view's (its
    analysis of the parsed document; nothing reads them back).
    """
    try:
        from pytest_benchmark import __version__ as bench_version
    except ImportError:
        bench_version = None
    statuses = [s.status for s in session.states.values()]
    # Each feature's part, through its own accessor (run/agreement.py, ...).
    agreed = agreement.state_of(session.stash)
    sides = ab_run.state_of(session.stash).sides
    roofline.annotate(session.records)
    document: dict[str, Any] = {
        "machine_info": info,
        "commit_info": {} if commit is None else commit,
        "benchmarks": session.records,
        "datetime": dt.datetime.now(dt.UTC).isoformat(),
        "version": bench_version,
        REPORT_KEY: {
            "schema": SCHEMA_VERSION,
            "plugin_version": plugin_version(),
            "complete": all(s not in (PARTIAL, INTERRUPTED, CRASHED) for s in statuses),
            "backends": backend_summary(session),
            "run_order": list(session.labels),
            "crossovers": [],  # from the view, below (the key keeps its place)
            "cost_model": [],
            "noise_test": stats.describe_test(),
            "busy": busy.describe_rule(session.settings.busy),
            "dispatch_only": dispatch_only(session),
            "points": list(session.points),
            "agreement": list(agreed.agreement),
            **(
                {"determinism": list(agreed.determinism)}
                if any(b.rerun_of for b in session.settings.backends)
                else {}
            ),
            **({"ab": ab_section(session)} if sides is not None else {}),
            "results": list(agreed.recorded),
            **search.state_of(session.stash).sections,
            "machines": roofline.machines(session.records),
            "comparison": None
            if compared is None
            else {"with": str(session.settings.compare_path), **compared.to_json()},
        },
    }
    data = json.loads(json.dumps(document, default=repr))
    view = view_of(data)
    reasons = busy.index(view.records) if session.settings.busy != busy.IGNORE else {}
    analysed = {
        "crossovers": [
            {
                "benchmark": b.key,
                **c.to_json(),
                "summary": c.describe(b.size_label),
                "unreliable": busy.crossover_marks(b, c, reasons),
            }
            for b in view.benches
            for c in crossovers(b)
        ],
        "cost_model": [m.to_json() for m in view.models],
        **(
            {"scaling": view.scaling()}
            if any(b.devices for b in session.settings.backends)
            else {}
        ),
    }
    document[REPORT_KEY].update(analysed)
    text = json.dumps(document, indent=2, default=repr).encode()
    data[REPORT_KEY].update(json.loads(json.dumps(analysed, default=repr)))
    return text, view


def next_run_path(runs: Path, text: bytes) -> Path:
    """Store ``text`` as the next ``runs/NNNN.json``; never replaces a file."""
    runs.mkdir(parents=True, exist_ok=True)
    numbers = [int(m[1]) for p in runs.iterdir() if (m := _RUN_NAME.match(p.name))]
    number = max(numbers, default=0) + 1
    while True:
        path = runs / f"{number:04d}.json"
        try:
            with open(path, "xb") as fh:
                fh.write(text)
            return path
        except FileExistsError:  # a concurrent run took this number
            number += 1


def write_reports(
    config: pytest.Config,
    session: LyapaxSession,
    info: dict[str, Any],
    compared: ComparisonResult | None = None,
) -> tuple[ReportView, list[Path]]:
    """The run's report and the files written from it: runs/NNNN.json, then
    benchmark.json, then the figures, summary.md and report.html.

    Writes nothing, and creates no directory, when nothing was measured.
    ``info`` is this machine's :func:`machine_info`.
    """
    if not session.records and not agreement.state_of(session.stash).agreement:
        settings = session.settings
        compilecache.tidy_unreported(
            settings.compile_cache,
            settings.report_dir,
            session.stash.get(compilecache.REPORT_EXISTED, True),
        )
        return compose(session, info, compared)[1], []
    report_dir = session.settings.report_dir
    assert report_dir is not None
    report_dir.mkdir(parents=True, exist_ok=True)
    latest = report_dir / JSON_NAME
    runs = report_dir / RUNS_DIR
    if latest.exists() and not runs.exists():
        # A report from before numbered runs existed: keep a copy first.
        next_run_path(runs, latest.read_bytes())
    # The files are drawn from the JSON as parsed back, as ``pytest-lyapax
    # html`` will draw them, so report.html embeds these very bytes.
    text, view = compose(session, info, compared, commit_info(config))
    written = [next_run_path(runs, text)]
    atomic_write(latest, text)
    written.append(latest)
    figure: bytes | str
    try:
        figure = render_png(*view.figure_args())
        atomic_write(report_dir / FIGURE_NAME, figure)
    except ImportError as exc:  # matplotlib is optional: the JSON still matters
        figure = f"{exc} (pip install matplotlib)"
        session.figure_error = f"no {FIGURE_NAME}: {figure}"
    except Exception as exc:  # noqa: BLE001 - a figure bug must not cost the JSON
        figure = f"{type(exc).__name__}: {exc}"
        session.figure_error = f"no {FIGURE_NAME}: {figure}"
    else:
        written.append(report_dir / FIGURE_NAME)
        written += _write_figure(report_dir, ROOFLINE_NAME, view.roofline_png, session)
        written += _write_figure(report_dir, AB_FIGURE_NAME, view.ab_png, session)
        written += _write_figure(report_dir, SCALING_NAME, view.scaling_png, session)
    written += write_readable(report_dir, view, figure, session)
    return view, written


def _write_figure(
    report_dir: Path,
    name: str,
    draw: Callable[[], bytes | None],
    session: LyapaxSession,
) -> list[Path]:
    """An optional figure (``roofline.png``: some point has its work;
    ``ab.png``: an A/B of sized benchmarks; ``scaling.png``: device counts)
    when ``draw`` gives one; a failure is noted."""
    try:
        png = draw()
    except Exception as exc:  # noqa: BLE001 - must not cost the other files
        problem = f"no {name}: {type(exc).__name__}: {exc}"
        session.figure_error = "; ".join(filter(None, [session.figure_error, problem]))
        return []
    if png is None:
        return []
    atomic_write(report_dir / name, png)
    return [report_dir / name]


def write_readable(
    report_dir: Path,
    view: ReportView,
    figure: bytes | str,
    session: LyapaxSession,
) -> list[Path]:
    """``summary.md`` and ``report.html`` (with ``figure`` embedded)."""
    try:
        files = {
            SUMMARY_NAME: summary_markdown(view),
            HTML_NAME: report_html(view, figure),
        }
    except Exception as exc:  # noqa: BLE001 - must not cost the JSON or figure
        problem = f"no {SUMMARY_NAME}/{HTML_NAME}: {type(exc).__name__}: {exc}"
        session.figure_error = "; ".join(filter(None, [session.figure_error, problem]))
        return []
    paths = []
    for name, data in files.items():
        atomic_write(report_dir / name, data)
        paths.append(report_dir / name)
    return paths


def check_regressions(
    session: LyapaxSession, info: dict[str, Any]
) -> ComparisonResult | None:
    """Compare with the saved run; remember why the gate fails on the session.

    A gate across hosts or devices is refused (``session.gate_refused``)
    unless ``--jax-compare-across-machines`` was given.  A comparison whose
    either side ran on a busy machine is marked unreliable, and under
    ``--jax-busy=warn`` its timing gates are excused (``report/busy.py``).
    """
    settings = session.settings
    if settings.compare_data is None:
        return None
    result = busy.judge_comparisons(
        compare_runs(
            settings.compare_data, session.records, settings.compare_fail, info
        ),
        settings.busy,
    )
    if settings.compare_fail:
        refused = result.refusal()
        if refused and not settings.compare_across_machines:
            session.gate_refused = refused
        else:
            session.gate_failures = result.gate_failures(settings.compare_allow_missing)
    return result


def run_facts(
    session: LyapaxSession,
    compared: ComparisonResult | None,
    written: Sequence[Path],
) -> RunFacts:
    """What the terminal summary adds to the report: this run's facts."""
    settings = session.settings
    agreed = agreement.state_of(session.stash)
    mismatched = remote.state_of(session.stash).mismatched
    mismatch_exit = 0
    if mismatched:
        mismatch_exit = int(remote.MISMATCH_EXIT)
    return RunFacts(
        live=True,
        compared=compared,
        gate_refused=session.gate_refused or None,
        gate_failures=tuple(session.gate_failures),
        gates=tuple(str(t) for t in settings.compare_fail),
        report_dir=str(settings.report_dir),
        written=tuple(str(p) for p in written),
        figure_error=session.figure_error,
        collection_errors=session.collection_errors,
        agree_warnings=tuple(agreed.warnings),
        late_failures=tuple(agreed.late_failures),
        mismatched=tuple(mismatched),
        mismatch_exit=mismatch_exit,
    )


def terminal_sections(
    session: LyapaxSession,
    view: ReportView,
    compared: ComparisonResult | None,
    written: Sequence[Path],
) -> list[Section]:
    """The terminal summary: the report's sections with the run's facts."""
    return explain.report_sections(view, run=run_facts(session, compared, written))


def summary_lines(
    session: LyapaxSession,
    compared: ComparisonResult | None,
    written: Sequence[Path],
    info: dict[str, Any] | None = None,
) -> list[tuple[str, list[str]]]:
    """Sections of the terminal summary as (title, lines) pairs."""
    view = compose(session, info, compared)[1]
    sections = terminal_sections(session, view, compared, written)
    return [(s.title, text_lines(s)) for s in sections]
