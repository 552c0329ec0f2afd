"""Where two backends' series cross: who is faster at which size.

Who is *faster* at a size is decided by the noise test on the two backends'
round times (:func:`pytest_lyapax.report.stats.judge`); where the medians
cross is interpolated in log(size).  Pure functions over
:class:`~pytest_lyapax.report.series.SizedBenchmark`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_lyapax.report import stats
from pytest_lyapax.report.series import Point, SizedBenchmark

# Verdict of a size where the noise test could not decide for lack of rounds.
FEW = "too few rounds"


@dataclass(frozen=True)
class Crossing:
    """A change of sign of the median difference between two adjacent sizes."""

    size: float  # interpolated in log(size) vs log(speedup)
    between: tuple[int, int]
    winner: str  # the label that is faster (by median) after the crossing


@dataclass(frozen=True)
class Crossover:
    """How ``other`` compares with ``reference`` over the common sizes.

    ``verdicts`` holds, per common size, the label that the noise test
    (:func:`pytest_lyapax.report.stats.judge`) finds faster, ``"noise"`` when it
    finds no difference, or :data:`FEW` when there were too few rounds.
    """

    reference: str
    other: str
    sizes: tuple[int, ...] = ()
    verdicts: tuple[str, ...] = ()
    crossings: tuple[Crossing, ...] = ()
    speedup_at_largest: float | None = None  # t_reference / t_other

    @property
    def largest(self) -> int | None:
        return self.sizes[-1] if self.sizes else None

    @property
    def kind(self) -> str:
        """One word for the JSON report: no-common-sizes, too-few-rounds,
        within-noise, other-faster, reference-faster, crossover or mixed."""
        if not self.sizes:
            return "no-common-sizes"
        judged = [v for v in self.verdicts if v != FEW]
        if not judged:
            return "too-few-rounds"
        decided = [v for v in judged if v != "noise"]
        if not decided:
            return "within-noise"
        if set(decided) == {self.other} and not self.crossings:
            return "other-faster"
        if set(decided) == {self.reference} and not self.crossings:
            return "reference-faster"
        if len(self.crossings) == 1 and decided[0] != decided[-1]:
            return "crossover"
        return "mixed"

    def describe(self, size_label: str = "size") -> str:
        ref, other = self.reference, self.other
        if not self.sizes:
            return f"{other} vs {ref}: no size measured on both"
        groups: dict[str, list[int]] = {}
        for size, verdict in zip(self.sizes, self.verdicts, strict=True):
            groups.setdefault(verdict, []).append(size)
        parts = [
            f"{label} faster at {size_label} {_sizes_text(groups[label])}"
            for label in (other, ref)
            if label in groups
        ]
        if "noise" in groups:
            parts.append(f"within noise at {size_label} {_sizes_text(groups['noise'])}")
        if FEW in groups:
            parts.append(
                f"too few rounds to judge at {size_label} {_sizes_text(groups[FEW])} "
                f"(the noise test needs {stats.MIN_ROUNDS} per backend)"
            )
        if self.crossings:
            where = ", ".join(
                f"~{c.size:.3g} (between {c.between[0]} and {c.between[1]}, "
                f"{self._after(i)})"
                for i, c in enumerate(self.crossings)
            )
            parts.append(f"medians cross at {size_label} {where}")
        else:
            parts.append("medians do not cross in the measured range")
        tail = f"{self.speedup_at_largest:.3g}x at {self.largest}"
        return f"{other} vs {ref}: " + "; ".join(parts) + f" (t_{ref}/t_{other} {tail})"

    def _after(self, index: int) -> str:
        """Who leads after crossing ``index``: "faster" only where the noise test
        found that label faster at a size before the next crossing; a lower
        median alone never calls two backends different."""
        c = self.crossings[index]
        end = (
            self.crossings[index + 1].between[0]
            if index + 1 < len(self.crossings)
            else math.inf
        )
        shown = any(
            verdict == c.winner
            for size, verdict in zip(self.sizes, self.verdicts, strict=True)
            if c.between[1] <= size <= end
        )
        if shown:
            return f"{c.winner} faster after"
        return f"{c.winner}'s median lower after, no difference shown by the noise test"

    def to_json(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "other": self.other,
            "kind": self.kind,
            "sizes": list(self.sizes),
            "verdicts": list(self.verdicts),
            "crossings": [c.__dict__ for c in self.crossings],
            "largest": self.largest,
            "speedup_at_largest": self.speedup_at_largest,
        }


def _sizes_text(sizes: Sequence[int]) -> str:
    return ", ".join(str(s) for s in sizes)


def _verdict(reference: str, other: str, ref: Point, oth: Point) -> str:
    verdict = stats.judge(ref.samples, oth.samples, turns=(ref.turns, oth.turns))
    if verdict.kind == stats.FEW:
        return FEW
    if verdict.kind == stats.FASTER:
        return other
    if verdict.kind == stats.SLOWER:
        return reference
    return "noise"


def find_crossover(
    reference: str,
    other: str,
    ref_points: Mapping[int, Point],
    other_points: Mapping[int, Point],
) -> Crossover:
    """Compare two backends size by size and find every crossing of the medians.

    A crossing lies between adjacent common sizes where the sign of
    ``log(t_reference / t_other)`` changes; its position is interpolated
    linearly in log(size).  Who is *faster* at a size is decided by the noise
    test on the two backends' round times (:func:`pytest_lyapax.report.stats.judge`).
    """
    sizes = tuple(sorted(set(ref_points) & set(other_points)))
    if not sizes:
        return Crossover(reference, other)
    logs = [
        math.log(ref_points[s].median / other_points[s].median)
        if ref_points[s].median > 0 and other_points[s].median > 0
        else 0.0
        for s in sizes
    ]
    verdicts = tuple(
        _verdict(reference, other, ref_points[s], other_points[s]) for s in sizes
    )
    crossings = []
    for i in range(1, len(sizes)):
        a, b = logs[i - 1], logs[i]
        if a == 0.0 or b == 0.0 or (a > 0) == (b > 0):
            continue
        lo, hi = sizes[i - 1], sizes[i]
        fraction = -a / (b - a)
        at = math.exp(math.log(lo) + fraction * (math.log(hi) - math.log(lo)))
        crossings.append(Crossing(at, (lo, hi), other if b > 0 else reference))
    return Crossover(
        reference, other, sizes, verdicts, tuple(crossings), math.exp(logs[-1])
    )


def crossovers(bench: SizedBenchmark) -> list[Crossover]:
    """Each backend against the first one (in run order) that has timings."""
    labels = list(bench.series)
    if len(labels) < 2:
        return []
    ref = labels[0]
    return [
        find_crossover(ref, other, bench.points(ref), bench.points(other))
        for other in labels[1:]
    ]
