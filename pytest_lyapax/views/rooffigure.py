"""``roofline.png``: achieved FLOP/s against arithmetic intensity, log-log.

Per backend, its measured roofs -- ``min(peak FLOP/s, intensity x peak
bandwidth)``, from ``pytest_lyapax.machines[label].peaks`` -- and one marker
per timed size of each series, labelled with the size.  The launch floor
is not a line in this plane (a call's shortest time ``launch_s`` caps its
FLOP/s at ``flops / launch_s``, which depends on its work, not only on its
intensity): for each launch-bound size a short bar at that cap, joined to
the marker by a dotted line, shows the best a call of that work could reach
on that backend -- the gap is the share of the time spent above the
launch floor (the bar lies below the roofs, or the size would not be
launch-bound).  Drawn from the
report alone (matplotlib's object API, Agg canvas), so ``pytest-lyapax
html`` and ``plot --roofline`` redraw the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from pytest_lyapax.report.roofline import Marker

_MARKERS = "osD^v<>p"
_DPI = 100


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
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()
