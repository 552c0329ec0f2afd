"""An A/B run (``--jax-ab``, ``report/ab.py``) shown: its table of verdicts,
and ``ab.png``, the B/A time ratio against problem size.

In ``ab.png``, one curve per sized benchmark and backend of
``pytest_lyapax.ab``, log-log, with the ratio's interval as error bars where
it has one, and the line B/A = 1 (no change).  Drawn from the report alone
(matplotlib's object API, Agg canvas), as the other figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_lyapax.report import ab
from pytest_lyapax.report.identity import is_size
from pytest_lyapax.report.units import format_seconds
from pytest_lyapax.views.figure import png_bytes


def ratio_series(
    entries: Sequence[Mapping[str, Any]],
) -> dict[str, list[tuple[int, float, float, float]]]:
    """Per ``benchmark [backend]``: ``(size, ratio, low, high)`` in size
    order, for the sized entries with a ratio (low = high = ratio without an
    interval); empty when none is sized."""
    out: dict[str, list[tuple[int, float, float, float]]] = {}
    for e in entries:
        size, ratio, interval = e.get("size"), e.get("ratio"), e.get("interval")
        if not is_size(size) or not isinstance(ratio, int | float):
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
    return png_bytes(fig)


AB_HEADER = (
    "benchmark",
    "size",
    "backend",
    "A median",
    "B median",
    "B/A",
    "interval",
    "verdict (B vs A)",
    "counters A -> B",
)


def ab_lines(section: Mapping[str, Any]) -> tuple[str, ...]:
    """What A and B of an A/B run (``--jax-ab``) are, and how to read it."""
    return (
        f"A: {ab.side_text(section.get('a'))}",
        f"B: {ab.side_text(section.get('b'))} (--jax-ab={section.get('option')})",
        "B/A: per-call time of B over A's (median of the turn pairs' ratios on "
        "interleaved rounds), with its interval at the noise test's level",
    )


def ab_rows(entries: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    """One row per benchmark, size and backend of a report's A/B comparisons
    (read from disk: every field may be missing)."""
    rows: list[tuple[str, ...]] = []
    for e in entries:
        medians = e.get("median_s") if isinstance(e.get("median_s"), Mapping) else {}
        interval = e.get("interval")
        rows.append(
            (
                str(e.get("benchmark", "?")).rsplit("::", 1)[-1],
                "-" if e.get("size") is None else str(e.get("size")),
                str(e.get("backend")),
                format_seconds(_seconds(medians.get("a"))),
                format_seconds(_seconds(medians.get("b"))),
                _ratio(e.get("ratio")),
                f"[{_ratio(interval[0])}, {_ratio(interval[1])}]"
                if isinstance(interval, list) and len(interval) == 2
                else "-",
                ab.verdict_text(e),
                ab.counter_change(e),
            )
        )
    return rows


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _ratio(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, int | float) else "-"
