"""The 0-1 test for chaos (Gottwald & Melbourne): K near 1 for chaotic and
near 0 for regular series, one vmapped program for a parameter grid, seeded
frequencies, and clear errors for bad input."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import tol

from lyapax.indicators import zero_one_test
from lyapax.sweep import sweep_trajectory

N = 3000


def logistic(x, params):
    return params["r"] * x * (1.0 - x)


@pytest.fixture(scope="module")
def logistic_series():
    """Orbits of the logistic map for r = 4, 3.5 (period 4), 3.83 (period 3)
    and 3.7 (chaotic), from one sweep: rows ``(4, N)``."""
    rs = jnp.array([4.0, 3.5, 3.83, 3.7])
    traj = sweep_trajectory(
        logistic, jnp.array([0.3]), {"r": rs}, dt=1.0, n_steps=N, t_transient=1000.0
    )
    return np.asarray(traj.states[..., 0])


@pytest.fixture(scope="module")
def logistic_k(logistic_series):
    return zero_one_test(logistic_series)


def test_logistic_chaotic_and_periodic(logistic_k):
    res = logistic_k
    assert res.K.shape == (4,)
    assert res.K_per_frequency.shape == (4, 100)
    assert res.n_cut == N // 10
    k4, k35, k383, k37 = np.asarray(res.K)
    assert k4 > 0.9  # r = 4: fully chaotic
    assert k35 < 0.1  # r = 3.5: period 4
    assert k383 < 0.1  # r = 3.83: the period-3 window
    assert k37 > 0.9  # r = 3.7: chaotic
    # the frequencies are shared by the batch and lie in (pi/5, 4 pi/5)
    c = np.asarray(res.frequencies)
    assert c.shape == (100,) and np.all((c > np.pi / 5) & (c < 4 * np.pi / 5))


def test_batch_rows_equal_single_calls_and_chunks(logistic_series, logistic_k):
    """One program for the batch gives each row's own result, in any chunking."""
    for i in (0, 1):
        one = zero_one_test(logistic_series[i])
        assert one.K.shape == ()
        np.testing.assert_allclose(logistic_k.K[i], one.K, rtol=0, atol=tol(1e-12))
    nested = zero_one_test(logistic_series.reshape(2, 2, N))  # same program
    assert nested.K.shape == (2, 2)
    np.testing.assert_allclose(nested.K.reshape(4), logistic_k.K, rtol=0, atol=0)
    chunked = zero_one_test(logistic_series, batch_size=3)  # 2 chunks, padded
    np.testing.assert_allclose(chunked.K, logistic_k.K, rtol=0, atol=tol(1e-12))


def test_direct_displacement_sum_matches_the_fft_form():
    """K_c from the FFT form equals a direct O(N n_cut) evaluation."""
    rng = np.random.default_rng(1)
    phi = rng.normal(size=400) + 0.3
    res = zero_one_test(phi, n_frequencies=3, seed=5, n_cut=40)
    n, m = phi.size, np.arange(1, 41)
    # The reference on the host: complex128 arithmetic on a TPU's arrays
    # aborts the process in XLA's TPU compiler (seen there in float64).
    freqs, ks = np.asarray(res.frequencies), np.asarray(res.K_per_frequency)
    for c, kc in zip(freqs, ks, strict=True):
        z = np.cumsum(phi * np.exp(1j * c * np.arange(1, n + 1)))
        msd = np.array([np.mean(np.abs(z[k:] - z[:-k]) ** 2) for k in m])
        d = msd - phi.mean() ** 2 * (1 - np.cos(m * c)) / (1 - np.cos(c))
        np.testing.assert_allclose(kc, np.corrcoef(m, d)[0, 1], rtol=0, atol=tol(1e-10))


def test_seed_sets_the_frequencies():
    x = np.sin(0.7 * np.arange(2000)) + 0.5 * np.sin(1.9 * np.arange(2000))
    a, b = zero_one_test(x, seed=3), zero_one_test(jnp.asarray(x), seed=3)
    np.testing.assert_array_equal(a.frequencies, b.frequencies)
    np.testing.assert_allclose(a.K, b.K, rtol=0, atol=1e-12)
    assert not np.allclose(a.frequencies, zero_one_test(x, seed=4).frequencies)
    assert abs(float(a.K)) < 0.1  # quasi-periodic: regular


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"series": np.zeros(10)}, "at least 20"),
        ({"series": 1.0}, "non-empty"),
        ({"series": np.full(100, np.nan)}, "finite"),
        ({"series": np.ones(100), "n_cut": 80}, "n_cut=80"),
        ({"series": np.ones(100), "n_cut": 1}, "n_cut must be >= 2"),
        ({"series": np.ones(100), "n_frequencies": 0}, "n_frequencies must be"),
        ({"series": np.ones(100), "batch_size": 0}, "batch_size must be"),
    ],
)
def test_bad_input_names_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        zero_one_test(**kwargs)


def test_complex_series_is_rejected():
    with pytest.raises(TypeError, match="real"):
        zero_one_test(np.ones(100, dtype=complex))


@pytest.mark.slow
def test_works_under_jit_and_vmap():
    """A pure function of the series: jit and vmap give the eager numbers."""
    x = jnp.asarray(np.random.default_rng(2).normal(size=(3, 400)))
    eager = zero_one_test(x, n_frequencies=8).K
    jitted = jax.jit(lambda s: zero_one_test(s, n_frequencies=8).K)(x)
    mapped = jax.vmap(lambda s: zero_one_test(s, n_frequencies=8).K)(x)
    np.testing.assert_allclose(jitted, eager, rtol=0, atol=1e-12)
    np.testing.assert_allclose(mapped, eager, rtol=0, atol=1e-12)
