"""The one list of round observers (``rounds.RoundObserver`` subclasses).

Each observer lives in its own module, which imports ``rounds.py`` for the
base class; the list sits here, above them all, so that ``rounds.py`` does
not import its observers back (an import cycle).
"""

from __future__ import annotations

from typing import Any

from pytest_lyapax.measuring.machine import MachineObserver
from pytest_lyapax.measuring.rounds import RoundObserver


def observers_for(settings: Any) -> list[RoundObserver]:
    """The observers of one benchmark, from the session's settings
    (``run/options.Settings``; an observer reads its option with ``getattr``
    and a default)."""
    return [MachineObserver()]
