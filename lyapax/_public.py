"""The public modules of lyapax: one list for the API reference, the tests
and the tour of the API (``examples/15_public_api.py``).

The convention: a module is public when no part of its dotted name starts
with an underscore; ``__all__`` of a public module is its contract. Listed
here are ``lyapax``'s own public modules and subpackages (the modules inside
a public subpackage are reached through it), in the order the API reference
documents them: an object exported by several is documented under the first.
"""

from __future__ import annotations

PUBLIC_MODULES: tuple[str, ...] = (
    "lyapax.core",
    "lyapax.integrators",
    "lyapax.diagnostics",
    "lyapax.systems",
    "lyapax.network",
    "lyapax.coupling",
    "lyapax.simulator",
    "lyapax.dde",
    "lyapax.sweep",
    "lyapax.converge",
    "lyapax.covariant",
    "lyapax.checks",
    "lyapax.finite_time",
    "lyapax.indicators",
    "lyapax.hamiltonian",
    "lyapax.hybrid",
    "lyapax.utils",
    "lyapax.distributed",
    "lyapax.pde",
    "lyapax.shadowing",
    "lyapax.driven",
    "lyapax.adaptive",
)
