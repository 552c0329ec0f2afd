"""``pytest-lyapax`` (or ``python -m pytest_lyapax``): work with saved reports.

Subcommands::

    merge   A.json B.json ... -o OUT.json    one report from several runs/machines
    plot    REPORT.json [...] -o crossover.png   the plugin's figure, re-drawn
    summary REPORT.json [...] -o summary.md      the run's markdown summary
            [--terminal]  (-o - prints) the run's terminal summary instead
    html    REPORT.json [...] -o report.html     the run's self-contained page
    history DIR_OR_FILES... -o history.png   median per series over runs
    compare A.json B.json [--fail=median:25%] [--busy=warn|fail|ignore]
                                             the regression gate, without pytest
    agree   A.json B.json [--pair cpu:gpu]   recorded results of two runs compared

Reports are untrusted input, read by the same loader as the plugin's
``--jax-compare`` (``schema.load_report``): anything that is not a
pytest-benchmark report with numeric statistics, or comes from a newer
pytest-lyapax, is refused with one line on stderr.  Exit codes: 0 success;
1 ``compare`` found a regression (or, with ``--fail``, a missing benchmark),
or ``agree`` a disagreement;
2 usage error or unusable input (also: ``compare --fail`` across hosts or
devices without ``--across-machines``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pytest_lyapax.report import (
    agreement,
    busy,
    costmodel,
    details,
    gates,
    stats,
)
from pytest_lyapax.report.compare import compare_runs
from pytest_lyapax.report.history import find_steps, history_series, render_history
from pytest_lyapax.report.identity import extra_info
from pytest_lyapax.report.merge import Merged, merge_reports, merged_document
from pytest_lyapax.report.schema import Report, ReportError
from pytest_lyapax.report.schema import load_report as _load
from pytest_lyapax.report.series import group_sized, unsized_medians
from pytest_lyapax.views import agreement as agreement_view
from pytest_lyapax.views import roofline as roofline_view
from pytest_lyapax.views import search as search_view
from pytest_lyapax.views import tables

MAX_TABLE_ROWS = 50


class InputError(Exception):
    """An input file or argument that cannot be used (exit code 2)."""


def load_report(path: Path, *, need_plot_stats: bool = False) -> Report:
    """:func:`pytest_lyapax.report.schema.load_report`, failing with an InputError."""
    try:
        return _load(path, need_plot_stats=need_plot_stats)
    except ReportError as exc:
        raise InputError(str(exc)) from None


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
    from pytest_lyapax.report.precision import backend_precision
    from pytest_lyapax.views.figure import BackendLegend

    return [
        BackendLegend(
            str(b["label"]),
            str(b.get("status", "ok")),
            b.get("device") if isinstance(b.get("device"), str) else None,
            str(b.get("reason") or ""),
            backend_precision(b),
        )
        for b in merged.backends
    ]


def cmd_plot(args: argparse.Namespace) -> int:
    from pytest_lyapax.views.figure import render_png

    if args.roofline:
        return _plot_roofline(args)
    reports = [
        load_report(p, need_plot_stats=True) for p in expand_inputs(args.reports)
    ]
    merged = merge_reports(reports)
    if not merged.benchmarks:
        raise InputError("no benchmark with a pytest-lyapax backend label to plot")
    benches = group_sized(merged.benchmarks, merged.order)
    # Each merged record names its machine (a merged input keeps several).
    machines = "; ".join(
        dict.fromkeys(str(extra_info(b)["machine"]) for b in merged.benchmarks)
    )
    failed = [point for r in reports for point in details.failed_points(r.data)]
    models = costmodel.by_key(costmodel.cost_models(benches))
    if len(reports) == 1:
        # One report: the figure its run drew, with the sizes a search chose,
        # its bracket and the memory ceilings (saved with the report only).
        from pytest_lyapax.views.document import view_of

        png = view_of(reports[0].data).figure_png()
    else:
        png = render_png(
            benches,
            _legends(merged),
            machines,
            unsized_medians(merged.benchmarks),
            models,
            details.panel_notes(merged.benchmarks, None, failed),
        )
    _write(args.output, png)
    print(
        f"wrote {args.output} ({len(benches)} sized benchmarks; machines: {machines})"
    )
    roof = roofline_view.index(merged.benchmarks)
    reasons = busy.index(merged.benchmarks)
    busy_peaks = busy.peaks_index(merged.benchmarks)
    for bench in benches[:MAX_TABLE_ROWS]:
        lines = roofline_view.crossover_lines(bench, roof, reasons, busy_peaks)
        for line in lines + busy.crossover_notes(bench, reasons):
            print(f"{bench.name}: {line}")
        for line in busy.model_lines(models[bench.key], bench, reasons):
            print(f"{bench.name}: {busy.with_prefix('cost model ', line)}")
    return 0


def _plot_roofline(args: argparse.Namespace) -> int:
    """``plot --roofline``: roofline.png of one saved report."""
    from pytest_lyapax.views.document import view_of

    paths = expand_inputs(args.reports)
    if len(paths) != 1:
        raise InputError(f"plot --roofline takes one report, got {len(paths)}")
    png = view_of(load_report(paths[0]).data).roofline_png()
    if png is None:
        raise InputError(f"{paths[0]}: no benchmark has a roofline entry")
    _write(args.output, png)
    print(f"wrote {args.output}")
    return 0


def _document(items: Sequence[str]) -> dict[str, Any]:
    """One report as stored, or several merged (as ``merge`` writes them)."""
    paths = expand_inputs(items)
    reports = [load_report(p, need_plot_stats=True) for p in paths]
    if len(reports) == 1:
        return reports[0].data
    merged = merge_reports(reports)
    if not merged.benchmarks:
        raise InputError("no benchmark with a pytest-lyapax backend label")
    return merged_document(reports, merged)


def cmd_readable(args: argparse.Namespace) -> int:
    from pytest_lyapax.views.document import view_of
    from pytest_lyapax.views.render import report_html, summary_markdown, summary_text

    view = view_of(_document(args.reports))
    if getattr(args, "terminal", False):
        # The run's terminal summary, less what only the run knew (files
        # written, the gate's verdict, the comparison's values).
        text = summary_text(view)
        if args.output is None or str(args.output) == "-":
            sys.stdout.write(text.decode())
            return 0
        _write(args.output, text)
    else:
        render = summary_markdown if args.command == "summary" else report_html
        args.output = args.output or Path(args.default_output)
        _write(args.output, render(view))
    print(f"wrote {args.output} ({len(view.records)} benchmarks)")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    reports = [load_report(p, need_plot_stats=True) for p in expand_inputs(args.inputs)]
    reports.sort(key=lambda r: r.when)
    series = history_series(reports, join_machines=args.join_machines)
    if not series:
        raise InputError("no benchmark with a pytest-lyapax backend label in the runs")
    steps, unjudged = find_steps(reports, series)
    png = render_history(reports, series, steps)
    _write(args.output, png)
    places = {
        run.machine.place for s in series for runs in s.by_size.values() for run in runs
    }
    where = f" from {len(places)} machines" if len(places) > 1 else ""
    if args.join_machines and len(places) > 1:
        where = " (machines joined)"
    print(f"{len(reports)} runs, {len(series)} series{where} -> {args.output}")
    rows = [
        [
            s.series,
            "-" if s.size is None else str(s.size),
            s.before,
            s.after,
            f"{s.verdict.ratio:.2f}x",
            f"{s.verdict.p:.2g}" if s.verdict.p is not None else "-",
            s.kind.upper(),
        ]
        + ([s.note] if any(x.note for x in steps) else [])
        for s in steps
    ]
    if rows:
        header = ["series", "size", "before", "after", "median ratio", "p", "step"]
        if any(x.note for x in steps):
            header.append("changed")
        for line in tables.render_table(header, rows[:MAX_TABLE_ROWS]):
            print(line)
        if len(rows) > MAX_TABLE_ROWS:
            print(f"... and {len(rows) - MAX_TABLE_ROWS} more steps")
        for step in [s for s in steps if s.unreliable][:MAX_TABLE_ROWS]:
            print(
                f"unreliable: busy: {step.kind.upper()} {step.series} "
                f"{step.before} -> {step.after}: {step.unreliable}"
            )
    else:
        print("no step beyond the noise between consecutive runs")
    print(f"SLOWER / FASTER: {stats.rule_text()}, between consecutive runs")
    searched = search_view.history_lines([(str(r.when), r.key) for r in reports])
    for line in searched[-MAX_TABLE_ROWS:]:
        print(line)
    if unjudged:
        print(
            f"{unjudged} pair(s) of consecutive runs not judged: too few rounds "
            f"(fewer than {stats.MIN_ROUNDS} stored per run)"
        )
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    try:
        thresholds = gates.parse_gates(args.fail, "--fail")
        mode = busy.parse_busy(args.busy, "--busy")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    saved, now = load_report(Path(args.saved)), load_report(Path(args.now))
    result = busy.judge_comparisons(
        compare_runs(saved.data, now.benchmarks, thresholds, now.machine_info),
        mode,
    )
    table = tables.comparison_table(result.comparisons, thresholds)
    for line in table[: MAX_TABLE_ROWS + 2]:
        print(line)
    if len(result.comparisons) > MAX_TABLE_ROWS:
        print(f"... and {len(result.comparisons) - MAX_TABLE_ROWS} more")
    for line in tables.machine_lines(result.machines):
        print(line)
    unjudged = [(c.fullname, w) for c in result.comparisons for w in c.not_comparable]
    for name, why in unjudged[:MAX_TABLE_ROWS]:
        print(f"not comparable: {name}: {why}")
    for line in busy.comparison_lines(result.to_json(), "--busy")[:MAX_TABLE_ROWS]:
        print(line)
    if result.missing:
        print(
            f"{len(result.missing)} benchmark(s) of {saved.path} missing in {now.path}"
        )
    for line in search_view.compare_lines(saved.key, now.key)[:MAX_TABLE_ROWS]:
        print(line)
    if not thresholds:
        return 0
    refused = result.refusal()
    if refused and not args.across_machines:
        why = f"--fail: refusing to gate runs measured apart ({refused})"
        raise InputError(gates.refusal(why, "--across-machines"))
    failures = result.gate_failures(args.allow_missing)
    for line in failures[:MAX_TABLE_ROWS]:
        print(f"FAIL: {line}")
    rules = ", ".join(str(t) for t in thresholds)
    print(f"gate {rules}: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


def _recorded(report: Report) -> dict[tuple[str, str], dict[str, Any]]:
    entries = report.key.get("results")
    out = {}
    for e in entries if isinstance(entries, list) else []:
        if isinstance(e, dict) and isinstance(e.get("entries"), list):
            out[(str(e.get("test")), str(e.get("backend")))] = e
    return out


def cmd_agree(args: argparse.Namespace) -> int:
    reference, other = load_report(Path(args.reference)), load_report(Path(args.other))
    pairs = []
    for text in args.pair or []:
        left, sep, right = text.partition(":")
        if not sep or not left or not right:
            raise InputError(f"--pair {text!r}: expected LABEL:LABEL, e.g. cpu:gpu")
        pairs.append((left, right))
    ref, now = _recorded(reference), _recorded(other)
    if not pairs:
        pairs = sorted({(b, b) for _, b in ref} & {(b, b) for _, b in now})
    entries = []
    for (test, label), r in ref.items():
        for left, right in pairs:
            a = now.get((test, right))
            if label != left or a is None:
                continue
            tolerance = agreement.Tolerance.from_json(a.get("tolerance"))
            verdicts = agreement.compare_entries(
                r["entries"], a["entries"], tolerance, agreement.load_file
            )
            entries.append(
                {
                    "test": test,
                    "backend": f"{right} ({other.path.name})",
                    "reference": f"{left} ({reference.path.name})",
                    "agree": all(v.ok for v in verdicts),
                    "failed": not all(v.ok for v in verdicts),
                    "names": [v.to_json() for v in verdicts],
                }
            )
    if not entries:
        raise InputError(
            f"no recorded results of the same test and backend in {reference.path} "
            f"and {other.path} (recorded with jax_results or by benchmarks; pass "
            "--pair LABEL:LABEL for differently named backends)"
        )
    rows = agreement_view.agreement_rows(entries)
    if len(rows) > MAX_TABLE_ROWS:
        rows = agreement_view.agreement_rows(entries, only_disagreeing=True)
    print(agreement_view.headline(entries))
    if rows:
        table = tables.render_table(agreement_view.AGREEMENT_HEADER, rows, ruled=False)
        for line in table[: MAX_TABLE_ROWS + 1]:
            print(line)
    return 0 if all(e["agree"] for e in entries) else 1


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
    p.add_argument(
        "--roofline",
        action="store_true",
        help="draw roofline.png (achieved FLOP/s against intensity) of one report",
    )
    p.set_defaults(func=cmd_plot)
    for name, default, what in (
        ("summary", "summary.md", "GitHub-flavoured markdown summary"),
        ("html", "report.html", "self-contained HTML report (figure embedded)"),
    ):
        p = sub.add_parser(name, help=f"write the {what} of saved reports")
        p.add_argument("reports", nargs="+", help="a report, or several to merge")
        p.add_argument(
            "-o", "--output", type=Path, default=None, help=f"default: {default}"
        )
        p.set_defaults(func=cmd_readable, default_output=default)
        if name == "summary":
            p.add_argument(
                "--terminal",
                action="store_true",
                help="the terminal summary the run printed (to stdout, or -o), "
                "less its files written and the gate's verdict",
            )
    p = sub.add_parser("history", help="median per series over saved runs")
    p.add_argument(
        "inputs", nargs="+", help="report dirs (their runs/*.json) or JSON files"
    )
    p.add_argument("-o", "--output", type=Path, default=Path("history.png"))
    p.add_argument(
        "--join-machines",
        action="store_true",
        help="one series per benchmark and backend across hosts and devices "
        "(default: each machine is its own series)",
    )
    p.set_defaults(func=cmd_history)
    p = sub.add_parser("compare", help="the --jax-compare-fail gate on two files")
    p.add_argument("saved")
    p.add_argument("now")
    gates.add_gate_options(p.add_argument, "--")
    p.add_argument(
        "--busy", metavar="warn|fail|ignore", default=busy.WARN, help=busy.HELP + "."
    )
    p.set_defaults(func=cmd_compare)
    p = sub.add_parser("agree", help="recorded results of two runs compared")
    p.add_argument("reference", help="the reference run's benchmark.json")
    p.add_argument("other")
    p.add_argument(
        "--pair",
        metavar="A:B",
        action="append",
        help="compare backend A of the reference with backend B of the other "
        "run (repeatable; default: every label both runs have)",
    )
    p.set_defaults(func=cmd_agree)
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
