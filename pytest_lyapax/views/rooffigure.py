"""``roofline.png``: achieved FLOP/s against arithmetic intensity, log-log.

Per backend, its measured roofs -- ``min(peak FLOP/s, intensity x peak
bandwidth)``, from ``pytest_lyapax.machines[label].peaks`` -- and one marker
per timed size of each series, labelled with the size.  Drawn from the
report alone (matplotlib's object API, Agg canvas), so ``pytest-lyapax
html`` and ``plot --roofline`` redraw the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

_MARKERS = "osD^v<>p"
_DPI = 100


def render_roofline_png(
    points: Mapping[str, list[tuple[str, int, float, float]]],
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
    for i, (label, pts) in enumerate(points.items()):
        color = colors[i % len(colors)]
        peaks = (machines.get(label) or {}).get("peaks") or {}
        flops, bandwidth = peaks.get("flops_per_s"), peaks.get("bandwidth_bytes_per_s")
        if isinstance(flops, float) and isinstance(bandwidth, float):
            knee = flops / bandwidth
            xs = [low, min(max(knee, low), high), high]
            ys = [min(flops, x * bandwidth) for x in xs]
            ax.plot(xs, ys, color=color, linewidth=1.2, label=f"{label} roof")
        for name, size, intensity, rate in pts:
            marker = _MARKERS[series.index(name) % len(_MARKERS)]
            ax.plot([intensity], [rate], marker, color=color, markersize=5)
            ax.annotate(
                str(size),
                (intensity, rate),
                textcoords="offset points",
                xytext=(3, 3),
                fontsize=7,
                color=color,
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
