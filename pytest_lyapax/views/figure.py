"""The crossover figure: wall time against problem size, one line per series.

A *series* is a backend label (``cpu``) or, for merged reports, a backend on a
machine (``gpu @ server``).  The figure is a grid of small panels, one per
sized benchmark, plus one bar chart of the benchmarks without a size axis;
its pixel size and drawing time are bounded (at most :data:`MAX_PANELS`
panels; the rest are counted in the title and stay in the JSON and the
terminal tables).  Uses matplotlib's object API with the Agg canvas, so
drawing never touches pyplot's global state or the user's interactive
backend.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ParamSpec

from pytest_lyapax.report.crossover import crossovers
from pytest_lyapax.report.series import Point, SizedBenchmark
from pytest_lyapax.views import search as search_view

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from pytest_lyapax.report.costmodel import BenchmarkModel
    from pytest_lyapax.report.details import FailedPoint, PanelNotes

_MARKERS = "osD^v<>p"
MAX_PANELS = 24  # sized panels drawn; the bar chart comes on top
MAX_BARS = 20  # unsized benchmarks drawn in the bar chart
_COLUMNS = 3
_DPI = 100


@dataclass(frozen=True)
class BackendLegend:
    """How a series appears in the legend: its label, status, device, reason."""

    label: str
    status: str
    device: str | None = None
    reason: str = ""
    precision: str = ""  # "float32", "float64 (matmul highest)", ...


def _short(text: str, width: int = 60, lines: int = 3) -> str:
    wrapped = textwrap.wrap(text, width) or ["no reason given"]
    if len(wrapped) > lines:
        wrapped = wrapped[:lines]
        wrapped[-1] = wrapped[-1][: width - 3] + "..."
    return "\n".join(wrapped)


def build_figure(
    benches: Sequence[SizedBenchmark],
    legends: Sequence[BackendLegend],
    machine: str,
    unsized: Mapping[str, Mapping[str, Point]] | None = None,
    models: Mapping[str, BenchmarkModel] | None = None,
    notes: Mapping[str, PanelNotes] | None = None,
    searched: Mapping[str, search_view.Marks] | None = None,
) -> Figure:
    """Draw the crossover grid (see the module docstring for its bounds).

    ``models`` (per benchmark key) adds each fitted cost model as a thin
    dashed curve; ``notes`` marks out-of-memory sizes and writes each
    series' compile (or first-call) time at its largest size."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    unsized = dict(unsized or {})
    drawn = list(benches[:MAX_PANELS])
    panels: list[SizedBenchmark | str | None] = list(drawn)
    if unsized:
        panels.append("bars")
    if not panels:
        panels.append(None)
    columns = min(_COLUMNS, len(panels))
    rows = math.ceil(len(panels) / columns)
    width_in = 4.8 * columns
    # Header text is wrapped to the figure's width (about 14 characters per
    # inch at 9 pt) and the legend goes under it, so neither can overlap.
    chars = max(40, int(width_in * 14))
    lines = textwrap.wrap(
        f"Wall time per JAX backend (median, bars = IQR); {machine}", chars
    )
    incomplete = [e for e in legends if e.status not in ("ok", "unavailable")]
    unavailable = [e for e in legends if e.status == "unavailable"]
    for heading, entries in (
        ("INCOMPLETE RUN: ", incomplete),
        ("Not measured (no timing is shown for it): ", unavailable),
    ):
        if entries:
            said = (f"{e.label} {e.status}: {_short(e.reason, 80, 1)}" for e in entries)
            lines += textwrap.wrap(heading + "; ".join(said), chars)
    keys = [
        ("thin dashed: fitted cost model t(n) = a + b*n^p", _any_fit(drawn, models)),
        (
            "x at the top: out of memory",
            any(p.predicted is None for n in (notes or {}).values() for p in n.failed),
        ),
        (
            "hollow: predicted, not measured (over budget; bars = interval)",
            any(p.predicted for n in (notes or {}).values() for p in n.failed),
        ),
        (
            "bottom right: untimed warm-up at the largest size",
            any(n.warmups for n in (notes or {}).values()),
        ),
        (search_view.KEY_TEXT, bool(searched)),
    ]
    if any(shown for _, shown in keys):
        lines += textwrap.wrap("; ".join(text for text, shown in keys if shown), chars)
    if len(benches) > len(drawn):
        lines.append(
            f"{len(drawn)} of {len(benches)} sized benchmarks drawn; all are in "
            "benchmark.json and the terminal tables"
        )
    legend_columns = max(1, min(len(legends), int(width_in // 2.4)))
    legend_rows = math.ceil(len(legends) / legend_columns) if legends else 0
    text_in = 0.1 + 0.17 * len(lines)
    header_in = text_in + 0.25 * legend_rows + 0.45
    # Room under the last row for the bar chart's two-line, slanted names.
    footer_in = 0.35 + (0.75 if unsized else 0.0)
    fig = Figure(
        figsize=(width_in, 3.6 * rows + header_in + footer_in - 0.35), dpi=_DPI
    )
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    colors = {entry.label: f"C{i % 10}" for i, entry in enumerate(legends)}
    markers = {e.label: _MARKERS[i % len(_MARKERS)] for i, e in enumerate(legends)}
    for ax, panel in zip(axes, panels, strict=False):
        if panel == "bars":
            _draw_bars(ax, unsized, legends, colors)
        elif isinstance(panel, SizedBenchmark):
            _draw_sized(ax, panel, colors, markers)
            search_view.draw(ax, panel, (searched or {}).get(panel.key), colors)
            _draw_extras(
                ax,
                panel,
                colors,
                (models or {}).get(panel.key),
                (notes or {}).get(panel.key),
            )
        else:
            _draw_empty(ax)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)

    handles = []
    for entry in legends:
        shown = ", ".join(t for t in (entry.device, entry.precision) if t)
        device = f" ({shown})" if shown else ""
        status = "" if entry.status == "ok" else f" [{entry.status}]"
        (handle,) = axes[0].plot(
            [],
            [],
            color=colors[entry.label],
            marker=markers[entry.label],
            linestyle="-" if entry.status == "ok" else "--",
            label=f"{entry.label}{device}{status}",
        )
        handles.append(handle)
    height = fig.get_figheight()
    top = 1.0 - header_in / height
    fig.text(
        0.01, 1.0 - 0.05 / height, "\n".join(lines), va="top", ha="left", fontsize=9
    )
    if handles:
        fig.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(0.01, 1.0 - text_in / height),
            fontsize=8,
            ncols=legend_columns,
            frameon=False,
        )
    fig.subplots_adjust(
        left=0.08 / columns * 2,
        right=0.98,
        bottom=footer_in / fig.get_figheight(),
        top=top,
        hspace=0.55,
        wspace=0.3,
    )
    return fig


def _any_fit(
    benches: Sequence[SizedBenchmark], models: Mapping[str, BenchmarkModel] | None
) -> bool:
    return any(
        f.fits for b in benches for f in getattr((models or {}).get(b.key), "fits", ())
    )


def png_bytes(fig: Figure) -> bytes:
    """A figure as PNG bytes, at the resolution of every figure of the plugin."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI)
    return buffer.getvalue()


_P = ParamSpec("_P")


def _as_png(draw: Callable[_P, Figure]) -> Callable[_P, bytes]:
    """``draw`` returning its figure as PNG bytes (the same arguments)."""

    def render(*args: _P.args, **kwargs: _P.kwargs) -> bytes:
        return png_bytes(draw(*args, **kwargs))

    return render


# The crossover figure as PNG bytes (arguments as :func:`build_figure`).
render_png = _as_png(build_figure)


def _iqr_errors(points: Sequence[Point]) -> list[list[float]]:
    return [
        [max(0.0, p.median - p.q1) for p in points],
        [max(0.0, p.q3 - p.median) for p in points],
    ]


def _log_y(ax: Axes) -> None:
    # Few ticks, no minor ones: tick layout dominates drawing time otherwise.
    from matplotlib.ticker import LogLocator, NullLocator

    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(numticks=5))
    ax.yaxis.set_minor_locator(NullLocator())


def _draw_sized(
    ax: Axes,
    bench: SizedBenchmark,
    colors: Mapping[str, str],
    markers: Mapping[str, str],
) -> None:
    from matplotlib.ticker import NullLocator

    for label, points in bench.series.items():
        ax.errorbar(
            [p.size for p in points],
            [p.median for p in points],
            yerr=_iqr_errors(points),
            color=colors.get(label, "0.3"),
            marker=markers.get(label, "o"),
            markersize=4,
            capsize=3,
            linestyle="-" if len(points) > 1 else "none",
        )
    notes = []
    for c in crossovers(bench):
        for crossing in c.crossings:
            ax.axvline(crossing.size, color="0.4", linestyle=":", linewidth=1)
        notes.append(_short(c.describe("size"), 56, 3))
    if notes:
        ax.text(
            0.02,
            0.98,
            "\n".join(notes),
            transform=ax.transAxes,
            ha="left",
            va="top",
            fontsize=6.5,
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.8},
        )
    sizes = bench.sizes
    _log_y(ax)
    if len(sizes) > 1:
        ax.set_xscale("log")
    ticks = sizes if len(sizes) <= 8 else sizes[:: math.ceil(len(sizes) / 8)]
    ax.set_xticks(ticks, [str(s) for s in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_title(_short(bench.name, 48, 2), fontsize=8)
    ax.set_xlabel(bench.size_label, fontsize=8)
    ax.set_ylabel("s per call", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, which="both", alpha=0.3)


def _draw_predicted(ax: Axes, point: FailedPoint, color: str) -> None:
    """An over-budget size: a hollow marker at its predicted time per call,
    bars over the prediction's interval (never drawn as a measurement)."""
    assert point.predicted is not None and point.size is not None
    value, lo, hi = point.predicted
    ax.errorbar(
        [point.size],
        [value],
        yerr=[[max(0.0, value - lo)], [max(0.0, hi - value)]],
        color=color,
        marker="o",
        markerfacecolor="none",
        markersize=5,
        capsize=2,
        linestyle="none",
        alpha=0.8,
        label="predicted, not measured",
    )


def _measured_elsewhere(bench: SizedBenchmark, point: FailedPoint) -> bool:
    """Whether another backend measured the size ``point`` did not run at."""
    return any(
        label != point.backend and point.size in bench.points(label)
        for label in bench.series
    )


def _draw_extras(
    ax: Axes,
    bench: SizedBenchmark,
    colors: Mapping[str, str],
    model: BenchmarkModel | None,
    notes: PanelNotes | None,
) -> None:
    """Fitted cost models (thin dashed), out-of-memory sizes (x at the top
    edge) and the warm-up time of each series at its largest size."""
    if model is not None:
        for fit in model.fits:
            if not fit.fits:
                continue
            lo, hi = fit.sizes[0], fit.sizes[-1]
            xs = [lo * (hi / lo) ** (i / 40) for i in range(41)]
            ax.plot(
                xs,
                [fit.predict(x) for x in xs],
                color=colors.get(fit.label, "0.3"),
                linestyle="--",
                linewidth=0.8,
                alpha=0.8,
            )
    if notes is None:
        return
    lines = []
    for point in notes.failed:
        if point.size is None:
            continue
        if point.predicted is not None:
            _draw_predicted(ax, point, colors.get(point.backend, "0.3"))
            if _measured_elsewhere(bench, point):
                ax.annotate(
                    f"not run on {point.backend}",
                    (point.size, point.predicted[0]),
                    xytext=(4, 4),
                    textcoords="offset points",
                    fontsize=6,
                    color=colors.get(point.backend, "0.3"),
                )
            continue
        ax.plot(
            [point.size],
            [0.96],
            transform=ax.get_xaxis_transform(),
            marker="x",
            markersize=7,
            color=colors.get(point.backend, "red"),
            linestyle="none",
        )
        ax.annotate(
            "out of memory" if point.status == "oom" else "skipped",
            (point.size, 0.96),
            xycoords=("data", "axes fraction"),
            xytext=(0, -10),
            textcoords="offset points",
            fontsize=6,
            ha="center",
            color=colors.get(point.backend, "red"),
        )
    failed_sizes = {p.size for p in notes.failed if p.size is not None}
    if failed_sizes - set(bench.sizes):
        ticks = sorted(set(bench.sizes) | failed_sizes)
        if len(ticks) > 1:
            ax.set_xscale("log")
        ticks = ticks if len(ticks) <= 8 else ticks[:: math.ceil(len(ticks) / 8)]
        ax.set_xticks(ticks, [str(s) for s in ticks])
        # The log scale set here brings its minor ticks and labels back.
        from matplotlib.ticker import NullLocator

        ax.xaxis.set_minor_locator(NullLocator())
        ax.margins(x=0.12)
    for label, (size, warm) in notes.warmups.items():
        lines.append(f"{label} at {size}: {warm.short()}")
    if lines:
        ax.text(
            0.98,
            0.02,
            "\n".join(_short(line, 48, 1) for line in lines[:4]),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=6,
            color="0.25",
        )


def _draw_bars(
    ax: Axes,
    unsized: Mapping[str, Mapping[str, Point]],
    legends: Sequence[BackendLegend],
    colors: Mapping[str, str],
) -> None:
    names = list(unsized)[:MAX_BARS]
    labels = [e.label for e in legends]
    width = 0.8 / max(1, len(labels))
    for j, label in enumerate(labels):
        xs, ys, points = [], [], []
        for i, name in enumerate(names):
            point = unsized[name].get(label)
            if point is not None:
                xs.append(i + (j - (len(labels) - 1) / 2) * width)
                ys.append(point.median)
                points.append(point)
        if xs:
            ax.bar(
                xs,
                ys,
                width=width,
                yerr=_iqr_errors(points),
                color=colors.get(label, "0.3"),
                capsize=2,
            )
    _log_y(ax)
    ax.set_xticks(
        range(len(names)),
        [_bar_label(n) for n in names],
        rotation=30,
        ha="right",
        fontsize=6.5,
    )
    extra = len(unsized) - len(names)
    title = "benchmarks without a size axis"
    if extra > 0:
        title += f" (first {len(names)}, {extra} more in the JSON)"
    ax.set_title(title, fontsize=8)
    ax.set_ylabel("s per call", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(True, axis="y", alpha=0.3)


def _cut(text: str, width: int = 26) -> str:
    if len(text) <= width:
        return text
    head = (width - 3) // 2
    return text[:head] + "..." + text[-(width - 3 - head) :]


def _bar_label(name: str) -> str:
    """A bar's name: module path and test on two lines, each cut in the
    middle when long (both ends are what tell two benchmarks apart)."""
    path, sep, test = name.partition("::")
    return f"{_cut(path)}\n::{_cut(test)}" if sep else _cut(name)


def _draw_empty(ax: Axes) -> None:
    ax.text(
        0.5,
        0.5,
        "no benchmark produced timings",
        transform=ax.transAxes,
        ha="center",
        va="center",
    )
    ax.set_xticks([])
    ax.set_yticks([])
