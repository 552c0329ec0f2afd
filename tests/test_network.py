"""Networks: exact spectra, the fused tangent path, compile caching, bad input."""

import dataclasses
import gc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse
from support.precision import tol

from lyapax._engine.benettin import run_benettin
from lyapax._engine.tree import assemble, leaf_shapes, merge_static, split_static
from lyapax._engine.validate import as_state
from lyapax.core import lyapunov_spectrum
from lyapax.coupling import kuramoto_coupling, linear_coupling, sigmoidal_coupling
from lyapax.network import (
    Network,
    NetworkStep,
    make_network_step_fn,
    make_parametrized_network_step_fn,
    network_problem,
    network_step,
    network_step_parametrized,
)
from lyapax.simulator import ModelSpec, Parameter, StateVar, build_jax_dfun
from lyapax.systems import kuramoto_network


def linear_dfun(x, c, p):
    return p["gamma"] * x + c


def _topologies(n=6):
    rng = np.random.default_rng(0)
    eye = np.eye(n)
    path = np.eye(n, k=1) + np.eye(n, k=-1)  # eigenvalues 2 cos(pi m / (n + 1))
    sym = rng.uniform(0.0, 1.0, (n, n))
    sym = (sym + sym.T) / 2
    np.fill_diagonal(sym, 0.0)
    directed_ring = np.roll(eye, 1, axis=1)  # eigenvalues on a circle: complex pairs
    rng = np.random.default_rng(0)
    directed = rng.uniform(0, 1, (n, n)) * (rng.uniform(size=(n, n)) < 0.5)
    np.fill_diagonal(directed, 0.0)
    assert not np.allclose(directed, directed.T)
    # (weights, tolerance): normal matrices converge to the rk4 error (~1e-5 for
    # |h lambda| <= 0.2); the non-normal directed one keeps an O(1/T) term from
    # its skewed eigenbasis (observed 7e-5 at T = 1000).
    return {
        "path": (path, 1e-4),
        "weighted_symmetric": (sym, 1e-4),
        "directed_ring": (directed_ring, 1e-4),
        "directed_random": (directed, 5e-4),
    }


TOPOLOGIES = _topologies()


def _linear_problem(weights, coupling):
    n = weights.shape[0]
    return network_problem(
        linear_dfun,
        Network(weights, (0,)),
        coupling,
        {"gamma": -1.0, "G": 1.5},
        np.linspace(-1.0, 1.0, n),
        0.05,
        integrator="rk4",
    )


def _long_run(problem):
    return lyapunov_spectrum(problem, n_steps=20000, renorm_every=10, t_transient=50.0)


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_linear_network_spectrum_is_real_part_of_eigenvalues(name):
    weights, bound = TOPOLOGIES[name]
    n = weights.shape[0]
    eig = np.linalg.eigvals(-1.0 * np.eye(n) + 1.5 * weights)
    # Distinct eigenvalues (complex pairs share a real part, and so do their
    # exponents): the flow's spectrum is Re eig, sorted.
    assert np.min(np.abs(eig[:, None] - eig[None, :]) + np.eye(n)) > 1e-2
    want = np.sort(eig.real)[::-1]
    res = _long_run(_linear_problem(weights, linear_coupling()))
    # float32: 20 000 steps of rounding in the sums of log|diag R|.
    np.testing.assert_allclose(res.exponents, want, rtol=0, atol=tol(bound, 5e-4))


