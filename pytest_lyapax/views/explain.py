"""What a report says, as titled sections of tables, lines and figures.

:func:`report_sections` is the one composer of the plugin's output: the
terminal summary, ``summary.md`` and ``report.html`` are its sections, which
the renderers (``render.py``: text, markdown, HTML) only format.  It reads
one report document (as stored in ``benchmark.json``, or a merged one)
analysed once by :func:`view_of`, so the files written by a run and those
regenerated later by ``pytest-lyapax summary|html`` from the saved JSON are
the same bytes.  Crossovers and the cost model are recomputed from the
stored per-round samples (the cost model's bootstrap is seeded by each
series' name); everything else comes from the document as stored.  The
terminal adds the facts only the running session knows (:class:`RunFacts`:
the live comparison, files written, the gate's verdict, agreement warnings,
code mismatches); from a saved report they are empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_lyapax.backends.labels import CRASHED, outcome_text
from pytest_lyapax.report import (
    analysis,
    costmodel,
    details,
    roofline,
    rooftext,
    stats,
    units,
)
from pytest_lyapax.report.gates import refusal
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
    compared: analysis.ComparisonResult | None = None
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


def _backends(view: ReportView, text: bool) -> Section:
    if text:
        return _backend_lines(view)
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


def _backend_lines(view: ReportView) -> Section:
    """The terminal's backend table: where each ran, then why not ok."""
    rows = []
    for b in view.backends:
        device = b.get("device") or ""
        if b.get("jax_version"):
            device += f", jax {b['jax_version']}"
        environment = f"JAX_PLATFORMS={b.get('platform')}"
        if b.get("gateway"):  # a backend on another host (remote.py)
            environment += f" @ {b.get('host') or '?'} ({b['gateway']})"
        outcomes = b.get("outcomes")
        tests = outcome_text(outcomes) if isinstance(outcomes, Mapping) else ""
        rows.append(
            (
                str(b["label"]),
                environment,
                str(b.get("status")),
                tests or "-",
                str(b.get("n_benchmarks")),
                device.strip(", ") or "-",
            )
        )
    header = ("backend", "environment", "status", "tests", "benchmarks", "device")
    reasons = tuple(
        f"{b['label']}: {b['reason']}" for b in view.backends if b.get("reason")
    )
    return Section(
        "pytest-lyapax: backends",
        [Table(header, tuple(rows), left=6), Lines(reasons)],
    )


def _missing(view: ReportView) -> dict[str, str]:
    return {
        str(b["label"]): str(b.get("status"))
        for b in view.backends
        if b.get("status") not in (None, "ok")
    }


def _sized(view: ReportView, text: bool) -> list[Section]:
    out = []
    models = costmodel.by_key(view.models)
    roof = rooftext.index(view.records)
    for bench in view.benches:
        header, rows = tables.sized_rows(bench, view.order, _missing(view))
        lines = rooftext.crossover_lines(bench, roof)
        model = models.get(bench.key)
        if model is not None:
            lines += [f"cost model {line}" for line in model.lines()]
        # The terminal lists the sizes not timed in a section of their own.
        failed = [] if text else [f for f in view.failed if _belongs(f, bench)]
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


def _unsized(view: ReportView, text: bool) -> Section | None:
    lines = tables.unsized_rows(view.unsized, view.order, _missing(view))
    if lines is None:
        return None
    header, rows = lines
    title = "benchmarks without a size axis: median wall time"
    return Section(
        title if text else title.capitalize(),
        [Table(tuple(header), tuple(map(tuple, rows)))],
    )


def _comparison(view: ReportView, run: RunFacts | None) -> Section | None:
    c = view.key.get("comparison")
    if not isinstance(c, Mapping):
        return None
    if run is not None and run.compared is not None:
        return _live_comparison(c, run.compared, run.gate_refused)
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
    if run is not None:
        return Section(_comparison_title(c), blocks)
    return Section("Comparison with a saved run", blocks)


