"""Covariant Lyapunov vectors against exact and structural references.

Linear problems have constant Jacobians: their covariant vectors are the
eigenvectors of the (discrete) tangent map, which for Runge-Kutta steps of
``dx/dt = M x`` are exactly those of ``M`` (the step matrix is a polynomial in
``M dt``). Nonlinear problems are checked by covariance (``J v_i(n)`` parallel
to ``v_i(n+1)``), by the flow direction of the zero exponent, and by equality
with ``lyapunov_spectrum`` for the same forward run. Angles are in radians.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
from scipy.special import lambertw
from support.precision import OPS, tol

import lyapax
from lyapax import (
    covariant_vectors,
    lyapunov_spectrum,
    ode_problem,
    subspace_angles,
    systems,
)
from lyapax.coupling import linear_coupling
from lyapax.covariant import _memory
from lyapax.dde import dde_problem, network_dde_problem
from lyapax.network import Network, network_problem

NON_NORMAL = np.array([[-1.0, 5.0], [0.0, -2.0]])


def linear_flow(A):
    A = jnp.asarray(A)
    return lambda x: A @ x


def angle_to(vectors, direction):
    """Angle between each ``vectors[n]`` (d,) and ``direction`` (d,) or (n, d)."""
    a = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    b = np.broadcast_to(direction, vectors.shape)
    b = b / np.linalg.norm(b, axis=-1, keepdims=True)
    cos = np.sum(a * b, axis=-1)
    sin = np.linalg.norm(a - cos[..., None] * b, axis=-1)  # accurate when small
    return np.arctan2(sin, np.abs(cos))


def eigvecs_by_rate(M):
    """Real eigenvalues (descending) and eigenvectors of ``M``."""
    w, V = np.linalg.eig(M)
    order = np.argsort(-w.real)
    return w.real[order], V.real[:, order]


def assert_eigenvectors(res, M, bound):
    """Every saved column i is parallel to eigenvector i of ``M``."""
    w, V = eigvecs_by_rate(M)
    for i in range(res.vectors.shape[-1]):
        err = angle_to(res.vectors[:, :, i], V[:, i]).max()
        assert err < bound, (i, err)
    norms = np.linalg.norm(res.vectors, axis=1)
    assert np.allclose(norms, 1.0, atol=tol(1e-12, OPS))
    return w, V


# ------------------------------------------------------------ linear oracles


def test_non_normal_flow_gives_the_eigenvectors_not_the_gram_schmidt_frame():
    problem = ode_problem(linear_flow(NON_NORMAL), jnp.array([1.0, 1.0]), dt=0.01)
    kw = dict(renorm_every=10, t_transient=30.0)
    res = covariant_vectors(problem, 8_000, t_backward=30.0, **kw)
    w, V = assert_eigenvectors(res, NON_NORMAL, tol(1e-9, OPS))
    angle = np.degrees(angle_to(res.vectors[:, :, 0], res.vectors[:, :, 1]))
    assert np.abs(angle - 11.30993247).max() < tol(1e-6, 1e-4)
    assert np.degrees(np.arctan(1 / 5)) == pytest.approx(11.30993247, abs=tol(1e-8))
    # The Gram-Schmidt frame of the same run is orthogonal: 90 degrees, not 11.3.
    spec = lyapunov_spectrum(problem, 8_000, **kw)
    Y = np.asarray(spec.checkpoint.Y)
    assert np.allclose(Y.T @ Y, np.eye(2), atol=tol(1e-12))
    assert angle_to(Y[:, 1], V[:, 1]) > 1.0
    # Exponents of the same forward run; each vector grows at its eigenvalue.
    np.testing.assert_allclose(res.exponents, spec.exponents, rtol=0, atol=tol(1e-12))
    np.testing.assert_allclose(
        res.local_growth, np.broadcast_to(w, (len(res.times), 2)), atol=tol(1e-8)
    )
    assert res.vectors.shape == (len(res.times), 2, 2)
    assert res.states.shape == (len(res.times), 2)
    np.testing.assert_allclose(res.times, 0.1 * np.arange(1, len(res.times) + 1))
    assert len(res.times) == (8_000 - 3_000) // 10


def test_hyperbolic_torus_map_eigenvectors_and_constant_angle():
    M = np.array([[3.0, 1.0], [2.0, 1.0]])
    Mj = jnp.asarray(M)
    res = covariant_vectors(
        lambda x: jnp.mod(Mj @ x, 1.0),
        jnp.array([0.1, 0.3]),
        dt=1.0,
        n_steps=200,
        t_transient=30,
        t_backward=30,
    )
    w, _ = assert_eigenvectors(res, M, tol(1e-12, OPS))
    np.testing.assert_allclose(res.exponents, np.log(np.abs(w)), atol=tol(1e-12))
    np.testing.assert_allclose(
        res.exponents, [np.log(2 + 3**0.5), np.log(2 - 3**0.5)], atol=tol(1e-12)
    )
    angle = angle_to(res.vectors[:, :, 0], res.vectors[:, :, 1])
    assert np.ptp(angle) < tol(1e-12, OPS) and 0.1 < angle[0] < np.pi / 2 - 0.1


@pytest.mark.slow
def test_henon_vectors_are_covariant_step_by_step():
    henon = systems.henon_map()
    res = covariant_vectors(
        henon,
        jnp.array([0.1, 0.1]),
        dt=1.0,
        n_steps=400,
        t_transient=100,
        t_backward=60,
    )
    J = np.asarray(jax.vmap(jax.jacfwd(henon))(jnp.asarray(res.states[:-1])))
    pushed = np.einsum("nij,njk->nik", J, res.vectors[:-1])
    for i in range(2):
        err = angle_to(pushed[:, :, i], res.vectors[1:, :, i])
        assert err.max() < 1e-10, (i, err.max())
        # local_growth[n + 1] is the log-stretch of vector i over step n + 1.
        stretch = np.log(np.linalg.norm(pushed[:, :, i], axis=1))
        np.testing.assert_allclose(res.local_growth[1:, i], stretch, atol=1e-10)
    assert res.exponents[0] == pytest.approx(0.419, abs=0.05)
    assert float(np.sum(res.exponents)) == pytest.approx(np.log(0.3), abs=1e-10)


@pytest.mark.parametrize(
    "rhs, x0, t_backward",
    [
        pytest.param(systems.lorenz(), [1.0, 1.0, 1.0], 50.0, marks=pytest.mark.slow),
        # lambda_1 - lambda_2 = 0.07: the backward pass needs ~ 20 / 0.07.
        (systems.rossler(), [1.0, 1.0, 0.0], 300.0),
    ],
    ids=["lorenz", "rossler"],
)
def test_zero_exponent_vector_is_the_flow_direction(rhs, x0, t_backward):
    problem = ode_problem(rhs, jnp.array(x0), dt=0.01)
    res = covariant_vectors(
        problem,
        100 * round(t_backward + 150),
        renorm_every=10,
        t_transient=50.0,
        t_backward=t_backward,
        save_every=50,
    )
    zero = int(np.argmin(np.abs(np.asarray(res.exponents))))
    assert zero == 1
    F = np.asarray(jax.vmap(rhs)(jnp.asarray(res.states)))
    err = angle_to(res.vectors[:, :, 1], F)
    assert err.max() < 1e-4, err.max()
    # The unstable and stable vectors are not the flow direction.
    assert angle_to(res.vectors[:, :, 0], F).min() > 1e-3


def test_exponents_equal_lyapunov_spectrum_of_the_same_forward_run():
    problem = ode_problem(systems.lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)
    kw = dict(k=2, renorm_every=5, t_transient=10.0, seed=3)
    res = covariant_vectors(problem, 5_000, **kw)
    spec = lyapunov_spectrum(problem, 5_000, **kw)
    np.testing.assert_allclose(
        res.exponents, spec.exponents, rtol=tol(1e-12), atol=tol(1e-14, OPS)
    )
    np.testing.assert_allclose(res.stderr, spec.stderr, rtol=tol(1e-9))


def test_subspace_angles_of_known_planes():
    e = np.eye(4)
    theta = 1e-9
    tilted = np.stack([e[0], np.cos(theta) * e[1] + np.sin(theta) * e[2]], 1)
    got = np.asarray(subspace_angles(e[:, :2], tilted))
    np.testing.assert_allclose(got, [theta, 0.0], rtol=1e-6, atol=1e-15)
    got = np.asarray(subspace_angles(e[:, :2], e[:, 2:3] + e[:, 0:1]))
    np.testing.assert_allclose(got, [np.pi / 4], atol=1e-14)
    with pytest.raises(ValueError, match="same d"):
        subspace_angles(np.ones((3, 2)), np.ones((4, 1)))


@pytest.mark.parametrize("k", [1, 2, 3, 13])
def test_upper_inverse_of_a_batch_of_triangular_factors(k):
    from lyapax.covariant._kernels import upper_inverse

    R = np.triu(np.random.default_rng(k).normal(size=(5, k, k))) + 3 * np.eye(k)
    inverse = np.asarray(upper_inverse(jnp.asarray(R)))
    np.testing.assert_allclose(
        inverse @ R, np.broadcast_to(np.eye(k), R.shape), atol=tol(1e-13, OPS)
    )
    assert not np.tril(inverse, -1).any()


# ------------------------------------------------------------ every problem kind


def triangular_network(n=4, sparse=False):
    """Linear nodes dx_i/dt = -a_i x_i + G sum_j W_ij x_j with strictly upper
    triangular W: the network matrix -diag(a) + G W is non-normal with the
    real, distinct eigenvalues -a_i."""
    rng = np.random.default_rng(1)
    W = np.triu(rng.uniform(0.5, 1.5, (n, n)), 1)
    a = np.linspace(0.2, 1.1, n)
    G = 0.8
    weights = scipy.sparse.csr_matrix(W) if sparse else jnp.asarray(W)

    def dfun(state, c, params):
        return -params["a"] * state + c

    network = Network(weights, cvar_indices=(0,))
    problem = network_problem(
        dfun,
        network,
        linear_coupling(),
        {"G": G, "a": jnp.asarray(a)},
        jnp.ones(n),
        dt=0.02,
        integrator="rk4",
    )
    return problem, -np.diag(a) + G * W


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_non_normal_linear_network_gives_its_eigenvectors(sparse):
    problem, M = triangular_network(sparse=sparse)
    res = covariant_vectors(
        problem, 6_000, renorm_every=10, t_transient=60.0, t_backward=60.0
    )
    w, V = assert_eigenvectors(res, M, tol(1e-7, 1e-5))  # float32: non-normal M
    np.testing.assert_allclose(res.exponents, w, atol=tol(1e-9))
    gram = np.abs(V.T @ V - np.eye(4)).max()
    assert gram > 0.1  # non-normal: a Gram-Schmidt frame could not pass


@pytest.mark.slow
def test_linear_delay_equation_vectors_are_exponentials_on_the_buffer():
    a, tau, dt = 0.3, 1.0, 0.01
    problem = dde_problem(
        systems.linear_scalar_dde(a), 1.0, tau, dt, integrator="rk4", interpolate=True
    )
    res = covariant_vectors(
        problem,
        4_000,
        k=2,
        renorm_every=10,
        t_transient=20.0,
        t_backward=20.0,
        save_every=100,
    )
    roots = [float((lambertw(-a * tau, k=b) / tau).real) for b in (0, -1)]
    np.testing.assert_allclose(res.exponents, roots, atol=1e-7)
    H = problem.buf0.shape[0]  # slots (value, derivative) of the one variable
    assert res.states.shape[1] == 1 + 2 * H
    j = np.arange(H)
    for n in range(len(res.times)):
        step = res.steps[n]
        assert step == 2_000 + (n + 1) * 100  # transient + steps to this vector
        buf = res.vectors[n, 1:].reshape(H, 2, 2)
        for i, lam in enumerate(roots):
            values = buf[(step - j) % H, 0, i]  # x at theta = -j dt
            np.testing.assert_allclose(
                values / values[0], np.exp(-lam * j * dt), atol=1e-7
            )
            assert res.vectors[n, 0, i] == pytest.approx(values[0], rel=1e-12)


def _covariance_error(problem, res, step0):
    """Largest angle between the flat step's JVP of v_i(n) and v_i(n + 1)."""
    view = problem.for_engine()

    def push(z, v, t):
        return jax.jvp(lambda x: view.step(x, t), (z,), (v,))[1]

    steps = step0 + np.arange(len(res.times) - 1)
    pushed = jax.vmap(jax.vmap(push, (None, 1, None), 1))(
        jnp.asarray(res.states[:-1]), jnp.asarray(res.vectors[:-1]), steps
    )
    return max(
        angle_to(np.asarray(pushed[:, :, i]), res.vectors[1:, :, i]).max()
        for i in range(res.vectors.shape[-1])
    )


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_delayed_network_vectors_are_covariant():
    n = 3
    W = jnp.asarray(np.array([[0, 1.0, 0.5], [0.2, 0, 1.0], [1.0, 0.3, 0]]))
    problem = network_dde_problem(
        lambda x, c, p: -x + c,
        Network(W, cvar_indices=(0,)),
        linear_coupling(),
        {"G": 0.7},
        jnp.ones(n),
        dt=0.05,
        tau=0.5,
        integrator="heun",
    )
    res = covariant_vectors(problem, 600, k=3, t_transient=10.0, t_backward=10.0)
    assert res.steps[0] == 201  # 200 transient steps
    assert _covariance_error(problem, res, res.steps[0]) < 1e-9
    spec = lyapunov_spectrum(problem, 600, k=3, t_transient=10.0)
    np.testing.assert_allclose(res.exponents, spec.exponents, atol=1e-12)


