"""Kaplan-Yorke dimension and convergence drift on known inputs."""

import jax.numpy as jnp
import numpy as np
import pytest

from lyapax.core import (
    convergence_drift,
    kaplan_yorke_dimension,
    lyapunov_spectrum,
    ode_problem,
)
from lyapax.systems import linear_system


@pytest.mark.parametrize(
    "exponents, expected",
    [
        ([0.906, 0.0, -14.572], 2.0 + 0.906 / 14.572),
        ([0.419, -1.623], 1.0 + 0.419 / 1.623),
        ([-0.1, -1.0], 0.0),
        ([0.0, -1.0], 1.0),
        ([1.0, 0.5], 2.0),
        ([-1.0, 2.0, -3.0], 2.0 + 1.0 / 3.0),  # order of input does not matter
    ],
)
def test_kaplan_yorke_on_known_spectra(exponents, expected):
    assert kaplan_yorke_dimension(exponents) == pytest.approx(expected, abs=1e-12)


def test_kaplan_yorke_partial_spectrum_needs_more_exponents():
    assert kaplan_yorke_dimension([0.5, -1.0], d_total=10) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="larger k"):
        kaplan_yorke_dimension([0.5, 0.1], d_total=10)
    with pytest.raises(ValueError, match="d_total"):
        kaplan_yorke_dimension([0.5, 0.1, -2.0], d_total=2)


def test_convergence_drift_detects_a_converged_run():
    A = np.diag([-0.5, -1.0])
    res = lyapunov_spectrum(
        ode_problem(linear_system(A), jnp.ones(2), 0.01),
        n_steps=20_000,
        renorm_every=10,
    )
    drift = convergence_drift(res, window=0.2, tol=1e-2)
    assert drift.converged
    assert drift.absolute.shape == (2,)
    # The estimate is exact up to an O(1)/T alignment offset c/T; over the last
    # 20% of T = 200 it moves by c (1/160 - 1/200) ~ 3e-3 for c ~ 2.
    assert float(jnp.max(drift.absolute)) < 5e-3
    strict = convergence_drift(res, window=1.0, tol=1e-9)
    assert not strict.converged
    with pytest.raises(ValueError, match="window"):
        convergence_drift(res, window=0.0)
