"""Pure functions over benchmark records: series, crossover, comparison, tables.

A *record* is one entry of pytest-benchmark's JSON ``benchmarks`` list; the
plugin puts the backend label in ``extra_info["backend"]`` and the size (or
None) in ``extra_info["size"]``.  Nothing here measures, reads a clock or
imports pytest, so the command-line tools reuse it on saved reports.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_SIZE_LABEL = "problem size (jax_size)"

# The statistics pytest-benchmark stores per benchmark, in its own order.
STAT_FIELDS = (
    "min",
    "max",
    "mean",
    "stddev",
    "rounds",
    "median",
    "iqr",
    "q1",
    "q3",
    "iqr_outliers",
    "stddev_outliers",
    "outliers",
    "ld15iqr",
    "hd15iqr",
    "ops",
    "total",
)
# Those that are durations in seconds (larger means slower or noisier): the
# only ones a regression gate may compare.
TIME_FIELDS = tuple(
    f for f in STAT_FIELDS if f in {"min", "max", "mean", "stddev", "median", "iqr"}
)
# Parameters the plugin adds itself; every other parameter makes its own series.
PLUGIN_PARAMS = ("jax_backend", "jax_size")


@dataclass(frozen=True)
class CompareThreshold:
    """A regression limit such as ``median:25%`` (relative) or ``median:0.01s``."""

    field: str
    limit: float
    relative: bool

    def excess(self, saved: float, now: float) -> float:
        """Return the change from ``saved`` to ``now``: percent if relative, else s."""
        if self.relative:
            return (now / saved - 1.0) * 100.0 if saved > 0 else float("inf")
        return now - saved

    def exceeded(self, saved: float, now: float) -> bool:
        """Whether ``now`` is slower than ``saved`` by more than the limit."""
        return self.excess(saved, now) > self.limit

    def format_change(self, change: float) -> str:
        """A change as this threshold measures it, in readable units."""
        if self.relative:
            return f"{change:+.1f}%"
        sign = "+" if change >= 0 else "-"
        return sign + format_seconds(abs(change))

    def __str__(self) -> str:
        if self.relative:
            return f"{self.field}:{self.limit:g}%"
        return f"{self.field}:{format_seconds(self.limit)}"


_THRESHOLD = re.compile(
    r"^(?P<field>[a-z]+):(?P<value>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)(?P<unit>%|s)?$"
)


def parse_threshold(text: str) -> CompareThreshold:
    """Parse ``FIELD:N%`` (relative) or ``FIELD:SECONDS[s]`` (absolute).

    Raises ValueError naming the text and what is allowed.
    """
    match = _THRESHOLD.match(text.strip())
    if not match or match["field"] not in TIME_FIELDS:
        raise ValueError(
            f"cannot read {text!r}; write FIELD:PERCENT% or FIELD:SECONDS, with "
            f"FIELD one of {', '.join(TIME_FIELDS)} (e.g. median:25% or median:0.05)"
        )
    return CompareThreshold(
        field=match["field"],
        limit=float(match["value"]),
        relative=match["unit"] == "%",
    )


@dataclass(frozen=True)
class Point:
    """One backend's timing at one size (seconds): median and quartiles."""

    size: int
    median: float
    q1: float
    q3: float


@dataclass
class SizedBenchmark:
    """A size-parametrized benchmark with fixed other parameters: one series
    of points per backend."""

    key: str
    name: str
    size_label: str = DEFAULT_SIZE_LABEL
    series: dict[str, list[Point]] = field(default_factory=dict)

    def points(self, label: str) -> dict[int, Point]:
        return {p.size: p for p in self.series.get(label, [])}

    def medians(self, label: str) -> dict[int, float]:
        return {p.size: p.median for p in self.series.get(label, [])}

    @property
    def sizes(self) -> list[int]:
        return sorted({p.size for points in self.series.values() for p in points})


@dataclass(frozen=True)
class Crossing:
    """A change of sign of the median difference between two adjacent sizes."""

    size: float  # interpolated in log(size) vs log(speedup)
    between: tuple[int, int]
    winner: str  # the label that is faster (by median) after the crossing


