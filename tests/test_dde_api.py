"""The public DDE API: resume, compile cache, compatibility builders, bad input."""

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.warned import assert_warned_here

import lyapax
from lyapax import systems
from lyapax.coupling import kuramoto_coupling, linear_coupling
from lyapax.dde import (
    DDECheckpoint,
    constant_history_buf0,
    dde_problem,
    effective_tau,
    lyapunov_spectrum_dde,
    make_scalar_delayed_step_fn,
    network_dde_problem,
    resolve_tau_steps,
    scalar_delayed_history0,
)
from lyapax.network import Network
from lyapax.simulator import (
    Connectivity,
    ModelSpec,
    Parameter,
    StateVar,
    build_jax_dfun,
    make_step_fn,
)

MG_RUN = dict(k=3, renorm_every=10)


@pytest.fixture(scope="module")
def mg():
    return dde_problem(systems.mackey_glass(), 1.2, 2.0, 0.1, interpolate=True)


@pytest.mark.slow
def test_two_resumed_chunks_equal_one_long_run(mg):
    full = lyapunov_spectrum_dde(mg, 400, t_transient=5.0, **MG_RUN)
    first = lyapunov_spectrum_dde(mg, 200, t_transient=5.0, **MG_RUN)
    second = lyapunov_spectrum_dde(
        mg, 200, resume=first.checkpoint, save_states=True, decimate=5, **MG_RUN
    )
    assert isinstance(second.checkpoint, DDECheckpoint)
    np.testing.assert_allclose(second.exponents, full.exponents, rtol=0, atol=1e-8)
    np.testing.assert_allclose(second.times[-1], full.times[-1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        np.concatenate([first.times, second.times]), full.times, atol=1e-12
    )
    assert int(second.checkpoint.t) == int(full.checkpoint.t)
    np.testing.assert_allclose(second.checkpoint.buf, full.checkpoint.buf, atol=1e-12)
    assert second.trajectory.shape == (40, 1)  # the present state only
    np.testing.assert_allclose(second.trajectory[-1], full.checkpoint.state[:, 0])
    # lyapunov_spectrum hands a DDE problem to the delay engine.
    again = lyapax.lyapunov_spectrum(mg, 200, t_transient=5.0, **MG_RUN)
    np.testing.assert_array_equal(again.exponents, first.exponents)


def test_resume_rejects_mismatches(mg):
    first = lyapunov_spectrum_dde(mg, 200, t_transient=5.0, **MG_RUN)
    with pytest.raises(ValueError, match="mutually exclusive"):
        lyapunov_spectrum_dde(
            mg, 200, t_transient=5.0, resume=first.checkpoint, **MG_RUN
        )
    with pytest.raises(TypeError, match="DDECheckpoint"):
        lyapunov_spectrum_dde(mg, 200, resume=tuple(first.checkpoint), **MG_RUN)
    with pytest.raises(ValueError, match="k=2"):
        lyapunov_spectrum_dde(mg, 200, k=2, renorm_every=10, resume=first.checkpoint)
    with pytest.raises(ValueError, match="dt"):
        lyapunov_spectrum_dde(
            mg.step_fn,
            mg.state0,
            0.2,
            200,
            buf0=mg.buf0,
            resume=first.checkpoint,
            **MG_RUN,
        )


def test_transient_covers_at_least_one_history_length(mg):
    """horizon = 21 steps: 3 blocks of 10 run first even with t_transient=0."""
    none = lyapunov_spectrum_dde(mg, 100, **MG_RUN)
    one_history = lyapunov_spectrum_dde(mg, 100, t_transient=3.0, **MG_RUN)
    np.testing.assert_array_equal(none.exponents, one_history.exponents)
    assert int(none.checkpoint.t) == 130


@pytest.mark.slow
def test_rebuilt_problems_with_new_numbers_do_not_retrace():
    traces = []

    def rhs(a, x, xd):
        traces.append(1)  # runs only while JAX traces
        return -a * xd + 0.1 * jnp.sin(x)

    # tau / dt = 29.5 and 29.8: the same 31-slot buffer, new numbers.
    builds = [(1.0, 0.295, 0.01, 1.0), (2.5, 0.298, 0.01, -0.5)]
    problems = [
        dde_problem(jax.tree_util.Partial(rhs, a), x0, tau, dt, interpolate=True)
        for a, tau, dt, x0 in builds
    ]
    runs = []
    for problem in problems:
        traces.clear()
        runs.append(lyapunov_spectrum_dde(problem, 100, k=1, renorm_every=10))
        runs[-1].exponents.block_until_ready()
        if len(runs) == 1:
            assert traces, "the first run must trace"
        else:
            assert not traces, "a rebuilt problem with new numbers retraced"
    assert runs[0].exponents[0] != runs[1].exponents[0]

    calls = []

    def dfun(x, c, p):
        calls.append(1)
        return p["gamma"] * x + c

    n = 3
    nets = []
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        steps = rng.integers(1, 6, (n, n))
        steps[0, 1] = 6  # the same horizon (7 slots) for both
        nets.append(
            network_dde_problem(
                dfun,
                Network(jnp.asarray(rng.random((n, n))), (0,), delay_steps=steps),
                linear_coupling(),
                {"gamma": -1.0 - seed, "G": 0.3 + seed},
                jnp.asarray(rng.random(n)),
                0.01,
            )
        )
    for i, problem in enumerate(nets):
        calls.clear()
        lyapunov_spectrum_dde(
            problem, 50, k=2, renorm_every=10
        ).exponents.block_until_ready()
        assert bool(calls) == (i == 0)


def test_kuramoto_with_per_edge_delays_as_a_user_writes_it():
    """ModelSpec + Connectivity delays + the plain Kuramoto coupling."""
    n, dt = 6, 0.01
    model = ModelSpec(
        name="kuramoto",
        state_variables=(StateVar("theta"),),
        parameters=(Parameter("omega", 0.0),),
        cvar=("theta",),
        dfun_str={"theta": "omega + c"},
    )
    dfun = build_jax_dfun(model)
    weights = np.ones((n, n)) - np.eye(n)
    lengths = np.random.default_rng(3).uniform(1.0, 5.0, (n, n))
    conn = Connectivity(weights, tract_lengths=lengths, speed=10.0)
    network = Network(weights, model.cvar_indices, delay_steps=conn.delay_steps(dt))
    params = {"omega": jnp.linspace(-1.0, 1.0, n), "G": 2.0}
    theta0 = jnp.linspace(0.0, 2 * np.pi, n, endpoint=False)
    problem = network_dde_problem(
        dfun, network, kuramoto_coupling(), params, theta0, dt
    )
    assert problem.horizon == conn.horizon(dt)
    runs = [
        lyapunov_spectrum_dde(problem, 1000, k=3, renorm_every=10, t_transient=2.0)
        for _ in range(2)
    ]
    np.testing.assert_array_equal(runs[0].exponents, runs[1].exponents)
    np.testing.assert_array_equal(runs[0].history, runs[1].history)
    assert np.all(np.isfinite(runs[0].exponents))
    # The same run through the published builder with a plain coupling_fn.
    step = make_step_fn(
        dfun,
        weights,
        True,
        conn.horizon(dt),
        n,
        model.cvar_indices,
        dt,
        delay_steps=conn.delay_steps(dt),
        coupling_fn=kuramoto_coupling(),
    )
    compat = lyapunov_spectrum_dde(
        step,
        state0=theta0[None],
        buf0=constant_history_buf0(theta0[None], step.horizon),
        params=params,
        dt=dt,
        n_steps=1000,
        k=3,
        renorm_every=10,
        t_transient=2.0,
    )
    np.testing.assert_allclose(compat.exponents, runs[0].exponents, rtol=1e-12)


def test_published_linear_make_step_fn_matches_network_dde_problem():
    dt, tau = 1e-3, 0.05
    weights = np.array([[0.0, 1.0], [1.0, 0.0]])
    conn = Connectivity(weights, tract_lengths=tau * weights, speed=1.0)

    def dfun(x, c, p):
        return p["gamma"] * x + c

    params = {"gamma": -1.0, "G": 0.5}
    state0 = jnp.array([[0.3, -0.2]])
    step = make_step_fn(
        dfun=dfun,
        weights=jnp.asarray(weights),
        has_delays=True,
        horizon=conn.horizon(dt),
        n_nodes=2,
        cvar_indices=(0,),
        dt=dt,
        delay_steps=jnp.asarray(conn.delay_steps(dt)),
        G_default=0.5,
    )
    buf0 = constant_history_buf0(state0, conn.horizon(dt))
    run = dict(n_steps=1000, k=2, renorm_every=10, t_transient=0.1)
    compat = lyapunov_spectrum_dde(
        step, state0=state0, buf0=buf0, params=params, dt=dt, **run
    )
    problem = network_dde_problem(
        dfun,
        Network(weights, (0,), delay_steps=conn.delay_steps(dt)),
        linear_coupling(),
        params,
        state0,
        dt,
    )
    np.testing.assert_allclose(
        compat.exponents, lyapunov_spectrum_dde(problem, **run).exponents, rtol=1e-12
    )


def test_scalar_compat_builders_match_dde_problem():
    rhs = systems.mackey_glass()
    step = make_scalar_delayed_step_fn(rhs, 1, 20, 0.1, interpolate=True)
    X0, buf0 = scalar_delayed_history0(jnp.array([1.2]), 20, interpolate=True)
    compat = lyapunov_spectrum_dde(
        step, state0=X0, buf0=buf0, dt=0.1, n_steps=200, t_transient=5.0, **MG_RUN
    )
    problem = dde_problem(rhs, 1.2, 2.0, 0.1, interpolate=True)
    ref = lyapunov_spectrum_dde(problem, 200, t_transient=5.0, **MG_RUN)
    np.testing.assert_allclose(compat.exponents, ref.exponents, rtol=1e-12)


def test_tau_resolution_warns_and_reports_the_delay_used():
    with pytest.warns(UserWarning, match=r"tau_steps=32.*tau_eff=0\.32"):
        assert resolve_tau_steps(0.317, 0.01) == 32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_tau_steps(0.3, 0.01) == 30  # 29.999... counts as whole
        assert effective_tau(0.317, 0.01) == pytest.approx(0.32)
        assert effective_tau(0.317, 0.01, interpolate=True) == pytest.approx(0.317)
    with pytest.warns(UserWarning, match="not a multiple") as record:
        problem = dde_problem(systems.linear_scalar_dde(), 1.0, 0.317, 0.01)
    assert_warned_here(record, "not a multiple")
    assert problem.tau_steps == 32 and problem.tau_eff == pytest.approx(0.32)


def test_per_edge_delays_off_the_grid_say_so_at_the_callers_line():
    """Per-edge ``tau`` rounded to whole steps warns with the largest change,
    naming the line that built the problem (dense and sparse weights)."""
    n = 3
    W = np.ones((n, n)) - np.eye(n)
    tau = np.full((n, n), 0.0317)
    for sparse in (False, True):
        with pytest.warns(UserWarning, match="not multiples of dt") as record:
            problem = network_dde_problem(
                lambda x, c, p: -x + c,
                Network(jnp.asarray(W), (0,), sparse=sparse),
                linear_coupling(),
                {"G": 0.1},
                jnp.ones(n),
                0.01,
                tau=tau,
            )
        assert_warned_here(record, "not multiples of dt")
        change = re.search(r"max change ([0-9.e-]+)", str(record[0].message))
        assert float(change.group(1)) == pytest.approx(0.0017)  # 3.17 steps -> 3
        assert problem.horizon == 4


def test_default_k_is_capped_with_a_message(mg):
    with (
        pytest.warns(UserWarning, match=r"k=1 exponents.*dimension 43") as record,
        pytest.raises(ValueError, match="n_steps"),
    ):
        lyapunov_spectrum_dde(mg, 15, renorm_every=10)
    assert_warned_here(record, "k not given")


LIN = systems.linear_scalar_dde()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(tau=0.0), "tau must be a finite number > 0"),
        (dict(tau=-1.0), "tau must be a finite number > 0"),
        (dict(tau=float("nan")), "tau must be a finite number > 0"),
        (dict(tau=0.004), "rounds to zero steps"),
        (dict(tau=0.009, interpolate=True), "needs tau >= dt"),
        (dict(history=jnp.zeros((3, 1, 1))), r"shape \(31, 1, 1\)"),
        (dict(history=lambda t: jnp.zeros(2)), "history"),
        (dict(integrator="rk45"), "integrator"),
    ],
)
def test_dde_problem_bad_input(kwargs, match):
    args = dict(rhs_delayed=LIN, state0=1.0, tau=0.3, dt=0.01) | kwargs
    with pytest.raises(ValueError, match=match):
        dde_problem(**args)


