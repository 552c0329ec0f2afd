"""Several reports as one (``pytest-lyapax merge`` and ``plot``).

Series are told apart by their identity
(:func:`~pytest_lyapax.report.identity.series_id`):
when the inputs come from more than one machine, every series label gets the
machine (``cpu @ laptop``, ``gpu @ server``; host and device when one host
has several devices), and two inputs holding the same series at the same size
are a conflict: the first is kept and the other reported, never overwritten.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_lyapax.report.identity import (
    machine_of,
    machine_suffixes,
    record_size,
    series_id,
)
from pytest_lyapax.report.schema import REPORT_KEY, SCHEMA_VERSION, Report


@dataclass
class Merged:
    """Several reports as one: series labelled backend @ machine."""

    benchmarks: list[dict[str, Any]] = field(default_factory=list)
    backends: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)
    points: list[dict[str, Any]] = field(default_factory=list)  # out of memory

    @property
    def order(self) -> list[str]:
        return [b["label"] for b in self.backends]


def _labelled(backend: str, suffix: str) -> str:
    return f"{backend} @ {suffix}" if suffix else backend


def merge_reports(reports: Sequence[Report]) -> Merged:
    """Combine reports (see the module docstring)."""
    ids = [
        (report, bench, series_id(bench, report.machine_info))
        for report in reports
        for bench in report.benchmarks
    ]
    ids = [(r, b, s) for r, b, s in ids if s.backend is not None]
    suffixes = machine_suffixes([s.machine for _, _, s in ids])
    merged = Merged()
    seen: dict[tuple[Any, ...], Path] = {}
    known_labels: set[str] = set()
    for report in reports:
        commit = report.data.get("commit_info")
        merged.sources.append(
            {
                "file": str(report.path),
                "machine": str(machine_of({}, report.machine_info)),
                "datetime": report.data.get("datetime"),
                "commit": commit.get("id") if isinstance(commit, dict) else None,
            }
        )
    for report, bench, sid in ids:
        assert sid.backend is not None
        suffix = suffixes[sid.machine]
        label = _labelled(sid.backend, suffix)
        key = (*sid.key(), record_size(bench))
        if key in seen:
            merged.conflicts.append(
                f"{bench['fullname']} on {label}: in {seen[key]} and "
                f"{report.path}; kept the first"
            )
            continue
        seen[key] = report.path
        entry = copy.deepcopy(bench)
        info = entry.setdefault("extra_info", {})
        info["backend"] = label
        info["source_backend"] = sid.backend
        # The machine travels with each record: a merged file's own
        # machine_info can describe only one of them.
        info["host"] = sid.machine.host
        info["cpu"] = sid.machine.cpu
        info["machine"] = str(sid.machine)
        if suffix:
            # Unique ids for pytest-benchmark compare, one per machine.
            entry["fullname"] = f"{bench['fullname']}@{suffix}"
            entry["name"] = f"{bench.get('name', bench['fullname'])}@{suffix}"
        merged.benchmarks.append(entry)
    for report in reports:
        here = machine_of({}, report.machine_info)
        suffix = suffixes.get(here, here.host if any(suffixes.values()) else "")
        for point in report.key.get("points") or []:
            entry = {**point, "backend": _labelled(str(point["backend"]), suffix)}
            if entry not in merged.points:
                merged.points.append(entry)
    for report in reports:
        machines = {
            s.backend: s.machine for r, _, s in ids if r is report and s.backend
        }
        entries = report.backends() or [{"label": b, "status": "ok"} for b in machines]
        for entry in entries:
            backend = str(entry["label"])
            machine = machines.get(backend) or machine_of({}, report.machine_info)
            suffix = suffixes.get(machine)
            if suffix is None:  # a backend without timings (e.g. unavailable)
                suffix = (
                    (machine.host or "unknown host") if any(suffixes.values()) else ""
                )
            label = _labelled(backend, suffix)
            if label in known_labels:
                continue
            known_labels.add(label)
            merged.backends.append({**entry, "label": label, "machine": str(machine)})
    return merged


def merged_document(reports: Sequence[Report], merged: Merged) -> dict[str, Any]:
    first = reports[0].data
    return {
        "machine_info": first.get("machine_info", {}),
        "commit_info": first.get("commit_info", {}),
        "benchmarks": merged.benchmarks,
        "datetime": dt.datetime.now(dt.UTC).isoformat(),
        "version": first.get("version"),
        REPORT_KEY: {
            "schema": SCHEMA_VERSION,
            "merged_from": merged.sources,
            "conflicts": merged.conflicts,
            "backends": merged.backends,
            "run_order": merged.order,
            "complete": all(b.get("status") == "ok" for b in merged.backends),
            "points": merged.points,
        },
    }
