"""Chaos indicators beyond the spectrum.

- :func:`two_trajectory_exponent`: Benettin's 1976 two-trajectory estimate of
  the largest exponent, for any step (differentiable or not);
- :func:`gali`: GALI_k and SALI from ``k`` deviation vectors, with a
  regular/chaotic verdict, batched over initial conditions;
- :func:`megno`: Cincotta & Simó's MEGNO ``Y`` and ``<Y>``, the exponent
  from its slope (as REBOUND's) and a regular/chaotic verdict, batched over
  initial conditions (stability maps);
- :func:`expansion_entropy`: Hunt & Ott's expansion entropy with its batch
  mean and spread;
- :func:`zero_one_test`: Gottwald & Melbourne's 0-1 test for chaos on an
  observable's time series, batched over series;
- :func:`delay_embedding`, :func:`lyapunov_rosenstein`, :func:`lyapunov_kantz`:
  the largest exponent of a measured time series, with the linear region of
  the divergence curve exposed (:func:`linear_region`).

The trajectory-based indicators run one orbit per row, all rows in one vmapped
program (``state0_batch`` / ``params_batch``, chunked by ``batch_size`` and
split over the visible devices like the sweeps).
"""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax.indicators._embedding import delay_embedding
    from lyapax.indicators._expansion import ExpansionEntropy, expansion_entropy
    from lyapax.indicators._from_data import (
        DivergenceResult,
        NoLinearRegionWarning,
        lyapunov_kantz,
        lyapunov_rosenstein,
        mean_period,
    )
    from lyapax.indicators._gali import GALIOptions, GALIResult, gali
    from lyapax.indicators._linear_fit import (
        LinearFit,
        LinearRegionOptions,
        linear_region,
    )
    from lyapax.indicators._megno import MEGNO_MIN_STEPS, MEGNOResult, megno
    from lyapax.indicators._two_trajectory import (
        TwoTrajectoryOptions,
        TwoTrajectoryResult,
        two_trajectory_exponent,
    )
    from lyapax.indicators._zero_one import ZeroOneResult, zero_one_test

__all__ = [
    # trajectory-based indicators
    "ExpansionEntropy",
    "expansion_entropy",
    "GALIOptions",
    "GALIResult",
    "gali",
    "MEGNO_MIN_STEPS",
    "MEGNOResult",
    "megno",
    "TwoTrajectoryOptions",
    "TwoTrajectoryResult",
    "two_trajectory_exponent",
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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.indicators._embedding": ("delay_embedding",),
        "lyapax.indicators._expansion": ("ExpansionEntropy", "expansion_entropy"),
        "lyapax.indicators._from_data": (
            "DivergenceResult",
            "NoLinearRegionWarning",
            "lyapunov_kantz",
            "lyapunov_rosenstein",
            "mean_period",
        ),
        "lyapax.indicators._gali": ("GALIOptions", "GALIResult", "gali"),
        "lyapax.indicators._linear_fit": (
            "LinearFit",
            "LinearRegionOptions",
            "linear_region",
        ),
        "lyapax.indicators._megno": ("MEGNO_MIN_STEPS", "MEGNOResult", "megno"),
        "lyapax.indicators._two_trajectory": (
            "TwoTrajectoryOptions",
            "TwoTrajectoryResult",
            "two_trajectory_exponent",
        ),
        "lyapax.indicators._zero_one": ("ZeroOneResult", "zero_one_test"),
    },
)
