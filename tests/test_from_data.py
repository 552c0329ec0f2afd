"""The largest exponent of a measured series: delay embedding, Rosenstein's
and Kantz's estimators against known exponents (Hénon 0.419 per iteration;
Lorenz at sigma=16, rho=45.92, beta=4: 1.50 per time unit, Wolf et al. 1985),
noise without a linear region (the fit says so), the linear-region search on
exact curves, and clear errors for bad input."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import tol
from support.warned import assert_warned_here

from lyapax import rk4_step, simulate_trajectory
from lyapax.indicators import (
    LinearRegionOptions,
    NoLinearRegionWarning,
    delay_embedding,
    linear_region,
    lyapunov_kantz,
    lyapunov_rosenstein,
    mean_period,
)
from lyapax.systems import henon_map, lorenz

N = 5000


@pytest.fixture(scope="module")
def henon_x():
    """x of the Hénon map (a = 1.4, b = 0.3), NumPy, ``(N,)``."""
    traj = simulate_trajectory(henon_map(), jnp.array([0.1, 0.1]), N, n_transient=1000)
    return np.asarray(traj.states[:, 0])


@pytest.fixture(scope="module")
def lorenz_x():
    """x of the Lorenz flow (16, 45.92, 4) every 0.01 time units, JAX, ``(N,)``."""
    step = rk4_step(lorenz(16.0, 45.92, 4.0), 0.01)
    traj = simulate_trajectory(step, jnp.ones(3), N, dt=0.01, n_transient=2000)
    return traj.states[:, 0]


def test_delay_embedding_rows():
    x = np.arange(10.0)
    X = delay_embedding(x, 3, lag=2)
    assert X.shape == (6, 3)
    np.testing.assert_array_equal(X[0], [0, 2, 4])
    np.testing.assert_array_equal(X[-1], [5, 7, 9])
    np.testing.assert_array_equal(delay_embedding(jnp.asarray(x), 1), x[:, None])


@pytest.mark.parametrize(
    "estimator, low, high",
    [(lyapunov_rosenstein, 0.38, 0.46), (lyapunov_kantz, 0.38, 0.46)],
)
def test_henon_largest_exponent(henon_x, estimator, low, high):
    res = estimator(henon_x, dimension=2, lag=1, horizon=20)
    assert res.fit.found, res.fit.reason
    assert low <= res.exponent <= high  # 0.419 per iteration
    assert res.exponent == res.fit.slope
    # the fitted region is a stretch of the curve, with a small residual
    assert res.fit.stop - res.fit.start >= 5
    assert res.fit.max_residual <= 0.05 * res.fit.rise
    assert res.times.shape == res.divergence.shape == res.counts.shape == (21,)
    assert res.counts[0] > 0.9 * (N - 1 - 20)


@pytest.mark.parametrize(
    "estimator",
    [lyapunov_rosenstein, pytest.param(lyapunov_kantz, marks=pytest.mark.slow)],
)
def test_lorenz_largest_exponent(lorenz_x, estimator):
    # lag 0.05 time units; over dimensions 3-7 and lags 5-17 samples the
    # estimates spread by about +-10% (examples/34_lyapunov_from_data.py)
    res = estimator(lorenz_x, dimension=5, lag=5, horizon=300, dt=0.01)
    assert res.fit.found, res.fit.reason
    assert res.exponent == pytest.approx(1.50, rel=0.10)  # Wolf et al. 1985
    np.testing.assert_allclose(res.times[-1], 3.0)
    assert res.theiler == round(mean_period(lorenz_x))


@pytest.mark.parametrize("estimator", [lyapunov_rosenstein, lyapunov_kantz])
def test_noise_has_no_linear_region(estimator):
    noise = np.random.default_rng(0).normal(size=2000)
    with pytest.warns(NoLinearRegionWarning, match="no linear region") as record:
        res = estimator(noise, dimension=3, lag=1, horizon=20)
    assert_warned_here(record, "no linear region")
    assert not res.fit.found and "no window" in res.fit.reason
    assert np.isnan(res.exponent)
    assert np.isfinite(res.divergence).all()  # the curve is still there to look at


def test_numpy_and_jax_inputs_agree(henon_x):
    a = lyapunov_rosenstein(henon_x[:1000], 2, horizon=10)
    b = lyapunov_rosenstein(jnp.asarray(henon_x[:1000]), 2, horizon=10)
    np.testing.assert_array_equal(a.divergence, b.divergence)
    assert a.exponent == b.exponent


def test_kantz_with_one_neighbour_is_rosenstein(henon_x):
    a = lyapunov_rosenstein(henon_x[:1000], 2, horizon=10, theiler=2)
    b = lyapunov_kantz(henon_x[:1000], 2, horizon=10, theiler=2, n_neighbours=1)
    np.testing.assert_allclose(a.divergence, b.divergence, rtol=0, atol=1e-12)


def test_neighbour_search_matches_brute_force(henon_x):
    """Chunked search = the nearest neighbour outside the Theiler window."""
    x = henon_x[:1000]  # the shapes of the tests above: no new compilation
    res = lyapunov_rosenstein(x, 2, horizon=10, theiler=4)
    X = np.asarray(delay_embedding(x, 2))
    m = X.shape[0] - 10
    d = np.linalg.norm(X[:m, None] - X[None, :m], axis=-1)
    i = np.arange(m)
    d[np.abs(i[:, None] - i[None, :]) <= 4] = np.inf
    j = d.argmin(axis=1)
    for k in (0, 3, 10):
        expected = np.mean(np.log(np.linalg.norm(X[i + k] - X[j + k], axis=1)))
        np.testing.assert_allclose(res.divergence[k], expected, rtol=tol(1e-10))


def test_the_float32_search_finds_the_nearest_neighbours(henon_x):
    """Without x64 the search takes differences: the product form's d^2 kept
    no digit of a near neighbour's distance there and ranked others first
    (the divergence 1.4 % off at k = 0, 4 % at k = 10; 25 of these 989
    references got a neighbour at distance 0 and were left out)."""
    x = np.asarray(henon_x[:1000], np.float32)
    with jax.enable_x64(False):
        res = lyapunov_rosenstein(x, 2, horizon=10, theiler=4)
    assert res.divergence.dtype == np.float32
    X = np.asarray(delay_embedding(x, 2), np.float64)  # float32 values, exact
    m = X.shape[0] - 10
    d = np.linalg.norm(X[:m, None] - X[None, :m], axis=-1)
    i = np.arange(m)
    d[np.abs(i[:, None] - i[None, :]) <= 4] = np.inf
    j = d.argmin(axis=1)
    assert res.counts[0] == m
    for k in (0, 3, 10):
        expected = np.mean(np.log(np.linalg.norm(X[i + k] - X[j + k], axis=1)))
        np.testing.assert_allclose(res.divergence[k], expected, rtol=1e-5)


def test_refit_over_a_chosen_range(henon_x):
    res = lyapunov_rosenstein(henon_x, 2, horizon=20, fit=(2.0, 9.0))
    assert (res.fit.t_start, res.fit.t_stop) == (2.0, 9.0)
    assert 0.38 <= res.exponent <= 0.46
    again = linear_region(res.times, res.divergence, (2.0, 9.0))
    assert again == res.fit


def test_linear_region_of_an_exact_curve():
    """Flat, then slope 0.5 for t in [2, 8], then flat: the region is found to
    within one sample at each end (a flat point beside a knee is within the
    tolerances), and the slope to within 2%."""
    t = np.linspace(0.0, 12.0, 61)
    y = np.clip(0.5 * (t - 2.0), 0.0, 3.0)
    fit = linear_region(t, y)
    assert fit.found
    assert abs(fit.t_start - 2.0) <= 0.21 and abs(fit.t_stop - 8.0) <= 0.21
    np.testing.assert_allclose(fit.slope, 0.5, rtol=0.02)
    inside = slice(fit.start, fit.stop)
    resid = np.abs(fit.line(t[inside]) - y[inside]).max()
    np.testing.assert_allclose(resid, fit.max_residual, rtol=1e-12)
    # strictly inside the ramp the line is exact
    exact = linear_region(t[10:41], y[10:41])
    assert (exact.t_start, exact.t_stop) == (2.0, 8.0)
    np.testing.assert_allclose(exact.slope, 0.5, rtol=1e-12)
    # a window of one flat end and the ramp has a knee: not taken whole
    knee = linear_region(t[:41], y[:41], {"min_points": 35})
    assert not knee.found and "no window" in knee.reason
    # a rise below min_rise is no region
    small = linear_region(t, 0.1 * y, {"min_rise": 1.0})
    assert not small.found and np.isnan(small.slope)
    # a given range that is not straight fails the tolerance, with the reason
    bent = linear_region(t, y, LinearRegionOptions(time_range=(0.0, 12.0)))
    assert not bent.found and "residual" in bent.reason


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"dimension": 0}, ValueError, "dimension must be >= 1"),
        ({"dimension": 2.5}, TypeError, "dimension must be an integer"),
        ({"dimension": 2, "lag": 0}, ValueError, "lag must be >= 1"),
        ({"dimension": 60, "lag": 2}, ValueError, "too short for the embedding"),
        ({"dimension": 2, "horizon": 95}, ValueError, "horizon=95 is too long"),
        ({"dimension": 2, "horizon": 0}, ValueError, "horizon must be >= 1"),
        ({"dimension": 2, "theiler": -1}, ValueError, "theiler must be >= 0"),
        ({"dimension": 2, "dt": 0.0}, ValueError, "dt"),
        ({"dimension": 2, "fit": (3.0, 1.0)}, ValueError, "t0 < t1"),
        ({"dimension": 2, "fit": {"tol": 0}}, ValueError, "tol"),
        ({"dimension": 2, "fit": {"tolerance": 0.1}}, TypeError, "unknown keys"),
        ({"dimension": 2, "fit": "auto"}, TypeError, "fit must be"),
    ],
)
def test_bad_input_names_the_argument(kwargs, error, match):
    x = np.sin(0.3 * np.arange(100.0))
    with pytest.raises(error, match=match):
        lyapunov_rosenstein(x, theiler=kwargs.pop("theiler", 2), **kwargs)


@pytest.mark.parametrize(
    "series, match",
    [
        (np.ones((10, 2)), "1-D array"),
        (np.array([1.0, np.nan, 2.0, 3.0, 4.0]), "finite"),
        (np.ones(2), "at least 4"),
    ],
)
def test_bad_series(series, match):
    with pytest.raises(ValueError, match=match):
        lyapunov_kantz(series, 1)


def test_kantz_options():
    x = np.sin(0.3 * np.arange(200.0))
    with pytest.raises(ValueError, match="n_neighbours must be >= 1"):
        lyapunov_kantz(x, 2, n_neighbours=0)
    with pytest.raises(ValueError, match="radius"):
        lyapunov_kantz(x, 2, radius=-1.0)
    with pytest.raises(ValueError, match="n_reference must be >= 1"):
        lyapunov_kantz(x, 2, n_reference=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoLinearRegionWarning)
        few = lyapunov_kantz(x, 2, horizon=5, n_reference=20, radius=1e-9)
    assert few.counts.max() <= 20
