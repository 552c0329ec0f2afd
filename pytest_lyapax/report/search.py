"""Sizes chosen by the plugin: the crossover search and the memory ceilings.

Pure functions, no pytest or JAX.  :func:`next_crossover_size` decides the
next size of a crossover search from the verdicts measured so far (a
verdict that read rounds of a busy machine decides nothing: its size is
measured again, once, and a search that still has only busy verdicts ends
"unreliable (busy)"); :func:`saved_bracket` finds where a saved run's
search ended, so that the next search starts there;
:func:`next_ceiling_size` the next size of a ceiling search from the sizes
that fit and those that did not, and :func:`saved_ceiling` where a saved
run's ceiling search ended.  Both ``saved_*`` read a saved report as
untrusted input, and take a start only from a search of the same test and
backends measured in the same conditions (:func:`_saved_parts`,
:func:`_conditions`).  The report's entries
(``pytest_lyapax.crossover_search`` and ``pytest_lyapax.ceilings``) are
written by :func:`search_entry` / :func:`ceiling_entry` and read back,
as untrusted input, by :func:`read_searches` / :func:`read_ceilings`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_lyapax.report.identity import is_size, series_id
from pytest_lyapax.report.stats import NOISE

# A crossing is bracketed when its two sizes are within +-25 % of their
# geometric mean: hi / lo <= 1.25 ** 2.
BRACKET_RATIO = 1.25**2
# How far one step goes beyond the measured range when one backend wins
# everywhere (a factor of 4 per step, clamped to the search bounds).
STEP_FACTOR = 4
# A ceiling is found when the largest size that fits and the first that does
# not are within 10 % of each other (or adjacent integers).
CEILING_RATIO = 1.1

BRACKETED, ABSENT, BUDGET, UNRELIABLE = "bracketed", "absent", "budget", "unreliable"
STATUSES = (BRACKETED, ABSENT, BUDGET, UNRELIABLE)
SEARCHING = "searching"  # not a final status: another size is wanted
# How a record chosen by a search is marked (extra_info["search"]).
CHOSEN_BY = ("crossover", "ceiling")


@dataclass(frozen=True)
class Decision:
    """What a search does next: measure ``size``, or stop with ``status``."""

    status: str  # SEARCHING or one of STATUSES
    size: int | None = None
    bracket: tuple[int, int] | None = None
    text: str = ""
    busy: str | None = None  # UNRELIABLE for a busy machine: why


def _mid(lo: int, hi: int) -> int | None:
    """The geometric midpoint of two sizes, or None when none lies between."""
    mid = round(math.sqrt(lo * hi))
    return mid if lo < mid < hi else None


def bracket_of(
    sizes: Sequence[int], verdicts: Sequence[str], a: str, b: str
) -> tuple[int, int, str] | None:
    """The first pair of adjacent decided sizes whose verdicts differ, and the
    label faster at the larger one."""
    decided = [(s, v) for s, v in zip(sizes, verdicts, strict=True) if v in (a, b)]
    for (s1, v1), (s2, v2) in zip(decided, decided[1:], strict=False):
        if v1 != v2:
            return s1, s2, v2
    return None


def next_crossover_size(
    sizes: Sequence[int],
    verdicts: Sequence[str],
    logs: Sequence[float],
    a: str,
    b: str,
    bounds: tuple[int, int],
    size_label: str = "size",
    busy: Mapping[int, str] | None = None,
    retried: Collection[int] = (),
) -> Decision:
    """The next size of a crossover search between backends ``a`` and ``b``.

    ``sizes`` ascending, with each size's noise-test verdict (``a``, ``b``,
    ``"noise"``, too few rounds) and ``log(t_a / t_b)`` of the medians.
    Between two decided sizes with different winners the widest gap is
    bisected geometrically until the bracket is within +-25 %; when one
    backend wins at every decided size, the search steps by a factor of 4
    beyond the measured range, first where that backend's lead shrinks,
    down to ``bounds[0]`` and up to ``bounds[1]``.

    ``busy`` maps the sizes whose verdict read rounds of a busy machine to
    why: they are left out, as if not measured, so the search asks for such
    a size again where it needs it; a size in ``retried`` (measured again
    already) that is still busy ends the search UNRELIABLE with
    ``Decision.busy`` set, its bracket the one the busy verdicts give.
    """
    if not busy:
        return _next_quiet(sizes, verdicts, logs, a, b, bounds, size_label)
    kept = [i for i, s in enumerate(sizes) if s not in busy]
    decision = _next_quiet(
        [sizes[i] for i in kept],
        [verdicts[i] for i in kept],
        [logs[i] for i in kept],
        a,
        b,
        bounds,
        size_label,
    )
    wanted = decision.size if decision.status == SEARCHING else None
    if decision.status == UNRELIABLE and decision.bracket is None:
        # No quiet verdict at all: measure the smallest busy size again (and
        # end if one measured again is still busy).
        wanted = min((s for s in busy if s in retried), default=min(busy))
    if wanted is None or wanted not in busy:
        return decision
    if wanted in retried:
        return _busy_end(sizes, verdicts, a, b, wanted, busy[wanted], size_label)
    return Decision(SEARCHING, wanted, decision.bracket, decision.text)


def _busy_end(
    sizes: Sequence[int],
    verdicts: Sequence[str],
    a: str,
    b: str,
    size: int,
    reason: str,
    size_label: str,
) -> Decision:
    """The end of a search that needs a size measured on a busy machine
    twice: UNRELIABLE, with the bracket the busy verdicts give, if any."""
    found = bracket_of(sizes, verdicts, a, b)
    text = f"the machine was busy at {size_label} {size} when measured again ({reason})"
    if found is None:
        return Decision(UNRELIABLE, text=text, busy=reason)
    s1, s2, after = found
    text += f"; the busy verdicts say {after} faster from {size_label} in [{s1}, {s2}]"
    return Decision(UNRELIABLE, bracket=(s1, s2), text=text, busy=reason)


def _next_quiet(
    sizes: Sequence[int],
    verdicts: Sequence[str],
    logs: Sequence[float],
    a: str,
    b: str,
    bounds: tuple[int, int],
    size_label: str,
) -> Decision:
    """:func:`next_crossover_size` from verdicts that all count."""
    lo, hi = bounds
    found = bracket_of(sizes, verdicts, a, b)
    if found is not None:
        s1, s2, after = found
        text = f"{after} faster from {size_label} in [{s1}, {s2}]"
        if s2 <= s1 * BRACKET_RATIO or s2 - s1 <= 1:
            return Decision(BRACKETED, bracket=(s1, s2), text=text)
        inside = [s for s in sizes if s1 <= s <= s2]
        gaps = sorted(zip(inside, inside[1:], strict=False), key=lambda g: g[1] / g[0])
        for g1, g2 in reversed(gaps):
            mid = _mid(g1, g2)
            if mid is not None:
                return Decision(SEARCHING, mid, (s1, s2), text)
        why = "the sizes inside it are all within noise"
        return Decision(UNRELIABLE, bracket=(s1, s2), text=f"{text} ({why})")
    decided = [
        (s, v, g) for s, v, g in zip(sizes, verdicts, logs, strict=True) if v in (a, b)
    ]
    if not decided:
        # Undecided and not within noise: too few rounds (or turns) to judge.
        few = [s for s, v in zip(sizes, verdicts, strict=True) if v != NOISE]
        if sizes and not few:
            # Two labels of one machine (an A/A run) end here: say what was
            # found, not only that nothing was.
            at = ", ".join(map(str, sizes))
            text = (
                f"no crossing in the measured range: within noise at every "
                f"{size_label} measured ({at}): no verdict to search from"
            )
        elif few:
            at = ", ".join(map(str, few))
            text = (
                f"too few rounds to judge at {size_label} {at}: no verdict to "
                "search from (more rounds: --benchmark-max-time, "
                "--benchmark-min-rounds)"
            )
        else:
            text = "the noise test decided no size: no verdict to search from"
        return Decision(UNRELIABLE, text=text)
    winner = decided[0][1]
    # Which way the winner's lead shrinks, from the medians of every size (a
    # size the noise test could not decide still has its medians).
    lead = [g if winner == b else -g for g in logs]
    shrinks_upwards = lead[-1] < lead[0]
    smallest, largest = min(sizes), max(sizes)
    down = max(lo, smallest // STEP_FACTOR) if smallest > lo else None
    up = min(hi, largest * STEP_FACTOR) if largest < hi else None
    order = (up, down) if shrinks_upwards else (down, up)
    text = (
        f"{winner} faster at every decided {size_label} from "
        f"{decided[0][0]} to {decided[-1][0]}"
    )
    for size in order:
        if size is not None and size not in sizes:
            return Decision(SEARCHING, size, None, text)
    return Decision(ABSENT, text=f"{text}: no crossing down to {lo} or up to {hi}")


def next_ceiling_size(
    fits: Sequence[int], too_big: Sequence[int], bound: int | None = None
) -> int | None:
    """The next size of a ceiling search: doubling from the largest size that
    fits until one does not, then geometric bisection until the two are
    within :data:`CEILING_RATIO`; None when found (or at ``bound``)."""
    largest = max(fits, default=None)
    smallest_bad = min(
        (s for s in too_big if largest is None or s > largest), default=None
    )
    if largest is None:
        return None
    if smallest_bad is None:
        nxt = largest * 2
        return (
            None
            if bound is not None and largest >= bound
            else (min(nxt, bound) if bound is not None else nxt)
        )
    if smallest_bad <= largest * CEILING_RATIO:
        return None
    return _mid(largest, smallest_bad)


def search_entry(
    test: str,
    backends: tuple[str, str],
    decision: Decision,
    bounds: tuple[int, int],
    added: Sequence[int],
    remeasured: Sequence[int] = (),
    started_from: tuple[int, int] | None = None,
    start_note: str = "",
) -> dict[str, Any]:
    """One ``crossover_search`` entry of the report: besides the bracket and
    status, the sizes added, those measured again because the machine was
    busy, the saved bracket it started from (or why a saved run was not
    read), and why it ended busy."""
    return {
        "test": test,
        "backends": list(backends),
        "bracket": None if decision.bracket is None else list(decision.bracket),
        "status": decision.status,
        "bounds": list(bounds),
        "added": sorted(added),
        "remeasured": sorted(remeasured),
        "started_from": None if started_from is None else list(started_from),
        "start_note": start_note,
        "busy": decision.busy,
        "summary": decision.text,
    }


def saved_bracket(
    data: object,
    test: str,
    backends: tuple[str, str],
    precisions: Mapping[str, str],
    bounds: tuple[int, int],
) -> tuple[int, int] | None:
    """Where a saved run's crossover search of ``test`` between ``backends``
    ended, as a bracket to start from: a saved report (untrusted: anything
    malformed gives None) whose entry for the same test and backends has a
    bracket inside ``bounds``, measured in the same ``precisions`` (per
    label, as :func:`~pytest_lyapax.report.precision.record_precision`
    writes them) as this run's."""
    parts = _saved_parts(data)
    if parts is None:
        return None
    section, records = parts
    found = [
        e["bracket"]
        for e in read_searches(section)
        if e["test"] == test and tuple(e["backends"]) == tuple(backends)
    ]
    bracket = found[-1] if found else None
    if bracket is None or not bounds[0] <= bracket[0] < bracket[1] <= bounds[1]:
        return None
    from pytest_lyapax.report.precision import record_precision

    if _conditions(records, test, backends, record_precision) != {
        label: {precisions.get(label, "")} for label in backends
    }:
        return None
    return bracket[0], bracket[1]