def test_user_coupling_equals_builtin_linear():
    weights = TOPOLOGIES["directed_random"][0]

    def user_linear(x, w, params):
        return params["G"] * (w @ x.T).T

    built_in = _long_run(_linear_problem(weights, linear_coupling()))
    user = _long_run(_linear_problem(weights, user_linear))
    np.testing.assert_allclose(built_in.exponents, user.exponents, rtol=0, atol=1e-12)


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_exponent_gradient_through_fused_path():
    """d lambda_1 / dG = mu_1, the top eigenvalue of a symmetric W.

    For gamma I + G W with symmetric W the top exponent is gamma + G mu_1; the
    gradient flows through the fused tangent_step (rk4 error ~ 1e-6 here).
    """
    weights = TOPOLOGIES["path"][0][:4, :4]
    mu = np.linalg.eigvalsh(weights).max()

    def top(G):
        problem = network_problem(
            linear_dfun,
            Network(weights, (0,)),
            linear_coupling(),
            {"gamma": -1.0, "G": G},
            jnp.linspace(-1.0, 1.0, 4),
            0.05,
            "rk4",
        )
        return lyapunov_spectrum(
            problem, n_steps=400, k=1, renorm_every=10, t_transient=10.0
        ).exponents[0]

    np.testing.assert_allclose(jax.grad(top)(0.7), mu, rtol=0, atol=1e-4)


N_KUR = 12


def _kuramoto_run(problem):
    """One run configuration for all Kuramoto oracles: one compiled program."""
    return lyapunov_spectrum(
        problem, n_steps=1000, k=5, renorm_every=10, t_transient=5.0
    ).exponents


def test_uncoupled_kuramoto_exponents_are_zero():
    omega = jnp.linspace(-1.0, 1.0, N_KUR)
    for weights, K in ((N_KUR, 0.0), (jnp.zeros((N_KUR, N_KUR)), 2.0)):
        exponents = _kuramoto_run(kuramoto_network(weights, omega=omega, K=K))
        np.testing.assert_allclose(exponents, 0.0, rtol=0, atol=tol(1e-8))


def test_identical_kuramoto_in_sync_has_zero_and_minus_K():
    """All-to-all (w = 1 - I), identical omega, theta_i = theta for all i.

    With c_i = (K/N) sum_j w_ij sin(theta_j - theta_i), the Jacobian at sync is
    dc_i/dtheta_j = (K/N) w_ij cos(0) = K/N (j != i) and
    dc_i/dtheta_i = -(K/N) sum_j w_ij = -(K/N)(N - 1), i.e.
    J = (K/N)(1 1^T - N I), independent of theta. 1 1^T has eigenvalues N (on the
    all-ones vector) and 0 (N - 1 times), so eig J = {0, -K (N - 1 times)}.

    J is symmetric and constant along the synchronous orbit, so after the
    transient the frame sits in its eigenspaces and the estimate is the exact
    exponent of the Heun map, log|1 + z + z^2/2| / h with z = h * eig J, up to
    the frame's residual misalignment ~ exp(-2 K t_transient) / T = 3e-8; the
    Heun map's exponent differs from the flow's by ~ h^2 K^3 / 6 = 5.6e-5.
    """
    K, h = 1.5, 0.01
    problem = kuramoto_network(N_KUR, omega=0.3, K=K, theta0=jnp.full(N_KUR, 0.7), dt=h)
    exponents = _kuramoto_run(problem)
    flow = np.array([0.0] + [-K] * 4)
    z = h * flow
    heun_map = np.log(np.abs(1 + z + z**2 / 2)) / h
    np.testing.assert_allclose(exponents, heun_map, rtol=0, atol=tol(1e-7))
    np.testing.assert_allclose(exponents, flow, rtol=0, atol=1e-4)


@pytest.mark.slow
def test_sparse_weights_give_dense_exponents():
    rng = np.random.default_rng(5)
    dense = rng.uniform(0, 1, (N_KUR, N_KUR)) * (rng.uniform(size=(N_KUR, N_KUR)) < 0.3)
    kw = dict(omega=jnp.linspace(-1.0, 1.0, N_KUR), K=4.0, alpha=0.3)
    a = _kuramoto_run(kuramoto_network(jnp.asarray(dense), **kw))
    b = _kuramoto_run(kuramoto_network(sparse.BCOO.fromdense(jnp.asarray(dense)), **kw))
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)
    assert np.ptp(np.asarray(a)) > 1e-3  # not a trivial all-zero case


# --- fused tangent path == jax.jvp batched by vmap ---------------------------


