"""The controller's outputs: merged ``benchmark.json``, ``crossover.png``, summary.

Storage, in the report directory (written only by a run that measured at
least one benchmark; a run that measured nothing writes and creates nothing):

``benchmark.json``   the latest run (replaced by each run that measured)
``crossover.png``    its figure (written after the JSON; a figure failure
                     never costs the JSON)
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
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from pytest_lyapax.backends.labels import (
    CRASHED,
    INTERRUPTED,
    OK,
    PARTIAL,
    RUNNABLE,
    outcome_text,
)
from pytest_lyapax.measuring import measure
from pytest_lyapax.report import analysis, costmodel, roofline, rooftext, stats
from pytest_lyapax.report.details import no_array_leaves
from pytest_lyapax.report.identity import record_label, worker_fields
from pytest_lyapax.report.schema import REPORT_KEY, SCHEMA_VERSION
from pytest_lyapax.run.session import LyapaxSession
from pytest_lyapax.views import explain, tables
from pytest_lyapax.views.figure import render_png
from pytest_lyapax.views.render import (
    HTML_NAME,
    SUMMARY_NAME,
    report_html,
    summary_markdown,
)

JSON_NAME = "benchmark.json"
FIGURE_NAME = "crossover.png"
ROOFLINE_NAME = "roofline.png"
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


def machine_info(config: pytest.Config) -> dict[str, Any]:
    """pytest-benchmark's machine description (through its hooks) if it is loaded."""
    hook = config.hook
    if hasattr(hook, "pytest_benchmark_generate_machine_info"):
        info = hook.pytest_benchmark_generate_machine_info(config=config)
        hook.pytest_benchmark_update_machine_info(config=config, machine_info=info)
        return info
    return {
        "node": platform.node(),
        "processor": platform.processor(),
        "machine": platform.machine(),
        "python_version": platform.python_version(),
        "system": platform.system(),
    }


def commit_info(config: pytest.Config) -> dict[str, Any]:
    hook = config.hook
    if hasattr(hook, "pytest_benchmark_generate_commit_info"):
        info = hook.pytest_benchmark_generate_commit_info(config=config)
        hook.pytest_benchmark_update_commit_info(config=config, commit_info=info)
        return info
    return {}


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
            why = "the run was interrupted (Ctrl-C)"
        else:
            state.status = PARTIAL
            why = "the run stopped early (-x, --maxfail or a session failure)"
        state.reason = f"{why}: {done} of its {expected} tests finished"


def dispatch_only(session: LyapaxSession) -> list[str]:
    """Full ids of benchmarks whose result had no JAX array to wait for."""
    return [str(r["fullname"]) for r in session.records if no_array_leaves(r)]


