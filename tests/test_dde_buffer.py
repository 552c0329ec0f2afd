"""The delay ring buffer: its time convention and the tangent through it.

Exact checks on small arrays: a buffer holding known values returns the value
at ``t - tau`` for every ``t`` and ``tau``; Hermite reads are exact on cubics;
one step writes where the convention says; the jvp/vmap tangent over
``(state, buffer)`` equals the Jacobian from ``jax.jacfwd``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import OPS, tol

from lyapax import systems
from lyapax._engine.benettin import tangent_step
from lyapax._internal import history as _history
from lyapax.coupling import kuramoto_coupling, linear_coupling, sigmoidal_coupling
from lyapax.dde import (
    as_edge_coupling,
    constant_history_buf0,
    dde_problem,
    make_scalar_delayed_step_fn,
    network_dde_problem,
    scalar_delayed_history0,
)
from lyapax.dde._step import FlatStep
from lyapax.network import Network


def g(m):
    """A known signal of the step index, one value per (cvar, node)."""
    m = np.asarray(m, dtype=float)
    return np.stack([np.sin(0.3 * m + 1.0), np.cos(0.7 * m) + 2.0])[None]


def filled_buffer(t, horizon):
    """Slots holding the samples of times t - horizon + 1 ... t (convention)."""
    buf = np.zeros((horizon, 1, 2))
    for m in range(t - horizon + 1, t + 1):
        buf[m % horizon] = g(m)
    return jnp.asarray(buf)


@pytest.mark.parametrize("horizon", [1, 2, 5, 9])
def test_slot_holds_the_value_at_t_minus_tau(horizon):
    for t in range(0, 3 * horizon + 4):
        buf = filled_buffer(t, horizon)
        for s in range(horizon):
            got = _history.read_slot(buf, jnp.int32(t), s)
            # The sample as stored (rounded to float32 in a float32 run, and
            # to the pair of float32s that holds a float64 on a TPU).
            stored = np.asarray(jnp.asarray(g(t - s), dtype=got.dtype))
            np.testing.assert_array_equal(got, stored)


def test_per_edge_reads_take_each_edge_delay():
    horizon, t = 6, 23
    values = filled_buffer(t, horizon)  # (H, 1, 2): one cvar, two nodes
    steps = jnp.array([[0, 5], [3, 1]])
    out = _history.read_edges(values, jnp.int32(t), steps)  # (1, target, source)
    for i in range(2):
        for j in range(2):
            assert out[0, i, j] == g(t - int(steps[i, j]))[0, j]


def test_hermite_read_is_exact_on_a_cubic():
    dt, horizon = 0.1, 7
    uniform, edges = jax.jit(_history.hermite_uniform), jax.jit(_history.hermite_edges)

    def p(time):
        return 1.0 - 2.0 * time + 0.5 * time**2 + 3.0 * time**3

    def dp(time):
        return -2.0 + time + 9.0 * time**2

    for t in (0, 4, 19):
        buf = np.zeros((horizon, 2, 1, 1))
        for m in range(t - horizon + 1, t + 1):
            buf[m % horizon, 0] = p(m * dt)
            buf[m % horizon, 1] = dp(m * dt)
        buf = jnp.asarray(buf)
        for position in (-6.0, -4.3, -1.0, -0.25, 0.0):
            got = uniform(buf, jnp.int32(t), position, dt)
            np.testing.assert_allclose(
                got[0, 0], p((t + position) * dt), rtol=tol(1e-13, OPS)
            )
        positions = jnp.array([[-2.5, -1.0], [-5.75, -0.5]])
        got = edges(buf, jnp.int32(t), positions, dt)
        np.testing.assert_allclose(
            got[0], p((t + positions) * dt), rtol=tol(1e-13, OPS)
        )


@pytest.mark.parametrize("tau_steps", [1, 3, 4])
def test_one_step_reads_t_minus_tau_and_writes_slot_t_plus_1(tau_steps):
    """dx/dt = x(t - tau) with Euler: x_next = x_t + dt * x_{t - tau}, exactly."""
    dt, horizon = 0.05, tau_steps + 1
    step = make_scalar_delayed_step_fn(
        lambda x, xd: xd, 1, tau_steps, dt, integrator="euler"
    )

    def signal(m):
        return np.array([[np.sin(0.3 * m + 1.0)]])

    for t in range(0, 2 * horizon + 3):
        buf = np.zeros((horizon, 1, 1))
        for m in range(t - horizon + 1, t + 1):
            buf[m % horizon] = signal(m)
        X = jnp.asarray(signal(t))
        (X1, buf1, t1, _), out = step((X, jnp.asarray(buf), jnp.int32(t), {}), None)
        expected = signal(t) + dt * signal(t - tau_steps)
        np.testing.assert_allclose(X1, expected, rtol=tol(1e-15, OPS))
        np.testing.assert_array_equal(out, X1)
        assert int(t1) == t + 1
        np.testing.assert_array_equal(buf1[(t + 1) % horizon], X1)
        untouched = [k for k in range(horizon) if k != (t + 1) % horizon]
        stored = np.asarray(jnp.asarray(buf, dtype=buf1.dtype))  # as the step got it
        np.testing.assert_array_equal(np.asarray(buf1)[untouched], stored[untouched])


def test_initial_history_slot_order():
    """Slot 0 is now, slot H - j is j steps ago (history function form)."""
    dt, tau = 0.1, 0.4  # horizon 5
    problem = dde_problem(
        systems.linear_scalar_dde(1.0), 7.0, tau, dt, history=lambda t: 10.0 * t
    )
    buf = np.asarray(problem.buf0)[:, 0, 0]
    assert problem.horizon == 5
    np.testing.assert_allclose(buf, [7.0, -4.0, -3.0, -2.0, -1.0], rtol=tol(1e-14, OPS))
    interp = dde_problem(
        systems.linear_scalar_dde(1.0),
        7.0,
        tau,
        dt,
        history=lambda t: t**2,
        interpolate=True,
    )
    b = np.asarray(interp.buf0)[:, :, 0, 0]
    lags = np.array([0, -4, -3, -2, -1]) * dt
    np.testing.assert_allclose(b[1:, 0], lags[1:] ** 2, rtol=tol(1e-14, OPS))
    np.testing.assert_allclose(b[1:, 1], 2 * lags[1:], rtol=tol(1e-14, OPS))
    assert b[0, 0] == 7.0


def test_constant_history_builders():
    X0, buf0 = scalar_delayed_history0(jnp.array([1.0, 2.0]), 3)
    assert X0.shape == (2, 1) and buf0.shape == (4, 2, 1)
    np.testing.assert_array_equal(buf0, jnp.broadcast_to(X0, (4, 2, 1)))
    buf = constant_history_buf0(jnp.ones((1, 5)), 6, interpolate=True)
    assert buf.shape == (6, 2, 1, 5)
    np.testing.assert_array_equal(buf[:, 0], 1.0)
    np.testing.assert_array_equal(buf[:, 1], 0.0)


def _flat_problem_step(problem):
    flat = FlatStep(
        problem.step_fn, problem.params, problem.state0.shape, problem.buf0.shape
    )
    rng = np.random.default_rng(1)
    z = jnp.concatenate([problem.state0.ravel(), problem.buf0.ravel()])
    # A generic point of the phase space, not the constant initial history.
    z = z + 0.1 * jnp.asarray(rng.standard_normal(z.shape))
    return flat, z


@pytest.mark.parametrize(
    "interpolate", [False, pytest.param(True, marks=pytest.mark.slow)]
)
def test_tangent_equals_jacfwd_on_state_and_buffer(interpolate):
    mg = dde_problem(
        systems.mackey_glass(),
        1.2,
        0.35 if interpolate else 0.3,
        0.1,
        integrator="rk4",
        interpolate=interpolate,
    )
    n = 3
    taus = np.array([[0.0, 0.2, 0.33], [0.1, 0.0, 0.25], [0.3, 0.15, 0.0]])
    net = network_dde_problem(
        lambda x, c, p: jnp.stack([x[1] + c[0], -x[0] + 0.1 * jnp.sin(x[1])]),
        Network(jnp.ones((n, n)) - jnp.eye(n), (0,)),
        kuramoto_coupling(alpha=0.3),
        {"G": 1.5},
        jnp.array([[0.1, 0.5, -0.3], [0.2, 0.0, 0.4]]),
        0.05,
        tau=taus if interpolate else np.round(taus / 0.05) * 0.05,
        interpolate=interpolate,
    )
    for problem in (mg, net):
        flat, z = _flat_problem_step(problem)
        jacobian = jax.jit(lambda x, t, f=flat: jax.jacfwd(lambda y: f(y, t))(x))
        tangent = jax.jit(lambda x, Y, t, f=flat: tangent_step(f, x, Y, t)[1])
        k = 4
        Y = jnp.asarray(np.random.default_rng(2).standard_normal((z.size, k)))
        for t in (0, 5, 17):
            J = jacobian(z, jnp.int32(t))
            JY = tangent(z, Y, jnp.int32(t))
            np.testing.assert_allclose(JY, J @ Y, rtol=tol(1e-10), atol=tol(1e-12))


def _plain_kuramoto(x, w, p):
    n = x.shape[-1]
    return p["G"] / n * jnp.sum(w * jnp.sin(x[:, None, :] - x[:, :, None] + 0.3), -1)


@pytest.mark.parametrize(
    "coupling",
    [
        linear_coupling(a=0.7, b=0.1),
        kuramoto_coupling(alpha=0.3),
        sigmoidal_coupling(a=1.2, b=-0.1, midpoint=0.2, sigma=0.5),
        _plain_kuramoto,
    ],
    ids=["linear", "kuramoto", "sigmoidal", "plain"],
)
def test_edge_couplings_agree_with_the_plain_form_and_uniform_path(coupling):
    """With one delay, every coupling form gives the plain coupling's value."""
    rng = np.random.default_rng(4)
    n = 5
    W = jnp.asarray(rng.random((n, n)) * (1 - np.eye(n)))
    src, cur = jnp.asarray(rng.random((1, n))), jnp.asarray(rng.random((1, n)))
    params = {"G": 1.7}
    edge = as_edge_coupling(coupling)
    delayed = jnp.broadcast_to(src[:, None, :], (1, n, n))
    by_edge = edge(delayed, cur, W, params)
    np.testing.assert_allclose(
        edge.uniform(src, cur, W, params), by_edge, rtol=tol(1e-12)
    )
    # Row i of the plain coupling on the network as node i sees it.
    for i in range(n):
        view = src.at[:, i].set(cur[:, i])
        want = coupling(view, W, params)[:, i]
        np.testing.assert_allclose(by_edge[:, i], want, rtol=tol(1e-12))