def three_var_dfun(x, c, p):
    u, v, w = x
    return jnp.stack([u - u**3 / 3 - v + c[0], p["eps"] * (u - v) + c[1], -w + u * v])


def _generic_tangent(step, state, Y):
    def one(v):
        return jax.jvp(step, (state,), (v,))

    return jax.vmap(one, in_axes=1, out_axes=(None, 1))(Y)


COUPLINGS = {
    "linear": linear_coupling(a=0.7, b=0.1),
    "sigmoidal": sigmoidal_coupling(a=1.2, midpoint=0.2, sigma=0.5),
    "kuramoto": kuramoto_coupling(alpha=0.4),
    "user": lambda x, w, p: jnp.tanh(w @ x.T).T * p["G"],
}


@pytest.mark.parametrize(
    "name,integrator",
    # The RK combination is shared by all couplings: every coupling on Heun,
    # every tableau on one coupling.
    [(name, "heun") for name in COUPLINGS]
    + [("kuramoto", m) for m in ("euler", "rk4", "rk6")],
)
@pytest.mark.slow
def test_fused_tangent_step_equals_generic_jvp(name, integrator):
    coupling = COUPLINGS[name]
    n, k = 5, 4
    rng = np.random.default_rng(1)
    # Non-contiguous coupled rows (0 and 2) exercise the gather path.
    step = network_step(
        three_var_dfun,
        Network(rng.uniform(size=(n, n)), (0, 2)),
        coupling,
        {"eps": 0.3, "G": 0.9},
        0.05,
        integrator,
    )
    state = jnp.asarray(rng.normal(size=3 * n))
    Y = jnp.asarray(rng.normal(size=(3 * n, k)))
    fused = step.tangent_step(state, Y)
    generic = _generic_tangent(step, state, Y)
    np.testing.assert_allclose(fused[0], generic[0], rtol=0, atol=1e-13)
    np.testing.assert_allclose(fused[1], generic[1], rtol=0, atol=1e-12)


def test_fused_and_generic_paths_give_the_same_exponents():
    problem = kuramoto_network(N_KUR, omega=jnp.linspace(-1, 1, N_KUR), K=3.0)
    fused = _kuramoto_run(problem)
    step = problem.step_fn
    # A plain function hides tangent_step: the engine falls back to jvp + vmap.
    generic = _kuramoto_run(problem._replace(step_fn=lambda x: step(x)))
    np.testing.assert_allclose(fused, generic, rtol=0, atol=tol(1e-10))


def test_coupling_is_re_evaluated_at_every_stage():
    rng = np.random.default_rng(2)
    n, dt = 4, 0.1
    w = jnp.asarray(rng.uniform(size=(n, n)))
    params = {"omega": 0.5, "G": 2.0}
    step = network_step(
        lambda x, c, p: p["omega"] + c, Network(w, 0), kuramoto_coupling(), params, dt
    )
    theta = jnp.asarray(rng.uniform(0, 6, n))

    def f(th):
        return 0.5 + kuramoto_coupling()(th[None], w, params)[0]

    k1 = f(theta)
    want = theta + dt / 2 * (k1 + f(theta + dt * k1))  # Heun, coupling at stage 2
    np.testing.assert_allclose(step(theta), want, rtol=0, atol=1e-15)


# --- state layout, builders ---------------------------------------------------


