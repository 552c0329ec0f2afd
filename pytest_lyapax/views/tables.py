"""Plain-text tables for the terminal summary and the command-line tools.

Every row is named by the identity of its series (``identity.py``): a
benchmark shows its short name unless two modules share it, then its full id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pytest_lyapax.report.counters import GATED, format_counter
from pytest_lyapax.report.identity import unique_names
from pytest_lyapax.report.units import format_bytes, format_seconds

if TYPE_CHECKING:
    from pytest_lyapax.report.compare import Comparison, MachineMatch
    from pytest_lyapax.report.gates import CompareThreshold
    from pytest_lyapax.report.series import Point, SizedBenchmark


def _per_label(cells: Sequence[str]) -> str:
    return " / ".join(cells) if any(c != "-" for c in cells) else "-"


def _measured_cells(points: Sequence[Point | None]) -> list[str]:
    """The compile and peak-memory cells of one size, over the backends."""
    compile_s = [
        format_seconds(p.compile_s if p else None)
        + (" (cached)" if p and p.compile_s is not None and p.cache == "hit" else "")
        for p in points
    ]
    peaks = [
        format_bytes(p.peak_bytes) + (" rss" if p.peak_is_rss else "")
        if p and p.peak_bytes is not None
        else "-"
        for p in points
    ]
    return [_per_label(compile_s), _per_label(peaks)]


def render_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    left: int = 1,
    ruled: bool = True,
) -> list[str]:
    """Plain-text table, the one formatter of the views: the first ``left``
    columns left-aligned, the rest right, a dashed rule under the header
    when ``ruled``; unruled, every column is left-aligned (a failure's long
    report, the agreement tables)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    left = left if ruled else len(widths)

    def line(cells: Sequence[str]) -> str:
        out = [
            str(c).ljust(w) if i < left else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    rule = ["  ".join("-" * w for w in widths)] if ruled else []
    return [line(header), *rule, *map(line, rows)]


def sized_rows(
    bench: SizedBenchmark,
    labels: Sequence[str],
    missing: Mapping[str, str],
    not_timed: Mapping[tuple[str, int], str] | None = None,
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the size x backend median table, with speedups
    against the first backend (a missing backend shows its status; a size
    measured on one backend but not timed on another shows why there:
    ``not_timed[(label, size)]``, e.g. "over budget")."""
    not_timed = not_timed or {}
    with_data = [label for label in labels if label in bench.series]
    ref = with_data[0] if with_data else None
    others = [label for label in with_data if label != ref]
    header = ["size", *labels, *(f"{o} speedup" for o in others)]
    # Compile time and peak memory, one value per backend ("a / b"), where
    # the report has them (schema 3, not --jax-no-extras).
    measured = any(
        p.compile_s is not None or p.peak_bytes is not None
        for points in bench.series.values()
        for p in points
    )
    each = f" ({'/'.join(with_data)})" if len(with_data) > 1 else ""
    if measured:
        header += [f"compile{each}", f"peak memory{each}"]
    rows = []
    for size in bench.sizes:
        points = [bench.points(label).get(size) for label in with_data]
        row = [str(size)]
        for label in labels:
            value = bench.medians(label).get(size)
            if value is None and label in missing:
                row.append(missing[label])
            elif value is None and (label, size) in not_timed:
                row.append(not_timed[label, size])
            else:
                row.append(format_seconds(value))
        for other in others:
            assert ref is not None
            t_ref = bench.medians(ref).get(size)
            t_other = bench.medians(other).get(size)
            row.append(f"{t_ref / t_other:.3g}x" if t_ref and t_other else "-")
        if measured:
            row += _measured_cells(points)
        rows.append(row)
    return header, rows


def sized_table(
    bench: SizedBenchmark, labels: Sequence[str], missing: Mapping[str, str]
) -> list[str]:
    """Size x backend median table with speedups against the first backend."""
    return render_table(*sized_rows(bench, labels, missing))


def unsized_rows(
    medians: Mapping[str, Mapping[str, Point]],
    labels: Sequence[str],
    missing: Mapping[str, str],
) -> tuple[list[str], list[list[str]]] | None:
    """Header and rows of the benchmark x backend median table (None: no
    benchmark without a size axis)."""
    if not medians:
        return None
    rows = []
    for name, by_label in medians.items():
        row = [name]
        for label in labels:
            point = by_label.get(label)
            if point is None and label in missing:
                row.append(missing[label])
            else:
                row.append(format_seconds(point.median if point else None))
        rows.append(row)
    return ["benchmark", *labels], rows


def unsized_table(
    medians: Mapping[str, Mapping[str, Point]],
    labels: Sequence[str],
    missing: Mapping[str, str],
) -> list[str]:
    """Benchmark x backend median table for benchmarks without a size axis
    (``medians`` as :func:`~pytest_lyapax.report.series.unsized_medians`
    gives them)."""
    found = unsized_rows(medians, labels, missing)
    return render_table(*found) if found else []


def comparison_table(
    comparisons: Sequence[Comparison], thresholds: Sequence[CompareThreshold]
) -> list[str]:
    """One row per compared benchmark: saved, now and change of each gated
    field (the median, in percent, without gates; a counter that cannot be
    compared shows ``n/a``), the counters that changed (where both runs
    recorded counters), the noise test's verdict, failed gates."""
    rules: dict[str, CompareThreshold | None] = {}
    for t in thresholds:
        rules.setdefault(t.field, t)
    if not rules:
        rules = {"median": None}
    names = unique_names(c.series for c in comparisons)
    header = ["benchmark"]
    for name in rules:
        header += [f"saved {name}", f"now {name}", "change"]
    with_counters = any(c.counter_changes for c in comparisons)
    if with_counters:
        header.append("counters")
    header.append("noise test")
    rows = []
    for c in comparisons:
        shown = c.name if names[c.series.benchmark] == c.series.name else c.fullname
        row = [shown]
        for name, rule in rules.items():
            row += _compared_cells(c, name, rule)
        if with_counters:
            row.append(c.counter_changes or "-")
        verdict = c.verdict.describe()
        if c.unreliable:
            verdict += "  UNRELIABLE (busy)"
        if c.failed:
            verdict += "  REGRESSION " + ", ".join(c.failed)
        if c.excused:
            verdict += "  not gated: " + ", ".join(c.excused)
        row.append(verdict)
        rows.append(row)
    return render_table(header, rows)


def _compared_cells(
    c: Comparison, name: str, rule: CompareThreshold | None
) -> list[str]:
    """Saved, now and change of one compared field (time or counter)."""
    if name not in c.saved or name not in c.now:
        return ["n/a", "n/a", "not comparable"]
    before, after = c.saved[name], c.now[name]
    if rule is None:
        change = f"{(after / before - 1) * 100:+.1f}%" if before > 0 else "-"
    else:
        change = rule.format_change(rule.excess(before, after))
    if rule is not None and rule.counter:
        counter = GATED[name]
        return [format_counter(counter, before), format_counter(counter, after), change]
    return [format_seconds(before), format_seconds(after), change]


def machine_lines(matches: Sequence[MachineMatch]) -> list[str]:
    """Per backend: does this run's machine match the saved run's?"""
    rows = []
    for m in matches:
        rows.append(
            [
                m.backend,
                str(m.saved) + (f", {m.saved.device}" if m.saved.device else ""),
                str(m.now) + (f", {m.now.device}" if m.now.device else ""),
                "same" if not m.differences else "; ".join(m.differences),
            ]
        )
    if not rows:
        return []
    return render_table(["backend", "saved run on", "this run on", "machine"], rows)


def compile_line(bench: SizedBenchmark, labels: Sequence[str]) -> str | None:
    """Each series' compile time over its sizes and how many of its warm-ups
    loaded their program from the persistent cache, e.g. ``compile: cpu
    1.2 s over 4 sizes (cache: 4 of 4 hit); tpu ...`` (None: not recorded)."""
    parts = []
    for label in labels:
        points = [p for p in bench.series.get(label, []) if p.compile_s is not None]
        if not points:
            continue
        total = sum(p.compile_s or 0.0 for p in points)
        text = f"{label} {format_seconds(total)} over {len(points)} size(s)"
        looked = [p for p in points if p.cache in ("hit", "miss")]
        if looked:
            hits = sum(p.cache == "hit" for p in looked)
            text += f" (cache: {hits} of {len(looked)} hit)"
        elif any(p.cache == "off" for p in points):
            text += " (cache off)"
        parts.append(text)
    return "compile: " + "; ".join(parts) if parts else None
