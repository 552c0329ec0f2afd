"""Where each timed size stands against its machine's measured limits.

Pure computations on a report's records (no JAX, pytest or matplotlib):
``extra_info.roofline`` holds the work per call (XLA cost analysis, from
``measuring/roofline.py``) and ``extra_info.peaks`` the worker's measured
peaks.  For a median time per call ``t``, FLOPs ``F``, bytes ``Q`` and peaks
``P`` (FLOP/s), ``B`` (bytes/s) and ``L`` (launch floor, s), each limit
predicts a shortest time -- ``F / P`` (compute), ``Q / B`` (bandwidth),
``L`` (launch) -- and the largest of the three is the ``bound``; the
``fraction`` of it reached is that time over ``t`` (1: the size runs at the
measured limit).  ``intensity`` is ``F / Q`` (FLOP per byte).

The bandwidth roof is the memory's (a triad on arrays far larger than the
caches): a size whose data stays in cache can run above it, and its line
says "(above it: from cache)".  For data beyond the caches the fraction
stays below 1 + :data:`SLACK`, the slack covering that the peaks are the
best of a few repetitions measured at another moment of a shared machine.
Where the program has ``while`` loops, XLA counted each loop body once, so
the work and every rate derived from it are lower bounds
(``loop_scaled: false``), and the line says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, NamedTuple

from pytest_lyapax.report.identity import (
    is_size,
    record_label,
    record_size,
    series_id,
    unique_names,
)

SOURCE = "xla cost analysis"
BOUNDS = ("bandwidth", "compute", "launch")
#: How far above 1 a fraction may lie (see the module doc).
SLACK = 0.5
_PEAK_KEYS = {
    "compute": "flops_per_s",
    "bandwidth": "bandwidth_bytes_per_s",
    "launch": "launch_s",
}
BOUNDS_ORDER = ("compute", "bandwidth", "launch")
_SYMBOL = re.compile(r"\b([A-Za-z])\b")


def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value > 0 else None


def point(
    work: Mapping[str, Any], peaks: Mapping[str, Any] | None, seconds: float
) -> dict[str, Any]:
    """The per-point fields for one size: achieved rates, intensity, and (with
    all three peaks) the bound and the fraction of it reached."""
    flops, nbytes = float(work["flops"]), float(work["bytes"])
    out: dict[str, Any] = {
        "achieved_flops_per_s": flops / seconds,
        "achieved_bytes_per_s": nbytes / seconds,
        "intensity": flops / nbytes,
        "bound": None,
        "fraction": None,
    }
    compute, bandwidth, launch = (
        _positive((peaks or {}).get(_PEAK_KEYS[b])) for b in BOUNDS_ORDER
    )
    if compute is None or bandwidth is None or launch is None:
        out["bound_reason"] = "peaks not measured (--jax-no-peaks or a failed probe)"
        return out
    shortest = {"compute": flops / compute, "bandwidth": nbytes / bandwidth}
    shortest["launch"] = launch
    bound = max(BOUNDS, key=shortest.__getitem__)
    out["bound"] = bound
    out["fraction"] = shortest[bound] / seconds
    return out


def _median(record: Mapping[str, Any]) -> float | None:
    stats = record.get("stats")
    return _positive(stats.get("median")) if isinstance(stats, Mapping) else None


def _work(record: Mapping[str, Any]) -> MutableMapping[str, Any] | None:
    info = record.get("extra_info")
    work = info.get("roofline") if isinstance(info, Mapping) else None
    if not isinstance(work, MutableMapping) or work.get("source") != SOURCE:
        return None
    if _positive(work.get("bytes")) is None or not isinstance(
        work.get("flops"), int | float
    ):
        return None
    return work


def annotate(records: Iterable[Mapping[str, Any]]) -> None:
    """Add the per-point fields to every record with a work entry (in place;
    running it again gives the same result)."""
    for record in records:
        work, seconds = _work(record), _median(record)
        if work is None or seconds is None:
            continue
        peaks = record["extra_info"].get("peaks")
        work.update(point(work, peaks if isinstance(peaks, Mapping) else None, seconds))


def machines(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``pytest_lyapax.machines``: each backend label's peaks (the first
    record of that label that carries them)."""
    out: dict[str, dict[str, Any]] = {}
    for record in records:
        label = record_label(record)
        info = record.get("extra_info") or {}
        peaks = info.get("peaks") if isinstance(info, Mapping) else None
        if label is not None and label not in out and isinstance(peaks, Mapping):
            out[label] = {"peaks": dict(peaks)}
    return out


