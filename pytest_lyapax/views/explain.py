"""What a report says, as titled sections of tables, lines and figures.

:func:`report_sections` reads one report document (as stored in
``benchmark.json``, or a merged one) and nothing else, so ``summary.md`` and
``report.html`` written by a run and regenerated later by ``pytest-lyapax
summary|html`` from the saved JSON are the same bytes.  Crossovers and the
cost model are recomputed from the stored per-round samples (the cost
model's bootstrap is seeded by each series' name); everything else comes
from the document as stored.  The renderers (``render.py``) only format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_lyapax.backends.labels import outcome_text
from pytest_lyapax.report import (
    analysis,
    costmodel,
    details,
    roofline,
    rooftext,
    units,
)
from pytest_lyapax.report.identity import (
    machine_of,
    record_label,
    record_size,
    series_id,
)
from pytest_lyapax.report.schema import REPORT_KEY
from pytest_lyapax.views import agreement_tables, tables
from pytest_lyapax.views.figure import BackendLegend

TITLE = "pytest-lyapax report"


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


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
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass(frozen=True)
class ReportView:
    """A document's benchmarks, grouped and analysed once."""

    data: Mapping[str, Any]
    key: Mapping[str, Any]
    records: list[Mapping[str, Any]]
    backends: list[Mapping[str, Any]]
    order: list[str]
    benches: list[analysis.SizedBenchmark]
    unsized: dict[str, dict[str, analysis.Point]]
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
        )

    def roofline_png(self) -> bytes | None:
        """``roofline.png`` (None: no point has its work and time)."""
        points = roofline.figure_points(self.records)
        if not points:
            return None
        from pytest_lyapax.views.rooffigure import render_roofline_png

        machines = self.key.get("machines")
        machines = machines if isinstance(machines, Mapping) else {}
        return render_roofline_png(points, machines, self.machine)

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
    benches = analysis.group_sized(records, order, info)
    return ReportView(
        data,
        key,
        records,
        backends,
        order,
        benches,
        analysis.unsized_medians(records, info),
        costmodel.cost_models(benches),
        details.failed_points(data),
    )


def _text(value: object) -> str:
    return "-" if value is None or value == "" else str(value)


def _header(view: ReportView) -> Section:
    key, data = view.key, view.data
    commit = data.get("commit_info")
    commit = commit if isinstance(commit, Mapping) else {}
    complete = key.get("complete")
    rows = [
        ("measured", _text(data.get("datetime"))),
        ("machine", view.machine),
        ("commit", _text(commit.get("id"))),
        ("pytest-lyapax", _text(key.get("plugin_version"))),
        ("report schema", _text(key.get("schema"))),
        ("complete", "yes" if complete is True else "NO" if complete is False else "-"),
    ]
    if key.get("merged_from"):
        rows.append(("merged from", f"{len(key['merged_from'])} report(s)"))
    return Section(TITLE, [Table(("", ""), tuple(rows))])


def _backends(view: ReportView) -> Section:
    rows = []
    for b in view.backends:
        outcomes = b.get("outcomes")
        tests = outcome_text(outcomes) if isinstance(outcomes, Mapping) else ""
        rows.append(
            (
                str(b["label"]),
                _text(b.get("status")),
                _text(b.get("device")),
                _text(b.get("jax_version")),
                tests or "-",
                _text(b.get("n_benchmarks")),
                _text(b.get("reason")),
            )
        )
    header = ("backend", "status", "device", "jax", "tests", "benchmarks", "reason")
    return Section("Backends", [Table(header, tuple(rows))])


def _missing(view: ReportView) -> dict[str, str]:
    return {
        str(b["label"]): str(b.get("status"))
        for b in view.backends
        if b.get("status") not in (None, "ok")
    }


def _sized(view: ReportView) -> list[Section]:
    out = []
    models = costmodel.by_key(view.models)
    roof = rooftext.index(view.records)
    for bench in view.benches:
        header, rows = tables.sized_rows(bench, view.order, _missing(view))
        lines = rooftext.crossover_lines(bench, roof)
        model = models.get(bench.key)
        if model is not None:
            lines += [f"cost model {line}" for line in model.lines()]
        failed = [f for f in view.failed if _belongs(f, bench)]
        lines += [
            f"{f.backend} at {f.size}: {f.status.replace('_', ' ')} ({f.message})"
            for f in failed
        ]
        out.append(
            Section(
                f"{bench.name}: median wall time per call",
                [Table(tuple(header), tuple(map(tuple, rows))), Lines(tuple(lines))],
            )
        )
    return out


def _belongs(point: details.FailedPoint, bench: analysis.SizedBenchmark) -> bool:
    return bench.key == point.benchmark or bench.key.startswith(point.benchmark + "[")