@dataclass(frozen=True)
class Crossover:
    """How ``other`` compares with ``reference`` over the common sizes.

    ``verdicts`` holds, per common size, the label that is faster beyond the
    measured noise (their interquartile ranges do not overlap) or ``"noise"``.
    """

    reference: str
    other: str
    sizes: tuple[int, ...] = ()
    verdicts: tuple[str, ...] = ()
    crossings: tuple[Crossing, ...] = ()
    speedup_at_largest: float | None = None  # t_reference / t_other

    @property
    def largest(self) -> int | None:
        return self.sizes[-1] if self.sizes else None

    @property
    def kind(self) -> str:
        """One word for the JSON report: no-common-sizes, within-noise,
        other-faster, reference-faster, crossover or mixed."""
        if not self.sizes:
            return "no-common-sizes"
        decided = [v for v in self.verdicts if v != "noise"]
        if not decided:
            return "within-noise"
        if set(decided) == {self.other} and not self.crossings:
            return "other-faster"
        if set(decided) == {self.reference} and not self.crossings:
            return "reference-faster"
        if len(self.crossings) == 1 and decided[0] != decided[-1]:
            return "crossover"
        return "mixed"

    def describe(self, size_label: str = "size") -> str:
        ref, other = self.reference, self.other
        if not self.sizes:
            return f"{other} vs {ref}: no size measured on both"
        groups: dict[str, list[int]] = {}
        for size, verdict in zip(self.sizes, self.verdicts, strict=True):
            groups.setdefault(verdict, []).append(size)
        parts = [
            f"{label} faster at {size_label} {_sizes_text(groups[label])}"
            for label in (other, ref)
            if label in groups
        ]
        if "noise" in groups:
            parts.append(f"within noise at {size_label} {_sizes_text(groups['noise'])}")
        if self.crossings:
            where = ", ".join(
                f"~{c.size:.3g} (between {c.between[0]} and {c.between[1]}, "
                f"{c.winner} faster after)"
                for c in self.crossings
            )
            parts.append(f"medians cross at {size_label} {where}")
        else:
            parts.append("medians do not cross in the measured range")
        tail = f"{self.speedup_at_largest:.3g}x at {self.largest}"
        return f"{other} vs {ref}: " + "; ".join(parts) + f" (t_{ref}/t_{other} {tail})"

    def to_json(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "other": self.other,
            "kind": self.kind,
            "sizes": list(self.sizes),
            "verdicts": list(self.verdicts),
            "crossings": [c.__dict__ for c in self.crossings],
            "largest": self.largest,
            "speedup_at_largest": self.speedup_at_largest,
        }


def _sizes_text(sizes: Sequence[int]) -> str:
    return ", ".join(str(s) for s in sizes)


def _base(fullname: str) -> str:
    return fullname.split("[", 1)[0]


def record_label(record: Mapping[str, Any]) -> str | None:
    label = (record.get("extra_info") or {}).get("backend")
    return label if isinstance(label, str) else None


def record_size(record: Mapping[str, Any]) -> int | None:
    size = (record.get("extra_info") or {}).get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def other_params(record: Mapping[str, Any]) -> str:
    """The record's parameters other than backend and size, as ``k=v,...``."""
    params = record.get("params") or {}
    if not isinstance(params, Mapping):
        return ""
    return ",".join(
        f"{k}={params[k]}" for k in sorted(params) if k not in PLUGIN_PARAMS
    )


def series_name(record: Mapping[str, Any], key: str = "name") -> str:
    """Test name (or full id with ``key="fullname"``) without backend and size,
    keeping every other parameter: one series per such name."""
    rest = other_params(record)
    base = _base(str(record.get(key, "")))
    return f"{base}[{rest}]" if rest else base


def group_sized(
    records: Iterable[Mapping[str, Any]], order: Sequence[str]
) -> list[SizedBenchmark]:
    """One :class:`SizedBenchmark` per test and combination of its other
    parameters (a ``dtype`` parameter gives one series per dtype)."""
    groups: dict[str, SizedBenchmark] = {}
    for record in records:
        label, size = record_label(record), record_size(record)
        if label is None or size is None:
            continue
        key = series_name(record, "fullname")
        bench = groups.setdefault(key, SizedBenchmark(key, series_name(record)))
        info = record.get("extra_info") or {}
        if info.get("size_label"):
            bench.size_label = str(info["size_label"])
        stats = record["stats"]
        point = Point(size, stats["median"], stats["q1"], stats["q3"])
        bench.series.setdefault(label, []).append(point)
    rank = {label: i for i, label in enumerate(order)}
    for bench in groups.values():
        for points in bench.series.values():
            points.sort(key=lambda p: p.size)
        bench.series = dict(
            sorted(bench.series.items(), key=lambda kv: rank.get(kv[0], len(rank)))
        )
    return list(groups.values())


def _verdict(reference: str, other: str, ref: Point, oth: Point) -> str:
    if oth.q3 < ref.q1:
        return other
    if ref.q3 < oth.q1:
        return reference
    return "noise"


def find_crossover(
    reference: str,
    other: str,
    ref_points: Mapping[int, Point],
    other_points: Mapping[int, Point],
) -> Crossover:
    """Compare two backends size by size and find every crossing of the medians.

    A crossing lies between adjacent common sizes where the sign of
    ``log(t_reference / t_other)`` changes; its position is interpolated
    linearly in log(size).  Who is *faster* at a size is decided only when
    the interquartile ranges do not overlap.
    """
    sizes = tuple(sorted(set(ref_points) & set(other_points)))
    if not sizes:
        return Crossover(reference, other)
    logs = [
        math.log(ref_points[s].median / other_points[s].median)
        if ref_points[s].median > 0 and other_points[s].median > 0
        else 0.0
        for s in sizes
    ]
    verdicts = tuple(
        _verdict(reference, other, ref_points[s], other_points[s]) for s in sizes
    )
    crossings = []
    for i in range(1, len(sizes)):
        a, b = logs[i - 1], logs[i]
        if a == 0.0 or b == 0.0 or (a > 0) == (b > 0):
            continue
        lo, hi = sizes[i - 1], sizes[i]
        fraction = -a / (b - a)
        at = math.exp(math.log(lo) + fraction * (math.log(hi) - math.log(lo)))
        crossings.append(Crossing(at, (lo, hi), other if b > 0 else reference))
    return Crossover(
        reference, other, sizes, verdicts, tuple(crossings), math.exp(logs[-1])
    )


