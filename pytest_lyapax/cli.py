"""``pytest-lyapax`` (or ``python -m pytest_lyapax``): work with saved reports.

Subcommands::

    merge   A.json B.json ... -o OUT.json    one report from several runs/machines
    plot    REPORT.json [...] -o crossover.png   the plugin's figure, re-drawn
    history DIR_OR_FILES... -o history.png   median per benchmark over runs
    compare A.json B.json [--fail=median:25%]   the regression gate, without pytest

Reports are untrusted input: anything that is not a pytest-benchmark report
with numeric statistics, or comes from a newer pytest-lyapax, is refused with
one line on stderr.  Exit codes: 0 success; 1 ``compare`` found a regression
(or, with ``--fail``, a missing benchmark); 2 usage error or unusable input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import analysis

REPORT_KEY = "pytest_lyapax"  # same key as report.REPORT_KEY (no pytest import)
SCHEMA_VERSION = 1
MAX_FILE_BYTES = 512 * 1024 * 1024
MAX_TABLE_ROWS = 50
MAX_HISTORY_PANELS = 24
PLOT_STATS = ("median", "q1", "q3")


class InputError(Exception):
    """An input file or argument that cannot be used (exit code 2)."""


# ---------------------------------------------------------------- reading


@dataclass
class Report:
    """One loaded, validated report."""

    path: Path
    data: dict[str, Any]
    benchmarks: list[dict[str, Any]]

    @property
    def key(self) -> dict[str, Any]:
        value = self.data.get(REPORT_KEY)
        return value if isinstance(value, dict) else {}

    @property
    def machine(self) -> str:
        """Host and CPU from pytest-benchmark's machine_info."""
        info = self.data.get("machine_info")
        info = info if isinstance(info, dict) else {}
        cpu = info.get("cpu") if isinstance(info.get("cpu"), dict) else {}
        brand = cpu.get("brand_raw") or info.get("processor") or "CPU"
        return f"{info.get('node') or 'unknown host'} ({brand})"

    @property
    def host(self) -> str:
        info = self.data.get("machine_info")
        node = info.get("node") if isinstance(info, dict) else None
        return str(node) if node else "unknown host"

    @property
    def when(self) -> dt.datetime:
        """Commit time if known, else the run's datetime (for ordering runs)."""
        commit = self.data.get("commit_info")
        for value in (
            commit.get("time") if isinstance(commit, dict) else None,
            self.data.get("datetime"),
        ):
            if isinstance(value, str):
                try:
                    when = dt.datetime.fromisoformat(value)
                except ValueError:
                    continue
                return when if when.tzinfo else when.replace(tzinfo=dt.UTC)
        return dt.datetime.min.replace(tzinfo=dt.UTC)

    def backends(self) -> list[dict[str, Any]]:
        entries = self.key.get("backends")
        if not isinstance(entries, list):
            return []
        return [e for e in entries if isinstance(e, dict) and "label" in e]