@pytest.mark.slow
def test_adaptive_steps_give_the_eigenvectors():
    pytest.importorskip("diffrax")
    from lyapax.adaptive import diffrax_adaptive_step

    problem = ode_problem(
        linear_flow(NON_NORMAL),
        jnp.array([1.0, 1.0]),
        dt=0.1,
        integrator=diffrax_adaptive_step("tsit5", rtol=1e-10, atol=1e-12),
    )
    res = covariant_vectors(problem, 600, t_transient=25.0, t_backward=25.0)
    assert_eigenvectors(res, NON_NORMAL, 1e-8)


# ------------------------------------------------------------ storage modes


@pytest.mark.slow
def test_storage_modes_agree_across_many_segments(monkeypatch):
    # Small segments: the forward pass runs in several calls and "recompute"
    # replays each one from its checkpoint.
    monkeypatch.setattr(_memory, "SEGMENT_BYTES", 4 * 3 * 4 * 8)
    problem = ode_problem(systems.lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)
    kw = dict(renorm_every=5, t_transient=5.0, t_backward=5.0, save_every=10)
    out = {
        m: covariant_vectors(problem, 3_000, storage=m, **kw)
        for m in ("device", "host", "recompute")
    }
    assert _memory.segments(3, 3, len(out["device"].times), 8).saves_cap == 4
    ref = out["device"]
    assert ref.storage == "device"
    for mode in ("host", "recompute"):
        got = out[mode]
        assert got.storage == mode
        np.testing.assert_allclose(got.vectors, ref.vectors, rtol=0, atol=1e-10)
        np.testing.assert_allclose(got.states, ref.states, rtol=0, atol=1e-10)
        np.testing.assert_allclose(got.local_growth, ref.local_growth, atol=1e-10)
        np.testing.assert_array_equal(got.exponents, ref.exponents)
    assert np.array_equal(out["recompute"].vectors, ref.vectors)  # bit for bit
    auto = covariant_vectors(problem, 3_000, **kw)
    assert auto.storage == "device"
    np.testing.assert_array_equal(auto.vectors, ref.vectors)
    # Saving intervals longer than a call's R buffer: split into chunks.
    monkeypatch.setattr(_memory, "MIN_BLOCKS", 4)
    kw["save_every"] = 30  # 6 blocks per interval, 4 per call
    split = {
        m: covariant_vectors(problem, 3_000, storage=m, **kw)
        for m in ("device", "recompute")
    }
    assert np.array_equal(split["recompute"].vectors, split["device"].vectors)
    np.testing.assert_allclose(split["device"].vectors, ref.vectors[2::3], atol=1e-10)


