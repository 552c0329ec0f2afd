"""``pytest-lyapax history``: one benchmark's timings over many saved runs.

A history series is a series identity (``identity.py``): benchmark (full test
id with its module, other parameters), backend and machine (host, CPU,
device).  Runs of two hosts are two series unless ``--join-machines`` asks
for one; a jax upgrade on one machine stays in its series, and the step where
it happened names both versions.  Consecutive runs of a series are compared
with the noise test of ``stats.py`` on their per-call round times; a step
either of whose runs was busy (``busy.py``) is marked unreliable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from pytest_lyapax.report import busy, stats
from pytest_lyapax.report.identity import (
    Machine,
    SeriesId,
    is_size,
    record_size,
    series_id,
    unique_names,
)
from pytest_lyapax.report.schema import Report
from pytest_lyapax.report.series import Point, point_of

MAX_HISTORY_PANELS = 24


@dataclass(frozen=True)
class Run:
    """One run's timing of a series at one size."""

    index: int  # position of its report, oldest first
    point: Point
    machine: Machine
    busy: str | None = None  # why its rounds ran on a busy machine (busy.py)


@dataclass
class HistorySeries:
    """One series over the runs: size -> runs in order."""

    sid: SeriesId
    title: str = ""
    by_size: dict[int | None, list[Run]] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """A change between consecutive runs of one series at one size."""

    series: str
    size: int | None
    before: str
    after: str
    verdict: stats.Verdict
    note: str = ""  # e.g. a jax version that changed in between
    unreliable: str = ""  # why either run was busy (report/busy.py)

    @property
    def kind(self) -> str:
        return self.verdict.kind


def history_series(
    reports: Sequence[Report], *, join_machines: bool = False
) -> list[HistorySeries]:
    """Every series of the runs (reports oldest first), keyed by identity."""
    found: dict[tuple[str, ...], HistorySeries] = {}
    for index, report in enumerate(reports):
        for bench in report.benchmarks:
            sid = series_id(bench, report.machine_info)
            if sid.backend is None:
                continue
            entry = found.setdefault(
                sid.key(join_machines=join_machines), HistorySeries(sid)
            )
            run = Run(index, point_of(bench), sid.machine, busy.record_reason(bench))
            entry.by_size.setdefault(record_size(bench), []).append(run)
    series = list(found.values())
    names = unique_names(s.sid for s in series)
    places = {s.sid.machine.place for s in series}
    for s in series:
        title = f"{names[s.sid.benchmark]} [{s.sid.backend}]"
        if len(places) > 1 and not join_machines:
            title += f" @ {s.sid.machine.host or 'unknown host'}"
            if len({p for p in places if p[0] == s.sid.machine.host}) > 1:
                title += f" ({s.sid.machine.device})"
        s.title = title
    return series


def _changed(a: Machine, b: Machine) -> str:
    return ", ".join(a.differences(b))


def find_steps(
    reports: Sequence[Report], series: Sequence[HistorySeries]
) -> tuple[list[Step], int]:
    """Steps between consecutive runs that the noise test calls slower or
    faster, and the number of pairs it could not judge (too few rounds)."""
    steps = []
    unjudged = 0
    names = [r.path.name for r in reports]
    for s in series:
        for size, runs in s.by_size.items():
            for a, b in zip(runs, runs[1:], strict=False):
                verdict = stats.judge(
                    a.point.samples,
                    b.point.samples,
                    medians=(a.point.median, b.point.median),
                )
                if verdict.kind == stats.FEW:
                    unjudged += 1
                    continue
                if verdict.kind == stats.NOISE:
                    continue
                steps.append(
                    Step(
                        s.title,
                        size,
                        names[a.index],
                        names[b.index],
                        verdict,
                        _changed(a.machine, b.machine),
                        "; ".join(
                            f"{names[r.index]}: {r.busy}" for r in (a, b) if r.busy
                        ),
                    )
                )
    return steps, unjudged


def _size_order(item: tuple[int | None, object]) -> tuple[bool, int]:
    size = item[0]
    return (size is None, size if is_size(size) else 0)


def render_history(
    reports: Sequence[Report], series: Sequence[HistorySeries], steps: Sequence[Step]
) -> bytes:
    """Median per run with its IQR band, one panel per series (bounded)."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogLocator, NullLocator

    drawn = list(series)[:MAX_HISTORY_PANELS]
    columns = min(3, len(drawn))
    rows = math.ceil(len(drawn) / columns)
    fig = Figure(figsize=(4.8 * columns, 3.2 * rows + 0.8), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    flagged = {(s.series, s.size, s.after) for s in steps}
    names = [r.path.name for r in reports]
    for ax, entry in zip(axes, drawn, strict=False):
        for n, (size, runs) in enumerate(
            sorted(entry.by_size.items(), key=_size_order)
        ):
            xs = [r.index for r in runs]
            color = f"C{n % 10}"
            ax.plot(
                xs,
                [r.point.median for r in runs],
                marker="o",
                ms=3,
                color=color,
                label="no size" if size is None else f"size {size}",
            )
            ax.fill_between(
                xs,
                [r.point.q1 for r in runs],
                [r.point.q3 for r in runs],
                color=color,
                alpha=0.2,
                linewidth=0,
            )
            bad = [
                (r.index, r.point.median)
                for r in runs
                if (entry.title, size, names[r.index]) in flagged
            ]
            if bad:
                ax.scatter(
                    *zip(*bad, strict=True),
                    s=60,
                    facecolors="none",
                    edgecolors="red",
                    zorder=3,
                )
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(numticks=5))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_title(entry.title[:60], fontsize=8)
        ax.set_xticks(range(len(reports)), [str(i + 1) for i in range(len(reports))])
        ax.tick_params(labelsize=7)
        ax.set_xlabel("run (oldest first)", fontsize=8)
        ax.set_ylabel("s per call", fontsize=8)
        ax.legend(fontsize=6)
    for ax in axes[len(drawn) :]:
        ax.set_visible(False)
    title = (
        f"Median per run (band = IQR; red = step found by the noise test); "
        f"{len(reports)} runs"
    )
    if len(series) > len(drawn):
        title += f"; {len(drawn)} of {len(series)} series drawn"
    fig.suptitle(title, fontsize=9)
    fig.subplots_adjust(hspace=0.6, wspace=0.3, top=1 - 0.8 / fig.get_figheight())
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()
