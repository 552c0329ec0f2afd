"""An A/B run's verdicts (``--jax-ab``): per benchmark, size and backend, B's
time against A's.

A is a label's records, B its twin ``LABEL_b`` (the other version of the
code).  The ratio is B/A of the per-call times: the noise test of
``stats.py`` (on interleaved rounds the sign test on neighbouring turns,
whose median pair ratio is the ratio) says ``faster``, ``slower`` (B
relative to A), ``noise`` or ``few-rounds``, and ``stats.ratio_interval``
gives its confidence interval.  A verdict read from rounds on a busy machine
(``busy.py``) carries the reason in ``unreliable``.  The exact counters of
both sides are kept beside it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_lyapax.report import busy, counters, stats
from pytest_lyapax.report.identity import record_label, record_size, series_id

#: Verdict words, B relative to A.
WORDS = {
    stats.FASTER: "faster",
    stats.SLOWER: "slower",
    stats.NOISE: "within noise",
    stats.FEW: "too few rounds",
}


def _key(record: Mapping[str, Any]) -> tuple[str, int | None]:
    return series_id(record).benchmark, record_size(record)


def _counters(record: Mapping[str, Any]) -> dict[str, float | None]:
    return {name: counters.counter(record, name)[0] for name, _ in counters.SHOWN}


def compare(
    records: Iterable[Mapping[str, Any]],
    twins: Mapping[str, str],
    busy_mode: str = busy.WARN,
) -> list[dict[str, Any]]:
    """One entry per benchmark, size and A label that both sides measured;
    ``twins`` maps each B label to its A label."""
    by_label: dict[str, dict[tuple[str, int | None], Mapping[str, Any]]] = {}
    for record in records:
        label = record_label(record)
        if label is not None:
            by_label.setdefault(label, {})[_key(record)] = record
    out = []
    for b_label, a_label in twins.items():
        a_side, b_side = by_label.get(a_label, {}), by_label.get(b_label, {})
        for key, a in a_side.items():
            b = b_side.get(key)
            if b is not None:
                out.append(_entry(key, a_label, b_label, a, b, busy_mode))
    return out


def _entry(
    key: tuple[str, int | None],
    a_label: str,
    b_label: str,
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    busy_mode: str,
) -> dict[str, Any]:
    before, after = stats.round_times(a), stats.round_times(b)
    turns = (stats.round_turns(a), stats.round_turns(b))
    medians = (_median_of(a), _median_of(b))
    verdict = stats.judge(before, after, medians=medians, turns=turns)
    interval = stats.ratio_interval(before, after, turns)
    reasons = (
        [r for r in (busy.record_reason(a), busy.record_reason(b)) if r]
        if busy_mode != busy.IGNORE
        else []
    )
    benchmark, size = key
    return {
        "benchmark": benchmark,
        "size": size,
        "backend": a_label,
        "b_label": b_label,
        "ratio": _finite(verdict.ratio),
        "interval": list(interval) if interval else None,
        "verdict": verdict.kind,
        "p": verdict.p,
        "pairs": verdict.pairs,
        "rounds": list(verdict.rounds),
        "median_s": {"a": medians[0], "b": medians[1]},
        "unreliable": "; ".join(reasons),
        "counters": {"a": _counters(a), "b": _counters(b)},
    }


def _median_of(record: Mapping[str, Any]) -> float:
    value = (record.get("stats") or {}).get("median")
    return float(value) if isinstance(value, int | float) else math.nan


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def verdict_text(entry: Mapping[str, Any]) -> str:
    """An entry's verdict in words: ``slower``, ``within noise``, ...;
    ``unreliable (busy)`` before it when its rounds ran on a busy machine."""
    word = WORDS.get(str(entry.get("verdict")), str(entry.get("verdict")))
    if entry.get("unreliable") and entry.get("verdict") != stats.FEW:
        return f"unreliable (busy): {word}"
    return word


def counter_change(entry: Mapping[str, Any]) -> str:
    """The counters that differ between A and B as ``name A -> B``, ``same``
    when none does, ``-`` when neither side recorded them."""
    both = entry.get("counters") if isinstance(entry.get("counters"), Mapping) else {}
    a, b = both.get("a") or {}, both.get("b") or {}
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        return "-"
    changed, known = [], False
    for name, _ in counters.SHOWN:
        x, y = a.get(name), b.get(name)
        known = known or x is not None or y is not None
        if x != y:
            changed.append(
                f"{name} {counters.format_counter(name, x)} -> "
                f"{counters.format_counter(name, y)}"
            )
    if not known:
        return "-"
    return ", ".join(changed) if changed else "same"


def side_text(side: object) -> str:
    """One side of an A/B (``{"what", "commit", "dirty", "path"}``) in words."""
    if not isinstance(side, Mapping):
        return "-"
    commit = side.get("commit")
    text = str(side.get("what") or "?")
    if commit:
        text += (
            f" (commit {str(commit)[:12]}{', modified' if side.get('dirty') else ''})"
        )
    return f"{text} at {side.get('path')}"
