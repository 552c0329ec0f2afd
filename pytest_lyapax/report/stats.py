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

**Interleaved rounds** (the default when several local backends run, see
``run/turns.py``): each round carries the number of the turn it ran in,
and the rounds of two backends in neighbouring turns were taken under the
same conditions of the machine.  Then the test is blocked: the rounds of
each turn are reduced to their median, each turn of one side is paired with
the neighbouring turn of the other (:func:`turn_pairs`), and the exact
two-sided sign test at level :data:`ALPHA` asks whether one side is slower
in more pairs than chance allows; the effect is the median of the pairs'
ratios, which must again exceed :data:`MIN_EFFECT`.  A load that comes and
goes raises both sides of the pairs it lands on, so it moves neither the
signs nor the ratios much; under the null hypothesis (two identical
backends) every pair's sign is a fair coin whatever the load, so the
false-positive rate is at most :data:`ALPHA` (and at most :data:`ALPHA`
times the chance that the effect also exceeds 5 %).  With fewer than
:data:`MIN_PAIRS` pairs the sign test cannot reach the level, and the
verdict is "too few turns".

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
BLOCKED_TEST_NAME = "sign test on the medians of neighbouring turns, two-sided, exact"
# Fewest turn pairs with which the sign test can reach ALPHA (2 / 2**8 < 0.01).
MIN_PAIRS = 8

# Verdict kinds.
FASTER, SLOWER, NOISE, FEW = "faster", "slower", "noise", "few-rounds"


def describe_test() -> dict[str, Any]:
    """The test and its parameters, as stored in a report."""
    return {
        "test": TEST_NAME,
        "alpha": ALPHA,
        "min_effect": MIN_EFFECT,
        "min_rounds": MIN_ROUNDS,
        "interleaved_test": BLOCKED_TEST_NAME,
        "min_pairs": MIN_PAIRS,
    }


def rule_text() -> str:
    """The noise test in one line, as the terminal and the CLI print it."""
    return (
        f"{TEST_NAME} on the per-call round times at level {ALPHA:g}, and a median "
        f"change above {MIN_EFFECT:.0%}, with >= {MIN_ROUNDS} rounds on each side; "
        f"rounds interleaved across backends: the {BLOCKED_TEST_NAME} "
        f"(>= {MIN_PAIRS} pairs)"
    )


def round_times(record: Mapping[str, Any]) -> tuple[float, ...]:
    """A record's per-call round times in seconds (empty if not stored)."""
    data = (record.get("stats") or {}).get("data")
    if not isinstance(data, list):
        return ()
    return tuple(float(x) for x in data)


def round_turns(record: Mapping[str, Any]) -> tuple[int, ...]:
    """The turn of each of a record's rounds (``extra_info["turns"]``), or
    ``()`` when its rounds were not interleaved or the counts disagree."""
    info, stats = record.get("extra_info"), record.get("stats")
    turns = info.get("turns") if isinstance(info, Mapping) else None
    data = stats.get("data") if isinstance(stats, Mapping) else None
    if not isinstance(turns, list) or not isinstance(data, list):
        return ()
    if len(turns) != len(data) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in turns
    ):
        return ()
    return tuple(turns)


def turn_medians(
    times: Sequence[float], turns: Sequence[int]
) -> list[tuple[int, float]]:
    """``(turn, median round time)`` per turn, in turn order."""
    by_turn: dict[int, list[float]] = {}
    for time, turn in zip(times, turns, strict=True):
        by_turn.setdefault(turn, []).append(time)
    return [(turn, _median(values)) for turn, values in sorted(by_turn.items())]


def turn_pairs(
    a: Sequence[tuple[int, float]], b: Sequence[tuple[int, float]]
) -> list[tuple[float, float]]:
    """Pairs ``(a, b)`` of turn medians: the k-th turn of one side with the
    k-th turn of the other, in turn order.

    Both sides step through their rounds in alternating turns, so the k-th
    turns of the two lie close in time even when one side began a few turns
    later (its warm-up ran while the other was already timing).
    """
    return [(x, y) for (_, x), (_, y) in zip(a, b, strict=False)]


def sign_test_p(wins: int, n: int) -> float:
    """Exact two-sided p-value of ``wins`` successes in ``n`` fair coin flips."""
    if n == 0:
        return 1.0
    k = min(wins, n - wins)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


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
    pairs: int | None = None  # turn pairs of the blocked test; None: Mann-Whitney

    def describe(self) -> str:
        if self.kind == FEW and self.pairs is not None:
            return f"too few interleaved turns ({self.pairs} pairs < {MIN_PAIRS})"
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
    turns: tuple[Sequence[int], Sequence[int]] | None = None,
) -> Verdict:
    """The noise test on two sets of per-call round times (see the module
    docstring).  ``medians`` gives the ratio when the samples are missing;
    ``turns``, the turn of every round of each side (:func:`round_turns`),
    makes it the blocked test of interleaved rounds."""
    if turns is not None and turns[0] and turns[1]:
        return _judge_blocked(before, after, turns[0], turns[1])
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


def _judge_blocked(
    before: Sequence[float],
    after: Sequence[float],
    before_turns: Sequence[int],
    after_turns: Sequence[int],
) -> Verdict:
    """The sign test on the turn medians of interleaved rounds (module doc)."""
    rounds = (len(before), len(after))
    pairs = turn_pairs(
        turn_medians(before, before_turns), turn_medians(after, after_turns)
    )
    ratios = sorted(b / a for a, b in pairs if a > 0)
    if min(rounds) < MIN_ROUNDS or len(ratios) < MIN_PAIRS:
        overall = _median(after) / _median(before) if _median(before) > 0 else math.inf
        return Verdict(FEW, overall, None, rounds, len(ratios))
    ratio = _median(ratios)
    slower = sum(1 for r in ratios if r > 1.0)
    faster = sum(1 for r in ratios if r < 1.0)
    p = sign_test_p(slower, slower + faster)
    if p >= ALPHA or abs(ratio - 1.0) <= MIN_EFFECT:
        return Verdict(NOISE, ratio, p, rounds, len(ratios))
    return Verdict(SLOWER if ratio > 1.0 else FASTER, ratio, p, rounds, len(ratios))


def ratio_interval(
    before: Sequence[float],
    after: Sequence[float],
    turns: tuple[Sequence[int], Sequence[int]],
) -> tuple[float, float] | None:
    """The confidence interval, at level ``1 - ALPHA``, of the median ratio
    after/before of interleaved rounds: order statistics of the turn pairs'
    ratios, distribution-free and dual to the sign test of :func:`judge`
    (it excludes 1 where that test rejects).  None without turns or with too
    few pairs."""
    if not (turns[0] and turns[1]):
        return None
    pairs = turn_pairs(turn_medians(before, turns[0]), turn_medians(after, turns[1]))
    ratios = sorted(b / a for a, b in pairs if a > 0)
    n = len(ratios)
    # The k-th smallest and k-th largest ratio bound the median with
    # confidence 1 - sign_test_p(k - 1, n): the largest k that reaches the level.
    k = 0
    while k + 1 <= n // 2 and sign_test_p(k, n) <= ALPHA:
        k += 1
    if k == 0:
        return None
    return ratios[k - 1], ratios[n - k]
