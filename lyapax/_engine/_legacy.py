"""Duck-typed declarations the engine still honours (compatibility only).

The engine's interfaces are declared (:mod:`lyapax._engine.abstract`). Two
older, undeclared forms keep working, and this module is the one place that
recognises them:

- a *problem* of lyapax 0.3.0's form: any object with ``step_fn``, ``state0``
  and ``dt`` is run as an :class:`~lyapax._engine.problem.ODEProblem`;
- a plain step *function* with the attribute ``uses_step_index = True`` is
  called ``fn(state, step_index)`` (new code subclasses
  :class:`~lyapax._engine.abstract.AbstractStep` instead);
- a network *coupling* that does not derive from the bases of
  :mod:`lyapax.network.coupling` but carries a fused ``batched_jvp``, the
  marker ``edge_aware = True``, or delayed forms ``edges`` and ``uniform``.

Nothing else in lyapax looks at a problem's, step's or coupling's attributes
to learn what it can do (``tests/test_layout.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_PROBLEM_FIELDS = ("step_fn", "state0", "dt")


def looks_like_problem(obj: Any) -> bool:
    """An object of the 0.3.0 problem form (``step_fn``, ``state0``, ``dt``)."""
    return all(hasattr(obj, name) for name in _PROBLEM_FIELDS)


def declares_step_index(fn: Any) -> bool:
    """A plain function declaring ``uses_step_index = True`` as an attribute."""
    return bool(getattr(fn, "uses_step_index", False))


def fused_jvp(coupling: Any) -> Callable[..., Any] | None:
    """An undeclared coupling's own ``batched_jvp``, or None."""
    return getattr(coupling, "batched_jvp", None)


def declares_edge_aware(coupling: Any) -> bool:
    """An undeclared coupling marked ``edge_aware = True``."""
    return bool(getattr(coupling, "edge_aware", False))


def has_delayed_forms(coupling: Any) -> bool:
    """An undeclared coupling with ``edges`` and ``uniform`` methods."""
    return hasattr(coupling, "edges") and hasattr(coupling, "uniform")
