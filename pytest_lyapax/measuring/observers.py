"""The one list of round observers (``observer.RoundObserver`` subclasses).

Each observer lives in its own module, which imports ``observer.py`` for
the base class; the list sits here, above them all, so that ``rounds.py``
(which runs them) does not import them (an import cycle).
"""

from __future__ import annotations

from typing import Any

from pytest_lyapax.measuring.machine import MachineObserver
from pytest_lyapax.measuring.observer import RoundObserver
from pytest_lyapax.measuring.recompiles import CompileObserver
from pytest_lyapax.measuring.stability import StabilityObserver


def observers_for(settings: Any) -> list[RoundObserver]:
    """The observers of one benchmark, from the session's settings
    (``run/options.Settings``; an observer reads its option with ``getattr``
    and a default).

    The compile observer comes last: with ``--jax-recompile=fail`` (or a
    warning that ``filterwarnings = error`` turns into one) its ``record``
    raises, after the others have written their entries.  ``--jax-no-extras``
    leaves out the machine state and the stability judgement (so that
    ``benchmarks/plugin_overhead.py`` measures their cost too), not the
    compile check, which ``--jax-recompile`` governs.
    """
    compiles = CompileObserver(getattr(settings, "recompile", "warn"))
    if not getattr(settings, "extras", True):
        return [compiles]
    return [MachineObserver(), StabilityObserver(), compiles]