def build_document(
    config: pytest.Config,
    session: LyapaxSession,
    info: dict[str, Any],
    compared: analysis.ComparisonResult | None = None,
) -> dict[str, Any]:
    """The merged report in pytest-benchmark's JSON schema."""
    try:
        from pytest_benchmark import __version__ as bench_version
    except ImportError:
        bench_version = None
    benches = analysis.group_sized(session.records, session.labels, info)
    models = costmodel.cost_models(benches)
    crossing = [
        {"benchmark": b.key, **c.to_json(), "summary": c.describe(b.size_label)}
        for b in benches
        for c in analysis.crossovers(b)
    ]
    statuses = [s.status for s in session.states.values()]
    roofline.annotate(session.records)
    return {
        "machine_info": info,
        "commit_info": commit_info(config),
        "benchmarks": session.records,
        "datetime": dt.datetime.now(dt.UTC).isoformat(),
        "version": bench_version,
        REPORT_KEY: {
            "schema": SCHEMA_VERSION,
            "plugin_version": plugin_version(),
            "complete": all(s not in (PARTIAL, INTERRUPTED, CRASHED) for s in statuses),
            "backends": backend_summary(session),
            "run_order": list(session.labels),
            "crossovers": crossing,
            "cost_model": [m.to_json() for m in models],
            "noise_test": stats.describe_test(),
            "dispatch_only": dispatch_only(session),
            "points": list(session.points),
            "agreement": list(session.agreement),
            "results": list(session.recorded),
            "machines": roofline.machines(session.records),
            "comparison": None
            if compared is None
            else {"with": str(session.settings.compare_path), **compared.to_json()},
        },
    }


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
    compared: analysis.ComparisonResult | None = None,
) -> list[Path]:
    """Store the run (runs/NNNN.json), then benchmark.json, then crossover.png.

    Writes nothing, and creates no directory, when nothing was measured.
    ``info`` is this machine's :func:`machine_info`.
    """
    if not session.records and not session.agreement:
        return []
    report_dir = session.settings.report_dir
    assert report_dir is not None
    report_dir.mkdir(parents=True, exist_ok=True)
    latest = report_dir / JSON_NAME
    runs = report_dir / RUNS_DIR
    if latest.exists() and not runs.exists():
        # A report from before numbered runs existed: keep a copy first.
        next_run_path(runs, latest.read_bytes())
    document = build_document(config, session, info, compared)
    text = json.dumps(document, indent=2, default=repr).encode()
    written = [next_run_path(runs, text)]
    atomic_write(latest, text)
    written.append(latest)
    # The figure is drawn from the JSON just written, as ``pytest-lyapax
    # html`` will draw it, so report.html embeds these very bytes.
    view = explain.view_of(json.loads(text))
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
        written += _write_roofline(report_dir, view, session)
    written += write_readable(report_dir, view, figure, session)
    return written


def _write_roofline(
    report_dir: Path, view: explain.ReportView, session: LyapaxSession
) -> list[Path]:
    """``roofline.png`` when some point has its work (a failure is noted)."""
    try:
        png = view.roofline_png()
    except Exception as exc:  # noqa: BLE001 - must not cost the other files
        problem = f"no {ROOFLINE_NAME}: {type(exc).__name__}: {exc}"
        session.figure_error = "; ".join(filter(None, [session.figure_error, problem]))
        return []
    if png is None:
        return []
    atomic_write(report_dir / ROOFLINE_NAME, png)
    return [report_dir / ROOFLINE_NAME]


def write_readable(
    report_dir: Path,
    view: explain.ReportView,
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
) -> analysis.ComparisonResult | None:
    """Compare with the saved run; remember why the gate fails on the session.

    A gate across hosts or devices is refused (``session.gate_refused``)
    unless ``--jax-compare-across-machines`` was given.
    """
    settings = session.settings
    if settings.compare_data is None:
        return None
    result = analysis.compare_runs(
        settings.compare_data, session.records, settings.compare_fail, info
    )
    if settings.compare_fail:
        refused = result.refusal()
        if refused and not settings.compare_across_machines:
            session.gate_refused = refused
        else:
            session.gate_failures = result.gate_failures(settings.compare_allow_missing)
    return result


