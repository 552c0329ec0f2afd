"""Chaos indicators beyond the spectrum: the 0-1 test for chaos and the
largest exponent of a measured time series (delay embedding, Rosenstein's
and Kantz's estimators, the linear region of the divergence curve)."""

from lyapax.indicators._embedding import delay_embedding
from lyapax.indicators._from_data import (
    DivergenceResult,
    NoLinearRegionWarning,
    lyapunov_kantz,
    lyapunov_rosenstein,
    mean_period,
)
from lyapax.indicators._linear_fit import LinearFit, LinearRegionOptions, linear_region
from lyapax.indicators._zero_one import ZeroOneResult, zero_one_test

__all__ = [
    # the 0-1 test
    "ZeroOneResult",
    "zero_one_test",
    # exponents from a measured series
    "DivergenceResult",
    "LinearFit",
    "LinearRegionOptions",
    "NoLinearRegionWarning",
    "delay_embedding",
    "linear_region",
    "lyapunov_kantz",
    "lyapunov_rosenstein",
    "mean_period",
]
