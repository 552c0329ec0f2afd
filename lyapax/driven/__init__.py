"""Driven and random systems: maps fed an input sequence, random maps and SDEs
with noise replayable from a key."""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax.driven._steps import DrivenStep, RandomStep, SDEStep
    from lyapax.driven.problem import (
        NOISE_KINDS,
        SCHEMES,
        DrivenProblem,
        RandomProblem,
        SDEProblem,
        driven_problem,
        random_problem,
        sde_problem,
    )

__all__ = [
    "NOISE_KINDS",
    "SCHEMES",
    "DrivenProblem",
    "DrivenStep",
    "RandomProblem",
    "RandomStep",
    "SDEProblem",
    "SDEStep",
    "driven_problem",
    "random_problem",
    "sde_problem",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.driven._steps": ("DrivenStep", "RandomStep", "SDEStep"),
        "lyapax.driven.problem": (
            "NOISE_KINDS",
            "SCHEMES",
            "DrivenProblem",
            "RandomProblem",
            "SDEProblem",
            "driven_problem",
            "random_problem",
            "sde_problem",
        ),
    },
)
