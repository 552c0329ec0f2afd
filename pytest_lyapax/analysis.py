"""Pure functions over benchmark records: series, crossover, comparison, tables.

A *record* is one entry of pytest-benchmark's JSON ``benchmarks`` list; the
plugin puts the backend label in ``extra_info["backend"]`` and the size (or
None) in ``extra_info["size"]``.  Nothing here measures or reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .options import CompareThreshold

DEFAULT_SIZE_LABEL = "problem size (jax_size)"


@dataclass(frozen=True)
class Point:
    """One backend's timing at one size (seconds)."""

    size: int
    median: float
    q1: float
    q3: float


@dataclass
class SizedBenchmark:
    """A size-parametrized benchmark: one series of points per backend."""

    key: str
    name: str
    size_label: str = DEFAULT_SIZE_LABEL
    series: dict[str, list[Point]] = field(default_factory=dict)

    def medians(self, label: str) -> dict[int, float]:
        return {p.size: p.median for p in self.series.get(label, [])}

    @property
    def sizes(self) -> list[int]:
        return sorted({p.size for points in self.series.values() for p in points})


@dataclass(frozen=True)
class Crossover:
    """Where ``other`` starts to beat ``reference`` (sizes and speedups)."""

    reference: str
    other: str
    kind: str  # "crossover", "other-faster", "reference-faster" or "no-common-sizes"
    size: float | None = None
    between: tuple[int, int] | None = None
    largest: int | None = None
    speedup_at_largest: float | None = None  # t_reference / t_other

    def describe(self, size_label: str = "size") -> str:
        ref, other = self.reference, self.other
        if self.kind == "no-common-sizes":
            return f"{other} vs {ref}: no size measured on both"
        tail = f"{self.speedup_at_largest:.3g}x at {self.largest}"
        if self.kind == "crossover":
            lo, hi = self.between or (0, 0)
            return (
                f"{other} faster than {ref} from {size_label} ~ {self.size:.3g} on "
                f"(between {lo} and {hi}); {tail}"
            )
        if self.kind == "other-faster":
            return f"{other} faster than {ref} at every measured size; {tail}"
        return (
            f"{ref} faster than {other} at the largest measured size; no crossover "
            f"in the measured range ({other} speedup {tail})"
        )


def _base(fullname: str) -> str:
    return fullname.split("[", 1)[0]


def record_label(record: Mapping[str, Any]) -> str | None:
    return (record.get("extra_info") or {}).get("backend")


def record_size(record: Mapping[str, Any]) -> int | None:
    return (record.get("extra_info") or {}).get("size")


def group_sized(
    records: Iterable[Mapping[str, Any]], order: Sequence[str]
) -> list[SizedBenchmark]:
    """Group size-parametrized records into one :class:`SizedBenchmark` per test."""
    groups: dict[str, SizedBenchmark] = {}
    for record in records:
        label, size = record_label(record), record_size(record)
        if label is None or size is None:
            continue
        key = _base(record["fullname"])
        bench = groups.setdefault(key, SizedBenchmark(key, _base(record["name"])))
        info = record.get("extra_info") or {}
        if info.get("size_label"):
            bench.size_label = info["size_label"]
        stats = record["stats"]
        point = Point(int(size), stats["median"], stats["q1"], stats["q3"])
        bench.series.setdefault(label, []).append(point)
    rank = {label: i for i, label in enumerate(order)}
    for bench in groups.values():
        for points in bench.series.values():
            points.sort(key=lambda p: p.size)
        bench.series = dict(
            sorted(bench.series.items(), key=lambda kv: rank.get(kv[0], len(rank)))
        )
    return list(groups.values())


def find_crossover(
    reference: str,
    other: str,
    t_reference: Mapping[int, float],
    t_other: Mapping[int, float],
) -> Crossover:
    """Locate the size from which ``other`` is faster at every larger size.

    Between the last size where ``reference`` wins and the next one, the
    crossover is interpolated linearly in log(size) vs log(speedup).
    """
    sizes = sorted(set(t_reference) & set(t_other))
    if not sizes:
        return Crossover(reference, other, "no-common-sizes")
    speedup = [t_reference[s] / t_other[s] for s in sizes]
    largest, last = sizes[-1], speedup[-1]
    if last < 1.0:
        return Crossover(
            reference, other, "reference-faster", None, None, largest, last
        )
    j = len(sizes) - 1
    while j > 0 and speedup[j - 1] >= 1.0:
        j -= 1
    if j == 0:
        return Crossover(reference, other, "other-faster", None, None, largest, last)
    lo, hi = sizes[j - 1], sizes[j]
    s_lo, s_hi = math.log(speedup[j - 1]), math.log(speedup[j])
    fraction = -s_lo / (s_hi - s_lo) if s_hi != s_lo else 0.5
    at = math.exp(math.log(lo) + fraction * (math.log(hi) - math.log(lo)))
    return Crossover(reference, other, "crossover", at, (lo, hi), largest, last)


