"""Was the machine busy while a benchmark's rounds ran? Then verdicts are unreliable.

Reads ``extra_info["machine_state"]`` (``measuring/machine.py``) of saved
records as of live ones, so the plugin, ``pytest-lyapax compare``, ``summary``,
``html`` and ``history`` judge alike.  :func:`busy_reason` says why a
record's rounds ran on a busy machine, or None; the rule, over the rounds'
stretches (``wall_s`` of them):

- **other processes used >= FOREIGN_CORES (0.25) of a core** on average
  (CPU time of all processes minus this worker's own, per wall second).  A
  quiet machine's background (daemons, the pytest controller waiting for its
  workers) stays well below 0.1 core; one competing busy thread is a whole
  core, so 0.25 means a competitor ran at least a quarter of the time.  On a
  2-core runner that is an eighth of the machine, and since XLA's CPU thread
  pool spreads an operation over every core, a core taken by someone else
  holds back the operation's slowest part;
- **steal >= STEAL_CORES (0.1) of a core**: time this VM's CPUs wanted and
  the hypervisor gave to another guest, which lands in the rounds directly;
- **as many other runnable tasks as cores** on average, sampled at the end
  of each stretch: the machine was oversubscribed (``/proc/loadavg`` counts
  threads, so this worker's own threads beyond one, ``own_cores - 1`` on
  average, are taken off);
- on a GPU, **another process on the GPU**, or **clocks held down** by a
  thermal, hardware or power-brake slowdown (a software power cap is how a
  GPU runs under load, and idle is not a slowdown).

``/proc/stat`` counts CPU time in clock ticks (10 ms), and each end of each
stretch can be off by up to a tick per CPU, so the foreign CPU and the steal
are taken minus :func:`tick_uncertainty` (sqrt(cpus x stretches) ticks over
the wall time, about two standard deviations): 30 ms of rounds in one
stretch on 2 CPUs are +-0.47 core, 1 s in 20 stretches +-0.06 core.  The
runnable tasks count only from :data:`MIN_GLIMPSES` samples on.

A signal recorded as unavailable says nothing either way.  What a busy
verdict does is ``--jax-busy`` (``compare --busy``): :data:`WARN` marks the
verdicts that read a busy record UNRELIABLE, with the reason, and excuses its
timing gates; :data:`FAIL` marks them and gates as usual; :data:`IGNORE`
does neither.  Gates on counters (anything not a time field) are never
excused.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pytest_lyapax.report.identity import (
    extra_info,
    record_label,
    record_size,
    series_id,
)
from pytest_lyapax.report.schema import TIME_FIELDS

if TYPE_CHECKING:  # a plain pytest start reads busy's options, not the analysis
    from pytest_lyapax.report.compare import Comparison, ComparisonResult
    from pytest_lyapax.report.costmodel import BenchmarkModel
    from pytest_lyapax.report.crossover import Crossover
    from pytest_lyapax.report.series import SizedBenchmark

KEY = "machine_state"
FOREIGN_CORES = 0.25
STEAL_CORES = 0.1
MIN_GLIMPSES = 5  # samples of the runnable tasks needed to judge them
# NVML reasons that hold the clocks below what the load asks for.
SLOWDOWNS = frozenset(
    {
        "hw_slowdown",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    }
)

WARN, FAIL, IGNORE = "warn", "fail", "ignore"
MODES = (WARN, FAIL, IGNORE)
HELP = (
    "What a timing verdict or timing gate does when the machine was busy while "
    "either side's rounds ran (other processes' CPU, steal, a shared or "
    "throttled GPU; see extra_info['machine_state']): warn (default) marks it "
    "UNRELIABLE with the reason, and a timing gate does not fail on it; fail "
    "marks it and gates as usual; ignore neither marks nor excuses"
)


def parse_busy(text: str, option: str) -> str:
    """``warn``, ``fail`` or ``ignore`` (any case); raises ValueError naming
    ``option``, the value and the accepted forms."""
    mode = text.strip().lower()
    if mode not in MODES:
        raise ValueError(
            f"{option}: {text!r} is not one of {', '.join(MODES)}; write e.g. "
            f"{option}=fail to gate timings taken on a busy machine anyway"
        )
    return mode


def describe_rule(mode: str) -> dict[str, Any]:
    """The rule and the mode, as stored in a report."""
    return {
        "mode": mode,
        "foreign_cores": FOREIGN_CORES,
        "steal_cores": STEAL_CORES,
        "uncertainty": "sqrt(cpus x stretches) clock ticks over the wall time",
        "min_glimpses": MIN_GLIMPSES,
        "runnable": "mean other runnable tasks - (own cores - 1) >= cores",
        "gpu": "another process on the GPU, or " + ", ".join(sorted(SLOWDOWNS)),
    }


def mode_of(key: Mapping[str, Any]) -> str:
    """The mode a report was written under (``warn`` if it says none)."""
    rule = key.get("busy")
    mode = rule.get("mode") if isinstance(rule, Mapping) else None
    return mode if mode in MODES else WARN


def machine_state_of(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """A record's machine state (empty when not recorded)."""
    state = extra_info(record).get(KEY)
    return state if isinstance(state, Mapping) else {}