def test_segments_on_the_device_equal_the_whole_run_in_one_program(monkeypatch):
    # Eager: several forward segments, their R factors copied into one device
    # buffer, C's rows and column order taken on the device. Under jit: one
    # forward program over the whole window. Same mathematics, to rounding.
    # The two are different XLA programs, and jax 0.12 rounds them apart by an
    # ulp here and there; Lorenz then grows such a seed at ~0.91 per time unit
    # (3000 steps: 1e-7 apart). So a short window, 6 time units in all: an
    # ulp-sized seed (<= 50 ulp of |x| <= 25, 2e-13) grows at most about
    # e^(0.91 * 6) = 230-fold, to 5e-11 < atol. A segment bug (an R factor in
    # the wrong slot, a column misordered) moves them by 1e-2 or more.
    monkeypatch.setattr(_memory, "SEGMENT_BYTES", 4 * 3 * 4 * 8)
    kw = dict(renorm_every=5, t_transient=2.0, t_backward=1.0, save_every=10)

    def run(x0):
        problem = ode_problem(systems.lorenz(), x0, dt=0.01)
        return covariant_vectors(problem, 400, **kw)

    x0 = jnp.array([1.0, 1.0, 1.0])
    eager = run(x0)
    assert _memory.segments(3, 3, len(eager.times), 8).saves_cap == 4
    assert len(eager.times) == 30  # 8 segments of <= 4 saves
    traced = jax.jit(lambda x: run(x)[:5])(x0)
    for got, want in zip(traced, eager[:5], strict=True):
        np.testing.assert_allclose(want, got, rtol=0, atol=tol(1e-10))
    np.testing.assert_array_equal(traced[1], eager.times)
    assert np.all(np.diff(eager.exponents) < 0)  # columns ordered as exponents