def crossovers(bench: SizedBenchmark) -> list[Crossover]:
    """Each backend against the first one (in run order) that has timings."""
    labels = list(bench.series)
    if len(labels) < 2:
        return []
    ref = labels[0]
    return [
        find_crossover(ref, other, bench.medians(ref), bench.medians(other))
        for other in labels[1:]
    ]


def format_seconds(value: float | None) -> str:
    """Format a duration with a readable unit (ns, us, ms or s)."""
    if value is None or not math.isfinite(value):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def render_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1
) -> list[str]:
    """Plain-text table: the first ``left`` columns left-aligned, the rest right."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        out = [
            str(c).ljust(w) if i < left else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *map(line, rows)]


def sized_table(
    bench: SizedBenchmark, labels: Sequence[str], missing: Mapping[str, str]
) -> list[str]:
    """Size x backend median table with speedups against the first backend."""
    with_data = [label for label in labels if label in bench.series]
    ref = with_data[0] if with_data else None
    others = [label for label in with_data if label != ref]
    header = ["size", *labels, *(f"{o} speedup" for o in others)]
    rows = []
    for size in bench.sizes:
        row = [str(size)]
        for label in labels:
            if label in missing:
                row.append(missing[label])
            else:
                row.append(format_seconds(bench.medians(label).get(size)))
        for other in others:
            t_ref = bench.medians(ref).get(size)
            t_other = bench.medians(other).get(size)
            row.append(f"{t_ref / t_other:.3g}x" if t_ref and t_other else "-")
        rows.append(row)
    return render_table(header, rows)


def unsized_table(
    records: Iterable[Mapping[str, Any]],
    labels: Sequence[str],
    missing: Mapping[str, str],
) -> list[str]:
    """Test x backend median table for benchmarks without a size axis."""
    medians: dict[str, dict[str, float]] = {}
    for record in records:
        label = record_label(record)
        if label is None or record_size(record) is not None:
            continue
        name = _base(record["name"])
        param = record.get("param") or ""
        rest = param.split("-", 1)[1] if "-" in param else ""
        if rest:
            name = f"{name}[{rest}]"
        medians.setdefault(name, {})[label] = record["stats"]["median"]
    if not medians:
        return []
    rows = []
    for name, by_label in medians.items():
        row = [name]
        for label in labels:
            row.append(missing.get(label) or format_seconds(by_label.get(label)))
        rows.append(row)
    return render_table(["benchmark", *labels], rows)


@dataclass(frozen=True)
class Comparison:
    """One benchmark compared with the same benchmark of a saved run."""

    fullname: str
    backend: str | None
    size: int | None
    saved: float
    now: float
    change: float
    failed: bool


def compare_runs(
    saved: Mapping[str, Any],
    records: Iterable[Mapping[str, Any]],
    threshold: CompareThreshold | None,
) -> list[Comparison]:
    """Match records with a saved run by test id and compare one statistic."""
    field_name = threshold.field if threshold else "median"
    rule = threshold or CompareThreshold(field_name, float("inf"), True)
    old = {b["fullname"]: b for b in saved.get("benchmarks", []) if "fullname" in b}
    result = []
    for record in records:
        before = old.get(record["fullname"])
        if before is None or field_name not in before.get("stats", {}):
            continue
        saved_value = float(before["stats"][field_name])
        now_value = float(record["stats"][field_name])
        result.append(
            Comparison(
                fullname=record["fullname"],
                backend=record_label(record),
                size=record_size(record),
                saved=saved_value,
                now=now_value,
                change=rule.excess(saved_value, now_value),
                failed=threshold is not None and rule.exceeded(saved_value, now_value),
            )
        )
    return result


def comparison_table(
    comparisons: Sequence[Comparison], threshold: CompareThreshold | None
) -> list[str]:
    relative = threshold.relative if threshold else True
    field_name = threshold.field if threshold else "median"
    rows = []
    for c in comparisons:
        change = f"{c.change:+.1f}%" if relative else f"{c.change:+.3g} s"
        if c.failed:
            change += "  REGRESSION"
        rows.append(
            [
                c.fullname.rsplit("::", 1)[-1],
                format_seconds(c.saved),
                format_seconds(c.now),
                change,
            ]
        )
    return render_table(
        ["benchmark", f"saved {field_name}", f"now {field_name}", "change"], rows
    )
