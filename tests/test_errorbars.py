"""Standard errors of the exponents: the batch-means rule and its honesty.

Honesty is measured with sweeps over many initial conditions / frames / noise
realisations: the fraction of runs whose true exponent lies within 2 standard
errors is compared with the nominal ~95%. Measured coverage (jax 0.10.2, CPU,
these exact settings):

* random linear map (i.i.d. log-normal multipliers; the exponent's error is a
  genuine random walk): 94.5% / 94.75% for the two exponents, median |z| 0.66
  / 0.71 (a normal variable has 0.67): calibrated.
* linear ODE (frames from 256 seeds; the error is the deterministic 1/T
  alignment transient): 98.4% / 99.2% / 100%, median |z| 1.2-1.3: slightly
  conservative.
* logistic map r = 4 (256 initial conditions): 100%, median |z| 0.04. log|f'|
  is ln 2 plus a coboundary, so the estimate's error shrinks like 1/T while
  batch means shrink like T^(-3/4): honest but very conservative.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import tol

from lyapax._engine import stats as _stats
from lyapax.core import lyapunov_spectrum
from lyapax.integrators import rk4_step
from lyapax.sweep import sweep_lyapunov_spectrum
from lyapax.systems import henon_map

# The same configuration as tests/test_sweep.py, to share its compiled program.
KW = dict(renorm_every=4, t_transient=20.0, save_states=True, decimate=2)
X0 = jnp.array([0.1, 0.1])


def _coverage(result, truth):
    z = np.abs(np.asarray(result.exponents) - truth) / np.asarray(result.stderr)
    return np.mean(z < 2.0, axis=0), np.median(z, axis=0)


# ------------------------------------------------------------ the rule


@pytest.mark.parametrize(
    ("n", "expected"), [(1, 0), (2, 2), (3, 2), (15, 3), (100, 10), (1000, 31)]
)
def test_square_root_rule_for_the_number_of_batches(n, expected):
    assert _stats.batch_count(n) == expected


def test_stderr_is_nan_without_two_blocks_and_zero_for_constant_growth():
    assert np.all(np.isnan(_stats.batch_means_stderr(np.ones((1, 3)), 0.1, 0.1)))
    se = _stats.batch_means_stderr(np.full((50, 2), 0.3), 0.1, 5.0)
    np.testing.assert_allclose(se, 0.0, atol=1e-15)


def test_stderr_equals_hand_computed_batch_means():
    res = lyapunov_spectrum(henon_map(), X0, 1.0, 400, **KW)
    assert res.stderr.shape == (2,)
    history, times = np.asarray(res.history), np.asarray(res.times)
    cum = history * times[:, None]
    growth = np.diff(np.vstack([np.zeros(2), cum]), axis=0)  # 100 blocks
    tau = 10 * 4.0  # 10 batches of 10 blocks of 4 steps
    rates = growth.reshape(10, 10, 2).sum(axis=1) / tau
    expected = np.sqrt(np.var(rates, axis=0, ddof=1) * tau / times[-1])
    np.testing.assert_allclose(res.stderr, expected, rtol=tol(1e-10))


def test_a_resumed_chunk_uses_its_blocks_and_the_whole_run_length():
    first = lyapunov_spectrum(henon_map(), X0, 1.0, 400, **KW)
    res = lyapunov_spectrum(
        henon_map(), X0, 1.0, 400, renorm_every=4, resume=first.checkpoint
    )
    history, times = np.asarray(res.history), np.asarray(res.times)
    cum0 = np.asarray(first.checkpoint.cum_log_growth)
    order = np.argsort(-np.asarray(res.checkpoint.cum_log_growth))
    cum = history * times[:, None]
    growth = np.diff(np.vstack([cum0[order], cum]), axis=0)
    rates = growth.reshape(10, 10, 2).sum(axis=1) / 40.0
    expected = np.sqrt(np.var(rates, axis=0, ddof=1) * 40.0 / 800.0)
    np.testing.assert_allclose(res.stderr, expected, rtol=tol(1e-8))


def test_stderr_traces_under_jit():
    se = jax.jit(lambda x: lyapunov_spectrum(henon_map(), x, 1.0, 400, **KW).stderr)
    np.testing.assert_allclose(
        se(X0),
        lyapunov_spectrum(henon_map(), X0, 1.0, 400, **KW).stderr,
        rtol=tol(1e-12),
    )


# ------------------------------------------------------------ honesty


def _random_linear_map(x, i, key):
    """x -> diag(exp(mu + 0.3 u_i)) x with u_i i.i.d. standard normal, drawn
    from the step index: exponents mu, errors a Gaussian random walk."""
    u = jax.random.normal(jax.random.fold_in(jax.random.PRNGKey(key), i), (2,))
    return jnp.exp(MU + 0.3 * u.astype(x.dtype)) * x


_random_linear_map.uses_step_index = True
MU = jnp.array([0.0, -0.05])


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_random_linear_map_errors_are_calibrated():
    res = sweep_lyapunov_spectrum(
        _random_linear_map, jnp.ones(2), jnp.arange(400), 1.0, 4096
    )
    coverage, median_z = _coverage(res, np.asarray(MU))
    assert np.all((coverage > 0.91) & (coverage < 0.985)), coverage
    assert np.all((median_z > 0.5) & (median_z < 0.85)), median_z


@pytest.mark.slow
def test_linear_ode_truth_lies_within_two_standard_errors():
    A = jnp.array([[-0.5, 2.0, 0.0], [0.0, -1.0, 1.0], [0.0, 0.0, -2.0]])
    step = rk4_step(lambda x: A @ x, 0.01)
    res = sweep_lyapunov_spectrum(
        step, jnp.ones(3), None, 0.01, 5000, renorm_every=10, seed=np.arange(256)
    )
    coverage, _ = _coverage(res, np.array([-0.5, -1.0, -2.0]))
    assert np.all(coverage >= 0.93), coverage


@pytest.mark.float64_only(
    "in float32, 43 of these 256 orbits land on the fixed point 0 within 4096 "
    "steps (x = 1/2 -> 1 -> 0, exponent ln 4): coverage 0.83"
)
def test_logistic_map_truth_lies_within_two_standard_errors():
    x0s = np.random.default_rng(0).uniform(0.01, 0.99, (256, 1))
    res = sweep_lyapunov_spectrum(
        lambda x: 4.0 * x * (1.0 - x), None, None, 1.0, 4096, state0_batch=x0s
    )
    coverage, median_z = _coverage(res, np.log(2.0))
    assert np.all(np.isfinite(res.exponents))
    assert coverage[0] >= 0.95, coverage
    assert median_z[0] < 0.5  # conservative, as explained in the module docstring
