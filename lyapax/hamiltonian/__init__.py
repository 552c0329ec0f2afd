"""Separable Hamiltonian systems on symplectic steps (leapfrog, Yoshida 4 and 6)."""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.hamiltonian._step": ("SYMPLECTIC_ORDERS", "SymplecticStep"),
        "lyapax.hamiltonian.problem": (
            "HamiltonianProblem",
            "SeparableHamiltonian",
            "hamiltonian_problem",
        ),
    },
)