def load_report(path: Path, *, need_plot_stats: bool = False) -> Report:
    """Read and validate one report; raise InputError saying what is wrong."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise InputError(
                f"{path}: {size / 1e6:.0f} MB is larger than the "
                f"{MAX_FILE_BYTES / 1e6:.0f} MB this tool reads"
            )
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text file") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(
            f"{path}: not valid JSON ({exc}); a truncated or partly written file?"
        ) from None
    try:
        benches = analysis.check_report(data, str(path))
    except ValueError as exc:
        raise InputError(str(exc)) from None
    key = data.get(REPORT_KEY)
    if key is not None:
        schema = key.get("schema", 0) if isinstance(key, dict) else None
        if not isinstance(schema, int) or isinstance(schema, bool) or schema < 0:
            raise InputError(f"{path}: its '{REPORT_KEY}' entry is malformed")
        if schema > SCHEMA_VERSION:
            raise InputError(
                f"{path}: written by a newer pytest-lyapax (report schema {schema}); "
                f"this one reads schema {SCHEMA_VERSION} and older: upgrade lyapax"
            )
    if need_plot_stats:
        for bench in benches:
            missing = [k for k in PLOT_STATS if k not in bench["stats"]]
            if missing:
                raise InputError(
                    f"{path}: {bench['fullname']} has no stats.{missing[0]}"
                )
    return Report(path, data, benches)


def expand_inputs(items: Sequence[str]) -> list[Path]:
    """Files as given; a directory means its ``runs/*.json`` (the plugin's
    history) or, without ``runs/``, its ``*.json``."""
    paths: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            runs = path / "runs"
            found = sorted((runs if runs.is_dir() else path).glob("*.json"))
            if not found:
                raise InputError(f"{path}: no saved runs (*.json) in it")
            paths += found
        else:
            paths.append(path)
    return paths


# ---------------------------------------------------------------- merging


@dataclass
class Merged:
    """Several reports as one: series labelled backend @ host."""

    benchmarks: list[dict[str, Any]] = field(default_factory=list)
    backends: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)

    @property
    def order(self) -> list[str]:
        return [b["label"] for b in self.backends]


def _label_for(backend: str, host: str, relabel: bool) -> str:
    return f"{backend} @ {host}" if relabel else backend


def merge_reports(reports: Sequence[Report]) -> Merged:
    """Combine reports; relabel series by host when more than one host is
    involved; report conflicting duplicates (same host, backend and test)."""
    hosts = {r.host for r in reports}
    relabel = len(hosts) > 1
    merged = Merged()
    seen: dict[tuple[str, str], Path] = {}
    known_labels: set[str] = set()
    for report in reports:
        merged.sources.append(
            {
                "file": str(report.path),
                "machine": report.machine,
                "datetime": report.data.get("datetime"),
                "commit": (report.data.get("commit_info") or {}).get("id")
                if isinstance(report.data.get("commit_info"), dict)
                else None,
            }
        )
        for bench in report.benchmarks:
            backend = analysis.record_label(bench)
            if backend is None:
                continue
            label = _label_for(backend, report.host, relabel)
            key = (label, bench["fullname"])
            if key in seen:
                merged.conflicts.append(
                    f"{bench['fullname']} on {label}: in {seen[key]} and "
                    f"{report.path}; kept the first"
                )
                continue
            seen[key] = report.path
            copy = json.loads(json.dumps(bench))
            info = copy.setdefault("extra_info", {})
            info["backend"] = label
            info["source_backend"] = backend
            info["machine"] = report.machine
            if relabel:
                # Unique ids for pytest-benchmark compare, one per machine.
                copy["fullname"] = f"{bench['fullname']}@{report.host}"
                copy["name"] = f"{bench.get('name', bench['fullname'])}@{report.host}"
            merged.benchmarks.append(copy)
        entries = report.backends() or [
            {"label": b, "status": "ok"}
            for b in dict.fromkeys(analysis.record_label(x) for x in report.benchmarks)
            if b is not None
        ]
        for entry in entries:
            label = _label_for(str(entry["label"]), report.host, relabel)
            if label in known_labels:
                continue
            known_labels.add(label)
            merged.backends.append({**entry, "label": label, "machine": report.machine})
    return merged


def merged_document(reports: Sequence[Report], merged: Merged) -> dict[str, Any]:
    first = reports[0].data
    return {
        "machine_info": first.get("machine_info", {}),
        "commit_info": first.get("commit_info", {}),
        "benchmarks": merged.benchmarks,
        "datetime": dt.datetime.now(dt.UTC).isoformat(),
        "version": first.get("version"),
        REPORT_KEY: {
            "schema": SCHEMA_VERSION,
            "merged_from": merged.sources,
            "conflicts": merged.conflicts,
            "backends": merged.backends,
            "run_order": merged.order,
            "complete": all(b.get("status") == "ok" for b in merged.backends),
        },
    }


# ---------------------------------------------------------------- commands


def _write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        raise InputError(f"{path}: cannot write it ({exc.strerror or exc})") from None


def cmd_merge(args: argparse.Namespace) -> int:
    reports = [load_report(p) for p in expand_inputs(args.reports)]
    merged = merge_reports(reports)
    if not merged.benchmarks:
        raise InputError(
            "no benchmark with a pytest-lyapax backend label in the inputs"
        )
    document = merged_document(reports, merged)
    _write(args.output, json.dumps(document, indent=2).encode())
    for line in merged.conflicts[:MAX_TABLE_ROWS]:
        print(f"conflict: {line}", file=sys.stderr)
    print(
        f"merged {len(reports)} report(s), {len(merged.benchmarks)} benchmarks, "
        f"series {', '.join(merged.order)} -> {args.output}"
    )
    if merged.conflicts:
        print(f"{len(merged.conflicts)} conflicting duplicate(s) not merged")
    return 0


def _legends(merged: Merged) -> list[Any]:
    from .figure import BackendLegend

    return [
        BackendLegend(
            str(b["label"]),
            str(b.get("status", "ok")),
            b.get("device") if isinstance(b.get("device"), str) else None,
            str(b.get("reason") or ""),
        )
        for b in merged.backends
    ]


def cmd_plot(args: argparse.Namespace) -> int:
    from .figure import render_png

    reports = [
        load_report(p, need_plot_stats=True) for p in expand_inputs(args.reports)
    ]
    merged = merge_reports(reports)
    if not merged.benchmarks:
        raise InputError("no benchmark with a pytest-lyapax backend label to plot")
    benches = analysis.group_sized(merged.benchmarks, merged.order)
    machines = "; ".join(dict.fromkeys(r.machine for r in reports))
    png = render_png(
        benches, _legends(merged), machines, analysis.unsized_medians(merged.benchmarks)
    )
    _write(args.output, png)
    print(
        f"wrote {args.output} ({len(benches)} sized benchmarks; machines: {machines})"
    )
    for bench in benches[:MAX_TABLE_ROWS]:
        for c in analysis.crossovers(bench):
            print(f"{bench.name}: {c.describe(bench.size_label)}")
    return 0


@dataclass
class Step:
    """A change between consecutive runs of one series at one size."""

    series: str
    size: int | None
    before: str
    after: str
    ratio: float
    kind: str  # "slower" or "faster"


def history_series(
    reports: Sequence[Report],
) -> dict[tuple[str, str], dict[int | None, list[tuple[int, analysis.Point]]]]:
    """(series name, backend) -> size -> [(run index, point)] in run order."""
    out: dict[tuple[str, str], dict[int | None, list[tuple[int, analysis.Point]]]] = {}
    for index, report in enumerate(reports):
        for bench in report.benchmarks:
            label = analysis.record_label(bench)
            if label is None:
                continue
            stats = bench["stats"]
            point = analysis.Point(0, stats["median"], stats["q1"], stats["q3"])
            size = analysis.record_size(bench)
            key = (analysis.series_name(bench), label)
            out.setdefault(key, {}).setdefault(size, []).append((index, point))
    return out


def find_steps(
    reports: Sequence[Report],
    series: Mapping[tuple[str, str], Mapping[int | None, list[tuple[int, Any]]]],
) -> list[Step]:
    """Consecutive runs whose interquartile ranges do not overlap."""
    steps = []
    names = [r.path.name for r in reports]
    for (name, label), by_size in series.items():
        for size, points in by_size.items():
            for (i, a), (j, b) in zip(points, points[1:], strict=False):
                if b.q1 > a.q3:
                    kind = "slower"
                elif b.q3 < a.q1:
                    kind = "faster"
                else:
                    continue
                ratio = b.median / a.median if a.median > 0 else math.inf
                steps.append(
                    Step(f"{name} [{label}]", size, names[i], names[j], ratio, kind)
                )
    return steps


def cmd_history(args: argparse.Namespace) -> int:
    reports = [load_report(p, need_plot_stats=True) for p in expand_inputs(args.inputs)]
    reports.sort(key=lambda r: r.when)
    series = history_series(reports)
    if not series:
        raise InputError("no benchmark with a pytest-lyapax backend label in the runs")
    steps = find_steps(reports, series)
    png = render_history(reports, series, steps)
    _write(args.output, png)
    print(f"{len(reports)} runs, {len(series)} series -> {args.output}")
    rows = [
        [
            s.series,
            "-" if s.size is None else str(s.size),
            s.before,
            s.after,
            f"{s.ratio:.2f}x",
            s.kind.upper(),
        ]
        for s in steps
    ]
    if rows:
        header = ["series", "size", "before", "after", "median ratio", "step"]
        for line in analysis.render_table(header, rows[:MAX_TABLE_ROWS]):
            print(line)
        if len(rows) > MAX_TABLE_ROWS:
            print(f"... and {len(rows) - MAX_TABLE_ROWS} more steps")
    else:
        print("no step beyond the noise (interquartile ranges overlap everywhere)")
    return 0


def _size_order(item: tuple[int | None, Any]) -> tuple[bool, int]:
    return (item[0] is None, item[0] or 0)


def render_history(
    reports: Sequence[Report],
    series: Mapping[tuple[str, str], Mapping[int | None, list[tuple[int, Any]]]],
    steps: Sequence[Step],
) -> bytes:
    """Median per run with its IQR band, one panel per series (bounded)."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import LogLocator, NullLocator

    keys = list(series)[:MAX_HISTORY_PANELS]
    columns = min(3, len(keys))
    rows = math.ceil(len(keys) / columns)
    fig = Figure(figsize=(4.8 * columns, 3.2 * rows + 0.8), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    flagged = {(s.series, s.size, s.after) for s in steps}
    names = [r.path.name for r in reports]
    for ax, key in zip(axes, keys, strict=False):
        for n, (size, points) in enumerate(
            sorted(series[key].items(), key=_size_order)
        ):
            xs = [i for i, _ in points]
            color = f"C{n % 10}"
            ax.plot(
                xs,
                [p.median for _, p in points],
                marker="o",
                ms=3,
                color=color,
                label="no size" if size is None else f"size {size}",
            )
            ax.fill_between(
                xs,
                [p.q1 for _, p in points],
                [p.q3 for _, p in points],
                color=color,
                alpha=0.2,
                linewidth=0,
            )
            bad = [
                (i, p.median)
                for i, p in points
                if (f"{key[0]} [{key[1]}]", size, names[i]) in flagged
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
        ax.set_title(f"{key[0]} [{key[1]}]"[:60], fontsize=8)
        ax.set_xticks(range(len(reports)), [str(i + 1) for i in range(len(reports))])
        ax.tick_params(labelsize=7)
        ax.set_xlabel("run (oldest first)", fontsize=8)
        ax.set_ylabel("s per call", fontsize=8)
        ax.legend(fontsize=6)
    for ax in axes[len(keys) :]:
        ax.set_visible(False)
    title = (
        f"Median per run (band = IQR; red = step beyond the noise); {len(reports)} runs"
    )
    if len(series) > len(keys):
        title += f"; {len(keys)} of {len(series)} series drawn"
    fig.suptitle(title, fontsize=9)
    fig.subplots_adjust(hspace=0.6, wspace=0.3, top=1 - 0.8 / fig.get_figheight())
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _threshold(text: str) -> analysis.CompareThreshold:
    try:
        return analysis.parse_threshold(text)
    except ValueError as exc:
        raise InputError(f"--fail: {exc}") from None


def cmd_compare(args: argparse.Namespace) -> int:
    threshold = _threshold(args.fail) if args.fail else None
    saved, now = load_report(Path(args.saved)), load_report(Path(args.now))
    result = analysis.compare_runs(saved.data, now.benchmarks, threshold)
    table = analysis.comparison_table(result.comparisons, threshold)
    for line in table[: MAX_TABLE_ROWS + 2]:
        print(line)
    if len(result.comparisons) > MAX_TABLE_ROWS:
        print(f"... and {len(result.comparisons) - MAX_TABLE_ROWS} more")
    if result.missing:
        print(
            f"{len(result.missing)} benchmark(s) of {saved.path} missing in {now.path}"
        )
    if threshold is None:
        return 0
    failures = result.gate_failures(args.allow_missing)
    for line in failures[:MAX_TABLE_ROWS]:
        print(f"FAIL: {line}")
    print(f"gate {threshold}: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pytest-lyapax",
        description="Merge, plot, follow and compare pytest-lyapax reports.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("merge", help="combine reports of several runs or machines")
    p.add_argument("reports", nargs="+", help="benchmark.json files or report dirs")
    p.add_argument("-o", "--output", type=Path, required=True)
    p.set_defaults(func=cmd_merge)
    p = sub.add_parser("plot", help="draw the crossover figure from saved reports")
    p.add_argument("reports", nargs="+")
    p.add_argument("-o", "--output", type=Path, default=Path("crossover.png"))
    p.set_defaults(func=cmd_plot)
    p = sub.add_parser("history", help="median per benchmark over saved runs")
    p.add_argument(
        "inputs", nargs="+", help="report dirs (their runs/*.json) or JSON files"
    )
    p.add_argument("-o", "--output", type=Path, default=Path("history.png"))
    p.set_defaults(func=cmd_history)
    p = sub.add_parser("compare", help="the --jax-compare-fail gate on two files")
    p.add_argument("saved")
    p.add_argument("now")
    p.add_argument("--fail", metavar="EXPR", help="e.g. median:25%% or median:0.05")
    p.add_argument("--allow-missing", action="store_true")
    p.set_defaults(func=cmd_compare)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (never raises)."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits with 2 on a usage error
    try:
        return int(args.func(args))
    except InputError as exc:
        print(f"pytest-lyapax {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        print(
            f"pytest-lyapax {args.command}: error: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return 2
