"""Separable Hamiltonian systems on symplectic steps (leapfrog, Yoshida 4 and 6)."""

from lyapax.hamiltonian._step import SYMPLECTIC_ORDERS, SymplecticStep
from lyapax.hamiltonian.problem import (
    HamiltonianProblem,
    SeparableHamiltonian,
    hamiltonian_problem,
)

__all__ = [
    "SYMPLECTIC_ORDERS",
    "HamiltonianProblem",
    "SeparableHamiltonian",
    "SymplecticStep",
    "hamiltonian_problem",
]