def summary_lines(
    session: LyapaxSession,
    compared: analysis.ComparisonResult | None,
    written: Sequence[Path],
    info: dict[str, Any] | None = None,
) -> list[tuple[str, list[str]]]:
    """Sections of the terminal summary as (title, lines) pairs."""
    sections: list[tuple[str, list[str]]] = []
    rows = []
    for entry in backend_summary(session):
        details = entry.get("device") or ""
        if entry.get("jax_version"):
            details += f", jax {entry['jax_version']}"
        environment = f"JAX_PLATFORMS={entry['platform']}"
        if entry.get("gateway"):  # a backend on another host (remote.py)
            environment += f" @ {entry.get('host') or '?'} ({entry['gateway']})"
        rows.append(
            [
                entry["label"],
                environment,
                entry["status"],
                outcome_text(entry["outcomes"]) or "-",
                str(entry["n_benchmarks"]),
                details.strip(", ") or "-",
            ]
        )
    lines = tables.render_table(
        ["backend", "environment", "status", "tests", "benchmarks", "device"],
        rows,
        left=6,
    )
    for state in session.states.values():
        if state.reason:
            lines.append(f"{state.backend.label}: {state.reason}")
    sections.append(("pytest-lyapax: backends", lines))

    labels = list(session.labels)
    missing = {
        s.backend.label: s.status for s in session.states.values() if s.status != OK
    }
    benches = analysis.group_sized(session.records, labels, info)
    models = costmodel.by_key(costmodel.cost_models(benches))
    roofline.annotate(session.records)
    roof = rooftext.index(session.records)
    for bench in benches:
        table = tables.sized_table(bench, labels, missing)
        table += rooftext.crossover_lines(bench, roof)
        if bench.key in models:
            table += [f"cost model {line}" for line in models[bench.key].lines()]
        sections.append((f"{bench.name}: median wall time per call", table))
    unsized = analysis.unsized_medians(session.records, info)
    table = tables.unsized_table(unsized, labels, missing)
    if table:
        sections.append(("benchmarks without a size axis: median wall time", table))
    if benches and len(labels) > 1:
        sections[-1][1].append(f"faster / within noise: {stats.rule_text()}")
    placed = roofline.series_lines(session.records)
    if placed:
        sections.append(("pytest-lyapax: roofline (XLA cost analysis)", placed))
    unblocked = dispatch_only(session)
    if unblocked:
        lines = [
            "these results had no JAX array to wait for, so only the dispatch was "
            "timed; return the arrays, or register the class as a pytree "
            "(jax.tree_util.register_dataclass, equinox.Module):"
        ]
        lines += [f"  {name}" for name in unblocked[:20]]
        sections.append(("pytest-lyapax: timed by dispatch only", lines))
    hosted = measure.host_argument_benchmarks(session.records)
    if hosted:
        lines = [
            "warning: timed with NumPy (host) arguments on a non-CPU backend, so "
            "every call includes the copy to the device; pass jax.device_put(x) "
            "to time the computation alone (or parametrize to time both):"
        ]
        lines += [f"  {name}" for name in hosted[:20]]
        sections.append(("pytest-lyapax: host arguments", lines))
    if session.points:
        lines = [
            f"{p['fullname']}: {p['status']}: {p['message']}"
            for p in session.points[:20]
        ]
        sections.append(("pytest-lyapax: sizes not timed", lines))

    settings = session.settings
    if compared is not None:
        title = f"comparison with {settings.compare_path}"
        if settings.compare_fail:
            gates = ", ".join(str(t) for t in settings.compare_fail)
            title += f" (fail above {gates})"
        lines = tables.comparison_table(compared.comparisons, settings.compare_fail)
        if not compared.comparisons:
            lines = ["no benchmark of this run appears in the saved run"]
        lines += tables.machine_lines(compared.machines)
        if session.gate_refused:
            lines.append(
                f"gate refused, the runs were measured apart: {session.gate_refused}"
            )
        elif compared.refusal():
            lines.append(f"measured apart (gated anyway): {compared.refusal()}")
        if compared.missing:
            lines.append(
                f"{len(compared.missing)} saved benchmark(s) missing from this run:"
            )
            lines += [f"  {name}" for name in compared.missing[:20]]
            if len(compared.missing) > 20:
                lines.append(f"  ... and {len(compared.missing) - 20} more")
        regressed = len(compared.regressions)
        if regressed:
            lines.append(f"{regressed} benchmark(s) regressed")
        sections.append((title, lines))
    if not session.records:
        sections.append(
            (
                "pytest-lyapax: reports",
                [
                    "no benchmark was measured: nothing written to "
                    f"{settings.report_dir}"
                ],
            )
        )
    elif written or session.figure_error:
        lines = [f"wrote {p}" for p in written]
        if session.figure_error:
            lines.append(session.figure_error)
        sections.append(("pytest-lyapax: reports", lines))
    return sections