@pytest.mark.slow
def test_state0_flat_or_2d_and_builders_agree():
    spec = ModelSpec(
        "fhn",
        (StateVar("v"), StateVar("w")),
        (Parameter("a", 0.7), Parameter("b", 0.8), Parameter("eps", 0.08)),
        ("v",),
        {"v": "v - v**3 / 3 - w + c", "w": "eps * (v + a - b * w)"},
    )
    dfun = build_jax_dfun(spec)
    n = 4
    w = np.random.default_rng(4).uniform(size=(n, n))
    x2d = jnp.stack([jnp.linspace(-1, 1, n), jnp.zeros(n)])
    net = Network(w, spec.cvar_indices)
    params = {"G": 0.5}
    p2 = network_problem(dfun, net, linear_coupling(), params, x2d, 0.05)
    p1 = network_problem(dfun, net, linear_coupling(), params, x2d.ravel(), 0.05)
    np.testing.assert_array_equal(p1.state0, x2d.ravel())
    np.testing.assert_array_equal(p2.state0, p1.state0)
    x1 = p1.step_fn(p1.state0)
    legacy = make_network_step_fn(
        dfun, w, spec.cvar_indices, params, 0.05, linear_coupling()
    )
    late = network_step_parametrized(dfun, net, linear_coupling(), 0.05)
    legacy_late = make_parametrized_network_step_fn(
        dfun, w, spec.cvar_indices, 0.05, linear_coupling()
    )
    for out in (
        legacy(p1.state0),
        late(p1.state0, params),
        legacy_late(p1.state0, params),
        late.bind(params)(p1.state0),
    ):
        np.testing.assert_array_equal(out, x1)
    # Row-major layout: the first n entries are v, the next n are w.
    by_hand = x2d + 0.05 * dfun(x2d, 0.5 * (w @ x2d[0])[None], params)
    euler = network_problem(dfun, net, linear_coupling(), params, x2d, 0.05, "euler")
    np.testing.assert_allclose(euler.step_fn(euler.state0), by_hand.ravel(), atol=1e-15)
    # Parameters at call time can be vmapped (sweeps).
    batch = {"G": jnp.array([0.0, 0.5])}
    swept = jax.vmap(late, in_axes=(None, 0))(p1.state0, batch)
    np.testing.assert_allclose(swept[1], x1, atol=1e-15)


# --- compile caching ----------------------------------------------------------

TRACES = {"n": 0}


def counting_dfun(x, c, p):
    TRACES["n"] += 1  # Python side effect: runs only when traced
    return p["omega"] + c


def test_rebuilt_problem_with_new_numbers_does_not_retrace():
    def build(scale):
        n = 10
        rng = np.random.default_rng(int(scale * 10))
        return network_problem(
            counting_dfun,
            Network(jnp.asarray(rng.uniform(size=(n, n))) * scale, (0,)),
            kuramoto_coupling(alpha=0.1 * scale),
            {"omega": jnp.linspace(-scale, scale, n), "G": 2.0 * scale},
            jnp.asarray(rng.uniform(0, 6, n)),
            0.01 * scale,
        )

    first = lyapunov_spectrum(build(1.0), n_steps=20, k=3, renorm_every=10)
    traces, cached = TRACES["n"], run_benettin._cache_size()
    second = lyapunov_spectrum(build(2.0), n_steps=20, k=3, renorm_every=10)
    assert TRACES["n"] == traces and run_benettin._cache_size() == cached
    assert not np.allclose(first.exponents, second.exponents)


def test_a_module_split_again_is_the_same_split_and_a_new_one_is_its_own():
    """The split a network problem's shape check made is reused by the run;
    a copy of its leaf list comes back, and another module (even one at a
    freed module's address) is split afresh."""
    problem = kuramoto_network(6, omega=0.5)
    step = problem.step_fn
    dynamic, static = split_static(step)
    first = next(i for i, leaf in enumerate(dynamic) if leaf is not None)
    dynamic[first] = None  # the caller's list is its own
    again, static_again = split_static(step)
    assert static_again == static and again[first] is not None
    leaves = jax.tree.leaves(step)
    assert all(a is b for a, b in zip(again, leaves, strict=True) if a is not None)
    for integrator in ("rk4", "euler", "heun"):
        del step, problem
        gc.collect()
        problem = kuramoto_network(6, omega=0.5, integrator=integrator)
        step = problem.step_fn
        leaves, fresh = split_static(step)
        assert fresh[0] == jax.tree.structure(step)
        assert merge_static(leaves, fresh).integrator == integrator


