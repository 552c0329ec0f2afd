"""Sweeps: one vmapped run over parameters, initial states and seeds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.warned import assert_warned_here

import lyapax.sweep._setup as sweep_mod
from lyapax.core import ODEProblem, lyapunov_spectrum, ode_problem
from lyapax.integrators import rk4_step
from lyapax.sweep import problem_family, sweep_lyapunov_spectrum, sweep_trajectory
from lyapax.sweep._kernels import spectrum_kernel
from lyapax.systems import henon_map, lorenz
from lyapax.utils import simulate_trajectory

DT = 0.01
X0 = jnp.array([1.0, 1.0, 20.0])


def lorenz_step(x, rho):
    """Lorenz (sigma=10, beta=8/3) RK4 step with rho as the swept parameter."""
    return rk4_step(lorenz(rho=rho), DT)(x)


def henon_step(x, p):
    return henon_map(a=p["a"], b=p["b"])(x)


HENON = henon_map()
HENON_X0 = jnp.array([0.1, 0.1])
# One run configuration shared by most tests, so that they share compiled
# programs (each new configuration costs a few seconds of compilation).
KW = dict(renorm_every=4, t_transient=20.0, save_states=True, decimate=2)
N_STEPS = 400
PARAMS = {
    "a": jnp.array([1.2, 1.25, 1.3, 1.35, 1.4]),
    "b": jnp.array([0.3, 0.25, 0.3, 0.2, 0.3]),
}


def _row(tree, i):
    return jax.tree.map(lambda leaf: leaf[i], tree)


def _max_diff(a, b):
    return max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def _single(a, b, x0=HENON_X0, seed=0):
    return lyapunov_spectrum(henon_map(a, b), x0, 1.0, N_STEPS, seed=seed, **KW)


@pytest.fixture(scope="module")
def henon_sweep():
    return sweep_lyapunov_spectrum(henon_step, HENON_X0, PARAMS, 1.0, N_STEPS, **KW)


# ------------------------------------------------------------ agreement


@pytest.mark.slow
def test_parameter_sweep_equals_a_python_loop_on_every_field(henon_sweep):
    res = henon_sweep
    assert res.exponents.shape == (5, 2) and res.stderr.shape == (5, 2)
    assert res.history.shape == (5, 100, 2) and res.times.shape == (5, 100)
    assert res.checkpoint.Y.shape == (5, 2, 2) and res.checkpoint.dt.shape == (5,)
    assert res.trajectory.shape == (5, 200, 2) and res.save_times.shape == (5, 200)
    for i in range(5):
        p = _row(PARAMS, i)
        assert _max_diff(_row(res, i), _single(p["a"], p["b"])) < 1e-8


def test_state_and_seed_batches_equal_a_loop_and_checkpoints_resume():
    x0s = jnp.array([[0.1, 0.1], [0.2, -0.1], [-0.3, 0.2], [0.0, 0.1]])
    seeds = np.array([0, 5, 7, 11])
    res = sweep_lyapunov_spectrum(
        HENON, None, None, 1.0, N_STEPS, seed=seeds, state0_batch=x0s, **KW
    )
    singles = [_single(1.4, 0.3, x0s[i], int(seeds[i])) for i in range(4)]
    for i in range(4):
        assert _max_diff(_row(res, i), singles[i]) < 1e-8
    # A row's checkpoint continues exactly like the single run's own.
    go_on = dict(renorm_every=4)
    a = lyapunov_spectrum(
        HENON, x0s[1], 1.0, 40, resume=_row(res.checkpoint, 1), **go_on
    )
    b = lyapunov_spectrum(HENON, x0s[1], 1.0, 40, resume=singles[1].checkpoint, **go_on)
    np.testing.assert_allclose(a.exponents, b.exponents, atol=1e-8)


def test_problem_form_sweeps_initial_states():
    problem = ODEProblem(HENON, HENON_X0, 1.0)
    x0s = jnp.array([[0.1, 0.1], [0.2, -0.1]])
    res = sweep_lyapunov_spectrum(
        problem, None, None, None, N_STEPS, state0_batch=x0s, **KW
    )
    assert _max_diff(_row(res, 1), _single(1.4, 0.3, x0s[1])) < 1e-8


def test_problem_family_sweeps_parameters_inside_a_problem():
    family = problem_family(
        lambda p: ODEProblem(henon_map(p["a"], p["b"]), HENON_X0, 1.0)
    )
    res = sweep_lyapunov_spectrum(family, None, PARAMS, None, N_STEPS, **KW)
    p = _row(PARAMS, 3)
    assert _max_diff(_row(res, 3), _single(p["a"], p["b"])) < 1e-8


def test_chunked_sweep_is_identical_to_the_unchunked_one(henon_sweep):
    for size in (2, 64):  # 2, 2, 1 (last chunk padded); one chunk
        part = sweep_lyapunov_spectrum(
            henon_step, HENON_X0, PARAMS, 1.0, N_STEPS, batch_size=size, **KW
        )
        assert _max_diff(henon_sweep, part) == 0.0


def _henon_to_host():
    return sweep_lyapunov_spectrum(
        henon_step,
        HENON_X0,
        PARAMS,
        1.0,
        N_STEPS,
        **KW,
        batch_size=2,
        trajectory_to_host=True,
    )


def test_trajectory_to_host_returns_numpy_with_the_same_numbers(henon_sweep):
    host = _henon_to_host()
    assert isinstance(host.trajectory, np.ndarray)
    np.testing.assert_array_equal(host.trajectory, henon_sweep.trajectory)


def test_sweep_trajectory_matches_the_exponent_run_and_a_plain_simulation(henon_sweep):
    kw = dict(renorm_every=4, t_transient=20.0, decimate=2)
    traj = sweep_trajectory(henon_step, HENON_X0, PARAMS, 1.0, N_STEPS, **kw)
    assert traj.states.shape == (5, 200, 2) and traj.times.shape == (5, 200)
    np.testing.assert_allclose(traj.states, henon_sweep.trajectory, atol=1e-10)
    np.testing.assert_allclose(traj.times, henon_sweep.save_times, rtol=1e-14)
    p = _row(PARAMS, 4)
    plain = simulate_trajectory(
        henon_map(p["a"], p["b"]), HENON_X0, N_STEPS, decimate=2, n_transient=20
    )
    np.testing.assert_allclose(traj.states[4], plain.states, atol=1e-10)


def test_second_sweep_with_new_numbers_does_not_recompile(henon_sweep):
    size = spectrum_kernel._cache_size()
    new = {"a": jnp.full(5, 1.3), "b": jnp.linspace(0.2, 0.3, 5)}  # weakly typed a
    res = sweep_lyapunov_spectrum(
        henon_step, jnp.array([0.2, 0.0]), new, 1.0, N_STEPS, seed=3, **KW
    )
    assert spectrum_kernel._cache_size() == size
    assert not np.allclose(res.exponents, henon_sweep.exponents)


def test_large_trajectory_warns_before_allocating(monkeypatch):
    monkeypatch.setattr(sweep_mod, "TRAJECTORY_WARN_BYTES", 1000)
    with pytest.warns(UserWarning, match="GiB of trajectory on the device") as record:
        sweep_lyapunov_spectrum(henon_step, HENON_X0, PARAMS, 1.0, N_STEPS, **KW)
    assert_warned_here(record, "GiB of trajectory")
    with pytest.warns(UserWarning, match="on the host"):
        _henon_to_host()


# ------------------------------------------------------------ known physics


@pytest.mark.slow
def test_lorenz_sweep_gives_fixed_point_chaos_and_periodic_orbit():
    """sigma=10, beta=8/3: rho=10 stable fixed points (exponents = real parts of
    the Jacobian's eigenvalues there), rho=28 chaos (lambda1 = 0.9056, Viswanath
    2001), rho=350 stable periodic orbit (lambda1 = 0, the rest negative)."""
    rhos = jnp.array([10.0, 28.0, 350.0])
    res = sweep_lyapunov_spectrum(
        lorenz_step, X0, rhos, DT, 20_000, renorm_every=10, t_transient=50.0
    )
    lam, se = np.asarray(res.exponents), np.asarray(res.stderr)
    # rho = 10: characteristic polynomial at C+-.
    sigma, beta, rho = 10.0, 8.0 / 3.0, 10.0
    poly = [1, sigma + 1 + beta, beta * (sigma + rho), 2 * sigma * beta * (rho - 1)]
    exact = np.sort(np.roots(poly).real)[::-1]
    assert np.all(lam[0] < 0)
    np.testing.assert_allclose(lam[0], exact, atol=2e-3)
    # rho = 28
    assert abs(lam[1, 0] - 0.9056) < max(0.05, 3 * se[1, 0])
    assert abs(lam[1, 1]) < 0.03 and lam[1, 2] < -14.0
    # rho = 350
    assert abs(lam[2, 0]) < 0.03 and lam[2, 1] < -0.3 and lam[2, 2] < -5.0
    # Every row keeps the sum rule -(sigma + 1 + beta).
    np.testing.assert_allclose(lam.sum(axis=1), -(sigma + 1 + beta), atol=0.02)


# ------------------------------------------------------------ delay equations


@pytest.mark.slow
def test_delay_equations_sweep_like_a_loop():
    dde = pytest.importorskip("lyapax.dde")
    from lyapax.systems import linear_scalar_dde

    def make(a):
        return dde.dde_problem(linear_scalar_dde(a=a), 1.0, tau=1.0, dt=0.05)

    a_s = jnp.array([0.5, 1.3])
    kw = dict(k=2, renorm_every=10, save_states=True, decimate=10)
    res = sweep_lyapunov_spectrum(problem_family(make), None, a_s, None, 400, **kw)
    assert isinstance(res.checkpoint, dde.DDECheckpoint)
    assert res.trajectory.shape == (2, 40, 1)  # the present state only
    for i, a in enumerate([0.5, 1.3]):
        one = dde.lyapunov_spectrum_dde(make(a), 400, **kw)
        assert _max_diff(_row(res, i), one) < 1e-8


@pytest.mark.slow
def test_delay_problem_params_are_swept_by_params_batch():
    dde = pytest.importorskip("lyapax.dde")
    from lyapax.coupling import linear_coupling
    from lyapax.network import Network

    def dfun(x, c, p):
        return -x + p["G"] * c

    net = Network(jnp.array([[0.0, 1.0], [1.0, 0.0]]), (0,))
    problem = dde.network_dde_problem(
        dfun, net, linear_coupling(), {"G": 0.5}, jnp.array([1.0, 0.5]), 0.05, tau=0.5
    )
    kw = dict(k=2, renorm_every=10)
    res = sweep_lyapunov_spectrum(
        problem, None, {"G": jnp.array([0.3, 0.8])}, None, 400, **kw
    )
    one = dde.lyapunov_spectrum_dde(problem._replace(params={"G": 0.8}), 400, **kw)
    np.testing.assert_allclose(res.exponents[1], one.exponents, atol=1e-8)
    with pytest.raises(ValueError, match="state0_batch cannot be used with a delay"):
        sweep_lyapunov_spectrum(
            problem, None, None, None, 400, state0_batch=jnp.ones((2, 2)), **kw
        )


# ------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            dict(params_batch={"a": jnp.ones(3), "b": jnp.ones(4)}),
            ValueError,
            r"one leading batch size; got params_batch\['a'\]: 3, "
            r"params_batch\['b'\]: 4",
        ),
        (
            dict(params_batch={"a": jnp.ones(3), "b": 0.3}),
            ValueError,
            r"params_batch\['b'\] is a scalar",
        ),
        (
            dict(
                params_batch={"a": jnp.ones(3), "b": jnp.ones(3)},
                state0_batch=jnp.ones((4, 2)),
            ),
            ValueError,
            "state0_batch: 4",
        ),
        (
            dict(params_batch={"a": jnp.ones(3), "b": jnp.ones(3)}, seed=np.arange(2)),
            ValueError,
            "seed: 2",
        ),
        (
            dict(params_batch=None, state0_batch=jnp.ones(3)),
            ValueError,
            r"state0_batch must have shape \(n, d\)",
        ),
        (
            dict(params_batch=None, state0_batch=jnp.ones((3, 3))),
            ValueError,
            r"state0_batch rows have shape \(3,\), but state0 has shape \(2,\)",
        ),
        (
            dict(params_batch=None, state0_batch=jnp.full((2, 2), jnp.nan)),
            ValueError,
            "state0_batch must be finite",
        ),
        (dict(params_batch=None), ValueError, "nothing to sweep"),
        (
            dict(params_batch={"a": jnp.ones(3), "b": jnp.ones(3)}, batch_size=0),
            ValueError,
            "batch_size must be >= 1; got batch_size=0",
        ),
        (
            dict(params_batch={"a": jnp.ones(3), "b": jnp.ones(3)}, devices=99),
            ValueError,
            "devices=99 must be between 1 and",
        ),
        (
            dict(params_batch={"a": jnp.ones(3), "b": jnp.ones(3)}, devices="gpu"),
            TypeError,
            "devices must be None",
        ),
        (
            dict(
                params_batch={"a": jnp.ones(3), "b": jnp.ones(3)},
                n_steps=7,
                renorm_every=2,
            ),
            ValueError,
            "n_steps=7 must be a multiple of renorm_every=2",
        ),
        (
            dict(params_batch={"a": jnp.ones(3), "b": jnp.ones(3)}, k=3),
            ValueError,
            "k must satisfy 1 <= k <= d=2; got k=3",
        ),
        (
            dict(
                params_batch={"a": jnp.ones(3), "b": jnp.ones(3)},
                seed=np.ones((3, 1), int),
            ),
            ValueError,
            "seed must be an integer or a 1-D",
        ),
    ],
)
def test_bad_input_is_a_clear_error_naming_the_argument(kwargs, error, match):
    args = dict(step_fn=henon_step, state0=HENON_X0, dt=1.0, n_steps=10)
    if kwargs.get("params_batch", "x") is None:
        args["step_fn"] = HENON
    args.update(kwargs)
    with pytest.raises(error, match=match):
        sweep_lyapunov_spectrum(**args)


def test_problem_with_params_batch_or_state0_is_refused():
    problem = ode_problem(lorenz(), X0, DT)
    with pytest.raises(ValueError, match="problem_family"):
        sweep_lyapunov_spectrum(problem, None, {"rho": jnp.ones(2)}, None, 10)
    with pytest.raises(TypeError, match="carries its own state0"):
        sweep_lyapunov_spectrum(problem, X0, None, None, 10, seed=np.arange(2))
    with pytest.raises(TypeError, match="step_fn must be"):
        sweep_lyapunov_spectrum(3.0, X0, {"rho": jnp.ones(2)}, DT, 10)
