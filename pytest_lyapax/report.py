"""The controller's outputs: merged ``benchmark.json``, ``crossover.png``, summary.

``benchmark.json`` follows pytest-benchmark's schema (``machine_info``,
``commit_info``, ``benchmarks``, ``datetime``, ``version``) so that
``pytest-benchmark compare`` reads it; the plugin adds a ``pytest_lyapax`` key
with each backend's status (and the reason when it was not measured).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from . import analysis
from .backends import OK
from .figure import BackendLegend, render_png
from .session import LyapaxSession

JSON_NAME = "benchmark.json"
FIGURE_NAME = "crossover.png"
REPORT_KEY = "pytest_lyapax"


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


def machine_name(info: dict[str, Any]) -> str:
    cpu = (info.get("cpu") or {}).get("brand_raw") or info.get("processor") or "CPU"
    return f"{info.get('node') or 'unknown host'} ({cpu})"


def backend_summary(session: LyapaxSession) -> list[dict[str, Any]]:
    """Each backend's status, filled in with device details from its records."""
    out = []
    for label, state in session.states.items():
        entry = state.to_json()
        mine = [r for r in session.records if analysis.record_label(r) == label]
        if mine:
            extra = mine[0].get("extra_info", {})
            for key in ("device", "jax_version", "jax_backend"):
                if extra.get(key) is not None:
                    entry[key] = extra[key]
        entry["n_benchmarks"] = len(mine)
        out.append(entry)
    return out


def build_document(
    config: pytest.Config, session: LyapaxSession, info: dict[str, Any]
) -> dict[str, Any]:
    """The merged report in pytest-benchmark's JSON schema."""
    try:
        from pytest_benchmark import __version__ as bench_version
    except ImportError:
        bench_version = None
    benches = analysis.group_sized(session.records, session.labels)
    crossing = [
        {"benchmark": b.key, **c.__dict__, "summary": c.describe(b.size_label)}
        for b in benches
        for c in analysis.crossovers(b)
    ]
    return {
        "machine_info": info,
        "commit_info": commit_info(config),
        "benchmarks": session.records,
        "datetime": dt.datetime.now(dt.UTC).isoformat(),
        "version": bench_version,
        REPORT_KEY: {
            "backends": backend_summary(session),
            "run_order": list(session.labels),
            "crossovers": crossing,
            "figure": FIGURE_NAME if session.figure_written else None,
        },
    }


def legends_for(session: LyapaxSession) -> list[BackendLegend]:
    entries = []
    for entry in backend_summary(session):
        status = entry["status"]
        if status == OK and not entry["n_benchmarks"]:
            status = "no timings"
        entries.append(
            BackendLegend(entry["label"], status, entry.get("device"), entry["reason"])
        )
    return entries


def write_reports(config: pytest.Config, session: LyapaxSession) -> list[Path]:
    """Write crossover.png and benchmark.json into the report directory."""
    import json

    report_dir = session.settings.report_dir
    assert report_dir is not None
    report_dir.mkdir(parents=True, exist_ok=True)
    info = machine_info(config)
    benches = analysis.group_sized(session.records, session.labels)
    written = []
    try:
        png = render_png(benches, legends_for(session), machine_name(info))
    except ImportError as exc:  # matplotlib is optional: the JSON still matters
        session.figure_error = f"no {FIGURE_NAME}: {exc} (pip install matplotlib)"
    else:
        atomic_write(report_dir / FIGURE_NAME, png)
        session.figure_written = True
        written.append(report_dir / FIGURE_NAME)
    document = build_document(config, session, info)
    text = json.dumps(document, indent=2, default=repr)
    atomic_write(report_dir / JSON_NAME, text.encode())
    return [report_dir / JSON_NAME, *written]


def check_regressions(session: LyapaxSession) -> list[analysis.Comparison]:
    """Compare with the saved run; remember failures on the session."""
    settings = session.settings
    if settings.compare_data is None:
        return []
    comparisons = analysis.compare_runs(
        settings.compare_data, session.records, settings.compare_fail
    )
    session.regressions = [c.fullname for c in comparisons if c.failed]
    return comparisons


def summary_lines(
    session: LyapaxSession,
    comparisons: Sequence[analysis.Comparison],
    written: Sequence[Path],
) -> list[tuple[str, list[str]]]:
    """Sections of the terminal summary as (title, lines) pairs."""
    sections: list[tuple[str, list[str]]] = []
    rows = []
    for entry in backend_summary(session):
        details = entry.get("device") or ""
        if entry.get("jax_version"):
            details += f", jax {entry['jax_version']}"
        rows.append(
            [
                entry["label"],
                f"JAX_PLATFORMS={entry['platform']}",
                entry["status"],
                str(entry["n_benchmarks"]),
                details.strip(", ") or "-",
            ]
        )
    lines = analysis.render_table(
        ["backend", "environment", "status", "benchmarks", "device"], rows, left=5
    )
    for state in session.states.values():
        if state.reason:
            lines.append(f"{state.backend.label}: {state.reason}")
    sections.append(("pytest-lyapax: backends", lines))

    labels = list(session.labels)
    missing = {
        s.backend.label: s.status
        for s in session.states.values()
        if s.status not in (OK, "crashed")
    }
    for bench in analysis.group_sized(session.records, labels):
        table = analysis.sized_table(bench, labels, missing)
        table += [c.describe(bench.size_label) for c in analysis.crossovers(bench)]
        sections.append((f"{bench.name}: median wall time per call", table))
    table = analysis.unsized_table(session.records, labels, missing)
    if table:
        sections.append(("benchmarks without a size axis: median wall time", table))

    settings = session.settings
    if settings.compare_data is not None:
        title = f"comparison with {settings.compare_path}"
        if settings.compare_fail is not None:
            title += f" (fail above {settings.compare_fail})"
        lines = analysis.comparison_table(comparisons, settings.compare_fail)
        if not comparisons:
            lines = ["no benchmark of this run appears in the saved run"]
        if session.regressions:
            lines.append(f"{len(session.regressions)} benchmark(s) regressed")
        sections.append((title, lines))
    if written or session.figure_error:
        lines = [f"wrote {p}" for p in written]
        if session.figure_error:
            lines.append(session.figure_error)
        sections.append(("pytest-lyapax: reports", lines))
    return sections
