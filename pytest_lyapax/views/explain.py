"""What a report says, as titled sections of tables, lines and figures.

:func:`report_sections` is the one composer of the plugin's output: the
terminal summary, ``summary.md`` and ``report.html`` are its sections, which
the renderers (``render.py``: text, markdown, HTML) only format.  It reads
one report document (as stored in ``benchmark.json``, or a merged one),
analysed once (``document.view_of``), so the files written by a run and
those regenerated later by ``pytest-lyapax summary|html`` from the saved
JSON are the same bytes.  Crossovers and the cost model are recomputed from
the stored per-round samples (the cost model's bootstrap is seeded by each
series' name); everything else comes from the document as stored.  The
terminal adds what only the running session knows (``document.RunFacts``,
sections in ``runtext.py``: the live comparison, files written, the gate's
verdict, agreement warnings, code mismatches); a saved report has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pytest_lyapax.backends.labels import outcome_text
from pytest_lyapax.report import (
    busy,
    costmodel,
    counters,
    details,
    roofline,
    stats,
    units,
)
from pytest_lyapax.report import devices as devices_report
from pytest_lyapax.report.identity import (
    record_label,
    record_size,
    series_id,
    unique_names,
)
from pytest_lyapax.report.series import SizedBenchmark
from pytest_lyapax.views import ab, agreement, roundchecks, runtext, tables
from pytest_lyapax.views import roofline as roofline_view
from pytest_lyapax.views import search as search_view
from pytest_lyapax.views.document import (
    Block,
    Figure,
    Lines,
    ReportView,
    RunFacts,
    Section,
    Table,
)

TITLE = "pytest-lyapax report"


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
        return runtext.backend_lines(view)
    rows: list[tuple[str, ...]] = []
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
    header: tuple[str, ...] = (
        "backend",
        "status",
        "device",
        "jax",
        "tests",
        "benchmarks",
        "reason",
    )
    if any(runtext.variables(b) for b in view.backends):  # execution variants
        header = (header[0], "environment", *header[1:])
        rows = [
            (row[0], runtext.variables(b) or "-", *row[1:])
            for row, b in zip(rows, view.backends, strict=True)
        ]
    modes = details.rounds_modes(view.records)
    if modes:  # how the rounds were timed (--jax-sequential)
        header = (*header[:-1], "rounds", header[-1])
        rows = [
            (*row[:-1], modes.get(str(b["label"]), "-"), row[-1])
            for row, b in zip(rows, view.backends, strict=True)
        ]
    return Section("Backends", [Table(header, tuple(rows))])


def _missing(view: ReportView) -> dict[str, str]:
    return {
        str(b["label"]): str(b.get("status"))
        for b in view.backends
        if b.get("status") not in (None, "ok")
    }


def _sized(view: ReportView, text: bool) -> list[Section]:
    out = []
    models = costmodel.by_key(view.models)
    roof = roofline_view.index(view.records)
    marked = busy.mode_of(view.key) != busy.IGNORE
    reasons = busy.index(view.records) if marked else {}
    busy_peaks = busy.peaks_index(view.records) if marked else {}
    searched = search_view.marks(view.key)
    for bench in view.benches:
        not_timed = {
            (f.backend, f.size): f.status.replace("_", " ")
            for f in view.failed
            if f.size is not None and _belongs(f, bench)
        }
        header, rows = tables.sized_rows(bench, view.order, _missing(view), not_timed)
        rows, starred = search_view.starred(rows, searched.get(bench.key))
        compiled = tables.compile_line(bench, view.order)
        lines = [compiled] if compiled else []
        lines += starred
        lines += roofline_view.crossover_lines(bench, roof, reasons, busy_peaks)
        lines += busy.crossover_notes(bench, reasons)
        model = models.get(bench.key)
        if model is not None:
            for line in busy.model_lines(model, bench, reasons):
                lines.append(busy.with_prefix("cost model ", line))
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


def _belongs(point: details.FailedPoint, bench: SizedBenchmark) -> bool:
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


def _machine_state(view: ReportView, text: bool) -> Section | None:
    """The machine's state during each benchmark's rounds (report/busy.py);
    the terminal shows only the busy ones, with their reasons."""
    if busy.mode_of(view.key) == busy.IGNORE:
        return None
    names = unique_names(series_id(r) for r in view.records)
    if text:
        reasons = [
            f"{r.get('name') or r.get('fullname')}: {reason}"
            for r in view.records
            if (reason := busy.record_reason(r)) is not None
        ]
        if not reasons:
            return None
        head = (
            f"{len(reasons)} of {len(view.records)} benchmarks ran their rounds on "
            "a busy machine; verdicts that read them are marked UNRELIABLE:"
        )
        shown = tuple(f"  {line}" for line in reasons[:10])
        more = (f"  ... and {len(reasons) - 10} more",) if len(reasons) > 10 else ()
        lines = Lines((head, *shown, *more))
        return Section("pytest-lyapax: busy machine", [lines])
    rows, unread = busy.machine_rows(view.records, names)
    if not rows:
        return None
    blocks: list[Block] = [Table(busy.MACHINE_HEADER, tuple(rows))]
    if unread:
        blocks.append(Lines(tuple(unread)))
    return Section("Machine state during the rounds", blocks)


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
        return runtext.live_comparison(c, run.compared, run.gate_refused)
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
    lines += busy.comparison_lines(c, "--jax-busy")[:50]
    lines += [f"missing from this run: {name}" for name in missing[:50]]
    unjudged = c.get("not_comparable")
    if isinstance(unjudged, Mapping):
        lines += [
            f"not comparable: {name}: {why}"
            for name, whys in list(unjudged.items())[:50]
            if isinstance(whys, list)
            for why in whys
        ]
    rows = tuple((str(name), str(kind)) for name, kind in list(verdicts.items())[:200])
    blocks: list[Block] = [Lines(tuple(lines))]
    if rows:
        blocks.append(Table(("benchmark", "noise test vs saved run"), rows))
    if run is not None:
        return Section(runtext.comparison_title(c), blocks)
    return Section("Comparison with a saved run", blocks)


def _entries(view: ReportView, name: str) -> list[Mapping[str, Any]]:
    entries = view.key.get(name)
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, Mapping)]


Entries = Sequence[Mapping[str, Any]]
Rows = Callable[[Entries, bool], list[tuple[str, ...]]]
# Per comparison section of the report: its headline, table header, and
# rows (all of them, or with True only the disagreeing ones).
_COMPARISONS: dict[str, tuple[Callable[[Entries], str], tuple[str, ...], Rows]] = {
    "agreement": (
        agreement.headline,
        agreement.AGREEMENT_HEADER,
        lambda e, bad: agreement.agreement_rows(e, only_disagreeing=bad),
    ),
    "determinism": (
        agreement.determinism_headline,
        agreement.DETERMINISM_HEADER,
        lambda e, bad: agreement.determinism_rows(e, only_differing=bad),
    ),
}


def _compared(view: ReportView, name: str, run: RunFacts | None) -> list[Block]:
    """The comparison section ``name`` (``agreement`` or ``determinism``;
    nothing when the report has no entries): its headline and table, in the
    terminal every row when there are few, else only the disagreeing ones;
    in the files the first 200."""
    entries = _entries(view, name)
    if not entries:
        return []
    headline, header, table = _COMPARISONS[name]
    rows = table(entries, False)
    shown = 200 if run is None else agreement.SHOWN_ROWS
    if len(rows) > shown:
        rows = table(entries, True)
    blocks: list[Block] = [Lines((headline(entries),))]
    if rows and run is None:
        blocks.append(Table(header, tuple(rows[:200])))
    elif rows:
        blocks.append(Table(header, tuple(rows), left=len(header), ruled=False))
    return blocks


def _agreement(view: ReportView, run: RunFacts | None) -> list[Section]:
    """Results across backends, then the run's warnings and late
    disagreements."""
    blocks = _compared(view, "agreement", run)
    if not blocks:
        return []
    if run is None:
        return [Section("Results across backends", blocks)]
    blocks.append(Lines(tuple(f"warning: {w}" for w in run.agree_warnings)))
    out = [Section("results across backends", blocks)]
    for text in run.late_failures:
        lines = Lines(tuple(text.splitlines()))
        out.append(Section("disagreement found after the test ran", [lines], "="))
    return out


def _determinism(view: ReportView, run: RunFacts | None) -> list[Section]:
    """Each label's results against its rerun's (--jax-rerun), bit for bit."""
    blocks = _compared(view, "determinism", run)
    if not blocks:
        return []
    title = "run-to-run determinism" if run else "Run-to-run determinism"
    return [Section(title, blocks)]


def _ab(view: ReportView, run: RunFacts | None, draw: bool) -> list[Section]:
    """An A/B run's B/A verdicts (--jax-ab): what A and B are, one row per
    benchmark, size and backend; with ``draw``, ab.png (or why not)."""
    section = view.key.get("ab")
    if not isinstance(section, Mapping):
        return []
    entries = [e for e in section.get("comparisons") or [] if isinstance(e, Mapping)]
    rows = ab.ab_rows(entries)
    blocks: list[Block] = [Lines(ab.ab_lines(section))]
    if not rows:
        blocks.append(Lines(("no benchmark measured on both sides",)))
    elif run is None:
        blocks.append(Table(ab.AB_HEADER, tuple(rows[:200])))
    else:
        header = ab.AB_HEADER
        blocks.append(Table(header, tuple(rows), left=3, ruled=False))
    if draw and run is None:
        alt = "B/A per-call time against problem size, with its interval"
        blocks += _drawn(view.ab_png, "A/B", alt, "ab-figure")
    title = "A/B" if run else "A/B: the other version against this one"
    return [Section(title, blocks)]


def _counters(view: ReportView, text: bool) -> Section | None:
    """The exact counters per call of every benchmark that recorded them
    (the terminal shows the first rows, the files all)."""
    recorded = [r for r in view.records if counters.has_counters(r)]
    if not recorded:
        return None
    rows: list[tuple[str, ...]] = []
    reasons: dict[str, list[str]] = {}
    for r in recorded:
        sid = series_id(r, view.machine_info)
        rows.append(
            (
                sid.name,
                _text(record_label(r)),
                _text(record_size(r)),
                *(counters.cell(r, name) for name, _ in counters.SHOWN),
            )
        )
        for name, why in counters.unavailable_reasons(r).items():
            reasons.setdefault(f"{name}: {why}", []).append(sid.name)
    shown = 20 if text else 500
    header = ("benchmark", "backend", "size", *(title for _, title in counters.SHOWN))
    lines = [
        "exact: fixed by the compiled programs (XLA cost and memory analysis, "
        "compile events of the warm-up, launches traced in the untimed first call); "
        "gate them with --jax-compare-fail=flops:5% (bytes:, temp:, compiles:)"
    ]
    if len(rows) > shown:
        lines.append(f"... and {len(rows) - shown} more rows in summary.md")
    lines += [
        f"n/a {why} ({len(names)} benchmark(s), e.g. {names[0]})"
        for why, names in list(reasons.items())[:10]
    ]
    title = "Counters per call (exact)"
    return Section(
        "pytest-lyapax: counters per call (exact)" if text else title,
        [Table(header, tuple(rows[:shown])), Lines(tuple(lines))],
    )


def _roofline(view: ReportView, draw: bool, text: bool) -> Section | None:
    """The line per series; with ``draw``, roofline.png (or why not)."""
    lines = roofline.series_lines(view.records)
    if not lines:
        return None
    alt = "achieved FLOP/s against arithmetic intensity, measured roofs"
    figure = (view.roofline_png, "roofline", alt) if draw else None
    return _titled("roofline (XLA cost analysis)", [Lines(tuple(lines))], text, figure)


def _titled(
    title: str,
    blocks: list[Block],
    text: bool,
    figure: tuple[Callable[[], bytes | None], str, str] | None,
) -> Section:
    """A section in the terminal (``pytest-lyapax: title``) or the files
    (``Title``, with the figure ``(draw, name, alt)`` if any, or why none)."""
    if text:
        return Section(f"pytest-lyapax: {title}", blocks)
    if figure is not None:
        draw, name, alt = figure
        blocks = blocks + _drawn(draw, name, alt, f"{name}-figure")
    return Section(title[0].upper() + title[1:], blocks)


SCALING_HEADER = (
    "test",
    "backend",
    "scaling",
    "p",
    "size",
    "time",
    "speedup",
    "efficiency",
    "devices on",
)


def _scaling(view: ReportView, draw: bool, text: bool) -> Section | None:
    """Speedup and efficiency per device count (--jax-devices), what the
    devices run on next to each; with ``draw``, scaling.png (or why not)."""
    rows = view.scaling()
    if not rows:
        return None

    def ratio(value: object) -> str:
        return f"{value:.2f}" if isinstance(value, float) else "-"

    table = tuple(
        (
            str(r["test"]),
            str(r["backend"]),
            str(r["scaling"]),
            str(r["devices"]),
            _text(r["size"]),
            units.format_seconds(r["median_s"]),
            ratio(r["speedup"]),
            ratio(r["efficiency"]),
            str(r["on"]),
        )
        for r in rows
    )
    notes = [
        "strong: same size on every p, speedup t1/tp, efficiency t1/(p tp); "
        "weak: size per device (the test scales it with p), efficiency t1/tp, "
        "speedup p t1/tp; t = median per call",
        *devices_report.oversubscribed(rows),
    ]
    blocks: list[Block] = [Table(SCALING_HEADER, table), Lines(tuple(notes))]
    alt = "speedup and efficiency against the number of devices"
    figure = (view.scaling_png, "scaling", alt) if draw else None
    return _titled("device scaling", blocks, text, figure)


def _drawn(
    draw: Callable[[], bytes | None], what: str, alt: str, ident: str
) -> list[Block]:
    """An optional figure of a section: none when ``draw`` gives none, the
    reason when matplotlib is missing."""
    try:
        png = draw()
    except ImportError as exc:  # matplotlib is optional
        return [Lines((f"no {what} figure: {exc}",))]
    return [] if png is None else [Figure(png, alt, ident)]


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


def _search(view: ReportView) -> list[Section]:
    """The crossover searches and memory ceilings (views/search.py)."""
    lines = search_view.search_lines(view.key)
    header, rows = search_view.ceiling_rows(view.key)
    blocks: list[Any] = [Lines(lines)] if lines else []
    if rows:
        blocks.append(Table(header, rows, left=2))
    started = search_view.ceiling_lines(view.key)
    if started:
        blocks.append(Lines(started))
    return [Section(search_view.TITLE, blocks)] if blocks else []


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
    if text:
        sections += _determinism(view, run)
    sections.append(_backends(view, text))
    if isinstance(figure, bytes):
        alt = "wall time per call against problem size, one curve per backend"
        sections.append(Section("Figure", [Figure(figure, alt)]))
    elif figure is not None:
        sections.append(Section("Figure", [Lines((f"no figure: {figure}",))]))
    sections += _sized(view, text)
    if not text:
        sections += _agreement(view, run)
        sections += _determinism(view, run)
    unsized = _unsized(view, text)
    if unsized is not None:
        sections.append(unsized)
    if text and view.benches and len(view.order) > 1:
        rule = f"faster / within noise: {stats.rule_text()}"
        sections[-1].blocks.append(Lines((rule,)))
    sections += _ab(view, run, figure is not None)
    optional_sections = (
        None if text else _resources(view),
        roundchecks.recompile_section(view, text),
        roundchecks.stability_section(view, text),
        _counters(view, text),
        _machine_state(view, text),
        _roofline(view, figure is not None, text),
        _scaling(view, figure is not None, text),
    )
    sections += [s for s in optional_sections if s is not None]
    sections += _search(view)
    if text:
        sections += runtext.timing_notes(view)
    comparison = _comparison(view, run)
    if comparison is not None:
        sections.append(comparison)
    if run is not None:
        return sections + runtext.run_sections(view, run)
    noise = view.key.get("noise_test")
    if isinstance(noise, Mapping) and noise:
        stored = ", ".join(f"{k} {_text(v)}" for k, v in noise.items())
        sections.append(
            Section("Noise test (faster / within noise)", [Lines((stored,))])
        )
    if machine:
        sections.append(_machine(view))
    return sections