def _comparison_title(c: Mapping[str, Any]) -> str:
    title = f"comparison with {c.get('with')}"
    gates = c.get("gates")
    if isinstance(gates, list) and gates:
        title += f" (fail above {', '.join(map(str, gates))})"
    return title


def _live_comparison(
    c: Mapping[str, Any], compared: analysis.ComparisonResult, refused: str | None
) -> Section:
    """The terminal's comparison: the values of both runs, as measured."""
    lines = tables.comparison_table(compared.comparisons, compared.thresholds)
    if not compared.comparisons:
        lines = ["no benchmark of this run appears in the saved run"]
    lines += tables.machine_lines(compared.machines)
    if refused:
        lines.append(f"gate refused, the runs were measured apart: {refused}")
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
    return Section(_comparison_title(c), [Lines(tuple(lines))])


def _agreement(view: ReportView, run: RunFacts | None) -> list[Section]:
    """Results across backends; the terminal shows every row when there are
    few (else the disagreeing ones), then the run's warnings and late
    disagreements."""
    entries = view.key.get("agreement")
    if not isinstance(entries, list) or not entries:
        return []
    entries = [e for e in entries if isinstance(e, Mapping)]
    rows = agreement_tables.agreement_rows(entries)
    shown = 200 if run is None else agreement_tables.SHOWN_ROWS
    if len(rows) > shown:
        rows = agreement_tables.agreement_rows(entries, only_disagreeing=True)
    blocks: list[Block] = [Lines((agreement_tables.headline(entries),))]
    header = agreement_tables.AGREEMENT_HEADER
    if run is None:
        if rows:
            blocks.append(Table(header, tuple(rows[:200])))
        return [Section("Results across backends", blocks)]
    if rows:
        blocks.append(Table(header, tuple(rows), left=len(header), ruled=False))
    blocks.append(Lines(tuple(f"warning: {w}" for w in run.agree_warnings)))
    out = [Section("results across backends", blocks)]
    for text in run.late_failures:
        lines = Lines(tuple(text.splitlines()))
        out.append(Section("disagreement found after the test ran", [lines], "="))
    return out


def _roofline(view: ReportView, draw: bool, text: bool) -> Section | None:
    """The line per series; with ``draw``, roofline.png (or why not)."""
    lines = roofline.series_lines(view.records)
    if not lines:
        return None
    blocks: list[Block] = [Lines(tuple(lines))]
    if text:
        return Section("pytest-lyapax: roofline (XLA cost analysis)", blocks)
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


def _listed(title: str, intro: str, names: object) -> Section | None:
    if not isinstance(names, list) or not names:
        return None
    return Section(title, [Lines((intro, *(f"  {n}" for n in names[:20])))])


def _timing_notes(view: ReportView) -> list[Section]:
    """The terminal's warnings about how points were timed, or not."""
    points = view.key.get("points")
    points = (
        [p for p in points if isinstance(p, Mapping)]
        if isinstance(points, list)
        else []
    )
    notes = (
        _listed(
            "pytest-lyapax: timed by dispatch only",
            "these results had no JAX array to wait for, so only the dispatch was "
            "timed; return the arrays, or register the class as a pytree "
            "(jax.tree_util.register_dataclass, equinox.Module):",
            view.key.get("dispatch_only"),
        ),
        _listed(
            "pytest-lyapax: host arguments",
            "warning: timed with NumPy (host) arguments on a non-CPU backend, so "
            "every call includes the copy to the device; pass jax.device_put(x) "
            "to time the computation alone (or parametrize to time both):",
            details.host_argument_benchmarks(view.records),
        ),
        Section(
            "pytest-lyapax: sizes not timed",
            [
                Lines(
                    tuple(
                        f"{p.get('fullname')}: {p.get('status')}: {p.get('message')}"
                        for p in points[:20]
                    )
                )
            ],
        )
        if points
        else None,
    )
    return [n for n in notes if n is not None]


