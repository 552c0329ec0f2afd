"""``ab.png``: an A/B run's B/A time ratio against problem size (``--jax-ab``).

One curve per sized benchmark and backend of ``pytest_lyapax.ab``, log-log,
with the ratio's interval as error bars where it has one, and the line
B/A = 1 (no change).  Drawn from the report alone (matplotlib's object API,
Agg canvas), as the other figures.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

_DPI = 100


def ratio_series(
    entries: Sequence[Mapping[str, Any]],
) -> dict[str, list[tuple[int, float, float, float]]]:
    """Per ``benchmark [backend]``: ``(size, ratio, low, high)`` in size
    order, for the sized entries with a ratio (low = high = ratio without an
    interval); empty when none is sized."""
    out: dict[str, list[tuple[int, float, float, float]]] = {}
    for e in entries:
        size, ratio, interval = e.get("size"), e.get("ratio"), e.get("interval")
        if not isinstance(size, int) or not isinstance(ratio, int | float):
            continue
        low, high = (
            interval
            if isinstance(interval, list) and len(interval) == 2
            else (ratio,) * 2
        )
        name = f"{str(e.get('benchmark')).rsplit('::', 1)[-1]} [{e.get('backend')}]"
        out.setdefault(name, []).append((size, float(ratio), float(low), float(high)))
    return {name: sorted(points) for name, points in out.items()}


def render_ab_png(series: Mapping[str, list[tuple[int, float, float, float]]]) -> bytes:
    """The figure as PNG bytes; ``series`` as :func:`ratio_series` gives it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(8.0, 5.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for i, (name, points) in enumerate(series.items()):
        sizes = [p[0] for p in points]
        ratios = [p[1] for p in points]
        below = [p[1] - p[2] for p in points]
        above = [p[3] - p[1] for p in points]
        ax.errorbar(
            sizes, ratios, yerr=[below, above], marker="o", markersize=4,
            capsize=3, color=f"C{i % 10}", label=name,
        )  # fmt: skip
    ax.axhline(1.0, color="0.4", linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    # Ratios read as plain numbers (0.5, 1, 2), not as powers of ten.
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.set_xlabel("problem size")
    ax.set_ylabel("B/A per-call time (above 1: B slower)")
    ax.set_title("A/B: the other version's time over this one's, per size", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()