def _resources(view: ReportView) -> Section | None:
    """Warm-up, memory and time split of every benchmark (schema 3 fields)."""
    rows = []
    any_measured = False
    for r in view.records:
        warm = details.warmup_of(r)
        memory = details.memory_of(r)
        split = details.time_split_of(r)
        where = details.args_on(r)
        any_measured |= bool(
            (warm and warm.kind == "compile")
            or any(v is not None for v in memory.values())
            or split
            or where
        )
        sid = series_id(r, view.machine_info)
        rows.append(
            (
                sid.name,
                _text(record_label(r)),
                _text(record_size(r)),
                warm.describe() if warm else details.NOT_MEASURED,
                *(units.format_bytes(memory[k]) for k, _ in details.MEMORY_FIELDS),
                (
                    f"{tables.format_seconds(split[0])} / "
                    f"{tables.format_seconds(split[1])}"
                    if split
                    else details.MISSING
                ),
                where or details.MISSING,
            )
        )
    if not rows:
        return None
    header = (
        "benchmark",
        "backend",
        "size",
        "warm-up (untimed)",
        *(name for _, name in details.MEMORY_FIELDS),
        "dispatch / device per call",
        "arguments on",
    )
    blocks: list[Block] = [Table(header, tuple(rows))]
    if not any_measured:
        blocks.append(
            Lines(
                (
                    "this report holds no compile, memory or time-split "
                    "measurement (written before report schema 3): shown as '-'",
                )
            )
        )
    return Section("Compile, memory and where the time goes", blocks)


def _unsized(view: ReportView) -> Section | None:
    lines = tables.unsized_rows(view.unsized, view.order, _missing(view))
    if lines is None:
        return None
    header, rows = lines
    return Section(
        "Benchmarks without a size axis: median wall time",
        [Table(tuple(header), tuple(map(tuple, rows)))],
    )


def _comparison(view: ReportView) -> Section | None:
    c = view.key.get("comparison")
    if not isinstance(c, Mapping):
        return None
    gates = c.get("gates") if isinstance(c.get("gates"), list) else []
    regressions = c.get("regressions") if isinstance(c.get("regressions"), list) else []
    missing = c.get("missing") if isinstance(c.get("missing"), list) else []
    verdicts = c.get("verdicts") if isinstance(c.get("verdicts"), Mapping) else {}
    lines = [f"compared with {_text(c.get('with'))}: {_text(c.get('compared'))} "]
    lines[0] += "benchmark(s)"
    if gates:
        refused = c.get("refused")
        if refused:
            result = f"REFUSED (measured apart: {refused})"
        elif regressions:
            result = f"FAILED: {len(regressions)} regression(s)"
        else:
            result = "passed"
        lines.append(f"gate {', '.join(map(str, gates))}: {result}")
    lines += [f"regressed: {name}" for name in regressions[:50]]
    lines += [f"missing from this run: {name}" for name in missing[:50]]
    rows = tuple((str(name), str(kind)) for name, kind in list(verdicts.items())[:200])
    blocks: list[Block] = [Lines(tuple(lines))]
    if rows:
        blocks.append(Table(("benchmark", "noise test vs saved run"), rows))
    return Section("Comparison with a saved run", blocks)


def _agreement(view: ReportView) -> Section | None:
    entries = view.key.get("agreement")
    if not isinstance(entries, list) or not entries:
        return None
    entries = [e for e in entries if isinstance(e, Mapping)]
    rows = agreement_tables.agreement_rows(entries)
    if len(rows) > 200:
        rows = agreement_tables.agreement_rows(entries, only_disagreeing=True)
    blocks: list[Block] = [Lines((agreement_tables.headline(entries),))]
    if rows:
        blocks.append(Table(agreement_tables.AGREEMENT_HEADER, tuple(rows[:200])))
    return Section("Results across backends", blocks)


def _roofline(view: ReportView, draw: bool) -> Section | None:
    """The line per series; with ``draw``, roofline.png (or why not)."""
    lines = roofline.series_lines(view.records)
    if not lines:
        return None
    blocks: list[Block] = [Lines(tuple(lines))]
    if draw:
        try:
            png = view.roofline_png()
        except ImportError as exc:  # matplotlib is optional
            blocks.append(Lines((f"no roofline figure: {exc}",)))
        else:
            if png is not None:
                alt = "achieved FLOP/s against arithmetic intensity, measured roofs"
                blocks.append(Figure(png, alt, "roofline-figure"))
    return Section("Roofline (XLA cost analysis)", blocks)


def _machine(view: ReportView) -> Section:
    rows = []
    for name, value in view.machine_info.items():
        if isinstance(value, Mapping):
            for sub, item in value.items():
                if not isinstance(item, Mapping | list):
                    rows.append((f"{name}.{sub}", _text(item)))
        elif not isinstance(value, list):
            rows.append((str(name), _text(value)))
    return Section("Machine", [Table(("field", "value"), tuple(rows[:80]))])


def report_sections(
    view: ReportView, *, figure: bytes | str | None = None, machine: bool = False
) -> list[Section]:
    """The report's sections in reading order: ``figure`` is the figure's PNG
    (or why there is none; None: no figure section), ``machine`` adds the full
    machine description."""
    sections = [_header(view), _backends(view)]
    if isinstance(figure, bytes):
        alt = "wall time per call against problem size, one curve per backend"
        sections.append(Section("Figure", [Figure(figure, alt)]))
    elif figure is not None:
        sections.append(Section("Figure", [Lines((f"no figure: {figure}",))]))
    sections += _sized(view)
    drawn = figure is not None
    optional_sections = (
        _agreement(view),
        _unsized(view),
        _resources(view),
        _roofline(view, drawn),
        _comparison(view),
    )
    for optional in optional_sections:
        if optional is not None:
            sections.append(optional)
    noise = view.key.get("noise_test")
    if isinstance(noise, Mapping) and noise:
        stored = ", ".join(f"{k} {_text(v)}" for k, v in noise.items())
        sections.append(
            Section("Noise test (faster / within noise)", [Lines((stored,))])
        )
    if machine:
        sections.append(_machine(view))
    return sections
