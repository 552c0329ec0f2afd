"""Delay-equation spectra against exact references.

Linear DDEs have characteristic roots given by the Lambert W function, so their
leading exponents are known exactly; Mackey-Glass is checked structurally.
"""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import lambertw
from support.precision import tol

from lyapax import systems
from lyapax.core import kaplan_yorke_dimension
from lyapax.coupling import linear_coupling
from lyapax.dde import dde_problem, lyapunov_spectrum_dde, network_dde_problem
from lyapax.network import Network


def lambert_rate(a, tau):
    """Rightmost root of lambda = -a exp(-lambda tau): Re W0(-a tau) / tau."""
    return float((lambertw(-a * tau, k=0) / tau).real)


def scalar_rate(a, tau, dt, *, t_total=20.0, **kw):
    problem = dde_problem(systems.linear_scalar_dde(a), 1.0, tau, dt, **kw)
    result = lyapunov_spectrum_dde(
        problem,
        n_steps=10 * round(t_total / dt / 10),
        k=1,
        renorm_every=10,
        t_transient=10.0,
    )
    return float(result.exponents[0])


@pytest.mark.slow
def test_grid_mode_is_first_order_and_within_1e_2():
    a, tau = 1.0, 0.3
    exact = lambert_rate(a, tau)
    errors = [abs(scalar_rate(a, tau, dt) - exact) for dt in (0.003, 0.0015)]
    assert errors[0] < 1e-2
    assert errors[1] < errors[0]
    assert 1.6 < errors[0] / errors[1] < 2.4  # first order in dt


def test_interpolated_rk4_is_exact_to_1e_6_off_grid():
    a, tau, dt = 1.0, 0.317, 0.01  # tau / dt = 31.7: not a multiple
    got = scalar_rate(a, tau, dt, integrator="rk4", interpolate=True)
    assert abs(got - lambert_rate(a, tau)) < tol(1e-6)


@pytest.mark.slow
def test_interpolated_heun_converges_at_order_two():
    a, tau = 1.0, 0.317
    exact = lambert_rate(a, tau)
    errors = [
        abs(scalar_rate(a, tau, dt, interpolate=True) - exact) for dt in (0.02, 0.01)
    ]
    order = np.log2(errors[0] / errors[1])
    assert 1.8 < order < 2.2


def test_small_delay_recovers_ode_decay():
    a, dt = 1.0, 1e-3
    got = scalar_rate(a, dt, dt, integrator="rk4", interpolate=True)
    assert abs(got - lambert_rate(a, dt)) < tol(1e-6)
    assert abs(got + a) < 2e-3  # -a (1 + a tau + ...) -> -a as tau -> 0


def _linear_dfun(x, c, p):
    return p["gamma"] * x + c


GAMMA, G = -1.0, 0.5
TWO_NODES = jnp.array([[0.0, 1.0], [1.0, 0.0]])


def two_node_rates(tau):
    """Symmetric and antisymmetric modes: gamma + W0(+-G tau e^{-gamma tau}) / tau."""
    z = G * tau * np.exp(-GAMMA * tau)
    return (
        GAMMA + float((lambertw(z) / tau).real),
        GAMMA + float((lambertw(-z) / tau).real),
    )


def two_node_spectrum(tau, dt, network=None, **kw):
    problem = network_dde_problem(
        _linear_dfun,
        network or Network(TWO_NODES, (0,)),
        linear_coupling(),
        {"gamma": GAMMA, "G": G},
        jnp.array([0.3, -0.2]),
        dt,
        tau=tau,
        **kw,
    )
    result = lyapunov_spectrum_dde(
        problem, n_steps=round(20.0 / dt), k=2, renorm_every=10, t_transient=5.0
    )
    return np.asarray(result.exponents)


def test_two_node_network_symmetric_and_antisymmetric_lambert_roots():
    tau, dt = 0.2, 0.005
    got = two_node_spectrum(tau, dt, integrator="rk4", interpolate=True)
    np.testing.assert_allclose(got, two_node_rates(tau), atol=1e-5)


def test_per_edge_delays_equal_to_uniform_give_the_uniform_result():
    tau, dt = 0.2, 0.005
    uniform = two_node_spectrum(tau, dt)
    per_edge = two_node_spectrum(np.full((2, 2), tau), dt)
    steps = Network(TWO_NODES, (0,), delay_steps=np.full((2, 2), 40))
    from_steps = two_node_spectrum(None, dt, network=steps)
    np.testing.assert_allclose(per_edge, uniform, rtol=1e-10)
    np.testing.assert_allclose(from_steps, uniform, rtol=1e-10)
    np.testing.assert_allclose(uniform, two_node_rates(tau), atol=5e-3)  # grid


@pytest.mark.slow
def test_mackey_glass_is_chaotic_with_dimension_between_2_and_3():
    problem = dde_problem(
        systems.mackey_glass(0.2, 0.1, 10), 1.2, 17.0, 0.5, interpolate=True
    )
    result = lyapunov_spectrum_dde(
        problem, n_steps=40_000, k=5, renorm_every=10, t_transient=1000.0
    )
    lam = np.asarray(result.exponents)
    assert 1e-3 < lam[0] < 2e-2  # small positive
    assert abs(lam[1]) < 1e-3  # the flow direction
    assert np.all(lam[2:] < -1e-2)  # negative tail
    assert 2.0 < kaplan_yorke_dimension(lam, d_total=problem.buf0.size + 1) < 3.0
