"""A report's benchmarks as series: one point per backend and size.

A *record* is one entry of pytest-benchmark's JSON ``benchmarks`` list; the
plugin puts the backend label in ``extra_info["backend"]`` and the size (or
None) in ``extra_info["size"]``.  Which series a record belongs to is
:func:`pytest_lyapax.report.identity.series_id`.  Nothing here measures, reads
a clock or imports pytest, so the command-line tools reuse it on saved reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_lyapax.report import stats
from pytest_lyapax.report.details import peak_memory, warmup_of
from pytest_lyapax.report.identity import (
    SeriesId,
    record_size,
    series_id,
    size_label,
    unique_names,
)

DEFAULT_SIZE_LABEL = "problem size (jax_size)"


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
    # The persistent compilation cache at the warm-up: "hit", "miss", "off"
    # or None (unknown; details.Warmup).
    cache: str | None = None


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
        cache=warmup.cache if warmup is not None else None,
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
