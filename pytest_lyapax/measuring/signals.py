"""A sampled signal of the machine: its extremes, or why it could not be read.

Shared by the readers of ``machine.py`` (CPU, load, frequency) and
``gpu.py`` (NVML).  A signal that cannot be read is recorded as
``{"unavailable": reason}``, never as a zero.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

UNAVAILABLE = "unavailable"


def unavailable(reason: str) -> dict[str, str]:
    """A signal that could not be read, with the reason."""
    return {UNAVAILABLE: reason}


class Extremes:
    """Min, max, sum and count of a sampled number."""

    def __init__(self) -> None:
        self.low = self.high = self.total = 0.0
        self.count = 0

    def add(self, value: float) -> None:
        self.low = value if not self.count else min(self.low, value)
        self.high = value if not self.count else max(self.high, value)
        self.total += value
        self.count += 1

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


class Signal:
    """A sampled signal: its readings, or why it could not be read."""

    def __init__(self) -> None:
        self.values = Extremes()
        self.problem = ""

    def read(self, reader: Callable[[], float]) -> None:
        if self.problem:
            return
        try:
            self.values.add(reader())
        except (OSError, ValueError) as exc:
            self.problem = str(exc) or type(exc).__name__

    def summary(self, **fields: str) -> dict[str, Any]:
        """``{name: attribute of the extremes}``, or unavailable."""
        if self.problem:
            return unavailable(self.problem)
        if not self.values.count:
            return unavailable("not sampled")
        out: dict[str, Any] = {
            name: round(getattr(self.values, attr), 3) for name, attr in fields.items()
        }
        out["samples"] = self.values.count
        return out