def test_bad_rhs_and_integrator_types():
    with pytest.raises(ValueError, match=r"return shape \(1,\)"):
        dde_problem(lambda x, xd: jnp.zeros(3), 1.0, 0.3, 0.01)
    with pytest.raises(TypeError, match="name"):
        dde_problem(LIN, 1.0, 0.3, 0.01, integrator=lambda rhs, dt: rhs)
    with pytest.raises(TypeError, match="buf0"):
        lyapunov_spectrum_dde(lambda c, _: (c, c[0]), jnp.ones((1, 1)), 0.1, 10)


def _net(**kwargs):
    n = 3
    args = (
        dict(
            dfun=lambda x, c, p: -x + c,
            network=Network(jnp.ones((n, n)) - jnp.eye(n), (0,)),
            coupling=linear_coupling(),
            params={},
            state0=jnp.zeros(n),
            dt=0.01,
        )
        | kwargs
    )
    return network_dde_problem(**args)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(), "no delay given"),
        (dict(tau=np.full((2, 2), 0.1)), r"\(3, 3\).*got shape \(2, 2\)"),
        (dict(tau=np.full((3, 3), -0.1)), "must be >= 0"),
        (dict(tau=np.full((3, 3), np.inf)), "finite"),
        (dict(tau=np.full((3, 3), np.nan)), "finite"),
        (dict(tau=-0.2), "tau must be a finite number > 0"),
        (dict(tau=np.full((3, 3), 0.005), interpolate=True), "at least one step"),
        (dict(tau=0.1, state0=jnp.zeros(4)), "state0"),
        (dict(tau=0.1, dfun=lambda x, c, p: c[:, :2]), r"shape"),
        (
            dict(tau=0.1, network=Network(np.ones((3, 3)), (0,), np.ones((3, 3), int))),
            "only one",
        ),
    ],
)
def test_network_dde_problem_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _net(**kwargs)


def test_make_step_fn_bad_input():
    W = np.ones((2, 2))
    base = dict(
        dfun=lambda x, c, p: c,
        weights=W,
        has_delays=True,
        horizon=3,
        n_nodes=2,
        cvar_indices=(0,),
        dt=0.01,
    )
    with pytest.raises(ValueError, match="needs at least 6"):
        make_step_fn(**base, delay_steps=np.full((2, 2), 5))
    with pytest.raises(ValueError, match="whole numbers"):
        make_step_fn(**base, delay_steps=np.full((2, 2), 1.5))
    with pytest.raises(ValueError, match=r"\(2, 2\) matrix"):
        make_step_fn(**base, delay_steps=np.ones((3, 3), int))
    with pytest.raises(ValueError, match="delay_steps .* or tau_steps"):
        make_step_fn(**base)
    with pytest.raises(ValueError, match="n_nodes=3"):
        make_step_fn(**base | dict(n_nodes=3), tau_steps=2)
