"""Names, signatures and messages kept from lyapax 0.3.0 (see docs/differences.md)."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import tol
from support.warned import assert_warned_here

import lyapax
from lyapax import kaplan_yorke_dimension, lyapunov_spectrum, ode_problem, systems
from lyapax.dde import (
    dde_problem,
    effective_tau,
    lyapunov_spectrum_dde,
    network_dde_problem,
    resolve_tau_steps,
    tau_eff,
)
from lyapax.diagnostics import convergence_drift
from lyapax.integrators import rk4_step
from lyapax.network import Network, network_problem
from lyapax.simulator import Connectivity
from lyapax.utils import simulate_trajectory


def _decay_problem(d=2, dt=1e-2):
    return ode_problem(lambda x: -x, jnp.ones(d), dt)


def test_trajectory_indexes_like_its_states():
    traj = simulate_trajectory(rk4_step(lambda x: -x, 0.1), jnp.array([1.0, 2.0]), 10)
    times, states = traj  # our record still unpacks
    assert traj.shape == states.shape == (10, 2) and traj.ndim == 2
    assert traj.dtype == states.dtype
    np.testing.assert_array_equal(traj[3:, 0], states[3:, 0])
    np.testing.assert_array_equal(np.asarray(traj), np.asarray(states))
    # exact RK4 amplification of x' = -x per step: 1 - h + h^2/2 - h^3/6 + h^4/24
    h = 0.1
    growth = 1 - h + h**2 / 2 - h**3 / 6 + h**4 / 24
    np.testing.assert_allclose(
        traj[:, 1], 2.0 * growth ** np.arange(1, 11), rtol=tol(1e-12)
    )
    np.testing.assert_array_equal(times, 1.0 + np.arange(10))  # steps without dt


def test_convergence_drift_without_tol_has_no_verdict():
    result = lyapunov_spectrum(_decay_problem(), 200, renorm_every=10)
    drift = convergence_drift(result, window=0.5)
    assert drift.converged is None
    assert drift.absolute.shape == (2,)
    assert convergence_drift(result, window=0.5, tol=1.0).converged is True


def test_convergence_drift_needs_two_rows():
    result = lyapunov_spectrum(_decay_problem(), 10, renorm_every=10)
    assert result.history.shape[0] == 1
    with pytest.raises(ValueError, match="at least 2 renormalisations; got 1"):
        convergence_drift(result)


def test_resume_messages_keep_the_published_phrases():
    problem = _decay_problem()
    first = lyapunov_spectrum(problem, 100, renorm_every=10, k=1)
    with pytest.raises(ValueError, match=r"k=1 .*tracked dimension.*k=2"):
        lyapunov_spectrum(problem, 100, renorm_every=10, k=2, resume=first.checkpoint)
    with pytest.raises(ValueError, match=r"dt=0\.01 \(resume\.dt\).*dt=0\.02"):
        lyapunov_spectrum(
            _decay_problem(dt=2e-2), 100, renorm_every=10, k=1, resume=first.checkpoint
        )
    with pytest.raises(ValueError, match=r"dimension d=3; the shapes"):
        lyapunov_spectrum(
            _decay_problem(d=3), 100, renorm_every=10, resume=first.checkpoint
        )


def test_dde_resume_with_another_delay_names_shapes():
    rhs = systems.linear_scalar_dde(a=0.5)
    short = dde_problem(rhs, jnp.array([1.0]), tau=0.3, dt=1e-2)
    first = lyapunov_spectrum_dde(short, n_steps=100, k=1, renorm_every=5)
    longer = dde_problem(rhs, jnp.array([1.0]), tau=0.6, dt=1e-2)
    with pytest.raises(ValueError, match="shapes"):
        lyapunov_spectrum_dde(
            longer, n_steps=100, renorm_every=5, resume=first.checkpoint
        )


def test_sub_step_interpolated_delay_names_tau_steps():
    rhs = systems.linear_scalar_dde(a=0.5)
    with pytest.raises(ValueError, match=r"tau >= dt \(tau_steps >= 1\).*tau=0\.005"):
        dde_problem(rhs, jnp.array([1.0]), tau=0.005, dt=1e-2, interpolate=True)


def test_kaplan_yorke_partial_spectrum_message():
    with pytest.raises(
        ValueError, match="d_total=3.*lies beyond the tracked exponents"
    ):
        kaplan_yorke_dimension(jnp.array([1.0, 0.5]), d_total=3)


def test_connectivity_delay_helpers():
    weights = jnp.ones((2, 2))
    lengths = np.array([[0.0, 3.0], [1.0, 0.0]])
    conn = Connectivity(weights, tract_lengths=lengths, speed=2.0)
    assert conn.has_delays is True
    np.testing.assert_array_equal(conn.delay_steps(0.5), [[0, 3], [1, 0]])
    assert conn.horizon(0.5) == 4
    assert Connectivity(weights).has_delays is False
    assert Connectivity(weights, tract_lengths=np.zeros((2, 2))).has_delays is False


def test_tau_eff_published_signature_and_new_name():
    assert tau_eff(170, 0.1) == pytest.approx(17.0, rel=1e-15)
    with pytest.raises(ValueError, match="tau_steps must be a finite number >= 0"):
        tau_eff(-1, 0.1)
    assert effective_tau(0.317, 0.01) == pytest.approx(0.32)
    assert effective_tau(0.317, 0.01, interpolate=True) == pytest.approx(0.317)


def test_resolve_tau_steps_warn_tol():
    with pytest.warns(UserWarning, match="tau_steps=32") as record:
        assert resolve_tau_steps(0.317, 0.01) == 32
    assert_warned_here(record, "tau_steps=32")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_tau_steps(0.317, 0.01, warn_tol=0.01) == 32  # 0.95% off
    with pytest.raises(
        ValueError, match="warn_tol must be a number >= 0; got warn_tol=-1"
    ):
        resolve_tau_steps(0.3, 0.01, warn_tol=-1)


def test_published_top_level_names():
    assert lyapax.network_step is lyapax.network.network_step
    assert lyapax.network_step_parametrized is lyapax.network.network_step_parametrized
    assert lyapax.coupling.linear_coupling is not None
    for name in ("network_step", "network_step_parametrized", "coupling"):
        assert name in lyapax.__all__
    from lyapax.simulator.step import build_jax_dfun, make_step_fn

    assert callable(build_jax_dfun) and callable(make_step_fn)


def test_network_and_delay_builders_reject_an_adaptive_integrator():
    pytest.importorskip("diffrax")
    from lyapax.adaptive import diffrax_adaptive_step
    from lyapax.coupling import linear_coupling

    adaptive = diffrax_adaptive_step()
    network = Network(jnp.zeros((2, 2)), (0,))

    def dfun(x, c, p):
        return -x + c

    with pytest.raises(ValueError, match="ode_problem only, not for network_problem"):
        network_problem(
            dfun, network, linear_coupling(), {}, jnp.ones((1, 2)), 0.1, adaptive
        )
    with pytest.raises(ValueError, match="not for network_problem or delay equations"):
        dde_problem(
            systems.linear_scalar_dde(a=0.5),
            jnp.array([1.0]),
            0.3,
            0.1,
            integrator=adaptive,
        )
    with pytest.raises(ValueError, match="diffrax_adaptive_step"):
        network_dde_problem(
            dfun,
            network,
            linear_coupling(),
            {},
            jnp.ones((1, 2)),
            0.1,
            tau=0.3,
            integrator=adaptive,
        )


def test_published_private_ring_helpers_follow_the_buffer_convention():
    from lyapax.simulator.step import (
        _read_uniform_delayed_cvar,
        _read_uniform_delayed_cvar_interp,
        _write_ring,
        _write_ring_interp,
    )

    horizon, dt = 5, 0.25
    grid = jnp.zeros((horizon, 1, 1))
    smooth = jnp.zeros((horizon, 2, 1, 1))
    for m in range(7):  # x(t) = 2 + 3 t, sampled at t = m * dt
        x = jnp.full((1, 1), 2.0 + 3.0 * m * dt)
        grid = _write_ring(grid, m, x, horizon)
        smooth = _write_ring_interp(smooth, m, x, jnp.full((1, 1), 3.0), horizon)
    # at step 6, a delay of 2 steps reads the sample of time 4 * dt
    assert float(_read_uniform_delayed_cvar(grid, 6, 2, horizon)[0, 0]) == 2.0 + 3.0
    # cubic Hermite reproduces a straight line between samples
    value = _read_uniform_delayed_cvar_interp(smooth, 6, 2.5, horizon, dt)
    assert float(value[0, 0]) == pytest.approx(2.0 + 3.0 * 3.5 * dt, abs=1e-12)


def test_make_step_fn_runs_under_lax_scan():
    import jax

    from lyapax.simulator.step import make_step_fn

    def dfun(x, c, p):
        return p["gamma"] * x + c

    step = make_step_fn(
        dfun=dfun,
        weights=jnp.zeros((1, 1)),
        delay_steps=jnp.zeros((1, 1), dtype=jnp.int32),
        has_delays=False,
        horizon=1,
        n_nodes=1,
        cvar_indices=(0,),
        dt=1e-2,
        integrator="heun",
    )
    carry0 = (jnp.ones((1, 1)), jnp.zeros((1, 1, 1)), jnp.int32(0), {"gamma": -1.0})
    (final, *_), _ = jax.lax.scan(step, carry0, None, length=100)
    # Heun on x' = -x: amplification 1 - h + h^2/2 per step
    assert float(final[0, 0]) == pytest.approx(
        (1 - 1e-2 + 0.5e-4) ** 100, rel=tol(1e-12)
    )