def _saved_parts(data: object) -> tuple[Mapping[str, Any], list[Any]] | None:
    """A saved report's ``pytest_lyapax`` section and records (None: it is
    not shaped as a report)."""
    if not isinstance(data, Mapping):
        return None
    section, records = data.get("pytest_lyapax"), data.get("benchmarks")
    if not isinstance(section, Mapping) or not isinstance(records, list):
        return None
    return section, records


def _conditions(
    records: Iterable[object],
    test: str,
    labels: Sequence[str],
    of: Callable[[Mapping[str, Any]], str],
) -> dict[str, set[str]]:
    """Per label of ``labels``, the conditions (``of`` a record: its
    precision, ...) it measured ``test`` in."""
    out: dict[str, set[str]] = {label: set() for label in labels}
    for record in records:
        if not isinstance(record, Mapping):
            continue
        sid = series_id(record)
        if sid.benchmark == test and sid.label in out:
            out[sid.label].add(of(record))
    return out


def ceiling_conditions(record: Mapping[str, Any]) -> str:
    """What a record's memory ceiling depends on, in words: the platform,
    the precision, the device kind (where recorded) and the variables its
    label set (a memory limit, XLA's memory fraction ...)."""
    from pytest_lyapax.report.identity import backend_env, extra_info
    from pytest_lyapax.report.precision import record_precision

    info = extra_info(record)
    words = [
        f"platform {_text(info.get('jax_backend')) or '?'}",
        record_precision(record) or "precision not recorded",
    ]
    if _text(info.get("device")):
        words.append(f"device {_text(info.get('device'))}")
    env = backend_env(record)
    if env:
        words.append(env)
    return ", ".join(words)


