"""Finite-time exponents: FTLE fields of flows and distributions of
finite-time Lyapunov exponents (see :mod:`lyapax.finite_time.field` and
:mod:`lyapax.finite_time.exponents`)."""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax.finite_time.exponents import FiniteTimeResult, finite_time_exponents
    from lyapax.finite_time.field import FTLEField, ftle_field, ftle_grid, grid_points

__all__ = [
    "FiniteTimeResult",
    "finite_time_exponents",
    "FTLEField",
    "ftle_field",
    "ftle_grid",
    "grid_points",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.finite_time.exponents": ("FiniteTimeResult", "finite_time_exponents"),
        "lyapax.finite_time.field": (
            "FTLEField",
            "ftle_field",
            "ftle_grid",
            "grid_points",
        ),
    },
)
