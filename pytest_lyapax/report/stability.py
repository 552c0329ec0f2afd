"""Is a benchmark's set of rounds stable enough to compare?

:func:`stability` judges one benchmark's timed rounds (per-call seconds,
``stats.data``) by pyperf's rules and the noise test's needs; a benchmark
that breaks any rule is *unstable*, with one readable reason per broken rule:

``spread``    standard deviation at least :data:`STD_LIMIT` (10 %) of the mean;
``outlier``   the fastest or slowest round at least :data:`EXTREME_LIMIT`
              (50 %) away from the mean;
``short``     calls under :data:`SHORT_CALL_S` (1 ms) timed one per round
              (pytest-benchmark's calibration repeats a call within a round
              only when it is shorter than ``--benchmark-min-time``, 5 us by
              default, so a 20 us call is timed singly, and the clock reads,
              the Python dispatch and the scheduler's interruptions weigh
              about as much as the call);
``rounds``    fewer than :data:`~pytest_lyapax.report.stats.MIN_ROUNDS`
              rounds (the noise test decides nothing below), or a 95 %
              confidence margin of the mean wider than
              :data:`~pytest_lyapax.report.stats.MIN_EFFECT` (5 %), the
              smallest change the noise test reports: the same margin
              ``z * std / sqrt(n) / mean`` as pytest-benchmark's
              ``--benchmark-precision``.

The worker records the result in ``extra_info["stability"]``
(``measuring/stability.py``); :func:`stability_of` reads it back from a
report, tolerant of old or malformed entries.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_lyapax.report.identity import extra_info
from pytest_lyapax.report.stats import MIN_EFFECT, MIN_ROUNDS
from pytest_lyapax.report.units import format_seconds

STABLE, UNSTABLE = "stable", "unstable"
STD_LIMIT = 0.10  # pyperf: std >= 10 % of the mean
EXTREME_LIMIT = 0.50  # pyperf: min or max >= 50 % away from the mean
SHORT_CALL_S = 1e-3  # pyperf: values under 1 ms are too short to time alone
CONFIDENCE = 0.95
_Z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)  # 1.96
PRECISION = MIN_EFFECT  # widest allowed relative margin of the mean
# Rule names, in the order their reasons are listed.
RULES = ("rounds", "spread", "outlier", "short")
RULE_TEXT = {
    "rounds": f"fewer than {MIN_ROUNDS} rounds, or a 95% margin of the mean "
    f"above {PRECISION:.0%}",
    "spread": f"std >= {STD_LIMIT:.0%} of the mean",
    "outlier": f"min or max >= {EXTREME_LIMIT:.0%} from the mean",
    "short": f"calls under {format_seconds(SHORT_CALL_S)} timed singly",
}


def _percent(x: float, digits: int = 0) -> str:
    return f"{100 * x:.{digits}f}%"


def _stdev(values: Sequence[float], mean: float) -> float:
    """Sample standard deviation (``statistics.stdev`` computes exactly with
    fractions: 0.3 s for the 10^5 rounds of a fast benchmark)."""
    return math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (len(values) - 1))


def stability(data: Sequence[float], iterations: int) -> dict[str, Any]:
    """Judge one benchmark's timed rounds: ``data`` its seconds per call,
    one value per round, ``iterations`` the calls per round.

    Returns ``{"verdict": "stable" | "unstable", "reasons": [...],
    "rules": [...], "rounds": n, "cv": std/mean or None, "margin": 95 %
    margin of the mean relative to it, or None}``; ``reasons`` and ``rules``
    (names from :data:`RULES`) list the broken rules in the same order.
    """
    values = [float(x) for x in data if math.isfinite(float(x))]
    n = len(values)
    broken: dict[str, str] = {}
    cv = margin = None
    if n < MIN_ROUNDS:
        broken["rounds"] = f"only {n} round{'s' if n != 1 else ''} (< {MIN_ROUNDS})"
    mean = math.fsum(values) / n if values else 0.0
    if n >= 2 and mean > 0:
        cv = _stdev(values, mean) / mean
        margin = _Z * cv / math.sqrt(n)
        if "rounds" not in broken and margin > PRECISION:
            broken["rounds"] = (
                f"mean known to ±{_percent(margin, 1)} after {n} rounds "
                f"(95% margin > {PRECISION:.0%})"
            )
        if cv >= STD_LIMIT:
            broken["spread"] = f"std {_percent(cv)} of mean (>= {STD_LIMIT:.0%})"
        low, high = (mean - min(values)) / mean, (max(values) - mean) / mean
        extremes = []
        if high >= EXTREME_LIMIT:
            extremes.append(f"max {_percent(high)} above the mean")
        if low >= EXTREME_LIMIT:
            extremes.append(f"min {_percent(low)} below the mean")
        if extremes:
            broken["outlier"] = f"{', '.join(extremes)} (>= {EXTREME_LIMIT:.0%})"
    if values and iterations == 1:
        median = statistics.median(values)
        if median < SHORT_CALL_S:
            broken["short"] = (
                f"calls of {format_seconds(median)} timed singly "
                f"(< {format_seconds(SHORT_CALL_S)})"
            )
    rules = [rule for rule in RULES if rule in broken]
    return {
        "verdict": UNSTABLE if rules else STABLE,
        "reasons": [broken[rule] for rule in rules],
        "rules": rules,
        "rounds": n,
        "iterations": iterations,
        "cv": cv,
        "margin": margin,
    }


@dataclass(frozen=True)
class Stability:
    """A recorded verdict: ``stable`` or ``unstable``, its reasons and the
    names of the broken rules."""

    verdict: str
    reasons: tuple[str, ...]
    rules: tuple[str, ...]

    @property
    def unstable(self) -> bool:
        return self.verdict == UNSTABLE


def stability_of(record: Mapping[str, Any]) -> Stability | None:
    """A record's ``extra_info["stability"]`` (None: not recorded, or not
    readable)."""
    entry = extra_info(record).get("stability")
    if not isinstance(entry, Mapping) or entry.get("verdict") not in (
        STABLE,
        UNSTABLE,
    ):
        return None
    reasons = entry.get("reasons")
    rules = entry.get("rules")
    return Stability(
        str(entry["verdict"]),
        tuple(str(r) for r in reasons) if isinstance(reasons, list) else (),
        tuple(str(r) for r in rules) if isinstance(rules, list) else (),
    )
