"""The searches in the report: their lines and table, and their marks on
the figure (views/explain.py puts the lines and table in a section); the
lines of ``pytest-lyapax compare`` and ``history``.

Sizes chosen by a crossover search are drawn as squares around the curve's
markers (the other marker style), a bracket found as a shaded band and one
the search did not find (a busy machine, the budget, sizes within noise) as
a hatched, dashed outline named by its status; each backend's memory
ceiling as a vertical dashed line in its colour at the largest size that
fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_lyapax.report import search as plan
from pytest_lyapax.report.series import SizedBenchmark

if TYPE_CHECKING:
    from matplotlib.axes import Axes

KEY_TEXT = (
    "square: size chosen by --jax-find-crossover (grey band: its bracket; "
    "hatched: a bracket not found, its status written in it); "
    "vertical dashed line: memory ceiling"
)
# The bracket's band on a panel: found, or not (its gid, for a reader of
# the figure's artists).
BRACKET_GID, OPEN_BRACKET_GID = "search-bracket", "search-bracket-not-found"


@dataclass
class Marks:
    """One benchmark's search marks on the figure."""

    chosen: list[int] = field(default_factory=list)
    bracket: tuple[int, int] | None = None
    ceilings: dict[str, int] = field(default_factory=dict)  # label: largest fitting
    # The search's status in words (status_text): only "bracketed" is a
    # bracket found; any other is drawn apart and named.
    status: str = plan.BRACKETED

    @property
    def found(self) -> bool:
        return self.status == plan.BRACKETED


def entries(key: Mapping[str, Any]) -> tuple[list[dict], list[dict]]:
    """The valid crossover-search and ceiling entries of a report section."""
    return plan.read_searches(key), plan.read_ceilings(key)


def marks(key: Mapping[str, Any]) -> dict[str, Marks]:
    """Per benchmark key, what the figure marks."""
    out: dict[str, Marks] = {}
    searches, ceilings = entries(key)
    for entry in searches:
        m = out.setdefault(entry["test"], Marks())
        m.chosen = list(entry["added"])
        bracket = entry["bracket"]
        m.bracket = None if bracket is None else (bracket[0], bracket[1])
        m.status = status_text(entry)
    for entry in ceilings:
        if entry["largest_fitting"] is not None:
            m = out.setdefault(entry["test"], Marks())
            m.ceilings[entry["backend"]] = entry["largest_fitting"]
    return out


def starred(
    rows: list[list[str]], mark: Marks | None
) -> tuple[list[list[str]], list[str]]:
    """The table's rows with a star on each size a search chose, and the
    line that says so."""
    if mark is None or not mark.chosen:
        return rows, []
    chosen = {str(s) for s in mark.chosen}
    out = [[f"{r[0]}*" if r[0] in chosen else r[0], *r[1:]] for r in rows]
    line = "* size chosen by --jax-find-crossover"
    if mark.bracket is not None and not mark.found:
        lo, hi = mark.bracket
        line += f"; its bracket [{lo}, {hi}] is not a crossing found: {mark.status}"
    return out, [line]


def draw(
    ax: Axes, bench: SizedBenchmark, mark: Marks | None, colors: Mapping[str, str]
) -> None:
    """Squares at the sizes a search chose, the bracket, the ceilings."""
    if mark is None:
        return
    chosen = set(mark.chosen)
    for label, points in bench.series.items():
        picked = [p for p in points if p.size in chosen]
        if picked:
            ax.plot(
                [p.size for p in picked],
                [p.median for p in picked],
                linestyle="none",
                marker="s",
                markersize=8,
                markerfacecolor="none",
                markeredgecolor=colors.get(label, "0.3"),
            )
    if mark.bracket is not None:
        _draw_bracket(ax, mark)
    for label, size in mark.ceilings.items():
        ax.axvline(size, color=colors.get(label, "0.3"), linestyle="--", linewidth=1)


def _draw_bracket(ax: Axes, mark: Marks) -> None:
    """A bracket found as a grey band; any other (unreliable, stopped by the
    budget) as a hatched, dashed outline with its status written at the top,
    so that it never reads as a crossing found."""
    assert mark.bracket is not None
    lo, hi = mark.bracket
    if mark.found:
        ax.axvspan(lo, hi, color="0.5", alpha=0.15, linewidth=0, gid=BRACKET_GID)
        return
    ax.axvspan(
        lo,
        hi,
        facecolor="none",
        edgecolor="0.35",
        hatch="//",
        linestyle="--",
        linewidth=0.8,
        gid=OPEN_BRACKET_GID,
    )
    ax.text(
        math.sqrt(lo * hi),
        0.98,
        mark.status,
        transform=ax.get_xaxis_transform(),
        ha="center",
        va="top",
        fontsize=7,
        color="0.25",
        gid=OPEN_BRACKET_GID,
        bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
    )