def percent(fraction: float) -> str:
    """A fraction as a percentage: whole percents, one significant digit
    below 1 % (a size at 0.3 % of a roof is not at "0 %")."""
    value = 100.0 * fraction
    return f"{value:.0f} %" if value >= 1 or value == 0 else f"{value:.1g} %"


def phrase(entry: Mapping[str, Any]) -> str:
    """One point's place in words: "71 % of measured bandwidth",
    "launch-bound, 1.3x the launch floor"."""
    bound, fraction = entry.get("bound"), entry.get("fraction")
    if bound == "launch" and isinstance(fraction, float) and fraction > 0:
        return f"launch-bound, {1.0 / fraction:.1f}x the launch floor"
    if bound in ("bandwidth", "compute") and isinstance(fraction, float):
        what = "bandwidth" if bound == "bandwidth" else "FLOP/s"
        above = (
            " (above it: from cache)" if bound == "bandwidth" and fraction > 1 else ""
        )
        return f"{percent(fraction)} of measured {what}{above}"
    rate = entry.get("achieved_flops_per_s")
    if isinstance(rate, float):
        return f"{rate:.3g} FLOP/s, {entry['achieved_bytes_per_s']:.3g} B/s (no peaks)"
    return f"{entry.get('source', 'not available')}: {entry.get('reason', '')}".strip()


def symbol(size_label: object) -> str:
    """How a size is written in a line: "d=" for "network size d (nodes)"
    (the label's first one-letter word), else "size "."""
    found = _SYMBOL.search(size_label) if isinstance(size_label, str) else None
    return f"{found.group(1)}=" if found else "size "


def series_lines(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """A line per sized series and backend, its sizes in increasing order:
    "test_x cpu: d=20 launch-bound, 3.1x the launch floor; d=2000 71 % of
    measured bandwidth"."""
    records = list(records)
    names = unique_names(series_id(r) for r in records if record_size(r) is not None)
    series: dict[tuple[str, str], list[tuple[int, str, bool]]] = {}
    symbols: dict[tuple[str, str], str] = {}
    for record in records:
        info = record.get("extra_info")
        label = record_label(record)
        size = info.get("size") if isinstance(info, Mapping) else None
        entry = info.get("roofline") if isinstance(info, Mapping) else None
        if label is None or not is_size(size) or not isinstance(entry, Mapping):
            continue
        qr = info.get("qr")
        name = names[series_id(record).benchmark]
        key = (name + (f" (qr={qr})" if isinstance(qr, str) else ""), label)
        symbols.setdefault(key, symbol(info.get("size_label")))
        looped = bool(entry.get("while_loops")) and not entry.get("loop_scaled")
        series.setdefault(key, []).append((size, phrase(entry), looped))
    lines = []
    for (name, label), points in series.items():
        sym = symbols[(name, label)]
        text = "; ".join(f"{sym}{size}: {words}" for size, words, _ in sorted(points))
        if any(looped for _, _, looped in points):
            text += " (loop bodies counted once by XLA: rates are lower bounds)"
        lines.append(f"{name} {label}: {text}")
    return lines


class Marker(NamedTuple):
    """One size on roofline.png: where it ran and, when the launch floor
    bound it, the best FLOP/s a call of its work can reach
    (``flops / launch_s``, below the roofs at its intensity)."""

    series: str
    size: int
    intensity: float
    rate: float  # achieved FLOP/s
    launch_ceiling: float | None


def figure_points(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Marker]]:
    """Per backend label, each annotated sized point, in the records' order."""
    out: dict[str, list[Marker]] = {}
    for record in records:
        info = record.get("extra_info")
        label = record_label(record)
        entry = info.get("roofline") if isinstance(info, Mapping) else None
        size = info.get("size") if isinstance(info, Mapping) else None
        if label is None or not isinstance(entry, Mapping) or not is_size(size):
            continue
        intensity = _positive(entry.get("intensity"))
        rate = _positive(entry.get("achieved_flops_per_s"))
        if intensity is None or rate is None:
            continue
        fraction = _positive(entry.get("fraction"))
        # fraction = launch_s / t and rate = flops / t: flops / launch_s.
        ceiling = (
            rate / fraction
            if entry.get("bound") == "launch" and fraction is not None
            else None
        )
        name = str(record.get("fullname", "?")).split("[", 1)[0].rsplit("::", 1)[-1]
        out.setdefault(label, []).append(Marker(name, size, intensity, rate, ceiling))
    return out