def test_place_rows_writes_only_the_rows_asked_for():
    from lyapax.covariant._kernels import place_rows

    rows = jnp.asarray(np.random.default_rng(0).normal(size=(4, 2, 2)))
    got = np.asarray(place_rows(jnp.zeros((8, 2, 2)), rows, np.int32(5), np.int32(3)))
    want = np.zeros((8, 2, 2))
    want[5:8] = rows[:3]
    np.testing.assert_array_equal(got, want)


def test_one_compile_across_run_lengths():
    from tests.test_runtime_lengths import count_compiles

    problem = ode_problem(systems.lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)
    covariant_vectors(problem, 1_000, renorm_every=10, t_transient=1.0)
    with count_compiles() as compiles:
        covariant_vectors(problem, 1_200, renorm_every=10, t_transient=2.0)
        covariant_vectors(problem, 900, renorm_every=5, t_transient=1.0, save_every=20)
        rebuilt = ode_problem(systems.lorenz(rho=30.0), jnp.ones(3), dt=0.01)
        covariant_vectors(rebuilt, 1_000, renorm_every=10, t_backward=3.0)
    assert compiles == []


def test_vmap_over_a_parameter_is_one_program():
    def angles(rho):
        problem = ode_problem(systems.lorenz(rho=rho), jnp.ones(3), dt=0.01)
        res = covariant_vectors(problem, 2_000, renorm_every=10, t_transient=5.0)
        return res.exponents, res.vectors

    rhos = jnp.array([28.0, 35.0])
    exps, vecs = jax.jit(jax.vmap(angles))(rhos)
    for i, rho in enumerate(rhos):
        problem = ode_problem(systems.lorenz(rho=float(rho)), jnp.ones(3), dt=0.01)
        one = covariant_vectors(problem, 2_000, renorm_every=10, t_transient=5.0)
        np.testing.assert_allclose(exps[i], one.exponents, atol=tol(1e-10))
        np.testing.assert_allclose(vecs[i], one.vectors, atol=tol(1e-8))


