"""Hybrid systems: flows with impacts, resets and switches (saltation-corrected
tangents)."""

from lyapax.hybrid._step import DEFAULT_MAX_EVENTS, HybridStep
from lyapax.hybrid.problem import HybridProblem, hybrid_problem

__all__ = ["DEFAULT_MAX_EVENTS", "HybridProblem", "HybridStep", "hybrid_problem"]
