"""A report document analysed once, and the blocks its sections are made of.

:func:`view_of` groups a document's benchmarks, fits the cost models and
finds the failed points once; :mod:`~pytest_lyapax.views.explain` composes
the sections from that view, and ``render.py`` formats them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_lyapax.report import costmodel, details, roofline
from pytest_lyapax.report import devices as devices_report
from pytest_lyapax.report.compare import ComparisonResult
from pytest_lyapax.report.identity import machine_of, record_label
from pytest_lyapax.report.precision import backend_precision
from pytest_lyapax.report.schema import REPORT_KEY
from pytest_lyapax.report.series import (
    Point,
    SizedBenchmark,
    group_sized,
    unsized_medians,
)
from pytest_lyapax.views import search as search_view
from pytest_lyapax.views.figure import BackendLegend


@dataclass(frozen=True)
class Table:
    """Rows under a header; as text, the first ``left`` columns are
    left-aligned and the rest right, with a dashed rule under the header
    when ``ruled`` (else every column left-aligned)."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    left: int = 1
    ruled: bool = True


@dataclass(frozen=True)
class Lines:
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Figure:
    """A figure (PNG bytes) drawn from the document; ``ident`` names its
    HTML element."""

    png: bytes
    alt: str
    ident: str = "crossover-figure"


Block = Table | Lines | Figure


@dataclass
class Section:
    """A titled part of the report; as text its title sits in a line of
    ``rule`` characters (``red``: a verdict the terminal colours)."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    rule: str = "-"
    red: bool = False


@dataclass(frozen=True)
class RunFacts:
    """What only the running session knows: the terminal's run section.

    ``RunFacts()`` is a saved report's (``live`` False: no "reports"
    section); the plugin fills it in at the end of a run.
    """

    live: bool = False
    compared: ComparisonResult | None = None
    gate_refused: str | None = None
    gate_failures: tuple[str, ...] = ()
    gates: tuple[str, ...] = ()  # the --jax-compare-fail thresholds as given
    report_dir: str = ""
    written: tuple[str, ...] = ()
    figure_error: str = ""
    collection_errors: int = 0
    agree_warnings: tuple[str, ...] = ()
    late_failures: tuple[str, ...] = ()
    mismatched: tuple[str, ...] = ()  # "label (host)" of remote code mismatches
    mismatch_exit: int = 0


@dataclass(frozen=True)
class ReportView:
    """A document's benchmarks, grouped and analysed once."""

    data: Mapping[str, Any]
    key: Mapping[str, Any]
    records: list[Mapping[str, Any]]
    backends: list[Mapping[str, Any]]
    order: list[str]
    benches: list[SizedBenchmark]
    unsized: dict[str, dict[str, Point]]
    models: list[costmodel.BenchmarkModel]
    failed: list[details.FailedPoint]

    @property
    def machine_info(self) -> Mapping[str, Any]:
        info = self.data.get("machine_info")
        return info if isinstance(info, Mapping) else {}

    @property
    def machine(self) -> str:
        machines = [str(machine_of(r, self.machine_info)) for r in self.records]
        return "; ".join(dict.fromkeys(machines)) or str(
            machine_of({}, self.machine_info)
        )

    def legends(self) -> list[BackendLegend]:
        out = []
        for b in self.backends:
            status = str(b.get("status") or "ok")
            if status == "ok" and not b.get("n_benchmarks") and b.get("outcomes") == {}:
                # No test of the run is this label's (``-k`` left perf_tests'
                # device-count twins none): nothing to draw, nothing missing.
                continue
            if status == "ok" and b.get("n_benchmarks") == 0:
                status = "no timings"
            device = b.get("device")
            if isinstance(device, str) and b.get("gateway") and b.get("host"):
                device = f"{device} @ {b['host']}"  # a backend on another host
            out.append(
                BackendLegend(
                    str(b["label"]),
                    status,
                    device if isinstance(device, str) else None,
                    str(b.get("reason") or ""),
                    backend_precision(b),
                )
            )
        return out

    def figure_args(self) -> tuple[Any, ...]:
        """The arguments of :func:`~pytest_lyapax.views.figure.render_png` here."""
        return (
            self.benches,
            self.legends(),
            self.machine,
            self.unsized,
            costmodel.by_key(self.models),
            details.panel_notes(self.records, self.machine_info, self.failed),
            search_view.marks(self.key),
        )

    def roofline_png(self) -> bytes | None:
        """``roofline.png`` (None: no point has its work and time)."""
        points = roofline.figure_points(self.records)
        if not points:
            return None
        from pytest_lyapax.views.roofline import render_roofline_png

        machines = self.key.get("machines")
        machines = machines if isinstance(machines, Mapping) else {}
        return render_roofline_png(points, machines, self.machine)

    def ab_png(self) -> bytes | None:
        """``ab.png`` (None: no sized benchmark in an A/B's comparisons)."""
        from pytest_lyapax.views.ab import ratio_series, render_ab_png

        section = self.key.get("ab")
        entries = section.get("comparisons") if isinstance(section, Mapping) else None
        found = ratio_series(
            [e for e in entries if isinstance(e, Mapping)]
            if isinstance(entries, list)
            else []
        )
        return render_ab_png(found) if found else None

    def scaling(self) -> list[dict[str, Any]]:
        """The device scaling rows (``--jax-devices``, report/devices.py)."""
        return devices_report.scaling_rows(
            self.records, self.backends, self.machine_info
        )

    def scaling_png(self) -> bytes | None:
        """``scaling.png`` (None: no device scaling row)."""
        rows = self.scaling()
        if not rows:
            return None
        from pytest_lyapax.views.devices import render_scaling_png

        return render_scaling_png(rows)

    def figure_png(self) -> bytes:
        from pytest_lyapax.views.figure import render_png

        return render_png(*self.figure_args())


def view_of(data: Mapping[str, Any]) -> ReportView:
    """Analyse a (validated) report document."""
    key = data.get(REPORT_KEY)
    key = key if isinstance(key, Mapping) else {}
    records = [r for r in data.get("benchmarks", []) if isinstance(r, Mapping)]
    backends = [
        b for b in key.get("backends") or [] if isinstance(b, Mapping) and "label" in b
    ]
    order = [str(b["label"]) for b in backends]
    for r in records:
        label = record_label(r)
        if label is not None and label not in order:
            order.append(label)
    info = data.get("machine_info")
    info = info if isinstance(info, Mapping) else None
    benches = group_sized(records, order, info)
    return ReportView(
        data,
        key,
        records,
        backends,
        order,
        benches,
        unsized_medians(records, info),
        costmodel.cost_models(benches),
        details.failed_points(data),
    )