@pytest.mark.slow
def test_sweep_equals_single_runs_and_chunks_agree():
    from lyapax import sweep_covariant_vectors

    def make(p):
        return ode_problem(systems.lorenz(rho=p["rho"]), jnp.ones(3), dt=0.01)

    rhos = {"rho": jnp.array([28.0, 35.0, 45.0])}
    kw = dict(renorm_every=10, t_transient=5.0, t_backward=5.0, save_every=20)
    res = sweep_covariant_vectors(make, rhos, 2_000, **kw)
    assert res.vectors.shape == (3, 75, 3, 3) and res.exponents.shape == (3, 3)
    chunked = sweep_covariant_vectors(make, rhos, 2_000, batch_size=2, **kw)
    np.testing.assert_allclose(chunked.vectors, res.vectors, atol=1e-10)
    for i, rho in enumerate([28.0, 35.0, 45.0]):
        one = covariant_vectors(make({"rho": rho}), 2_000, **kw)
        np.testing.assert_allclose(res.exponents[i], one.exponents, atol=1e-10)
        np.testing.assert_allclose(res.vectors[i], one.vectors, atol=1e-8)
        np.testing.assert_allclose(res.local_growth[i], one.local_growth, atol=1e-8)
    assert res.t_backward == one.t_backward


def test_a_sweep_called_again_compiles_nothing():
    # Each call jitted a new closure and compiled again (~1 s), found by
    # benchmarks/entry_points.py; now one program per family and options.
    from lyapax import sweep_covariant_vectors
    from lyapax.covariant import _sweep

    def make(p):
        return ode_problem(systems.lorenz(rho=p["rho"]), jnp.ones(3), dt=0.01)

    rhos = {"rho": jnp.array([28.0, 35.0])}
    first = sweep_covariant_vectors(make, rhos, 100, renorm_every=10)
    programs = _sweep._sweep_program._cache_size()
    again = sweep_covariant_vectors(
        make, {"rho": rhos["rho"] + 1.0}, 100, renorm_every=10
    )
    assert _sweep._sweep_program._cache_size() == programs
    assert again.exponents.shape == first.exponents.shape == (2, 3)
    sweep_covariant_vectors(make, rhos, 100, renorm_every=5)  # new options
    assert _sweep._sweep_program._cache_size() == programs + 1


