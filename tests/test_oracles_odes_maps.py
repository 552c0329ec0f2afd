"""Exponents of ODEs and maps against exact or structural references."""

import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import RUN, tol

from lyapax.core import lyapunov_spectrum, ode_problem
from lyapax.systems import (
    henon_map,
    linear_system,
    logistic_map,
    lorenz,
    lorenz96,
    rossler,
    tent_map,
)

LINEAR_CASES = {
    # distinct real eigenvalues, non-normal
    "real": np.array([[0.3, 1.0, 0.0], [0.0, -0.4, 0.5], [0.0, 0.0, -1.1]]),
    # a complex pair (-0.2 +- 2i) and a real eigenvalue -0.9
    "complex": np.array([[-0.2, 2.0, 0.3], [-2.0, -0.2, 0.0], [0.0, 0.0, -0.9]]),
}


@pytest.mark.parametrize("dt", [0.02, 0.01])
@pytest.mark.parametrize("name", sorted(LINEAR_CASES))
def test_linear_ode_spectrum_is_real_part_of_eigenvalues(name, dt, jax_results):
    A = LINEAR_CASES[name]
    expected = np.sort(np.linalg.eigvals(A).real)[::-1]
    n_steps = int(round(400.0 / dt))
    res = lyapunov_spectrum(
        ode_problem(linear_system(A), jnp.ones(3), dt),
        n_steps=n_steps,
        renorm_every=10,
        t_transient=20.0,
    )
    # Bounded alignment offsets decay like 1/T: 5e-3 at T = 400.
    np.testing.assert_allclose(res.exponents, expected, atol=5e-3)
    # Compared across backends with --jax-backend (non-chaotic: round-off only).
    jax_results.record("exponents", res.exponents)


def test_logistic_map_r4_is_ln2():
    res = lyapunov_spectrum(
        logistic_map(4.0), jnp.array([0.3]), dt=1.0, n_steps=200_000, t_transient=100
    )
    # Statistical error ~ sigma/sqrt(N) ~ 2e-3 for N = 2e5.
    assert abs(float(res.exponents[0]) - np.log(2.0)) < 1e-2


def test_tent_map_is_exactly_ln2(jax_results):
    res = lyapunov_spectrum(tent_map(), jnp.array([0.1234]), dt=1.0, n_steps=5_000)
    # |f'| = 2 everywhere, so every step contributes exactly log 2 (float32:
    # the running sum of 5 000 of them rounds at 2e-5 relative).
    assert abs(float(res.exponents[0]) - np.log(2.0)) < tol(1e-12)
    jax_results.record("exponents", res.exponents)


def test_henon_sum_and_values(jax_results):
    res = lyapunov_spectrum(
        henon_map(), jnp.array([0.1, 0.1]), dt=1.0, n_steps=100_000, t_transient=100
    )
    lam = np.asarray(res.exponents)
    # |det J| = b at every point: the sum is exact up to rounding.
    assert abs(lam.sum() - np.log(0.3)) < tol(1e-10)
    np.testing.assert_allclose(lam, [0.419, -1.623], atol=1e-2)
    # Chaotic: orbits of two backends part, so the estimates agree within stderr.
    jax_results.record("exponents", res.exponents, stderr=res.stderr)


@pytest.mark.parametrize("dt", [0.01, 0.005])
def test_lorenz_sum_and_values(dt, jax_results):
    sigma, beta = 10.0, 8.0 / 3.0
    res = lyapunov_spectrum(
        ode_problem(lorenz(sigma=sigma, beta=beta), jnp.array([1.0, 1.0, 1.0]), dt),
        n_steps=int(round(1000.0 / dt)),
        renorm_every=10,
        t_transient=50.0,
    )
    lam = np.asarray(res.exponents)
    # The trace is constant, so the sum is exact up to the O(dt^4) RK4 error
    # (measured ~1.0e-4 at dt = 0.01).  In float32 the rounding of 10^5
    # steps dominates: RUN relative to the sum (a TPU measured 1.0e-4 at
    # dt = 0.005).
    trace = sigma + 1.0 + beta
    assert abs(lam.sum() + trace) < tol(2e4 * dt**4, RUN * trace)
    # T = 1000 leaves a statistical error of ~1e-2 on lambda_1.
    np.testing.assert_allclose(lam, [0.906, 0.0, -14.572], atol=3e-2)
    jax_results.record("exponents", res.exponents, stderr=res.stderr)


@pytest.mark.parametrize("dt", [0.02, 0.01])
def test_rossler_sum_is_a_minus_c_plus_mean_x(dt):
    a, c = 0.2, 5.7
    res = lyapunov_spectrum(
        ode_problem(rossler(a=a, c=c), jnp.array([1.0, 1.0, 0.0]), dt),
        n_steps=int(round(1000.0 / dt)),
        renorm_every=10,
        t_transient=50.0,
        save_states=True,
    )
    mean_x = float(jnp.mean(res.trajectory[:, 0]))
    # div f = a + x - c along the orbit; its time average is the exact sum.
    assert abs(float(jnp.sum(res.exponents)) - (a - c + mean_x)) < 2e-3
    assert float(res.exponents[0]) > 0.05


@pytest.mark.parametrize("n", [8, pytest.param(12, marks=pytest.mark.slow)])
def test_lorenz96_sum_is_minus_n_with_one_zero_exponent(n, jax_results):
    x0 = 8.0 * jnp.ones(n) + 0.01 * jnp.arange(n)
    res = lyapunov_spectrum(
        ode_problem(lorenz96(F=8.0), x0, 0.01),
        n_steps=20_000,
        renorm_every=10,
        t_transient=20.0,
    )
    lam = np.asarray(res.exponents)
    # Constant trace -N: exact up to the RK4 truncation (~5e-6 at dt = 0.01);
    # in float32 up to a run's rounding relative to the sum (a TPU: 1.7e-4).
    assert abs(lam.sum() + n) < tol(1e-4, RUN * n)
    # Exactly one exponent (the flow direction) is ~0; the others are away from 0.
    gaps = np.sort(np.abs(lam))
    assert gaps[0] < 0.02
    assert gaps[1] > 3 * gaps[0]
    assert lam[0] > 0.5
    jax_results.record("exponents", res.exponents, stderr=res.stderr)
