"""The roofline shown: why a crossover happens, in words, and ``roofline.png``.

The crossover line.  A crossover (:mod:`~pytest_lyapax.report.crossover`) says
*where* one backend starts to beat another; the per-point ``bound`` and
``fraction`` (:mod:`~pytest_lyapax.report.roofline`) say which limit held each
size.  The line written here puts the two together, one clause per stretch of
sizes between crossings: "below d ~140 cpu and gpu are both launch-bound (cpu
2.0x its 4.1 us launch floor at d=20; gpu 1.3x its 5.6 us launch floor at
d=20), so the per-call price decides; above it ...".  Each backend in a
stretch is quoted at the size farthest from the crossing (the smallest size
below the first crossing, the largest above the last one), with its own
measured peak.  Only recorded numbers are used: a side whose points have no
bound (no roofline entry, ``"not available"``, or no peaks) is named with the
recorded reason instead.

The figure: achieved FLOP/s against arithmetic intensity, log-log.  Per
backend, its measured roofs -- ``min(peak FLOP/s, intensity x peak
bandwidth)``, from ``pytest_lyapax.machines[label].peaks`` -- and one marker
per timed size of each series, labelled with the size.  The launch floor
is not a line in this plane (a call's shortest time ``launch_s`` caps its
FLOP/s at ``flops / launch_s``, which depends on its work, not only on its
intensity): for each launch-bound size a short bar at that cap, joined to
the marker by a dotted line, shows the best a call of that work could reach
on that backend -- the gap is the share of the time spent above the
launch floor (the bar lies below the roofs, or the size would not be
launch-bound).  Drawn from the report alone (matplotlib's object API, Agg
canvas, imported only to draw), so ``pytest-lyapax html`` and ``plot
--roofline`` redraw the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_lyapax.report import busy
from pytest_lyapax.report.crossover import Crossover, crossovers
from pytest_lyapax.report.identity import record_label, record_size, series_id
from pytest_lyapax.report.roofline import Marker, percent, symbol
from pytest_lyapax.report.series import SizedBenchmark
from pytest_lyapax.report.units import format_seconds
from pytest_lyapax.views.figure import png_bytes

# What decides a stretch where every side is held by the same limit.
_DECIDES = {
    "launch": "the per-call price decides",
    "bandwidth": "the memory bandwidth each reaches decides",
    "compute": "the arithmetic rate each reaches decides",
}
_NO_ENTRY = "no roofline entry recorded"
_SI = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))


@dataclass(frozen=True)
class RoofPoint:
    """One size of one series as the roofline placed it (``bound`` None: not
    placed, ``reason`` says why)."""

    bound: str | None
    fraction: float | None
    peaks: Mapping[str, Any]
    reason: str


Index = Mapping[tuple[str, str, int], RoofPoint]


def _placed(entry: object, peaks: object) -> RoofPoint:
    peaks = peaks if isinstance(peaks, Mapping) else {}
    if not isinstance(entry, Mapping):
        return RoofPoint(None, None, peaks, _NO_ENTRY)
    bound, fraction = entry.get("bound"), entry.get("fraction")
    if isinstance(bound, str) and isinstance(fraction, float) and fraction > 0:
        return RoofPoint(bound, fraction, peaks, "")
    reason = entry.get("bound_reason") or entry.get("reason") or entry.get("source")
    return RoofPoint(None, None, peaks, str(reason or "no bound recorded"))


def index(
    records: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str, int], RoofPoint]:
    """Every sized record's place, keyed by (benchmark, series label, size)
    as :func:`~pytest_lyapax.report.series.group_sized` groups them; the
    records must have been through
    :func:`~pytest_lyapax.report.roofline.annotate`."""
    out = {}
    for record in records:
        label, size = record_label(record), record_size(record)
        if label is None or size is None:
            continue
        info = record.get("extra_info")
        info = info if isinstance(info, Mapping) else {}
        key = (series_id(record).benchmark, label, size)
        out[key] = _placed(info.get("roofline"), info.get("peaks"))
    return out


def _si(value: float, unit: str) -> str:
    for prefix, scale in _SI:
        if value >= scale:
            return f"{value / scale:.2g} {prefix}{unit}"
    return f"{value:.2g} {unit}"


def quantity(place: RoofPoint) -> str:
    """A placed point against its own peak: "1.3x its 5.6 us launch floor",
    "71 % of its 4.1 TB/s", "40 % of its 57 GFLOP/s"."""
    fraction = place.fraction or 0.0
    if place.bound == "launch":
        floor = format_seconds(place.peaks.get("launch_s"))
        return f"{1.0 / fraction:.1f}x its {floor} launch floor"
    key, unit = (
        ("bandwidth_bytes_per_s", "B/s")
        if place.bound == "bandwidth"
        else ("flops_per_s", "FLOP/s")
    )
    peak = place.peaks.get(key)
    peak_text = _si(float(peak), unit) if isinstance(peak, int | float) else "peak"
    return f"{percent(fraction)} of its {peak_text}"


def _sizes(sym: str, sizes: Sequence[int]) -> str:
    return sym + ", ".join(map(str, sizes))


@dataclass(frozen=True)
class _Side:
    """One backend in one stretch of sizes."""

    bound: str | None  # its one bound there (None: several, or none placed)
    held: str  # "launch-bound", "launch-bound at d=20, bandwidth-bound at d=50"
    detail: str  # "2.0x its 4.1 us launch floor at d=20", or why none


def _side(places: list[tuple[int, RoofPoint]], sym: str, quote: int) -> _Side:
    """A backend's points in a stretch, quoted at its placed size ``quote``
    (0: the smallest, -1: the largest)."""
    placed = [(s, p) for s, p in places if p.bound is not None]
    if not placed:
        return _Side(None, "not placed", _reasons(p for _, p in places))
    size, rep = placed[quote]
    bounds = list(dict.fromkeys(str(p.bound) for _, p in placed))
    held = ", ".join(
        f"{b}-bound at {_sizes(sym, [s for s, p in placed if p.bound == b])}"
        for b in bounds
    )
    detail = f"{quantity(rep)} at {sym}{size}"
    unplaced = [s for s, p in places if p.bound is None]
    if unplaced:
        detail += f"; not placed at {_sizes(sym, unplaced)}"
    one = bounds[0] if len(bounds) == 1 else None
    return _Side(one, f"{one}-bound" if one else held, detail)


def _stretches(c: Crossover, sym: str) -> list[tuple[str, list[int], int]]:
    """The common sizes split at each crossing: (name, sizes, index of the
    size to quote)."""
    if not c.crossings:
        return [("at every common size", list(c.sizes), -1)]
    name = sym.rstrip("= ")
    out = []
    edges = [x.size for x in c.crossings]
    for i in range(len(edges) + 1):
        lo = edges[i - 1] if i else 0.0
        hi = edges[i] if i < len(edges) else float("inf")
        sizes = [s for s in c.sizes if lo < s < hi]
        if not i:
            words, quote = f"below {name} ~{hi:.3g}", 0
        elif i == len(edges):
            words, quote = ("above it" if i == 1 else f"above {name} ~{lo:.3g}"), -1
        else:
            words, quote = f"between {name} ~{lo:.3g} and ~{hi:.3g}", -1
        if sizes:
            out.append((words, sizes, quote))
    return out


def _reasons(places: Iterable[RoofPoint]) -> str:
    """The first recorded reason, and how many other ones there are (the
    per-series lines give each size's)."""
    reasons = list(dict.fromkeys(p.reason for p in places))
    more = len(reasons) - 1
    return reasons[0] + (f"; {more} other reason(s) at other sizes" if more else "")


def why(roof: Index, bench: SizedBenchmark, c: Crossover) -> str | None:
    """The roofline's reason for crossover ``c`` of ``bench`` (see the
    module doc); None when none of its points has a roofline entry (a report
    from before the roofline, or ``--jax-no-extras``)."""
    sides = (c.other, c.reference)
    points = {
        label: [(s, roof.get((bench.key, label, s))) for s in c.sizes]
        for label in sides
    }
    if all(p is None or p.reason == _NO_ENTRY for v in points.values() for _, p in v):
        return None
    full = {
        label: [(s, p or RoofPoint(None, None, {}, _NO_ENTRY)) for s, p in v]
        for label, v in points.items()
    }
    missing = [label for label in sides if all(p.bound is None for _, p in full[label])]
    head = "why, from the roofline: "
    gaps = "; ".join(
        f"not available for {label} ({_reasons(p for _, p in full[label])})"
        for label in missing
    )
    present = [label for label in sides if label not in missing]
    if not present:
        return head + gaps
    sym = symbol(bench.size_label)
    clauses = [gaps] if gaps else []
    for words, sizes, quote in _stretches(c, sym):
        sides_here = [
            (label, _side([(s, p) for s, p in full[label] if s in sizes], sym, quote))
            for label in present
        ]
        bounds = {side.bound for _, side in sides_here}
        details = "; ".join(f"{label} {side.detail}" for label, side in sides_here)
        if len(sides_here) == 2 and len(bounds) == 1 and None not in bounds:
            (bound,) = bounds
            clauses.append(
                f"{words} {present[0]} and {present[1]} are both {bound}-bound "
                f"({details}), so {_DECIDES[str(bound)]}"
            )
        else:
            held = "; ".join(
                f"{label} {side.held} ({side.detail})" for label, side in sides_here
            )
            clauses.append(f"{words}: {held}")
    return head + "; ".join(clauses)


def crossover_lines(
    bench: SizedBenchmark,
    roof: Index,
    reasons: busy.Index | None = None,
    busy_peaks: Mapping[str, str] | None = None,
) -> list[str]:
    """Each crossover of ``bench`` in words, followed by the roofline's reason
    for it where its points have roofline entries; both marked unreliable
    where a judged size read a busy record (``reasons``: busy.index), the
    reason also where either side's peaks were measured on a busy machine
    (``busy_peaks``: busy.peaks_index)."""
    out = []
    for c in crossovers(bench):
        unreliable = bool(reasons) and bool(
            busy.crossover_marks(bench, c, reasons or {})
        )
        out.append(busy.marked(c.describe(bench.size_label), unreliable))
        reason = why(roof, bench, c)
        if reason is not None:
            peaks = [
                (busy_peaks or {})[label]
                for label in (c.other, c.reference)
                if label in (busy_peaks or {})
            ]
            if peaks:
                reason += f" (peaks measured on a busy machine: {'; '.join(peaks)})"
            out.append(busy.marked(reason, unreliable or bool(peaks)))
    return out


_MARKERS = "osD^v<>p"


def render_roofline_png(
    points: Mapping[str, list[Marker]],
    machines: Mapping[str, Any],
    machine: str,
) -> bytes:
    """The figure as PNG bytes; ``points`` as
    :func:`pytest_lyapax.report.roofline.figure_points` gives them."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.0, 5.6))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    every = [p for pts in points.values() for p in pts]
    low = min((p[2] for p in every), default=0.01) / 4
    high = max((p[2] for p in every), default=100.0) * 4
    series = sorted({p[0] for p in every})
    colors = [f"C{i}" for i in range(10)]
    floored = False
    for i, (label, pts) in enumerate(points.items()):
        color = colors[i % len(colors)]
        peaks = (machines.get(label) or {}).get("peaks") or {}
        flops, bandwidth = peaks.get("flops_per_s"), peaks.get("bandwidth_bytes_per_s")
        if isinstance(flops, float) and isinstance(bandwidth, float):
            knee = flops / bandwidth
            xs = [low, min(max(knee, low), high), high]
            ys = [min(flops, x * bandwidth) for x in xs]
            ax.plot(xs, ys, color=color, linewidth=1.2, label=f"{label} roof")
        for name, size, intensity, rate, ceiling in pts:
            marker = _MARKERS[series.index(name) % len(_MARKERS)]
            ax.plot([intensity], [rate], marker, color=color, markersize=5)
            if ceiling is not None:
                floored = True
                ax.plot([intensity] * 2, [rate, ceiling], ":", color=color, lw=0.8)
                ax.plot([intensity], [ceiling], "_", color=color, markersize=9)
            ax.annotate(
                str(size),
                (intensity, rate),
                textcoords="offset points",
                xytext=(3, 3),
                fontsize=7,
                color=color,
            )
    if floored:
        ax.plot(
            [],
            [],
            "_",
            color="0.3",
            markersize=9,
            label="launch floor: flops / launch_s (launch-bound sizes)",
        )
    for j, name in enumerate(series):
        ax.plot([], [], _MARKERS[j % len(_MARKERS)], color="0.3", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte, XLA cost analysis)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(f"Roofline: measured peaks and each size; {machine}", fontsize=9)
    if every or points:
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return png_bytes(fig)
