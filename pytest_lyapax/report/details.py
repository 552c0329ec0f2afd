"""Tolerant readers of the per-benchmark measurements beyond wall time.

Reports of schema 3 carry, per benchmark in ``extra_info``, ``warmup``
(compile or first-call time), ``memory`` (device peak, compiled argument,
output and temporary bytes, host peak RSS), ``time_split`` (dispatch vs
device time) and ``args_on`` (where the arguments lived), and, in the
plugin's key, ``points``: sizes that ran out of memory or were skipped after
one did.  Older reports lack them, and every report is untrusted input, so
each reader here returns None (shown as "-") for a missing or malformed
value instead of raising.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_lyapax.report.identity import (
    extra_info,
    record_label,
    record_size,
    series_id,
    worker_fields,
)
from pytest_lyapax.report.schema import REPORT_KEY
from pytest_lyapax.report.units import format_seconds

MISSING = "-"
NOT_MEASURED = "not measured"


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def _mapping(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = extra_info(record).get(key)
    return value if isinstance(value, Mapping) else {}


def first_call_s(record: Mapping[str, Any]) -> float | None:
    """Seconds of the untimed first call, compilation included (None: not
    recorded)."""
    return _number(extra_info(record).get("first_call_s"))


@dataclass(frozen=True)
class Warmup:
    """What the untimed first call cost: ``kind`` is ``compile`` (trace+lower
    and XLA compile timed apart) or ``first_call`` (one number, not called
    compile: it also holds first transfers and whatever else ran first)."""

    kind: str
    first_call_s: float | None = None
    trace_lower_s: float | None = None
    compile_s: float | None = None
    cache: str | None = None  # "hit", "miss", "off" or None (unknown)
    cache_hits: int | None = None  # programs loaded from the persistent cache

    def short(self) -> str:
        """One number, for a figure: compile time, else the first call's."""
        if self.kind == "compile" and self.compile_s is not None:
            return f"compile {format_seconds(self.compile_s)}"
        if self.first_call_s is not None:
            return f"first call {format_seconds(self.first_call_s)}"
        return NOT_MEASURED

    def describe(self) -> str:
        if self.kind == "compile" and self.compile_s is not None:
            text = f"compile {format_seconds(self.compile_s)}"
            if self.trace_lower_s is not None:
                text += f" + trace/lower {format_seconds(self.trace_lower_s)}"
            if self.cache:
                text += f" (cache {self.cache})"
            return text
        if self.first_call_s is not None:
            # Not "compile": it also holds first transfers and anything else
            # that ran first (e.g. programs shared with later tests).
            return f"first call {format_seconds(self.first_call_s)} (no compile split)"
        return NOT_MEASURED


def warmup_of(record: Mapping[str, Any]) -> Warmup | None:
    """The record's warm-up (None: not recorded).  A report from before
    schema 3 holds only ``first_call_s``: read as first-call overhead."""
    w = _mapping(record, "warmup")
    if w:
        cache = w.get("cache") if isinstance(w.get("cache"), Mapping) else {}
        state = None
        if cache.get("enabled") is False:
            state = "off"
        elif cache.get("hit") is True:
            state = "hit"
        elif cache.get("hit") is False:
            state = "miss"
        kind = "compile" if w.get("kind") == "compile" else "first_call"
        hits = cache.get("hits")
        return Warmup(
            kind,
            _number(w.get("first_call_s")),
            _number(w.get("trace_lower_s")),
            _number(w.get("compile_s")),
            state,
            hits if isinstance(hits, int) and not isinstance(hits, bool) else None,
        )
    old = first_call_s(record)
    return None if old is None else Warmup("first_call", old)


MEMORY_FIELDS = (
    ("device_peak_bytes", "device peak"),
    ("argument_bytes", "arguments"),
    ("output_bytes", "outputs"),
    ("temp_bytes", "temporaries"),
    ("host_peak_rss_bytes", "host peak RSS"),
)


def memory_of(record: Mapping[str, Any]) -> dict[str, float | None]:
    """Each memory field of :data:`MEMORY_FIELDS` in bytes (None: not measured)."""
    m = _mapping(record, "memory")
    return {key: _number(m.get(key)) for key, _ in MEMORY_FIELDS}


def time_split_of(record: Mapping[str, Any]) -> tuple[float, float] | None:
    """(dispatch, device) seconds per call, or None."""
    t = _mapping(record, "time_split")
    dispatch, device = _number(t.get("dispatch_s")), _number(t.get("device_s"))
    return None if dispatch is None or device is None else (dispatch, device)


def args_on(record: Mapping[str, Any]) -> str | None:
    """Where the timed call's arguments lived: host, device, mixed or none."""
    value = extra_info(record).get("args_on")
    return value if value in ("host", "device", "mixed", "none") else None