def _run_sections(view: ReportView, run: RunFacts) -> list[Section]:
    """Files written and the verdicts of the run (a saved report: the crashed
    backends only)."""
    out = []
    if run.live and not view.records:
        lines: tuple[str, ...] = (
            f"no benchmark was measured: nothing written to {run.report_dir}",
        )
        out.append(Section("pytest-lyapax: reports", [Lines(lines)]))
    elif run.written or run.figure_error:
        lines = tuple(f"wrote {p}" for p in run.written)
        lines += (run.figure_error,) if run.figure_error else ()
        out.append(Section("pytest-lyapax: reports", [Lines(lines)]))
    if run.collection_errors:
        title = (
            f"Interrupted: {run.collection_errors} error(s) during collection; no "
            "test was run (--continue-on-collection-errors runs them)"
        )
        out.append(Section(title, rule="!"))
    gates = " ".join(f"--jax-compare-fail={t}" for t in run.gates)
    if run.gate_refused:
        why = f"the saved run was measured elsewhere: {run.gate_refused}"
        title = f"pytest-lyapax: {gates} refused (usage error): " + refusal(
            why, "--jax-compare-across-machines"
        )
        out.append(Section(title, rule="=", red=True))
    if run.gate_failures:
        title = f"pytest-lyapax: {gates} failed: {len(run.gate_failures)} problem(s)"
        lines = tuple(f"  {line}" for line in run.gate_failures[:20])
        out.append(Section(title, [Lines(lines)], "=", red=True))
    crashed = [str(b["label"]) for b in view.backends if b.get("status") == CRASHED]
    if crashed:
        title = f"pytest-lyapax: backend(s) crashed: {', '.join(crashed)}"
        out.append(Section(title, rule="=", red=True))
    if run.mismatched:
        title = (
            f"pytest-lyapax: code mismatch on {', '.join(run.mismatched)}: not run "
            f"(exit code {run.mismatch_exit}; --jax-allow-code-mismatch runs it "
            "anyway)"
        )
        out.append(Section(title, rule="=", red=True))
    return out


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
    view: ReportView,
    *,
    figure: bytes | str | None = None,
    machine: bool = False,
    run: RunFacts | None = None,
) -> list[Section]:
    """The report's sections in reading order: ``figure`` is the figure's PNG
    (or why there is none; None: no figure section), ``machine`` adds the full
    machine description; with ``run``, the terminal summary's sections
    instead (the same tables, the warnings and verdicts of the run)."""
    text = run is not None
    sections = _agreement(view, run) if text else [_header(view)]
    sections.append(_backends(view, text))
    if isinstance(figure, bytes):
        alt = "wall time per call against problem size, one curve per backend"
        sections.append(Section("Figure", [Figure(figure, alt)]))
    elif figure is not None:
        sections.append(Section("Figure", [Lines((f"no figure: {figure}",))]))
    sections += _sized(view, text)
    if not text:
        sections += _agreement(view, run)
    unsized = _unsized(view, text)
    if unsized is not None:
        sections.append(unsized)
    if text and view.benches and len(view.order) > 1:
        rule = f"faster / within noise: {stats.rule_text()}"
        sections[-1].blocks.append(Lines((rule,)))
    optional_sections = (
        None if text else _resources(view),
        _roofline(view, figure is not None, text),
    )
    sections += [s for s in optional_sections if s is not None]
    if text:
        sections += _timing_notes(view)
    comparison = _comparison(view, run)
    if comparison is not None:
        sections.append(comparison)
    if run is not None:
        return sections + _run_sections(view, run)
    noise = view.key.get("noise_test")
    if isinstance(noise, Mapping) and noise:
        stored = ", ".join(f"{k} {_text(v)}" for k, v in noise.items())
        sections.append(
            Section("Noise test (faster / within noise)", [Lines((stored,))])
        )
    if machine:
        sections.append(_machine(view))
    return sections
