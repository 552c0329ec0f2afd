"""A run compared with a saved run: benchmark by benchmark, gate by gate.

Records are matched by identity (:func:`pytest_lyapax.report.identity.series_id`
and size); whether two sets of timings differ is
:func:`pytest_lyapax.report.stats.judge`; the limits are the gates'
(:class:`pytest_lyapax.report.gates.CompareThreshold`).  Nothing here
measures or imports pytest, so ``pytest-lyapax compare`` reuses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_lyapax.report import counters, stats
from pytest_lyapax.report.gates import CompareThreshold
from pytest_lyapax.report.identity import Machine, SeriesId, record_size, series_id


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


MatchKey = tuple[str, str, str, int | None]


def _match_key(
    sid: SeriesId, size: int | None, precision: str | None = None
) -> MatchKey:
    """Benchmark, backend, precision and size: two precisions of one label
    never match (a saved record without a precision matches any)."""
    p = sid.precision if precision is None else precision
    return (sid.benchmark, sid.backend or "", p, size)


def compare_runs(
    saved: Mapping[str, Any],
    records: Iterable[Mapping[str, Any]],
    thresholds: Sequence[CompareThreshold] = (),
    machine_info: Mapping[str, Any] | None = None,
) -> ComparisonResult:
    """Match this run's records with a saved run by identity (benchmark,
    backend, precision, size;
    :func:`~pytest_lyapax.report.identity.series_id`), compare the fields
    the gates name (median if none), run the noise test on each pair and
    record, per backend, the machine of both runs.

    ``machine_info`` describes this run's machine (a report's own is used
    for ``saved``).
    """
    saved_info = saved.get("machine_info")
    old: dict[MatchKey, tuple[SeriesId, Mapping[str, Any]]] = {}
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
        if key not in old:
            key = _match_key(sid, record_size(record), "")
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
