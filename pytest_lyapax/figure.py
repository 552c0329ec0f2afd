"""The crossover figure: wall time against problem size, one line per backend.

Uses matplotlib's object API with the Agg canvas, so drawing never touches
pyplot's global state or the user's interactive backend.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .analysis import SizedBenchmark, crossovers

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_MARKERS = "osD^v<>p"


@dataclass(frozen=True)
class BackendLegend:
    """How a backend appears in the legend: its label, status, device, reason."""

    label: str
    status: str
    device: str | None = None
    reason: str = ""


def _short(reason: str, width: int = 64, lines: int = 4) -> str:
    wrapped = textwrap.wrap(reason, width) or ["no reason given"]
    if len(wrapped) > lines:
        wrapped = wrapped[:lines]
        wrapped[-1] = wrapped[-1][: width - 3] + "..."
    return "\n".join(wrapped)


def build_figure(
    benches: Sequence[SizedBenchmark],
    legends: Sequence[BackendLegend],
    machine: str,
) -> Figure:
    """Draw one log-log panel per sized benchmark (one empty panel if none)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels = max(1, len(benches))
    fig = Figure(figsize=(7.5, 4.6 * panels), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(panels, 1, squeeze=False)[:, 0]
    colors = {entry.label: f"C{i}" for i, entry in enumerate(legends)}
    for ax, bench in zip(axes, benches or [None], strict=True):
        _draw_panel(ax, bench, legends, colors)

    names = ", ".join(b.name for b in benches) or "no sized benchmark"
    # Wrapped: with several benchmarks one line would run off the figure.
    wrapped = "\n".join(textwrap.wrap(f"benchmarks: {names}", width=80))
    fig.suptitle(
        f"Wall time per JAX backend (CPU/GPU crossover)\n{wrapped}\nmachine: {machine}",
        fontsize=11,
    )
    return fig


def render_png(
    benches: Sequence[SizedBenchmark],
    legends: Sequence[BackendLegend],
    machine: str,
) -> bytes:
    """The crossover figure as PNG bytes."""
    fig = build_figure(benches, legends, machine)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def _draw_panel(
    ax: Axes,
    bench: SizedBenchmark | None,
    legends: Sequence[BackendLegend],
    colors: Mapping[str, str],
) -> None:
    from matplotlib.ticker import NullLocator

    measured = set(bench.series) if bench is not None else set()
    for i, entry in enumerate(legends):
        color = colors[entry.label]
        device = f" ({entry.device})" if entry.device else ""
        if entry.label in measured:
            points = bench.series[entry.label]
            sizes = [p.size for p in points]
            ax.plot(
                sizes,
                [p.median for p in points],
                marker=_MARKERS[i % len(_MARKERS)],
                color=color,
                label=f"{entry.label}{device}: median",
            )
            ax.fill_between(
                sizes,
                [p.q1 for p in points],
                [p.q3 for p in points],
                color=color,
                alpha=0.2,
                linewidth=0,
            )
        else:
            status = entry.status if entry.status != "ok" else "no timings"
            ax.plot(
                [], [], linestyle="--", color=color, label=f"{entry.label}: {status}"
            )

    notes = [
        f"{e.label} not measured ({e.status}):\n{_short(e.reason)}"
        for e in legends
        if e.label not in measured and e.reason
    ]
    if bench is not None:
        for c in crossovers(bench):
            if c.kind == "crossover":
                ax.axvline(c.size, color="0.3", linestyle=":", linewidth=1.2)
                ax.annotate(
                    f"{c.other} faster from\n~{c.size:.3g}",
                    xy=(c.size, 0.04),
                    xycoords=("data", "axes fraction"),
                    xytext=(4, 0),
                    textcoords="offset points",
                    fontsize=8,
                )
            notes.append(c.describe("size"))
    if notes:
        ax.text(
            0.02,
            0.98,
            "\n".join(notes),
            transform=ax.transAxes,
            ha="left",
            va="top",
            fontsize=7.5,
            bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "alpha": 0.85},
        )
    if measured:
        ax.set_xscale("log")
        ax.set_yscale("log")
        # Label the measured sizes themselves rather than powers of ten.
        ax.set_xticks(bench.sizes, [str(s) for s in bench.sizes])
        ax.xaxis.set_minor_locator(NullLocator())
        title = f"{bench.name}: wall time vs size (log-log)"
        ax.set_xlabel(bench.size_label)
    else:
        title = "no size-parametrized benchmark produced timings"
        ax.set_xlabel("problem size")
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set_title(title, fontsize=10)
    ax.set_ylabel("wall time per call (s): median, band = IQR")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