def _number(entry: object, field: str) -> float | None:
    """A recorded number of a signal's entry, or None (the signal is
    unavailable, or the number not recorded)."""
    value = entry.get(field) if isinstance(entry, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _cores(x: float) -> str:
    return f"{x:.1f}" if x >= 1 else f"{x:.2f}"


def _gpu_reasons(gpu: object, during: str) -> list[str]:
    if not isinstance(gpu, Mapping):
        return []
    out = []
    others = _number(gpu.get("other_processes"), "max")
    if others:
        out.append(f"{others:.0f} other process(es) used the GPU during {during}")
    throttled = gpu.get("throttle_reasons")
    names = throttled.get("names") if isinstance(throttled, Mapping) else None
    slow = sorted(SLOWDOWNS & set(names)) if isinstance(names, list) else []
    if slow:
        out.append(f"GPU clocks held down ({', '.join(slow)}) during {during}")
    return out


def tick_uncertainty(state: Mapping[str, Any]) -> float:
    """How far the foreign CPU and steal of ``state`` may be off, in cores,
    from counting clock ticks (see the module docstring); inf when the
    record does not say."""
    tick = _number(state.get("foreign_cpu"), "tick_s")
    wall = _number(state, "wall_s")
    cpus, stretches = _number(state, "cpus"), _number(state, "stretches")
    if not (tick and wall and cpus and stretches):
        return math.inf
    return math.sqrt(cpus * stretches) * tick / wall


def busy_reasons(
    state: Mapping[str, Any], label: str | None = None, what: str = "rounds"
) -> list[str]:
    """Why the rounds (``what``) ran on a busy machine (see the module
    docstring); empty when no recorded signal says so.  ``label`` names the
    backend."""
    during = f"{label}'s {what}" if label else f"the {what}"
    cpus = _number(state, "cpus") or 1.0
    margin = tick_uncertainty(state)
    out = []
    foreign = _number(state.get("foreign_cpu"), "cores")
    if foreign is not None and foreign - margin >= FOREIGN_CORES:
        out.append(
            # Short rounds count few clock ticks: the figure may exceed what
            # the machine has, which is all that can be said then.
            f"other processes used {_cores(min(foreign, cpus))} of {cpus:.0f} cores "
            f"during {during}"
        )
    steal = _number(state.get("steal"), "cores")
    if steal is not None and steal - margin >= STEAL_CORES:
        out.append(
            f"the hypervisor withheld {_cores(steal)} cores (steal) during {during}"
        )
    runnable = state.get("runnable")
    mean = _number(runnable, "mean_others")
    glimpses = _number(runnable, "samples") or 0
    # /proc/loadavg counts threads: this worker's own threads running beside
    # the one that stopped the stretch (XLA's pool) are among the "others".
    own = _number(state.get("foreign_cpu"), "own_cores") or 1.0
    if mean is not None and glimpses >= MIN_GLIMPSES:
        others = mean - max(0.0, own - 1.0)
        if others >= cpus:
            out.append(
                f"{others:.1f} other tasks were runnable on average for "
                f"{cpus:.0f} cores during {during}"
            )
    return out + _gpu_reasons(state.get("gpu"), during)


def busy_reason(
    machine_state: Mapping[str, Any], label: str | None = None
) -> str | None:
    """:func:`busy_reasons` in one line, or None when not busy."""
    reasons = busy_reasons(machine_state, label)
    return "; ".join(reasons) if reasons else None


def record_reason(record: Mapping[str, Any]) -> str | None:
    """Why a record's rounds ran on a busy machine, naming its backend."""
    return busy_reason(machine_state_of(record), record_label(record))


def peaks_index(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Per backend label whose peaks (``extra_info.peaks``) were measured on
    a busy machine: why (their ``machine_state``, as of rounds)."""
    out: dict[str, str] = {}
    for record in records:
        label = record_label(record)
        peaks = extra_info(record).get("peaks")
        state = peaks.get(KEY) if isinstance(peaks, Mapping) else None
        if label is None or label in out or not isinstance(state, Mapping):
            continue
        reasons = busy_reasons(state, label, "peak measurement")
        if reasons:
            out[label] = "; ".join(reasons)
    return out


# ------------------------------------------------------------ crossovers

Index = Mapping[tuple[str, str, int], str]


def index(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, int], str]:
    """The busy reason of every sized record that has one, keyed by
    (benchmark, series label, size) as
    :func:`~pytest_lyapax.report.series.group_sized` groups them."""
    out = {}
    for record in records:
        label, size = record_label(record), record_size(record)
        reason = record_reason(record) if label is not None else None
        if reason is not None and size is not None and label is not None:
            out[(series_id(record).benchmark, label, size)] = reason
    return out


def crossover_marks(
    bench: SizedBenchmark, c: Crossover, reasons: Index
) -> dict[int, str]:
    """Per size of ``c`` whose verdict (judged, not "too few rounds") read a
    busy record on either side: the reason."""
    from pytest_lyapax.report.crossover import FEW

    out = {}
    for size, verdict in zip(c.sizes, c.verdicts, strict=True):
        if verdict == FEW:
            continue
        found = [
            reasons.get((bench.key, label, size)) for label in (c.other, c.reference)
        ]
        if any(found):
            out[size] = "; ".join(r for r in found if r)
    return out


def crossover_notes(bench: SizedBenchmark, reasons: Index) -> list[str]:
    """One line per crossover with busy sizes: which verdicts are unreliable
    and why (the first reason, and how many others)."""
    from pytest_lyapax.report.crossover import crossovers

    lines = []
    for c in crossovers(bench):
        marks = crossover_marks(bench, c, reasons)
        if not marks:
            continue
        sizes = ", ".join(str(s) for s in marks)
        why = list(dict.fromkeys(marks.values()))
        more = f" (and {len(why) - 1} other reason(s))" if len(why) > 1 else ""
        first = next(iter(marks))
        lines.append(
            f"{c.other} vs {c.reference}: UNRELIABLE at {bench.size_label} {sizes}, "
            f"the machine was busy (at {first}: {why[0]}){more}"
        )
    return lines


MARK = "UNRELIABLE (busy machine): "


def marked(line: str, busy: bool) -> str:
    """``line`` with the busy mark in front where it read busy rounds."""
    return MARK + line if busy else line


def with_prefix(prefix: str, line: str) -> str:
    """``prefix + line``, the busy mark kept in front."""
    if line.startswith(MARK):
        return MARK + prefix + line[len(MARK) :]
    return prefix + line


def series_busy(bench: SizedBenchmark, label: str, reasons: Index) -> bool:
    """Whether any measured size of ``label``'s series ran on a busy machine."""
    return any(
        (bench.key, label, p.size) in reasons for p in bench.series.get(label, [])
    )


def model_lines(
    model: BenchmarkModel, bench: SizedBenchmark, reasons: Index
) -> list[str]:
    """The cost model's lines (``BenchmarkModel.lines``), each fit and each
    predicted crossover marked when a series it was fitted to has a busy
    size: a fit reads every size of its series."""
    if all(f.status == "too-few-sizes" for f in model.fits):
        return model.lines()
    busy = {f.label: series_busy(bench, f.label, reasons) for f in model.fits}
    return [marked(f.describe(), busy[f.label]) for f in model.fits] + [
        marked(c.describe(), busy.get(c.reference, False) or busy.get(c.other, False))
        for c in model.crossovers
    ]


# ------------------------------------------------------------ comparisons


def _pair_reason(c: Comparison) -> str | None:
    saved, now = c.records
    parts = [
        f"{side}: {reason}"
        for side, record in (("this run", now), ("saved run", saved))
        if (reason := record_reason(record)) is not None
    ]
    return "; ".join(parts) or None


def judge_comparisons(result: ComparisonResult, mode: str) -> ComparisonResult:
    """``result`` with each comparison whose either side was busy marked
    ``unreliable`` (the reason); under :data:`WARN` its failed timing gates
    move from ``failed`` to ``excused``, so the gate does not fail on them."""
    if mode == IGNORE:
        return result
    timing = {str(t) for t in result.thresholds if t.field in TIME_FIELDS}
    judged = []
    for c in result.comparisons:
        reason = _pair_reason(c)
        if reason is None:
            judged.append(c)
            continue
        excused = tuple(f for f in c.failed if f in timing) if mode == WARN else ()
        judged.append(
            dataclasses.replace(
                c,
                unreliable=reason,
                failed=tuple(f for f in c.failed if f not in excused),
                excused=excused,
            )
        )
    return dataclasses.replace(result, comparisons=judged)


def comparison_lines(comparison: Mapping[str, Any], option: str) -> list[str]:
    """The unreliable comparisons of a comparison's JSON (``to_json``), one
    line each; ``option`` is that parser's busy option (``--jax-busy``)."""
    unreliable = comparison.get("unreliable")
    excused = comparison.get("excused")
    excused = excused if isinstance(excused, Mapping) else {}
    lines = []
    for name, reason in (unreliable if isinstance(unreliable, Mapping) else {}).items():
        line = f"unreliable: busy: {name}: {reason}"
        gates = excused.get(name)
        if isinstance(gates, list) and gates:
            line += (
                f"; gate {', '.join(map(str, gates))} not applied ({option}=fail "
                "applies it)"
            )
        lines.append(line)
    return lines


# ------------------------------------------------------------ the table

MACHINE_HEADER = (
    "benchmark",
    "backend",
    "size",
    "other processes (cores)",
    "steal (cores)",
    "runnable others (mean)",
    "load (max)",
    "CPU MHz",
    "GPU",
    "busy",
)


def _shown(entry: object, field: str, unread: dict[str, None]) -> str:
    """A recorded number as text; an unavailable signal as ``n/a``, its
    reason kept in ``unread`` (shown once under the table)."""
    if isinstance(entry, Mapping) and isinstance(entry.get("unavailable"), str):
        unread[entry["unavailable"]] = None
        return "n/a"
    value = _number(entry, field)
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _gpu_text(gpu: object, unread: dict[str, None]) -> str:
    if not isinstance(gpu, Mapping) or "unavailable" in gpu:
        return _shown(gpu, "", unread)
    clocks = _shown(gpu.get("sm_clock_mhz"), "min", unread)
    use = _shown(gpu.get("utilisation_percent"), "max", unread)
    throttled = gpu.get("throttle_reasons")
    names = throttled.get("names") if isinstance(throttled, Mapping) else None
    reasons = ", ".join(map(str, names)) if isinstance(names, list) and names else ""
    return f"SM >= {clocks} MHz, <= {use}% busy" + (f", {reasons}" if reasons else "")


def machine_rows(
    records: Iterable[Mapping[str, Any]], names: Mapping[str, str]
) -> tuple[list[tuple[str, ...]], list[str]]:
    """One row per record with a machine state (:data:`MACHINE_HEADER`), and
    the reasons of the signals that could not be read; ``names`` maps a
    benchmark to its display name."""
    rows: list[tuple[str, ...]] = []
    unread: dict[str, None] = {}
    for record in records:
        state = machine_state_of(record)
        if not state:
            continue
        benchmark = series_id(record).benchmark
        size = record_size(record)
        rows.append(
            (
                names.get(benchmark, benchmark),
                str(record_label(record) or "-"),
                "-" if size is None else str(size),
                _shown(state.get("foreign_cpu"), "cores", unread),
                _shown(state.get("steal"), "cores", unread),
                _shown(state.get("runnable"), "mean_others", unread),
                _shown(state.get("load"), "max_1min", unread),
                _shown(state.get("frequency"), "max_mhz", unread),
                _gpu_text(state.get("gpu"), unread),
                "BUSY" if record_reason(record) else "quiet",
            )
        )
    return rows, [f"n/a: {reason}" for reason in unread]
