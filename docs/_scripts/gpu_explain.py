"""The GPU page's explanation of the crossover, written from the stored report.

Every number in the fragment is read from (or fitted to)
``docs/_static/gpu_acceleration_reference.json`` with pytest-lyapax's own
functions -- the cost model, the crossover, the warm-up reader -- so the page
cannot disagree with the report it shows.  Nothing is typed in: a backend
that was not measured there is said to be not measured.

Run on its own with ``python docs/_scripts/gpu_explain.py`` to print it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPORT = (
    Path(__file__).resolve().parents[1] / "_static" / "gpu_acceleration_reference.json"
)


def _rst(text: str) -> str:
    for char in "\\*`|_":
        text = text.replace(char, "\\" + char)
    return text


def explanation(report_path: Path = REPORT, only: tuple[str, ...] = ()) -> str:
    """The fragment, as reStructuredText paragraphs and a bullet list;
    ``only``: the benchmarks to explain (default: every one)."""
    from pytest_lyapax.report import details
    from pytest_lyapax.report.crossover import crossovers
    from pytest_lyapax.views.document import view_of
    from pytest_lyapax.views.tables import compile_line, format_seconds

    data = json.loads(report_path.read_text())
    view = view_of(data)
    out = []
    backends = {str(b["label"]): b for b in view.backends}
    for bench, model in zip(view.benches, view.models, strict=True):
        if only and bench.name not in only:
            continue
        out.append(f"**{_rst(bench.name)}** ({_rst(bench.size_label)}):")
        out.append("")
        for label, points in bench.series.items():
            first, last = points[0], points[-1]
            growth = last.median / first.median
            span = last.size / first.size
            out.append(
                f"- {_rst(label)}: {format_seconds(first.median)} per call at "
                f"{first.size}, {format_seconds(last.median)} at {last.size}: "
                f"{growth:.3g} times the time for {span:.3g} times the size."
            )
        compiled = compile_line(bench, list(bench.series))
        if compiled is not None:
            out.append(f"- {_rst(compiled)}.")
        out += [f"- cost model, {_rst(line)}." for line in model.lines()]
        for c in crossovers(bench):
            out.append(f"- measured: {_rst(c.describe(bench.size_label))}.")
        for label, b in backends.items():
            # A label of the run that measured only other series (a
            # device-count twin) is no gap; one that could not run is.
            if label not in bench.series and b.get("status") != "ok":
                out.append(
                    f"- {_rst(label)}: not measured on that machine "
                    f"({_rst(str(b.get('status')))}: "
                    f"{_rst(str(b.get('reason') or 'no reason recorded'))}); no "
                    "fixed cost, exponent or crossover is given for it."
                )
        out.append("")
    warm = [
        (r, w)
        for r in view.records
        if (w := details.warmup_of(r)) is not None
        and w.kind == "first_call"
        and (not only or str(r.get("name", "")).split("[")[0] in only)
    ]
    # Reports of schema 3 on time the compile of a jitted call apart (the
    # compile line above); before, the first call was all there was.
    if warm and int(data["pytest_lyapax"].get("schema", 1)) < 3:
        record, w = warm[0]
        out.append(
            f"The untimed first call of the first benchmark "
            f"({_rst(str(record['fullname']))}) took "
            f"{format_seconds(w.first_call_s)}: compilation, and programs that "
            "later sizes share.  This report predates separate compile timing "
            "(report schema 3), so that is all it says about compilation."
        )
        out.append("")
    if not any(len(b.series) > 1 for b in view.benches):
        out.append(
            "Only one backend has timings in this report, so the report itself "
            "shows no crossover: the fixed price per call of a GPU and the size "
            "where it starts to pay off are for a report measured with a GPU to "
            "say."
        )
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    sys.stdout.write(explanation(Path(sys.argv[1]) if len(sys.argv) > 1 else REPORT))