TITLE = "Sizes chosen by the plugin: crossover and memory ceiling"


def search_lines(key: Mapping[str, Any]) -> tuple[str, ...]:
    """The crossover searches in words, one line each."""
    return tuple(search_line(e) for e in plan.read_searches(key))


def ceiling_rows(
    key: Mapping[str, Any],
) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Header and rows of the memory ceilings' table (no rows: none searched)."""
    ceilings: Sequence[Mapping[str, Any]] = plan.read_ceilings(key)
    header = ("benchmark", "backend", "largest fitting", "first not fitting", "why")
    rows = tuple(
        (
            str(e["test"]),
            str(e["backend"]),
            "-" if e["largest_fitting"] is None else str(e["largest_fitting"]),
            "-" if e["first_not_fitting"] is None else str(e["first_not_fitting"]),
            str(e.get("reason") or ""),
        )
        for e in ceilings
    )
    return header, rows


def ceiling_lines(key: Mapping[str, Any]) -> tuple[str, ...]:
    """Where each ceiling search started: the saved ceiling it confirmed
    first, or why a saved run was not a start (no line: neither)."""
    lines = []
    for e in plan.read_ceilings(key):
        where = f"memory ceiling {e['test']} on {e['backend']}: "
        if e["started_from"]:
            sizes = ", ".join(map(str, e["started_from"]))
            lines.append(f"{where}started from the saved ceiling [{sizes}]")
        if e["start_note"]:
            lines.append(where + e["start_note"])
    return tuple(lines)


def search_line(entry: Mapping[str, Any]) -> str:
    """One line of text for a crossover search entry."""
    a, b = entry["backends"]
    summary = entry.get("summary") or ""
    added = entry.get("added") or []
    chosen = f"; sizes added: {', '.join(map(str, added))}" if added else ""
    again = entry.get("remeasured") or []
    if again:
        chosen += f"; measured again (busy machine): {', '.join(map(str, again))}"
    start = entry.get("started_from")
    if start:
        chosen += f"; started from the saved bracket [{start[0]}, {start[1]}]"
    if entry.get("start_note"):
        chosen += f"; {entry['start_note']}"
    return f"{entry['test']} ({b} vs {a}): {status_text(entry)}: {summary}{chosen}"


def status_text(entry: Mapping[str, Any]) -> str:
    """A search entry's status in words: "stopped by the budget",
    "unreliable (busy)", or the status itself."""
    status = entry["status"]
    if status == plan.BUDGET:
        return "stopped by the budget"
    if status == plan.UNRELIABLE and entry.get("busy"):
        return "unreliable (busy)"
    return str(status)


def _bracket_text(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return "not searched"
    bracket = entry["bracket"]
    where = "" if bracket is None else f" [{bracket[0]}, {bracket[1]}]"
    return f"{status_text(entry)}{where}"


def _ceiling_text(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return "not searched"
    largest = entry["largest_fitting"]
    return "nothing fits" if largest is None else f"largest fitting {largest}"


def compare_lines(saved: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """The searches of a saved run against this run's, one line per test."""
    lines = []
    before = {(e["test"], tuple(e["backends"])): e for e in plan.read_searches(saved)}
    after = {(e["test"], tuple(e["backends"])): e for e in plan.read_searches(now)}
    for key in sorted(set(before) | set(after)):
        test, (a, b) = key
        lines.append(
            f"crossover {test} ({b} vs {a}): saved {_bracket_text(before.get(key))}"
            f" -> now {_bracket_text(after.get(key))}"
        )
    old = {(e["test"], e["backend"]): e for e in plan.read_ceilings(saved)}
    new = {(e["test"], e["backend"]): e for e in plan.read_ceilings(now)}
    for key in sorted(set(old) | set(new)):
        lines.append(
            f"memory ceiling {key[0]} on {key[1]}: saved {_ceiling_text(old.get(key))}"
            f" -> now {_ceiling_text(new.get(key))}"
        )
    return lines


def history_lines(runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Each run's searches (``runs``: when, report section), oldest first."""
    lines = []
    for when, key in runs:
        for e in plan.read_searches(key):
            a, b = e["backends"]
            lines.append(
                f"{when}: crossover {e['test']} ({b} vs {a}): {_bracket_text(e)}"
            )
        for e in plan.read_ceilings(key):
            lines.append(
                f"{when}: memory ceiling {e['test']} on {e['backend']}: "
                f"{_ceiling_text(e)}"
            )
    return lines
