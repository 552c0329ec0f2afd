"""The stability verdict of a benchmark's rounds, recorded in the worker.

:class:`StabilityObserver` writes ``extra_info["stability"]`` at the end of
the rounds, from the timed rounds' per-call seconds and the calls per round
(the rules: :mod:`pytest_lyapax.report.stability`).  It watches nothing
while the rounds run: the verdict needs only their times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_lyapax.measuring.observer import RoundObserver
from pytest_lyapax.report.stability import stability


class StabilityObserver(RoundObserver):
    """Writes ``extra_info["stability"]`` (``verdict``, ``reasons``, ...)."""

    key = "stability"

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def record(self, extra_info: dict[str, Any], data: Sequence[float]) -> None:
        extra_info[self.key] = stability(data, self.iterations)
