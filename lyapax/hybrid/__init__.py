"""Hybrid systems: flows with impacts, resets and switches (saltation-corrected
tangents)."""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax.hybrid._step import DEFAULT_MAX_EVENTS, HybridStep
    from lyapax.hybrid.problem import HybridProblem, hybrid_problem

__all__ = ["DEFAULT_MAX_EVENTS", "HybridProblem", "HybridStep", "hybrid_problem"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.hybrid._step": ("DEFAULT_MAX_EVENTS", "HybridStep"),
        "lyapax.hybrid.problem": ("HybridProblem", "hybrid_problem"),
    },
)
