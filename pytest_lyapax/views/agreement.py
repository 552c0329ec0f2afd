"""Tables of results compared across backends (``report/agreement.py``):
the long report of a failed test, the terminal's and the reports' section,
and the determinism of reruns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_lyapax.report.agreement import NameVerdict
from pytest_lyapax.views.tables import render_table


def _num(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else repr(value)
    return "-" if value is None else str(value)


# The terminal shows every comparison up to this many, else the disagreeing.
SHOWN_ROWS = 20
TABLE_HEADER = (
    "name",
    "leaf",
    "shape",
    "max abs dev",
    "max rel dev",
    "worst index",
    "reference",
    "this backend",
    "tolerance",
)


def table_rows(verdicts: Sequence[NameVerdict]) -> list[tuple[str, ...]]:
    """One row per disagreeing leaf (or name), as :data:`TABLE_HEADER`."""
    rows: list[tuple[str, ...]] = []
    for v in verdicts:
        if v.problem:
            rows.append((v.name, "-", "-", "-", "-", "-", "-", "-", v.problem))
        for leaf in v.leaves:
            if leaf.ok:
                continue
            rows.append(
                (
                    v.name,
                    leaf.path or "(root)",
                    str(leaf.shape) if leaf.shape else "()",
                    _num(leaf.max_abs),
                    _num(leaf.max_rel),
                    "-" if leaf.index is None else str(leaf.index),
                    _num(leaf.reference),
                    _num(leaf.value),
                    leaf.problem + (f"; {leaf.tolerance}" if leaf.tolerance else ""),
                )
            )
    return rows


def failure_text(
    test: str, label: str, reference: str, verdicts: Sequence[NameVerdict]
) -> str:
    """The long report of a test failed by a disagreement."""
    rows = table_rows([v for v in verdicts if not v.ok])
    head = (
        f"{test}: results on backend {label!r} disagree with the reference "
        f"backend {reference!r}"
    )
    return "\n".join([head, *render_table(TABLE_HEADER, rows, ruled=False)])


AGREEMENT_HEADER = (
    "test",
    "backend",
    "vs",
    "name",
    "verdict",
    "max abs",
    "max rel",
    "rule",
)


def headline(entries: Sequence[Mapping[str, Any]]) -> str:
    """ "all agree" or how many of a report's comparisons disagree."""
    bad = [e for e in entries if not e.get("agree")]
    result = "all agree" if not bad else f"{len(bad)} disagree"
    skipped = sum(
        1
        for e in entries
        for n in (e.get("names") if isinstance(e.get("names"), list) else [])
        if isinstance(n, Mapping) and n.get("compared") is False
    )
    if skipped:
        result += f" ({skipped} value(s) not compared across precisions)"
    return f"{len(entries)} comparison(s) with the reference backend: {result}"


def agreement_rows(
    entries: Sequence[Mapping[str, Any]], *, only_disagreeing: bool = False
) -> list[tuple[str, ...]]:
    """One row per test, backend and name of a report's ``agreement`` section
    (a report read from disk: every field may be missing)."""
    rows: list[tuple[str, ...]] = []
    for e in entries:
        names = e.get("names") if isinstance(e.get("names"), list) else []
        for n in names:
            if not isinstance(n, Mapping) or (only_disagreeing and n.get("agree")):
                continue
            verdict = (
                "not compared"
                if n.get("compared") is False
                else "agree"
                if n.get("agree")
                else "FAIL"
                if e.get("failed")
                else "warn"
            )
            problem = n.get("problem")
            rows.append(
                (
                    str(e.get("test")),
                    str(e.get("backend")),
                    str(e.get("reference")),
                    str(n.get("name")),
                    verdict + (f": {problem}" if problem else ""),
                    _g(n.get("max_abs")),
                    _g(n.get("max_rel")),
                    str(n.get("rule") or "-"),
                )
            )
    return rows


def _g(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, (int, float)) else "-"


DETERMINISM_HEADER = ("test", "backend", "rerun", "name", "verdict", "max abs")


def determinism_headline(entries: Sequence[Mapping[str, Any]]) -> str:
    """How many of a report's run/rerun comparisons are bit-identical."""
    differ = [e for e in entries if not e.get("identical")]
    result = "all bit-identical" if not differ else f"{len(differ)} differ"
    return f"{len(entries)} test(s) run twice on one backend: {result}"


def determinism_rows(
    entries: Sequence[Mapping[str, Any]], *, only_differing: bool = False
) -> list[tuple[str, ...]]:
    """One row per test, backend and name of a report's ``determinism``
    section (a report read from disk: every field may be missing)."""
    rows: list[tuple[str, ...]] = []
    for e in entries:
        names = e.get("names") if isinstance(e.get("names"), list) else []
        for n in names:
            if not isinstance(n, Mapping) or (only_differing and n.get("identical")):
                continue
            if n.get("identical"):
                verdict = "bit-identical"
            elif n.get("problem"):
                verdict = f"differs: {n.get('problem')}"
            else:
                verdict = (
                    f"differs: {n.get('differing')} of {n.get('elements')} elements"
                )
            rows.append(
                (
                    str(e.get("test")),
                    str(e.get("backend")),
                    str(e.get("rerun")),
                    str(n.get("name")),
                    verdict,
                    _g(n.get("max_abs")),
                )
            )
    return rows
