"""The interface of a measurement that watches a benchmark's rounds.

It lives apart from :mod:`~pytest_lyapax.measuring.rounds` (the watch and
the one list of observers, :func:`~pytest_lyapax.measuring.observers.observers_for`)
so that the modules of the observers import this one and ``rounds.py``
imports them, without an import cycle.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any, ClassVar


class RoundObserver(abc.ABC):
    """Watches one benchmark's rounds in this worker.

    ``start``/``stop`` bracket each stretch of rounds run without a pause
    (between them the worker may have waited for its turn: what happened
    then is another backend's); ``record`` writes the observer's entry.
    Before ``record`` the watch sets ``iterations`` (calls per timed round,
    as pytest-benchmark calibrated them) and ``test`` (the benchmark's full
    name, for warnings and failures).
    """

    key: ClassVar[str]  # its extra_info entry
    iterations: int = 1
    test: str = ""

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    def round_done(self) -> None:
        """After each round (cheap: called inside the rounds' loop)."""
        return None

    @abc.abstractmethod
    def record(self, extra_info: dict[str, Any], data: Sequence[float]) -> None:
        """Write ``extra_info[self.key]``; ``data`` the timed rounds' seconds
        per call."""