def saved_ceiling(
    data: object, test: str, label: str, conditions: str
) -> tuple[tuple[int, ...] | None, str]:
    """Where a saved run's ceiling search of ``test`` on ``label`` ended, as
    the sizes to confirm first (its largest size that fit, and the first
    that did not, where found), with a note on why a saved ceiling is not a
    start ("" where there is none to start from).

    The saved report is untrusted (anything malformed gives no start); its
    ceiling is a start only where every record of ``test`` on ``label`` was
    measured in ``conditions`` (:func:`ceiling_conditions` of this run's)."""
    parts = _saved_parts(data)
    if parts is None:
        return None, ""
    section, records = parts
    found = [
        e
        for e in read_ceilings(section)
        if e["test"] == test
        and e["backend"] == label
        and e["largest_fitting"] is not None
    ]
    if not found:
        return None, ""
    entry = found[-1]
    start = tuple(
        s
        for s in (entry["largest_fitting"], entry["first_not_fitting"])
        if s is not None
    )
    then = _conditions(records, test, [label], ceiling_conditions)[label]
    if then != {conditions}:
        said = "; ".join(sorted(then)) or "no record of its conditions"
        return None, (
            f"not started from the saved ceiling {_listed(start)}: measured with "
            f"{said}, now with {conditions}"
        )
    return start, ""