# ------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    "params_batch, match",
    [
        # A scalar leaf is named (before: "got leading sizes ['2', 'None']").
        (
            {"rho": jnp.array([28.0, 35.0]), "sigma": 10.0},
            r"params_batch\['sigma'\] is a scalar, but every leaf",
        ),
        (
            {"rho": jnp.array([28.0, 35.0]), "sigma": jnp.ones(3)},
            r"share one leading batch size; got params_batch\['rho'\]: 2",
        ),
        ({}, "params_batch must be a pytree of arrays with a leading batch axis"),
        ({"rho": jnp.zeros(0)}, "the batch is empty"),
    ],
)
def test_sweep_names_bad_params_batch(params_batch, match):
    from lyapax import sweep_covariant_vectors

    def make(p):  # never reached: the batch is checked first
        raise AssertionError("make_problem called on a bad batch")

    with pytest.raises(ValueError, match=match):
        sweep_covariant_vectors(make, params_batch, 100)


@pytest.fixture
def lorenz_problem():
    return ode_problem(systems.lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(save_every=15, renorm_every=10), "save_every=15 must be a multiple"),
        (dict(t_backward=-1.0), "t_backward must satisfy"),
        (dict(t_backward=11.0), "t_backward must satisfy"),
        (dict(t_backward=10.0), "t_backward must satisfy"),
        (dict(t_backward=9.99, save_every=10), "no vector to save"),
        (dict(k=4), "k must satisfy"),
        (dict(storage="disk"), "storage must be one of"),
        (dict(save_every=0), "save_every must be >= 1"),
    ],
)
def test_bad_arguments_name_the_argument(lorenz_problem, kwargs, match):
    with pytest.raises(ValueError, match=match):
        covariant_vectors(lorenz_problem, 1_000, **kwargs)


def test_an_impossible_request_is_refused_before_running():
    d = 100_000
    problem = ode_problem(lambda x: -x, jnp.zeros(d), dt=0.01)
    for storage in ("auto", "device", "recompute"):
        with pytest.raises(MemoryError, match="bytes"):
            covariant_vectors(problem, 1_000_000, k=100, storage=storage)


@pytest.mark.slow
def test_auto_falls_back_to_host_when_the_device_is_small(monkeypatch):
    need = _memory.footprints(
        d=1000,
        k=10,
        n_blocks=1000,
        n_saved=1000,
        seg=_memory.Segments(16, 256),
        itemsize=8,
    )
    device_gib = (need["device"].device + need["host"].device) // 2
    free = (device_gib, 10 * need["device"].host, False)  # a GPU and its host
    assert _memory.choose_storage("auto", need, free) == "host"
    assert _memory.choose_storage("recompute", need, free) == "recompute"
    with pytest.raises(MemoryError, match='"device" needs'):
        _memory.choose_storage("device", need, free)
    roomy = (10 * need["device"].device, 10 * need["device"].host, False)
    assert _memory.choose_storage("auto", need, roomy) == "device"
    # End to end: the chosen mode is the one that ran, with the same vectors.
    problem = ode_problem(linear_flow(NON_NORMAL), jnp.array([1.0, 1.0]), dt=0.01)
    ref = covariant_vectors(problem, 500, t_transient=1.0, storage="device")
    monkeypatch.setattr(_memory, "AUTO_FRACTION", 0.0)  # "device" never fits
    res = covariant_vectors(problem, 500, t_transient=1.0)
    assert res.storage == "host"
    np.testing.assert_allclose(res.vectors, ref.vectors, atol=1e-12)


def test_plain_form_needs_its_arguments():
    with pytest.raises(TypeError, match="requires"):
        covariant_vectors(systems.henon_map(), jnp.ones(2))


def test_exported_from_lyapax():
    for name in ("covariant_vectors", "CovariantResult", "subspace_angles"):
        assert name in lyapax.__all__
