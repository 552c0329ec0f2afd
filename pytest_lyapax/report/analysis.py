"""Pure functions over benchmark records: series, crossover, comparison.

A *record* is one entry of pytest-benchmark's JSON ``benchmarks`` list; the
plugin puts the backend label in ``extra_info["backend"]`` and the size (or
None) in ``extra_info["size"]``.  Which series a record belongs to is
:func:`pytest_lyapax.report.identity.series_id`; whether two sets of timings differ
is :func:`pytest_lyapax.report.stats.judge`.  Nothing here measures, reads a clock or
imports pytest, so the command-line tools reuse it on saved reports.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_lyapax.report import counters, stats
from pytest_lyapax.report.details import peak_memory, warmup_of
from pytest_lyapax.report.identity import (
    Machine,
    SeriesId,
    record_size,
    series_id,
    size_label,
    unique_names,
)
from pytest_lyapax.report.schema import TIME_FIELDS
from pytest_lyapax.report.units import format_seconds

DEFAULT_SIZE_LABEL = "problem size (jax_size)"
# Verdict of a size where the noise test could not decide for lack of rounds.
FEW = "too few rounds"

# ------------------------------------------------------------ thresholds

_UNITS = {"%": None, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_THRESHOLD = re.compile(
    r"^(?P<field>[a-z]+):(?P<value>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
    r"(?P<unit>%|s|ms|us|ns)?$"
)


@dataclass(frozen=True)
class CompareThreshold:
    """A regression limit: ``median:25%`` (relative) or ``median:25ms``
    (absolute) on a time statistic, or ``flops:5%`` / ``compiles:1`` on an
    exact counter (:data:`~pytest_lyapax.report.counters.GATED`)."""

    field: str
    limit: float  # percent if relative, else seconds (a count for a counter)
    relative: bool

    @property
    def counter(self) -> bool:
        """Whether this gate reads an exact counter, not a time: no noise
        test applies and a busy machine does not excuse it."""
        return self.field in counters.GATED

    def excess(self, saved: float, now: float) -> float:
        """Return the change from ``saved`` to ``now``: percent if relative,
        else seconds (or counts)."""
        if self.relative:
            if saved > 0:
                return (now / saved - 1.0) * 100.0
            # A counter may be 0 (no temporary bytes): 0 -> 0 is no change.
            return 0.0 if self.counter and now == saved else float("inf")
        return now - saved

    def exceeded(self, saved: float, now: float) -> bool:
        """Whether ``now`` is slower (a counter: larger) than ``saved`` by
        more than the limit."""
        if self.counter and self.relative and saved > 0:
            # Growth against the allowed growth: exactly 5 % passes flops:5%.
            return now - saved > saved * self.limit / 100.0
        return self.excess(saved, now) > self.limit

    def format_change(self, change: float) -> str:
        """A change as this threshold measures it, in readable units."""
        if self.relative:
            return f"{change:+.1f}%"
        if self.counter:
            return f"{change:+.0f}"
        sign = "+" if change >= 0 else "-"
        return sign + format_seconds(abs(change))

    def __str__(self) -> str:
        if self.relative:
            return f"{self.field}:{self.limit:g}%"
        if self.counter:
            return f"{self.field}:{self.limit:g}"
        return f"{self.field}:{format_seconds(self.limit).replace(' ', '')}"


def _counter_threshold(
    text: str, name: str, value: str, unit: str | None
) -> CompareThreshold:
    """A gate on a counter: a percent, or a bare count for ``compiles``."""
    if unit == "%":
        return CompareThreshold(name, float(value), relative=True)
    counted = name in counters.COUNTED
    if unit is None and counted and value.isdigit():
        return CompareThreshold(name, float(value), relative=False)
    forms = f"{name}:{value}%" + (f" or a whole count, {name}:1" if counted else "")
    raise ValueError(
        f"cannot read {text!r}: the counter {name} takes a percent ({forms})"
    )


def parse_threshold(text: str) -> CompareThreshold:
    """Parse ``FIELD:N%`` (relative) or ``FIELD:N`` with a unit s, ms, us or
    ns on a time statistic, or ``COUNTER:N%`` on a counter (``compiles``
    also a whole count, ``compiles:1``).

    A bare time is refused: ``median:25`` could mean 25 % or 25 s.  Raises
    ValueError naming the text and the allowed forms.
    """
    text = text.strip()
    match = _THRESHOLD.match(text)
    fields = ", ".join(TIME_FIELDS)
    if not match or match["field"] not in (*TIME_FIELDS, *counters.GATED):
        raise ValueError(
            f"cannot read {text!r}; write FIELD:PERCENT% or FIELD:TIME with a unit "
            f"(s, ms, us, ns), FIELD one of {fields}, e.g. median:25% or median:25ms;"
            f" or COUNTER:PERCENT%, COUNTER one of {', '.join(counters.GATED)} "
            "(compiles also a whole count), e.g. flops:5% or compiles:1"
        )
    value, unit = match["value"], match["unit"]
    if match["field"] in counters.GATED:
        return _counter_threshold(text, match["field"], value, unit)
    if unit is None:
        raise ValueError(
            f"{text!r} has no unit: write {match['field']}:{value}% for a relative "
            f"limit, or {match['field']}:{value}ms / {match['field']}:{value}s for "
            "an absolute one"
        )
    scale = _UNITS[unit]
    return CompareThreshold(
        field=match["field"],
        limit=float(value) if scale is None else float(value) * scale,
        relative=scale is None,
    )


# ------------------------------------------------------------ series


@dataclass(frozen=True)
class Point:
    """One backend's timing at one size (seconds): median, quartiles and the
    per-call round times the noise test reads."""

    size: int
    median: float
    q1: float
    q3: float
    samples: tuple[float, ...] = ()
    # Schema 3 (None in older reports): XLA compile time of the warm-up, and
    # the peak memory: the device's where reported, else the worker's RSS.
    compile_s: float | None = None
    peak_bytes: int | None = None
    peak_is_rss: bool = False
    turns: tuple[int, ...] = ()  # each round's turn when interleaved (stats.py)


def point_of(record: Mapping[str, Any], size: int = 0) -> Point:
    s = record["stats"]
    peak, is_rss = peak_memory(record)
    warmup = warmup_of(record)
    return Point(
        size,
        s["median"],
        s["q1"],
        s["q3"],
        stats.round_times(record),
        warmup.compile_s if warmup is not None else None,
        peak,
        is_rss,
        turns=stats.round_turns(record),
    )


@dataclass
class SizedBenchmark:
    """A size-parametrized benchmark with fixed other parameters: one series
    of points per series label (backend, or backend @ machine)."""

    key: str  # SeriesId.benchmark: full test id and other parameters
    name: str  # what tables and figures show (unique among the benchmarks)
    size_label: str = DEFAULT_SIZE_LABEL
    series: dict[str, list[Point]] = field(default_factory=dict)

    def points(self, label: str) -> dict[int, Point]:
        return {p.size: p for p in self.series.get(label, [])}

    def medians(self, label: str) -> dict[int, float]:
        return {p.size: p.median for p in self.series.get(label, [])}

    @property
    def sizes(self) -> list[int]:
        return sorted({p.size for points in self.series.values() for p in points})


def _labelled(
    records: Iterable[Mapping[str, Any]], machine_info: Mapping[str, Any] | None
) -> list[tuple[SeriesId, Mapping[str, Any]]]:
    out = []
    for record in records:
        sid = series_id(record, machine_info)
        if sid.label is not None:
            out.append((sid, record))
    return out


def group_sized(
    records: Iterable[Mapping[str, Any]],
    order: Sequence[str],
    machine_info: Mapping[str, Any] | None = None,
) -> list[SizedBenchmark]:
    """One :class:`SizedBenchmark` per benchmark identity (test id with its
    module, other parameters), one series per label, in run order."""
    sized = [(s, r) for s, r in _labelled(records, machine_info) if record_size(r)]
    names = unique_names(s for s, _ in sized)
    groups: dict[str, SizedBenchmark] = {}
    for sid, record in sized:
        bench = groups.setdefault(
            sid.benchmark, SizedBenchmark(sid.benchmark, names[sid.benchmark])
        )
        label = size_label(record)
        if label is not None:
            bench.size_label = label
        size = record_size(record)
        assert size is not None
        assert sid.label is not None
        bench.series.setdefault(sid.label, []).append(point_of(record, size))
    rank = {label: i for i, label in enumerate(order)}
    for bench in groups.values():
        for points in bench.series.values():
            points.sort(key=lambda p: p.size)
        bench.series = dict(
            sorted(bench.series.items(), key=lambda kv: rank.get(kv[0], len(rank)))
        )
    return list(groups.values())


def unsized_medians(
    records: Iterable[Mapping[str, Any]],
    machine_info: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, Point]]:
    """Benchmarks without a size axis: display name -> series label -> timing
    (one entry per benchmark identity: two modules' ``test_x`` are two)."""
    unsized = [
        (s, r) for s, r in _labelled(records, machine_info) if record_size(r) is None
    ]
    names = unique_names(s for s, _ in unsized)
    result: dict[str, dict[str, Point]] = {}
    for sid, record in unsized:
        assert sid.label is not None
        result.setdefault(names[sid.benchmark], {})[sid.label] = point_of(record)
    return result


# ------------------------------------------------------------ crossover


@dataclass(frozen=True)
class Crossing:
    """A change of sign of the median difference between two adjacent sizes."""

    size: float  # interpolated in log(size) vs log(speedup)
    between: tuple[int, int]
    winner: str  # the label that is faster (by median) after the crossing


@dataclass(frozen=True)
class Crossover:
    """How ``other`` compares with ``reference`` over the common sizes.

    ``verdicts`` holds, per common size, the label that the noise test
    (:func:`pytest_lyapax.report.stats.judge`) finds faster, ``"noise"`` when it
    finds no difference, or :data:`FEW` when there were too few rounds.
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
        """One word for the JSON report: no-common-sizes, too-few-rounds,
        within-noise, other-faster, reference-faster, crossover or mixed."""
        if not self.sizes:
            return "no-common-sizes"
        judged = [v for v in self.verdicts if v != FEW]
        if not judged:
            return "too-few-rounds"
        decided = [v for v in judged if v != "noise"]
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
        if FEW in groups:
            parts.append(
                f"too few rounds to judge at {size_label} {_sizes_text(groups[FEW])} "
                f"(the noise test needs {stats.MIN_ROUNDS} per backend)"
            )
        if self.crossings:
            where = ", ".join(
                f"~{c.size:.3g} (between {c.between[0]} and {c.between[1]}, "
                f"{self._after(i)})"
                for i, c in enumerate(self.crossings)
            )
            parts.append(f"medians cross at {size_label} {where}")
        else:
            parts.append("medians do not cross in the measured range")
        tail = f"{self.speedup_at_largest:.3g}x at {self.largest}"
        return f"{other} vs {ref}: " + "; ".join(parts) + f" (t_{ref}/t_{other} {tail})"

    def _after(self, index: int) -> str:
        """Who leads after crossing ``index``: "faster" only where the noise test
        found that label faster at a size before the next crossing; a lower
        median alone never calls two backends different."""
        c = self.crossings[index]
        end = (
            self.crossings[index + 1].between[0]
            if index + 1 < len(self.crossings)
            else math.inf
        )
        shown = any(
            verdict == c.winner
            for size, verdict in zip(self.sizes, self.verdicts, strict=True)
            if c.between[1] <= size <= end
        )
        if shown:
            return f"{c.winner} faster after"
        return f"{c.winner}'s median lower after, no difference shown by the noise test"

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


def _verdict(reference: str, other: str, ref: Point, oth: Point) -> str:
    verdict = stats.judge(ref.samples, oth.samples, turns=(ref.turns, oth.turns))
    if verdict.kind == stats.FEW:
        return FEW
    if verdict.kind == stats.FASTER:
        return other
    if verdict.kind == stats.SLOWER:
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
    linearly in log(size).  Who is *faster* at a size is decided by the noise
    test on the two backends' round times (:func:`pytest_lyapax.report.stats.judge`).
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


# ------------------------------------------------------------ comparison


@dataclass(frozen=True)
class Comparison:
    """One benchmark compared with the same benchmark of a saved run."""

    series: SeriesId
    name: str  # the record's test name with its backend and size
    fullname: str
    size: int | None
    saved: Mapping[str, float]  # time statistics of the saved run
    now: Mapping[str, float]
    failed: tuple[str, ...]  # the gates it fails (str of each threshold)
    verdict: stats.Verdict
    # Counter gates that could not judge it: "flops not comparable (why)".
    not_comparable: tuple[str, ...] = ()
    # The counters that changed ("flops +100.0%"), "same", or "" (none recorded).
    counter_changes: str = ""
    # The saved and this run's records, as compared (report/busy.py reads
    # their machine state): why either was busy, and the timing gates that
    # a busy machine excused (--jax-busy=warn).
    records: tuple[Mapping[str, Any], Mapping[str, Any]] = field(
        default=({}, {}), compare=False, repr=False
    )
    unreliable: str | None = None
    excused: tuple[str, ...] = ()

    @property
    def backend(self) -> str | None:
        return self.series.backend

    @property
    def counter_failed(self) -> tuple[str, ...]:
        """The failed gates that read a counter (never excused as noise)."""
        return tuple(f for f in self.failed if f.split(":")[0] in counters.GATED)


@dataclass(frozen=True)
class MachineMatch:
    """Per backend: the machine of the saved run and of this run."""

    backend: str
    saved: Machine
    now: Machine

    @property
    def differences(self) -> list[str]:
        return self.saved.differences(self.now)

    @property
    def same_place(self) -> bool:
        return self.saved.same_place(self.now)

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "saved": self.saved.to_json(),
            "now": self.now.to_json(),
            "match": not self.differences,
            "differences": self.differences,
        }


@dataclass
class ComparisonResult:
    """All comparisons with a saved run, and what could not be compared."""

    thresholds: tuple[CompareThreshold, ...] = ()
    comparisons: list[Comparison] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # in the saved run, not now
    new: list[str] = field(default_factory=list)  # now, not in the saved run
    machines: list[MachineMatch] = field(default_factory=list)

    @property
    def regressions(self) -> list[str]:
        return [c.fullname for c in self.comparisons if c.failed]

    def refusal(self) -> str | None:
        """Why no gate may judge these runs: a backend measured on another host
        or device (None: same place, as far as both reports record it)."""
        moved = [m for m in self.machines if not m.same_place]
        if not moved:
            return None
        return "; ".join(
            f"backend {m.backend!r}: " + ", ".join(m.differences) for m in moved
        )

    def gate_failures(self, allow_missing: bool) -> list[str]:
        """Why the gates fail (empty: they pass)."""
        reasons = [
            f"{c.fullname} regressed ({', '.join(c.failed)})"
            for c in self.comparisons
            if c.failed
        ]
        if not allow_missing:
            reasons += [
                f"{c.fullname}: {why}"
                for c in self.comparisons
                for why in c.not_comparable
            ]
            if not self.comparisons:
                reasons.append(
                    "no benchmark of this run matches one of the saved run (nothing "
                    "was compared)"
                )
            reasons += [f"{name} is missing from this run" for name in self.missing]
        return reasons

    def to_json(self) -> dict[str, Any]:
        return {
            "gates": [str(t) for t in self.thresholds],
            "machines": [m.to_json() for m in self.machines],
            "refused": self.refusal() if self.thresholds else None,
            "compared": len(self.comparisons),
            "regressions": self.regressions,
            "missing": self.missing,
            "verdicts": {c.fullname: c.verdict.kind for c in self.comparisons},
            "not_comparable": {
                c.fullname: list(c.not_comparable)
                for c in self.comparisons
                if c.not_comparable
            },
            "unreliable": {
                c.fullname: c.unreliable for c in self.comparisons if c.unreliable
            },
            "excused": {
                c.fullname: list(c.excused) for c in self.comparisons if c.excused
            },
        }


def _match_key(sid: SeriesId, size: int | None) -> tuple[str, str, int | None]:
    return (sid.benchmark, sid.backend or "", size)


def compare_runs(
    saved: Mapping[str, Any],
    records: Iterable[Mapping[str, Any]],
    thresholds: Sequence[CompareThreshold] = (),
    machine_info: Mapping[str, Any] | None = None,
) -> ComparisonResult:
    """Match this run's records with a saved run by identity (benchmark,
    backend, size; :func:`~pytest_lyapax.report.identity.series_id`), compare the
    fields the gates name (median if none), run the noise test on each pair
    and record, per backend, the machine of both runs.

    ``machine_info`` describes this run's machine (a report's own is used
    for ``saved``).
    """
    saved_info = saved.get("machine_info")
    old: dict[tuple[str, str, int | None], tuple[SeriesId, Mapping[str, Any]]] = {}
    for bench in saved.get("benchmarks", []):
        sid = series_id(bench, saved_info)
        old.setdefault(_match_key(sid, record_size(bench)), (sid, bench))
    timed = [t for t in thresholds if not t.counter]
    fields = list(dict.fromkeys(t.field for t in timed)) or ["median"]
    result = ComparisonResult(tuple(thresholds))
    seen = set()
    machines: dict[str, MachineMatch] = {}
    for record in records:
        sid = series_id(record, machine_info)
        key = _match_key(sid, record_size(record))
        seen.add(key)
        entry = old.get(key)
        if entry is None or any(f not in entry[1].get("stats", {}) for f in fields):
            result.new.append(record["fullname"])
            continue
        saved_sid, before = entry
        then = {f: float(before["stats"][f]) for f in fields}
        now = {f: float(record["stats"][f]) for f in fields}
        not_comparable = _read_counters(thresholds, before, record, then, now)
        failed = tuple(
            str(t)
            for t in thresholds
            if t.field in then and t.exceeded(then[t.field], now[t.field])
        )
        verdict = stats.judge(
            stats.round_times(before),
            stats.round_times(record),
            medians=(then[fields[0]], now[fields[0]]),
        )
        result.comparisons.append(
            Comparison(
                sid,
                str(record.get("name") or record["fullname"]),
                record["fullname"],
                record_size(record),
                then,
                now,
                failed,
                verdict,
                not_comparable,
                counter_changes(before, record),
                (before, record),
            )
        )
        if sid.backend is not None and sid.backend not in machines:
            machines[sid.backend] = MachineMatch(
                sid.backend, saved_sid.machine, sid.machine
            )
    result.missing = [
        bench["fullname"] for key, (_, bench) in old.items() if key not in seen
    ]
    result.machines = list(machines.values())
    return result


def _read_counters(
    thresholds: Sequence[CompareThreshold],
    before: Mapping[str, Any],
    record: Mapping[str, Any],
    then: dict[str, float],
    now: dict[str, float],
) -> tuple[str, ...]:
    """Put the gated counters of both records into ``then``/``now``; return
    why each one that is missing on either side cannot be compared."""
    problems = []
    for name in dict.fromkeys(t.field for t in thresholds if t.counter):
        saved, saved_why = counters.counter(before, counters.GATED[name])
        current, current_why = counters.counter(record, counters.GATED[name])
        if saved is not None and current is not None:
            then[name], now[name] = saved, current
            continue
        if saved is None and current is None and saved_why == current_why:
            why = [f"both runs: {saved_why}"]
        else:
            why = [f"saved run: {saved_why}" if saved is None else ""]
            why.append(f"this run: {current_why}" if current is None else "")
        problems.append(f"{name} not comparable ({'; '.join(filter(None, why))})")
    return tuple(problems)


def counter_changes(before: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    """The counters that differ between two records ("flops +100.0%,
    compiles 1 -> 2"), "same" when none does, "" when neither has any."""
    if not (counters.has_counters(before) and counters.has_counters(record)):
        return ""
    changes = []
    for name, _ in counters.SHOWN:
        saved, _why = counters.counter(before, name)
        current, _why = counters.counter(record, name)
        if saved is None or current is None or saved == current:
            continue
        if name in ("compiles", "executions") or saved == 0:
            was = counters.format_counter(name, saved)
            changes.append(f"{name} {was} -> {counters.format_counter(name, current)}")
        else:
            changes.append(f"{name} {(current / saved - 1) * 100:+.1f}%")
    return ", ".join(changes) or "same"
