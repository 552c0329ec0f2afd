"""Chaos indicators beyond the spectrum: the two-trajectory largest exponent,
GALI/SALI, expansion entropy.

- :func:`two_trajectory_exponent`: Benettin's 1976 two-trajectory estimate of
  the largest exponent, for any step (differentiable or not);
- :func:`gali`: GALI_k and SALI from ``k`` deviation vectors, with a
  regular/chaotic verdict, batched over initial conditions;
- :func:`expansion_entropy`: Hunt & Ott's expansion entropy with its batch
  mean and spread.

Every indicator runs one orbit per row, all rows in one vmapped program
(``state0_batch`` / ``params_batch``, chunked by ``batch_size`` and split over
the visible devices like the sweeps).
"""

from lyapax.indicators._expansion import ExpansionEntropy, expansion_entropy
from lyapax.indicators._gali import GALIOptions, GALIResult, gali
from lyapax.indicators._two_trajectory import (
    TwoTrajectoryOptions,
    TwoTrajectoryResult,
    two_trajectory_exponent,
)

__all__ = [
    "ExpansionEntropy",
    "expansion_entropy",
    "GALIOptions",
    "GALIResult",
    "gali",
    "TwoTrajectoryOptions",
    "TwoTrajectoryResult",
    "two_trajectory_exponent",
]
