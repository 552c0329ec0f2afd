"""The suite in float64 and in float32: tolerances that follow the run's
precision.

The plain run computes in float64 (the root ``conftest.py``);
``python -m pytest --jax-precision=float32`` runs the same tests with x64
off, as a TPU computes natively (docs/testing.md, "Running the test suite
on a TPU").  The run's precision is the process's ``jax_enable_x64``, which
the option fixes before any test module is imported.

- A test of an algorithm states its float64 tolerance as it always has and
  its float32 one beside it: ``tol(1e-12)`` is ``1e-12`` in a float64 run
  and :data:`RUN` in a float32 run; ``tol(1e-12, OPS)`` for a few
  operations, ``tol(1e-9, 3e-3)`` where the test says why.  A float32
  tolerance is never below the float64 one.  On a TPU, whose float64 is
  emulated, the float64 tolerance is :data:`EMULATED` times the stated one.
  An expected value that itself depends on the dtype (the step where
  float32's range ends, the bytes of a float) reads :func:`float64_run`.
- ``warnings_as_errors()``: a test that must not warn, less the warning
  every float32 run gives.
- What a float32 run cannot check at all is marked ``float64_only`` (see
  :mod:`support.markers`).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import jax
import numpy as np

#: float32 tolerances, relative (absolute for numbers of order one), by what
#: the compared numbers went through.  float32 rounds at 6e-8 relative:
#: ``OPS`` is about 16 units of the last place (a few operations, one
#: product, one solve), ``RUN`` about 1700 (a run of steps, renormalisations
#: or a long reduction, whose rounding errors add up).
OPS = 1e-6
RUN = 1e-4

#: What every float32 run of a float32 state says (lyapax/_engine/run.py).
FLOAT32_WARNING = "state0 is float32 and jax_enable_x64 is off"


def float64_run() -> bool:
    """Whether this run computes in float64 (x64 on)."""
    return bool(jax.config.jax_enable_x64)  # type: ignore[attr-defined]


def float64_range() -> bool:
    """Whether this run's floats reach float64's exponent range: a float64
    run, but not on a TPU, whose emulated float64 has float32's range
    (overflow at ~3e38; docs/method.md, "Precision")."""
    return float64_run() and jax.default_backend() != "tpu"


def transcendental_ops() -> float:
    """The float32 tolerance of a few operations that include ``exp``,
    ``log``, ``tanh``: :data:`OPS`, but on a TPU, whose float32
    transcendentals are approximations (log up to 4016 ulp, 2.4e-4 relative,
    on the lent v5e; benchmarks/float32_ops.py), 3e-4."""
    return 3e-4 if jax.default_backend() == "tpu" else OPS


#: Relative error of exp, log, sin, cos and tanh of arrays of one element
#: where float64 is emulated: float32-accurate, 1e-9 to 2e-7 measured on the
#: lent TPU v5e (lyapax's own warning, EMULATED_FLOAT64, says so to users).
SMALL_TRANSCENDENTALS = 2e-7

#: How much coarser a TPU's emulated float64 rounds than float64: each add
#: and multiply there is about 1e-14 relative (measured on the lent TPU v5e
#: against NumPy), float64's 1.1e-16 about 90 times.
EMULATED = 100.0


def tol(float64: float, float32: float = RUN) -> float:
    """``float64`` in a float64 run, exactly as the test states it (times
    :data:`EMULATED` where float64 is emulated, on a TPU); in a float32 run
    ``float32`` (never below ``float64``)."""
    if not float64_run():
        return max(float64, float32)
    return float64 * EMULATED if jax.default_backend() == "tpu" else float64


def emulated_float64() -> bool:
    """Whether this run's float64 is emulated (a float64 run on a TPU)."""
    return float64_run() and jax.default_backend() == "tpu"


def assert_same_numbers(got: Any, want: Any, err_msg: str = "") -> None:
    """``got`` equal to ``want`` bit for bit, as two programs of one
    computation give on a CPU and in a float32 run on a TPU; where float64
    is emulated, programs that differ only in their static lengths (a run in
    pieces against one call) round differently, 2.1e-15 relative on the
    lent TPU v5e, so there within ``tol(1e-16)`` relative."""
    got, want = np.asarray(got), np.asarray(want)
    if emulated_float64() and np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=tol(1e-16), atol=0, err_msg=err_msg)
    else:
        np.testing.assert_array_equal(got, want, err_msg=err_msg)


@contextmanager
def warnings_as_errors() -> Iterator[None]:
    """Every warning an error (a run that must not warn), but the one every
    float32 run gives in a float32 run of the suite."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if not float64_run():
            warnings.filterwarnings("ignore", message=FLOAT32_WARNING)
        yield