def peak_memory(record: Mapping[str, Any]) -> tuple[int | None, bool]:
    """The peak memory in bytes: the device's where reported, else the
    worker's RSS (then True); (None, False) if neither was measured."""
    memory = memory_of(record)
    device, rss = memory["device_peak_bytes"], memory["host_peak_rss_bytes"]
    if device is not None:
        return int(device), False
    return (int(rss), True) if rss is not None else (None, False)


def no_array_leaves(record: Mapping[str, Any]) -> bool:
    """Whether the result held no JAX array to wait for (dispatch only)."""
    return bool(extra_info(record).get("no_array_leaves"))


@dataclass(frozen=True)
class FailedPoint:
    """A size that gave no timing: ``oom``, ``skipped_after_oom`` or
    ``over_budget`` (then ``predicted``: seconds per call, low, high)."""

    fullname: str
    benchmark: str  # the benchmark identity (series_id(...).benchmark)
    backend: str
    size: int | None
    status: str
    message: str
    predicted: tuple[float, float, float] | None = None


def _prediction(entry: Mapping[str, Any]) -> tuple[float, float, float] | None:
    """An over-budget point's (predicted, low, high) seconds, or None."""
    value = _number(entry.get("predicted_s"))
    interval = entry.get("predicted_interval_s")
    if value is None or not isinstance(interval, list) or len(interval) != 2:
        return None
    lo, hi = _number(interval[0]), _number(interval[1])
    return None if lo is None or hi is None else (value, lo, hi)


def failed_points(data: Mapping[str, Any]) -> list[FailedPoint]:
    """The report's out-of-memory, skipped and over-budget points (malformed
    ones dropped)."""
    key = data.get(REPORT_KEY)
    entries = key.get("points") if isinstance(key, Mapping) else None
    out = []
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, Mapping) or not isinstance(e.get("fullname"), str):
            continue
        if not isinstance(e.get("backend"), str):
            continue
        size = record_size({"extra_info": {"size": e.get("size")}})
        sid = series_id({"fullname": e["fullname"], "params": e.get("params")})
        out.append(
            FailedPoint(
                e["fullname"],
                sid.benchmark,
                e["backend"],
                size,
                str(e.get("status") or "failed"),
                str(e.get("message") or ""),
                _prediction(e),
            )
        )
    return out


@dataclass(frozen=True)
class PanelNotes:
    """What a sized benchmark's panel shows besides its curves."""

    warmups: Mapping[str, tuple[int, Warmup]]  # label -> (largest size, warm-up)
    failed: tuple[FailedPoint, ...] = ()


def panel_notes(
    records: Iterable[Mapping[str, Any]],
    machine_info: Mapping[str, Any] | None,
    failed: Iterable[FailedPoint] = (),
) -> dict[str, PanelNotes]:
    """Per benchmark identity: each series' warm-up at its largest size and
    the failed points (matched by test id when the point has no parameters)."""
    warm: dict[str, dict[str, tuple[int, Warmup]]] = {}
    for record in records:
        size, label = record_size(record), record_label(record)
        w = warmup_of(record)
        if size is None or label is None or w is None:
            continue
        key = series_id(record, machine_info).benchmark
        current = warm.setdefault(key, {}).get(label)
        if current is None or size > current[0]:
            warm[key][label] = (size, w)
    notes = {k: PanelNotes(v) for k, v in warm.items()}
    for point in failed:
        key = next(
            (k for k in notes if k == point.benchmark or k.startswith(point.benchmark)),
            point.benchmark,
        )
        old = notes.get(key, PanelNotes({}))
        notes[key] = PanelNotes(old.warmups, (*old.failed, point))
    return notes


def host_argument_benchmarks(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """Full ids of benchmarks timed with host arguments on a non-CPU platform.

    "Non-CPU" is the platform the worker's JAX actually ran on
    (``extra_info.jax_backend``), not the label: ``cpu2=cpu`` is a CPU.
    """
    out = []
    for record in records:
        platform = worker_fields(record).get("jax_backend")
        if args_on(record) in ("host", "mixed") and platform not in (
            None,
            "cpu",
        ):
            out.append(str(record.get("fullname")))
    return out


def rounds_modes(records: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Per backend label, how its benchmarks' rounds were timed
    (``extra_info["rounds_mode"]``: ``interleaved`` with the other local
    backends, or ``sequential``; several modes joined by ``/``)."""
    seen: dict[str, dict[str, None]] = {}
    for record in records:
        label, mode = record_label(record), extra_info(record).get("rounds_mode")
        if label is not None and isinstance(mode, str) and mode:
            seen.setdefault(label, {})[mode] = None
    return {label: "/".join(modes) for label, modes in seen.items()}
