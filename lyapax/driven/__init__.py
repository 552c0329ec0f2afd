"""Driven and random systems: maps fed an input sequence, random maps and SDEs
with noise replayable from a key."""

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
