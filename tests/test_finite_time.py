"""Finite-time exponents against exact distributions: tent map (ln 2 in every
window), asymmetric tent map (binomial mean and spread), logistic map at
r = 4 (n * std -> pi / sqrt 6); the windows come from the one Benettin run."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import OPS, RUN, tol

from lyapax import lyapunov_spectrum, ode_problem
from lyapax.finite_time import finite_time_exponents
from lyapax.sweep import problem_family
from lyapax.systems import linear_system, logistic_map, lorenz, tent_map


@pytest.mark.parametrize("window", [1, 4, 10, 50])
def test_tent_map_is_ln2_in_every_window(window):
    res = finite_time_exponents(tent_map(), jnp.array([0.3]), 1.0, 1000, window)
    assert res.exponents.shape == (1000 // window, 1)
    np.testing.assert_allclose(res.times, window * np.arange(1, 1000 // window + 1))
    # A window is a difference of running sums (history x time): in float32
    # near t = 1000 each carries a few ulp of 693 (6e-5 each, /window).
    ulp = float(np.spacing(np.float32(1000 * np.log(2))))
    atol = tol(1e-12, max(RUN, 4 * ulp / window))
    np.testing.assert_allclose(res.exponents, np.log(2), rtol=0, atol=atol)


def asymmetric_tent(p):
    return lambda x: jnp.where(x < p, x / p, (1.0 - x) / (1.0 - p))


@pytest.mark.parametrize("n", [4, 16])
def test_asymmetric_tent_map_windows_are_binomial(n):
    p, members = 0.3, 4000
    x0 = np.random.default_rng(1).uniform(0.0, 1.0, (members, 1))
    res = finite_time_exponents(
        asymmetric_tent(p), None, 1.0, 4 * n, n, state0_batch=x0
    )
    assert res.exponents.shape == (members, 4, 1)
    mean = -p * np.log(p) - (1 - p) * np.log(1 - p)
    std = np.sqrt(p * (1 - p)) * abs(np.log((1 - p) / p)) / np.sqrt(n)
    samples = res.samples()[:, 0]  # 16 000 windows
    # Statistical tolerances: 5 standard errors of the mean and of the std.
    assert abs(res.mean()[0] - mean) < 5 * std / np.sqrt(samples.size)
    assert abs(res.std()[0] - std) < 5 * std / np.sqrt(2 * samples.size) + 0.01 * std
    # Every window is a binomial mixture of the two log-slopes.
    m = (samples * n - n * np.log(1 / (1 - p))) / (np.log(1 / p) - np.log(1 / (1 - p)))
    np.testing.assert_allclose(m, np.round(m), atol=tol(1e-9))


@pytest.mark.slow
def test_logistic_map_spread_decays_like_one_over_n():
    x0 = np.random.default_rng(2).uniform(0.0, 1.0, (4000, 1))
    n = 64
    res = finite_time_exponents(
        logistic_map(4.0), None, 1.0, 20 * n, n, state0_batch=x0, t_transient=100.0
    )
    np.testing.assert_allclose(res.mean(), np.log(2), atol=2e-3)
    np.testing.assert_allclose(n * res.std()[0], np.pi / np.sqrt(6), rtol=0.04)


def test_windows_come_from_the_same_run_and_average_to_its_exponents():
    problem = ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), 0.01)
    kw = dict(renorm_every=10, t_transient=5.0, seed=3)
    res = finite_time_exponents(problem, 4000, window=2.0, **kw)
    full = lyapunov_spectrum(problem, 4000, **kw)
    assert res.exponents.shape == (20, 3)
    np.testing.assert_allclose(res.lyapunov, full.exponents, rtol=tol(1e-13, OPS))
    np.testing.assert_allclose(
        res.mean(), full.exponents, rtol=tol(1e-11), atol=tol(1e-12)
    )
    values, edges = res.histogram(column=0, bins=5)
    assert values.shape == (5,) and edges.shape == (6,)
    np.testing.assert_allclose(np.sum(values * np.diff(edges)), 1.0)


def test_linear_map_family_gives_one_distribution_per_parameter():
    # x -> a x: every window's exponent is ln|a|, one row per a.
    a = np.array([0.5, 2.0, 3.0])
    fam = problem_family(
        lambda p: ode_problem(
            lambda x: p * x, jnp.array([1e-3]), 1.0, integrator="euler"
        )
    )
    res = finite_time_exponents(fam, 60, window=2.0, params_batch=a - 1.0)
    np.testing.assert_allclose(
        res.exponents[..., 0], np.log(a)[:, None] * np.ones(30), rtol=tol(1e-7, 1e-5)
    )


def test_continuous_linear_system_windows():
    M = jnp.array([[0.1, 0.0], [0.0, -0.4]])
    problem = ode_problem(linear_system(M), jnp.array([1.0, 1.0]), 0.05)
    res = finite_time_exponents(
        problem, 400, window=1.0, renorm_every=4, t_transient=60.0
    )
    # The frame has aligned (to exp(-0.5 * 60)); RK4's growth error is ~1e-9.
    np.testing.assert_allclose(res.exponents, [[0.1, -0.4]] * 20, atol=tol(1e-8))


def test_bad_windows_are_rejected_with_the_argument_named():
    problem = ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), 0.01)
    with pytest.raises(ValueError, match="whole multiple of the renormalisation"):
        finite_time_exponents(problem, 1000, window=0.15, renorm_every=10)
    with pytest.raises(ValueError, match="window must be"):
        finite_time_exponents(problem, 1000, window=-1.0)
    with pytest.raises(ValueError, match="not a whole number of windows"):
        finite_time_exponents(problem, 1000, window=0.3, renorm_every=10)
    with pytest.raises(TypeError, match="window="):
        finite_time_exponents(problem, 1000)


# --- time-dependent right-hand sides and backward time ------------------------
A0, A1, W = -0.2, 1.0, 1.3


def modulated(t, x):  # dx/dt = a(t) x, a(t) = A0 + A1 cos(W t)
    return (A0 + A1 * jnp.cos(W * t)) * x


def mean_rate(t_start, t_end):
    return A0 + A1 * (np.sin(W * t_end) - np.sin(W * t_start)) / (W * (t_end - t_start))


def test_time_dependent_exponent_is_the_time_average_of_a():
    problem = ode_problem(
        modulated, jnp.array([1.0]), 0.01, t0=0.5, time_dependent=True
    )
    res = lyapunov_spectrum(problem, 1000)
    np.testing.assert_allclose(res.exponents[0], mean_rate(0.5, 10.5), atol=tol(1e-9))
    assert int(res.checkpoint.step) == 1000  # the time is in the checkpoint
    windows = finite_time_exponents(problem, 1000, window=1.0)
    ends = 0.5 + windows.times
    np.testing.assert_allclose(
        windows.exponents[:, 0], mean_rate(ends - 1.0, ends), rtol=0, atol=tol(1e-9)
    )


def test_time_dependent_resume_continues_at_the_right_time():
    problem = ode_problem(modulated, jnp.array([1.0]), 0.01, time_dependent=True)
    first = lyapunov_spectrum(problem, 300, t_transient=2.0)
    second = lyapunov_spectrum(problem, 400, resume=first.checkpoint)
    # Transient [0, 2], measured [2, 9]: the resumed run ends at t = 9.
    np.testing.assert_allclose(second.exponents[0], mean_rate(2.0, 9.0), atol=tol(1e-9))


def test_time_dependent_sweep_over_initial_states():
    from lyapax.sweep import sweep_lyapunov_spectrum

    problem = ode_problem(modulated, jnp.array([1.0]), 0.01, time_dependent=True)
    res = sweep_lyapunov_spectrum(
        problem, None, None, None, 500, state0_batch=np.array([[1.0], [-2.0], [3.0]])
    )
    np.testing.assert_allclose(res.exponents[:, 0], mean_rate(0.0, 5.0), atol=tol(1e-9))


@pytest.mark.parametrize("form", ["backward", "negative dt"])
def test_backward_time_gives_the_reversed_flows_exponents(form):
    M = jnp.array([[0.1, 0.0], [0.0, -0.4]])
    kw = {"backward": True} if form == "backward" else {}
    dt = 0.05 if form == "backward" else -0.05
    problem = ode_problem(linear_system(M), jnp.array([1.0, 1.0]), dt, **kw)
    assert problem.dt == 0.05
    res = lyapunov_spectrum(problem, 400, renorm_every=4, t_transient=60.0)
    np.testing.assert_allclose(res.exponents, [0.4, -0.1], atol=tol(1e-8))


def test_time_dependent_bad_input():
    with pytest.raises(ValueError, match="fixed-step tableau name"):
        ode_problem(
            modulated,
            jnp.array([1.0]),
            0.01,
            time_dependent=True,
            integrator=lambda rhs, dt: rhs,
        )
    with pytest.raises(TypeError, match="backward must be True or False"):
        ode_problem(modulated, jnp.array([1.0]), 0.01, backward="yes")
    with pytest.raises(ValueError, match="maps and delay equations run forward"):
        lyapunov_spectrum(tent_map(), jnp.array([0.3]), -1.0, 10)


def test_time_dependent_run_until_converged_keeps_the_clock():
    from lyapax.converge import run_until_converged

    # a(t) of period 2 pi / W: chunks of 100 steps (t = 1) resume at their
    # own times, so the chunked run equals one run of the same length.
    problem = ode_problem(modulated, jnp.array([1.0]), 0.01, time_dependent=True)
    run = run_until_converged(
        problem, tol=1e-12, max_steps=500, chunk_steps=100, min_blocks=2
    )
    np.testing.assert_allclose(
        run.result.exponents[0], mean_rate(0.0, 5.0), atol=tol(1e-9)
    )
