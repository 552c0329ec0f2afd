"""What a benchmark's rounds say about themselves: unstable timings
(``extra_info["stability"]``) and compiles during the rounds
(``extra_info["recompiles"]``), as sections of the report.

The terminal lists only the benchmarks concerned (at most :data:`SHOWN`
lines each, with a count per rule so that many unstable benchmarks still
read at a glance); ``summary.md`` and ``report.html`` give every one in a
table, and the rules.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from pytest_lyapax.report.identity import record_label, record_size, series_id
from pytest_lyapax.report.recompiles import recompiles_of
from pytest_lyapax.report.stability import RULE_TEXT, RULES, stability_of
from pytest_lyapax.views.document import Block, Lines, ReportView, Section, Table

SHOWN = 20  # terminal lines per section
ROWS = 200  # table rows in summary.md and report.html
_ADVICE = (
    "more rounds (--benchmark-min-rounds, --benchmark-max-time), a quieter "
    "machine, or longer calls (pedantic(iterations=N), a larger size) steady them"
)


def _name(record: Mapping[str, Any]) -> str:
    return str(record.get("fullname") or record.get("name") or "?")


def _row(view: ReportView, record: Mapping[str, Any], *cells: str) -> tuple[str, ...]:
    size = record_size(record)
    return (
        series_id(record, view.machine_info).name,
        str(record_label(record) or "-"),
        "-" if size is None else str(size),
        *cells,
    )


def _listed(lines: list[str], total: int) -> list[str]:
    if total > SHOWN:
        lines = lines[:SHOWN] + [
            f"  ... and {total - SHOWN} more (summary.md lists every one)"
        ]
    return lines


def stability_section(view: ReportView, text: bool) -> Section | None:
    """Unstable benchmarks with their reasons (terminal: only when some are)."""
    judged = [(r, s) for r in view.records if (s := stability_of(r)) is not None]
    unstable = [(r, s) for r, s in judged if s.unstable]
    if not judged or (text and not unstable):
        return None
    rules = Counter(rule for _, s in unstable for rule in s.rules)
    head = f"{len(unstable)} of {len(judged)} benchmark(s) unstable"
    if rules:
        head += (
            " ("
            + "; ".join(
                f"{RULE_TEXT[rule]}: {rules[rule]}" for rule in RULES if rules[rule]
            )
            + ")"
        )
    if text:
        lines = [f"  {_name(r)}: {'; '.join(s.reasons)}" for r, s in unstable]
        body = [head + ":", *_listed(lines, len(unstable)), _ADVICE]
        return Section("pytest-lyapax: unstable timings", [Lines(tuple(body))])
    rule_line = "rules: " + "; ".join(RULE_TEXT[rule] for rule in RULES)
    blocks: list[Block] = [Lines((head, rule_line))]
    if unstable:
        rows = tuple(_row(view, r, "; ".join(s.reasons)) for r, s in unstable)
        header = ("benchmark", "backend", "size", "why unstable")
        blocks.append(Table(header, rows[:ROWS], left=4))
    return Section("Stability of the timed rounds", blocks)


def recompile_section(view: ReportView, text: bool) -> Section | None:
    """Benchmarks that compiled during their timed rounds (None: none did)."""
    found = [
        (r, c)
        for r in view.records
        if (c := recompiles_of(r)) is not None and c.count > 0
    ]
    if not found:
        return None
    intro = (
        f"{len(found)} benchmark(s) compiled during their timed rounds, so their "
        "timings include XLA's compiler (reasons from jax_explain_cache_misses)"
    )
    if text:
        lines = [
            f"  {_name(r)}: {c.count} compile(s): {'; '.join(c.reasons) or '-'}"
            for r, c in found
        ]
        body = [intro + ":", *_listed(lines, len(found))]
        return Section(
            "pytest-lyapax: compiles during the rounds", [Lines(tuple(body))]
        )
    rows = tuple(
        _row(view, r, str(c.count), "; ".join(c.reasons) or "-") for r, c in found
    )
    header = ("benchmark", "backend", "size", "compiles", "why (JAX)")
    return Section(
        "Compiles during the timed rounds",
        [Lines((intro,)), Table(header, rows[:ROWS], left=3)],
    )
