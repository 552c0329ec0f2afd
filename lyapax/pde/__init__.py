"""Lyapunov spectra of semilinear PDEs ``u_t = L u + N(u)`` on periodic grids.

- :mod:`~lyapax.pde.problem`: :func:`semilinear_problem` and how the Fourier
  symbol of ``L`` is given (real fields, a complex field as two real ones);
- :mod:`~lyapax.pde.equations`: :func:`kuramoto_sivashinsky`,
  :func:`complex_ginzburg_landau`;
- :mod:`~lyapax.pde._step`: the pseudo-spectral ETDRK4 and IFRK4 steps;
- :mod:`~lyapax.pde._coefficients`: their coefficients (Kassam & Trefethen's
  contour integral, float64 at build time).

The engine differentiates the step itself (``jax.jvp`` through the FFTs), so
the exponents are those of the discrete scheme.
"""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax.pde.equations import complex_ginzburg_landau, kuramoto_sivashinsky
    from lyapax.pde.problem import INTEGRATORS, SemilinearProblem, semilinear_problem

__all__ = [
    "INTEGRATORS",
    "SemilinearProblem",
    "complex_ginzburg_landau",
    "kuramoto_sivashinsky",
    "semilinear_problem",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.pde.equations": ("complex_ginzburg_landau", "kuramoto_sivashinsky"),
        "lyapax.pde.problem": (
            "INTEGRATORS",
            "SemilinearProblem",
            "semilinear_problem",
        ),
    },
)