#: NetworkStep's constructor arguments, in order.
_INIT_ORDER = (
    "dfun",
    "coupling",
    "weights",
    "params",
    "dt",
    "integrator",
    "cvar_indices",
)


def test_a_built_step_is_the_module_its_constructor_makes():
    """The builders assemble the step without equinox's per-instance checks;
    it is the same module as one made by its constructor (fields, pytree
    and equality), and a field list that is not the class's is refused."""
    problem = kuramoto_network(6, omega=0.5)
    built = problem.step_fn
    names = [f.name for f in dataclasses.fields(NetworkStep)]
    made = NetworkStep(*(getattr(built, name) for name in _INIT_ORDER))
    assert sorted(vars(built)) == sorted(vars(made)) == sorted(names)
    assert all(getattr(built, name) is getattr(made, name) for name in names)
    assert jax.tree.structure(built) == jax.tree.structure(made)
    assert bool(built == made)
    late = network_step_parametrized(
        built.dfun, Network(built.weights, (0,)), built.coupling, built.dt
    )
    bound = late.bind(built.params)
    assert sorted(vars(bound)) == sorted(names) and bool(bound == made)
    x = problem.state0
    np.testing.assert_array_equal(eqx.filter_jit(lambda s, y: s(y))(built, x), made(x))
    with pytest.raises(TypeError, match=r"assemble\(NetworkStep\) needs the fields"):
        assemble(NetworkStep, **{**vars(built), "extra": 1.0})
    with pytest.raises(TypeError, match="got \\['coupling'"):
        assemble(NetworkStep, coupling=built.coupling)


def test_split_leaf_kinds_known_by_type_except_a_tracers():
    """split_static keeps a leaf's kind by its type, but asks a tracer each
    time: inside jit every number is dynamic, outside an int stays static."""
    tree = {"a": 1.0, "n": 3, "flag": True, "x": jnp.ones(2), "f": np.float64(2.0)}
    dynamic, _ = split_static(tree)
    kinds = dict(zip(sorted(tree), (d is not None for d in dynamic), strict=True))
    assert kinds == {"a": True, "f": True, "flag": False, "n": False, "x": True}

    @jax.jit
    def inside(x, a):
        dyn, _ = split_static({"x": x, "a": a, "n": 3})
        assert [d is not None for d in dyn] == [True, False, True]
        return x

    inside(jnp.ones(2), 1.0)
    assert leaf_shapes([None, 1.0, jnp.ones((2, 3)), np.float32(1)]) == (
        ((), float),
        ((2, 3), jnp.ones(1).dtype),
        ((), np.dtype(np.float32)),
    )


def test_a_state_found_finite_is_not_read_again_but_a_new_one_is():
    """as_state remembers the array it found finite last (a problem called
    again); a freed array's address taken by a non-finite one is checked."""
    good = jnp.linspace(0.0, 1.0, 5)
    assert as_state("state0", good) is good
    with pytest.raises(ValueError, match="state0 must be finite"):
        as_state("state0", good.at[2].set(jnp.inf))
    for _ in range(20):  # ids of freed arrays come back
        as_state("state0", jnp.linspace(0.0, 1.0, 5))
        gc.collect()
        with pytest.raises(ValueError, match=r"entries \[1\] are nan"):
            as_state("state0", jnp.array([0.0, jnp.nan, 1.0, 2.0, 3.0]))


def _seed_run(n_nodes):
    """The worker body of examples/14_gpu_acceleration.py."""
    problem = kuramoto_network(n_nodes, omega=jnp.linspace(-1.0, 1.0, n_nodes))
    return lyapunov_spectrum(
        problem,
        n_steps=200,
        k=5,
        renorm_every=10,
        t_transient=0.0,
    )


def test_gpu_example_problem_runs_and_hits_the_cache():
    first = _seed_run(50)
    cached = run_benettin._cache_size()
    second = _seed_run(50)  # ModelSpec and dfun rebuilt: same compiled program
    assert run_benettin._cache_size() == cached
    assert first.exponents.shape == (5,)
    assert np.all(np.isfinite(first.exponents))
    np.testing.assert_array_equal(first.exponents, second.exponents)
    assert np.all(np.diff(np.asarray(first.exponents)) <= 0)