def crossovers(bench: SizedBenchmark) -> list[Crossover]:
    """Each backend against the first one (in run order) that has timings."""
    labels = list(bench.series)
    if len(labels) < 2:
        return []
    ref = labels[0]
    return [
        find_crossover(ref, other, bench.points(ref), bench.points(other))
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
            value = bench.medians(label).get(size)
            if value is None and label in missing:
                row.append(missing[label])
            else:
                row.append(format_seconds(value))
        for other in others:
            t_ref = bench.medians(ref).get(size)
            t_other = bench.medians(other).get(size)
            row.append(f"{t_ref / t_other:.3g}x" if t_ref and t_other else "-")
        rows.append(row)
    return render_table(header, rows)


def unsized_medians(
    records: Iterable[Mapping[str, Any]],
) -> dict[str, dict[str, Point]]:
    """Benchmarks without a size axis: series name -> backend -> timing."""
    result: dict[str, dict[str, Point]] = {}
    for record in records:
        label = record_label(record)
        if label is None or record_size(record) is not None:
            continue
        stats = record["stats"]
        point = Point(0, stats["median"], stats["q1"], stats["q3"])
        result.setdefault(series_name(record), {})[label] = point
    return result


def unsized_table(
    records: Iterable[Mapping[str, Any]],
    labels: Sequence[str],
    missing: Mapping[str, str],
) -> list[str]:
    """Test x backend median table for benchmarks without a size axis."""
    medians = unsized_medians(records)
    if not medians:
        return []
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


@dataclass
class ComparisonResult:
    """All comparisons with a saved run, and what could not be compared."""

    comparisons: list[Comparison] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in the saved run, not now
    new: list[str] = field(default_factory=list)  # now, not in the saved run

    @property
    def regressions(self) -> list[str]:
        return [c.fullname for c in self.comparisons if c.failed]

    def gate_failures(self, allow_missing: bool) -> list[str]:
        """Why a ``--jax-compare-fail`` gate fails (empty: it passes)."""
        reasons = [f"{name} regressed" for name in self.regressions]
        if not allow_missing:
            if not self.comparisons:
                reasons.append(
                    "no benchmark of this run matches one of the saved run (nothing "
                    "was compared)"
                )
            reasons += [f"{name} is missing from this run" for name in self.missing]
        return reasons


def compare_runs(
    saved: Mapping[str, Any],
    records: Iterable[Mapping[str, Any]],
    threshold: CompareThreshold | None,
) -> ComparisonResult:
    """Match records with a saved run by test id and compare one statistic."""
    field_name = threshold.field if threshold else "median"
    rule = threshold or CompareThreshold(field_name, float("inf"), True)
    old = {b["fullname"]: b for b in saved.get("benchmarks", []) if "fullname" in b}
    result = ComparisonResult()
    seen = set()
    for record in records:
        seen.add(record["fullname"])
        before = old.get(record["fullname"])
        if before is None or field_name not in before.get("stats", {}):
            result.new.append(record["fullname"])
            continue
        saved_value = float(before["stats"][field_name])
        now_value = float(record["stats"][field_name])
        result.comparisons.append(
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
    result.missing = [name for name in old if name not in seen]
    return result


def comparison_table(
    comparisons: Sequence[Comparison], threshold: CompareThreshold | None
) -> list[str]:
    rule = threshold or CompareThreshold("median", float("inf"), True)
    rows = []
    for c in comparisons:
        change = rule.format_change(c.change)
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
        ["benchmark", f"saved {rule.field}", f"now {rule.field}", "change"], rows
    )


def check_report(data: object, what: str) -> list[dict[str, Any]]:
    """Validate an untrusted report; return its benchmarks or raise ValueError.

    A report is a JSON object with a ``benchmarks`` list whose entries have a
    string ``fullname`` and numeric (finite, non-negative) time statistics.
    """
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ValueError(
            f"{what} is not a pytest-benchmark report (no 'benchmarks' list)"
        )
    benches = data["benchmarks"]
    for i, bench in enumerate(benches):
        if not isinstance(bench, dict) or not isinstance(bench.get("fullname"), str):
            raise ValueError(f"{what}: benchmark #{i} has no 'fullname' string")
        stats = bench.get("stats")
        if not isinstance(stats, dict):
            raise ValueError(f"{what}: {bench['fullname']} has no 'stats' object")
        for name in (*TIME_FIELDS, "q1", "q3"):
            value = stats.get(name)
            if name in stats and (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(
                    f"{what}: {bench['fullname']} has a non-numeric or negative "
                    f"stats.{name} ({value!r}); expected seconds as a number"
                )
    return benches
