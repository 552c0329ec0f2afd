"""The noise test: when is one set of timings really faster than another?

Both the crossover verdict ("gpu faster at d 1000" / "within noise") and
``pytest-lyapax history``'s SLOWER/FASTER steps use :func:`judge` on the
per-round samples that every report keeps (``stats.data``: pytest-benchmark
stores each round's time divided by its number of iterations, so every sample
is seconds per call, whatever the timer calibration chose).

The test is the two-sided Mann-Whitney U test at level :data:`ALPHA` (normal
approximation with tie and continuity corrections, which errs on the side of
"within noise" at small sample sizes), and the medians must also differ by
more than :data:`MIN_EFFECT` (5 %): with hundreds of rounds the test alone
calls a 1 % shift significant, and rounds of one process do not sample the
variation between processes, which is larger than that.  It is decided only
when each side has at least :data:`MIN_ROUNDS` rounds; with fewer, or without
stored samples, the verdict is "too few rounds" -- never "faster".  A rank
test does not assume normal timings and is not moved by a single slow
outlier round.

What the samples cannot show: a round of many iterations averages them, so
a fast benchmark's rounds vary less than a slow one's; and rounds of one
process share that process's state (memory layout, clock), so the spread
between processes is not sampled unless the runs are repeated
(``--jax-processes``, see the docs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ALPHA = 0.01
MIN_ROUNDS = 10
MIN_EFFECT = 0.05  # relative change of the median below which it is noise
TEST_NAME = "Mann-Whitney U, two-sided, normal approximation"

# Verdict kinds.
FASTER, SLOWER, NOISE, FEW = "faster", "slower", "noise", "few-rounds"


def describe_test() -> dict[str, Any]:
    """The test and its parameters, as stored in a report."""
    return {
        "test": TEST_NAME,
        "alpha": ALPHA,
        "min_effect": MIN_EFFECT,
        "min_rounds": MIN_ROUNDS,
    }


def rule_text() -> str:
    """The noise test in one line, as the terminal and the CLI print it."""
    return (
        f"{TEST_NAME} on the per-call round times at level {ALPHA:g}, and a median "
        f"change above {MIN_EFFECT:.0%}, with >= {MIN_ROUNDS} rounds on each side"
    )


def round_times(record: Mapping[str, Any]) -> tuple[float, ...]:
    """A record's per-call round times in seconds (empty if not stored)."""
    data = (record.get("stats") or {}).get("data")
    if not isinstance(data, list):
        return ()
    return tuple(float(x) for x in data)


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided p-value of the Mann-Whitney U test, and U of ``b`` over ``a``
    scaled to [0, 1] (0.5: no shift; above: ``b`` tends to be larger)."""
    n, m = len(a), len(b)
    pooled = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks = [0.0] * len(pooled)
    ties = 0.0
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    rank_b = sum(r for r, (_, side) in zip(ranks, pooled, strict=True) if side == 1)
    u_b = rank_b - m * (m + 1) / 2
    mean = n * m / 2
    total = n + m
    variance = n * m / 12 * ((total + 1) - ties / (total * (total - 1)))
    if variance <= 0:
        return 1.0, 0.5
    z = max(0.0, abs(u_b - mean) - 0.5) / math.sqrt(variance)
    return math.erfc(z / math.sqrt(2)), u_b / (n * m)


@dataclass(frozen=True)
class Verdict:
    """How ``after`` compares with ``before``: kind, p-value, median ratio."""

    kind: str  # faster, slower, noise or few-rounds (after relative to before)
    ratio: float  # median(after) / median(before)
    p: float | None = None
    rounds: tuple[int, int] = (0, 0)

    def describe(self) -> str:
        if self.kind == FEW:
            return f"too few rounds ({min(self.rounds)} < {MIN_ROUNDS})"
        if self.kind == NOISE:
            return f"within noise (p={self.p:.2g})"
        return f"{self.kind} (p={self.p:.2g})"


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def judge(
    before: Sequence[float],
    after: Sequence[float],
    *,
    medians: tuple[float, float] | None = None,
) -> Verdict:
    """The noise test on two sets of per-call round times (see the module
    docstring).  ``medians`` gives the ratio when the samples are missing."""
    if before and after:
        ratio_parts = (_median(before), _median(after))
    else:
        ratio_parts = medians or (math.nan, math.nan)
    if math.isnan(ratio_parts[0]) or math.isnan(ratio_parts[1]):
        ratio = math.nan
    else:
        ratio = ratio_parts[1] / ratio_parts[0] if ratio_parts[0] > 0 else math.inf
    rounds = (len(before), len(after))
    if min(rounds) < MIN_ROUNDS:
        return Verdict(FEW, ratio, None, rounds)
    p, shift = mann_whitney_p(before, after)
    if p >= ALPHA or abs(ratio - 1.0) <= MIN_EFFECT:
        return Verdict(NOISE, ratio, p, rounds)
    return Verdict(SLOWER if shift > 0.5 else FASTER, ratio, p, rounds)