def _listed(sizes: Sequence[int]) -> str:
    return f"[{', '.join(map(str, sizes))}]"


def ceiling_entry(
    test: str,
    backend: str,
    fits: Sequence[int],
    too_big: Mapping[int, str],
    added: Sequence[int],
    stopped: str = "",
    started_from: Sequence[int] = (),
    start_note: str = "",
) -> dict[str, Any]:
    """One ``ceilings`` entry: the largest size that fit, the first that did
    not, and why it did not (or why the search stopped); the saved sizes it
    started from (or why a saved run was not a start)."""
    largest = max(fits, default=None)
    above = sorted(s for s in too_big if largest is None or s > largest)
    first = above[0] if above else None
    reason = too_big[first] if first is not None else stopped
    return {
        "test": test,
        "backend": backend,
        "largest_fitting": largest,
        "first_not_fitting": first,
        "reason": reason,
        "added": sorted(added),
        "started_from": list(started_from),
        "start_note": start_note,
    }


def _bracket(value: object) -> list[int] | None:
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(is_size(v) and v > 0 for v in value)
        and value[0] <= value[1]
    ):
        return [int(v) for v in value]
    return None


def _size_or_none(value: object) -> int | None:
    return int(value) if is_size(value) and value > 0 else None


def _text(value: object) -> str:
    return value[:500] if isinstance(value, str) else ""


def read_searches(section: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The valid ``crossover_search`` entries of a stored report's
    ``pytest_lyapax`` section; anything malformed is left out."""
    raw = section.get("crossover_search")
    out: list[dict[str, Any]] = []
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, dict):
            continue
        test, backends = entry.get("test"), entry.get("backends")
        status = entry.get("status")
        if not isinstance(test, str) or status not in STATUSES:
            continue
        if not (
            isinstance(backends, list)
            and len(backends) == 2
            and all(isinstance(x, str) for x in backends)
        ):
            continue
        bracket = _bracket(entry.get("bracket"))
        if entry.get("bracket") is not None and bracket is None:
            continue
        busy = entry.get("busy")
        out.append(
            {
                "test": test,
                "backends": list(backends),
                "bracket": bracket,
                "status": status,
                "bounds": _bracket(entry.get("bounds")),
                "added": _sizes(entry.get("added")),
                "remeasured": _sizes(entry.get("remeasured")),
                "started_from": _bracket(entry.get("started_from")),
                "start_note": _text(entry.get("start_note")),
                "busy": _text(busy) or None,
                "summary": _text(entry.get("summary")),
            }
        )
    return out


def _sizes(value: object) -> list[int]:
    """The positive sizes of a stored list (an untrusted one: others dropped)."""
    return (
        [int(s) for s in value if is_size(s) and s > 0]
        if isinstance(value, list)
        else []
    )


def read_ceilings(section: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The valid ``ceilings`` entries of a stored report's section."""
    raw = section.get("ceilings")
    out: list[dict[str, Any]] = []
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, dict):
            continue
        test, backend = entry.get("test"), entry.get("backend")
        if not isinstance(test, str) or not isinstance(backend, str):
            continue
        largest = _size_or_none(entry.get("largest_fitting"))
        first = _size_or_none(entry.get("first_not_fitting"))
        if entry.get("largest_fitting") is not None and largest is None:
            continue
        if entry.get("first_not_fitting") is not None and first is None:
            continue
        if largest is not None and first is not None and first <= largest:
            continue
        out.append(
            {
                "test": test,
                "backend": backend,
                "largest_fitting": largest,
                "first_not_fitting": first,
                "reason": _text(entry.get("reason")),
                "added": _sizes(entry.get("added")),
                "started_from": _sizes(entry.get("started_from")),
                "start_note": _text(entry.get("start_note")),
            }
        )
    return out


def malformed(section: Mapping[str, Any]) -> str | None:
    """What is wrong with a stored report's search sections (None: nothing):
    an entry that :func:`read_searches` or :func:`read_ceilings` would drop."""
    for name, read in (
        ("crossover_search", read_searches),
        ("ceilings", read_ceilings),
    ):
        raw = section.get(name)
        if raw is None:
            continue
        if not isinstance(raw, list):
            return f"'{name}' is not a list"
        if len(read(section)) != len(raw):
            return (
                f"'{name}' has a malformed entry (each needs its test, "
                "and sizes that are positive integers)"
            )
    return None