def test_rebuilt_problem_of_a_checked_structure_still_validates():
    """A rebuilt problem of a structure already checked and compiled skips
    the shape check (its structure key) and the compile, not the checks of
    its values; a coupling of another shape is a new structure, checked."""

    def run(problem):
        return lyapunov_spectrum(problem, n_steps=20, k=2, renorm_every=10)

    first = kuramoto_network(6)
    run(first)
    cached = run_benettin._cache_size()
    with pytest.raises(ValueError, match=r"dt must be a finite number > 0; got dt=-0"):
        kuramoto_network(6, dt=-0.01)
    with pytest.raises(ValueError, match="state0 must be finite"):
        run(kuramoto_network(6, theta0=jnp.full(6, jnp.nan)))
    with pytest.raises(ValueError, match="coupling must return shape"):
        network_problem(
            first.step_fn.dfun,
            Network(first.step_fn.weights, (0,)),
            lambda x, w, p: x[:, :3],
            first.step_fn.params,
            first.state0,
            0.01,
        )
    again = kuramoto_network(6, omega=0.5)
    # The default phases and the coupling of a Python alpha are kept.
    assert again.state0 is first.state0
    assert again.step_fn.coupling is first.step_fn.coupling
    np.testing.assert_array_equal(
        again.state0, jnp.linspace(0.0, 2 * jnp.pi, 6, endpoint=False)
    )
    run(again)
    assert run_benettin._cache_size() == cached


# --- bad input ----------------------------------------------------------------


def _kur_args(n=4, **over):
    kw = dict(
        dfun=lambda x, c, p: p["omega"] + c,
        network=Network(np.ones((n, n)), (0,)),
        coupling=kuramoto_coupling(),
        params={"omega": 0.1},
        state0=np.zeros(n),
        dt=0.01,
    )
    kw.update(over)
    return kw


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="weights.*square"):
        Network(np.ones((3, 4)), (0,))
    with pytest.raises(ValueError, match="state0.*n_nodes=4"):
        network_problem(**_kur_args(state0=np.zeros((1, 5))))
    with pytest.raises(ValueError, match="state0.*n_nodes=4"):
        network_problem(**_kur_args(state0=np.zeros(7)))
    with pytest.raises(ValueError, match="cvar_indices"):
        network_problem(**_kur_args(network=Network(np.ones((4, 4)), (1,))))
    with pytest.raises(ValueError, match="cvar_indices"):
        Network(np.ones((4, 4)), (-1,))
    with pytest.raises(ValueError, match="coupling must return shape"):
        network_problem(**_kur_args(coupling=lambda x, w, p: x[0]))
    with pytest.raises(ValueError, match="dfun must return shape"):
        network_problem(**_kur_args(dfun=lambda x, c, p: x[0]))
    with pytest.raises(ValueError, match="integrator"):
        network_problem(**_kur_args(integrator="rk45"))
    with pytest.raises(ValueError, match="dt"):
        network_problem(**_kur_args(dt=-0.1))
    with pytest.raises(ValueError, match="delay_steps"):
        Network(np.ones((4, 4)), (0,), delay_steps=np.ones((3, 3), int))


def test_model_spec_errors_surface_at_construction():
    spec = ModelSpec(
        "needs_a", (StateVar("x"),), (Parameter("a"),), ("x",), {"x": "a * x + c"}
    )
    args = _kur_args(dfun=build_jax_dfun(spec), params={"G": 1.0})
    with pytest.raises(ValueError, match="'a' has no default.*params"):
        network_problem(**args)
    with pytest.raises(ValueError, match="state0.*n_sv=1"):
        network_problem(
            **_kur_args(
                dfun=build_jax_dfun(spec), params={"a": 1.0}, state0=np.zeros(8)
            )
        )
