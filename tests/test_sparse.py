"""Padded neighbour-list (ELL) weights: conversion and products against dense."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse
from support.precision import OPS, float64_run, tol

from lyapax._internal import sparse as _sparse
from lyapax._internal.sparse import EllWeights, as_ell, ell_from_coo


def _random_sparse(n, density, seed=0):
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=(n, n)) * (rng.random((n, n)) < density)
    dense[3] = 0.0  # a node with no inputs
    return dense


@pytest.mark.slow
def test_conversions_reproduce_the_dense_matrix():
    dense = _random_sparse(40, 0.2)
    for weights in (dense, jnp.asarray(dense), sparse.BCOO.fromdense(dense)):
        ell = as_ell(weights)
        np.testing.assert_array_equal(np.asarray(ell.todense()), dense)
        assert ell.shape == (40, 40)
        assert ell.width == int(np.max(np.count_nonzero(dense, axis=1)))


def test_scipy_sparse_input():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    dense = _random_sparse(30, 0.3, seed=1)
    for fmt in (scipy_sparse.csr_matrix, scipy_sparse.coo_matrix):
        got = np.asarray(as_ell(fmt(dense)).todense())
        np.testing.assert_array_equal(got, dense.astype(got.dtype))  # run's dtype


def test_bcoo_duplicates_are_summed_and_explicit_zeros_dropped():
    idx = jnp.array([[0, 1], [0, 1], [1, 0], [2, 2]], dtype=jnp.int32)
    data = jnp.array([1.5, 2.0, 0.0, 4.0])
    bcoo = sparse.BCOO((data, idx), shape=(3, 3))
    ell = as_ell(bcoo)
    np.testing.assert_array_equal(np.asarray(ell.todense()), np.asarray(bcoo.todense()))
    assert ell.width == 2  # row 0 keeps both duplicates, row 1's zero is gone


@pytest.mark.parametrize("unroll", [64, 2])
def test_product_equals_dense(monkeypatch, unroll):
    # unroll=2 forces the fori_loop path for rows wider than two slots.
    monkeypatch.setattr(_sparse, "_UNROLL", unroll)
    dense = _random_sparse(50, 0.15, seed=2)
    ell = as_ell(dense)
    x = jax.random.normal(jax.random.PRNGKey(0), (50, 7))
    np.testing.assert_allclose(ell @ x, dense @ np.asarray(x), rtol=0, atol=tol(1e-12))
    np.testing.assert_allclose(
        ell @ x[:, 0], dense @ np.asarray(x[:, 0]), rtol=0, atol=tol(1e-12)
    )


def test_product_under_jit_and_jvp():
    dense = _random_sparse(20, 0.3, seed=3)
    ell = as_ell(dense)
    x = jax.random.normal(jax.random.PRNGKey(1), (20, 3))
    v = jax.random.normal(jax.random.PRNGKey(2), (20, 3))

    def push(w, x, v):
        return jax.jvp(lambda y: w @ jnp.sin(y), (x,), (v,))

    out, tangent = jax.jit(push)(ell, x, v)
    np.testing.assert_allclose(out, dense @ np.sin(np.asarray(x)), atol=tol(1e-12))
    expected = dense @ (np.cos(np.asarray(x)) * np.asarray(v))
    np.testing.assert_allclose(tangent, expected, atol=tol(1e-12))


def test_large_products_are_computed_apart_from_their_users_on_cpu():
    # The product's users read each of its elements several times (as the
    # Kuramoto stage does); apart, its gathers are fused into one pass.
    n = 400
    dense = _random_sparse(n, 0.02, seed=5)
    ell = as_ell(dense)
    x = jax.random.normal(jax.random.PRNGKey(3), (n, 3))

    def users(w, x):
        p = w @ x
        return p * p[:, :1]

    compiled = jax.jit(users).lower(ell, x).compile().as_text()
    if jax.default_backend() == "cpu":
        assert "conditional(" in compiled
    expected = (dense @ np.asarray(x)) * (dense @ np.asarray(x))[:, :1]
    np.testing.assert_allclose(jax.jit(users)(ell, x), expected, atol=tol(1e-11))
    batch = jnp.stack([x, 2 * x])
    np.testing.assert_allclose(
        jax.vmap(users, in_axes=(None, 0))(ell, batch)[1], 4 * expected, atol=tol(4e-11)
    )
    # Small products too (a 20-node network's step is 40% faster apart).
    small = as_ell(_random_sparse(20, 0.3, seed=6))
    text = jax.jit(users).lower(small, x[:20]).compile().as_text()
    assert ("conditional(" in text) == (jax.default_backend() == "cpu")


def test_padding_points_at_the_node_itself_with_zero_weight():
    ell = as_ell(_random_sparse(10, 0.3, seed=4))
    pad = np.asarray(ell.values) == 0.0
    rows = np.broadcast_to(np.arange(10)[:, None], pad.shape)
    np.testing.assert_array_equal(np.asarray(ell.indices)[pad], rows[pad])


def test_extra_edge_arrays_share_the_slots():
    rows = np.array([2, 0, 2, 1])
    cols = np.array([1, 2, 0, 1])
    vals = np.array([1.0, 2.0, 3.0, 4.0])
    delays = np.array([7, 8, 9, 10])
    indices, values, (d,) = ell_from_coo(rows, cols, vals, 3, (delays,))
    for r, c, val, dl in zip(rows, cols, vals, delays, strict=True):
        slot = np.flatnonzero((indices[r] == c) & (values[r] == val))
        assert slot.size == 1 and d[r, slot[0]] == dl


@pytest.mark.parametrize("shape", [(3, 4), (0, 0), (2, 2, 2)])
def test_non_square_weights_raise(shape):
    with pytest.raises(ValueError, match="square"):
        as_ell(np.zeros(shape))


def test_ell_is_a_pytree_with_array_leaves():
    ell = as_ell(np.eye(4))
    leaves = jax.tree_util.tree_leaves(ell)
    assert len(leaves) == 2 and isinstance(ell, EllWeights)


def test_sparse_edge_read_matches_the_dense_read():
    from lyapax._internal.history import read_edges

    rng = np.random.default_rng(5)
    n, horizon = 12, 6
    dense = _random_sparse(n, 0.3, seed=5)
    rows, cols = np.nonzero(dense)
    steps_dense = np.zeros((n, n), dtype=np.int32)
    steps_dense[rows, cols] = rng.integers(0, horizon, rows.size)
    indices, values, (steps,) = ell_from_coo(
        rows, cols, dense[rows, cols], n, (steps_dense[rows, cols],)
    )
    buf = jnp.asarray(rng.normal(size=(horizon, 2, n)))
    full = np.asarray(read_edges(buf, 9, jnp.asarray(steps_dense)))
    got = np.asarray(_sparse.read_edges_ell(buf, 9, steps, indices))
    assert got.shape == (2, n, indices.shape[1])
    real = values != 0  # padded slots carry weight 0: their reads do not count
    for c in range(2):
        expected = full[c][np.arange(n)[:, None], indices]
        np.testing.assert_array_equal(got[c][real], expected[real])


def test_dense_memory_guard_names_the_size():
    _sparse.check_dense_fits("x", 10, "fine", limit=100)
    with pytest.raises(MemoryError, match=r"needs 8\.0 GiB.*1\.0 GiB.*use sparse"):
        _sparse.check_dense_fits("weights", 8 * 2**30, "use sparse", limit=2**30)


# --- networks with sparse weights: the same spectra as dense weights ---------

from lyapax.core import lyapunov_spectrum  # noqa: E402
from lyapax.coupling import (  # noqa: E402
    kuramoto_coupling,
    linear_coupling,
    sigmoidal_coupling,
)
from lyapax.network import Network, network_problem  # noqa: E402


def _ring(n, offsets):
    """Dense ``(n, n)`` circulant ring lattice: i receives from i + s, s in offsets."""
    W = np.zeros((n, n))
    for s in offsets:
        W[np.arange(n), (np.arange(n) + s) % n] += 1.0
    return W


def _two_var_dfun(x, c, p):
    # x (2, n): a damped oscillator per node, driven by the coupling on row 0.
    return jnp.stack([x[1] + c[0] - p["gamma"] * x[0], -x[0] - p["gamma"] * x[1]])


def _spectrum(W, coupling, dfun, state0, cvar=(0,), n_steps=100):
    params = {"gamma": 0.3, "G": 0.8, "omega": jnp.linspace(-1, 1, W.shape[0])}
    problem = network_problem(dfun, Network(W, cvar), coupling, params, state0, 0.01)
    return lyapunov_spectrum(problem, n_steps=n_steps, k=5, renorm_every=10)


def _kuramoto_dfun(theta, c, p):
    return p["omega"] + c


COUPLINGS = {
    "linear": (linear_coupling(a=0.5), _two_var_dfun, 2),
    "sigmoidal": (sigmoidal_coupling(a=1.0, midpoint=0.2, sigma=0.7), _two_var_dfun, 2),
    "kuramoto": (kuramoto_coupling(alpha=0.3), _kuramoto_dfun, 1),
}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.slow) if name == "kuramoto" else name
        for name in sorted(COUPLINGS)
    ],
)
def test_sparse_spectrum_equals_dense_at_n500(name):
    coupling, dfun, n_sv = COUPLINGS[name]
    n = 500
    rng = np.random.default_rng(7)
    W = _ring(n, (-3, -1, 2, 5)) * rng.uniform(0.5, 1.5, (n, n))
    state0 = jnp.asarray(rng.uniform(-1, 1, (n_sv, n)))
    dense = _spectrum(jnp.asarray(W), coupling, dfun, state0)
    for weights in (sparse.BCOO.fromdense(W), as_ell(W)):
        got = _spectrum(weights, coupling, dfun, state0)
        np.testing.assert_allclose(
            got.exponents, dense.exponents, rtol=0, atol=tol(1e-10)
        )


def test_scipy_weights_build_a_neighbour_list_network():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    W = _ring(30, (-1, 1))
    network = Network(scipy_sparse.csr_matrix(W), (0,))
    assert isinstance(network.weights, EllWeights) and network.weights.width == 2
    np.testing.assert_array_equal(np.asarray(network.weights.todense()), W)


@pytest.mark.slow
def test_custom_coupling_on_sparse_weights_takes_the_generic_path():
    # A plain function: no fused batched_jvp, so each stage runs jax.jvp of it
    # batched over the k tangents (k + 1 products per stage instead of one).
    def cubic(x, weights, params):
        return params["G"] * (weights @ (x**3).T).T

    n = 60
    W = _ring(n, (-2, 1, 4))
    state0 = jnp.asarray(np.random.default_rng(8).uniform(-1, 1, (2, n)))
    dense = _spectrum(jnp.asarray(W), cubic, _two_var_dfun, state0)
    got = _spectrum(sparse.BCOO.fromdense(W), cubic, _two_var_dfun, state0)
    # float32: the two programs' sums round differently on a TPU (3e-7 seen)
    np.testing.assert_allclose(
        got.exponents, dense.exponents, rtol=0, atol=tol(1e-10, OPS)
    )


@pytest.mark.slow
def test_ring_lattice_spectrum_from_circulant_eigenvalues():
    # x' = -g x + G W x with W a symmetric circulant ring lattice: eigenvalues
    # lam_m = -g + G sum_s cos(2 pi m s / n); Heun multiplies each eigen-mode
    # by exactly 1 + h lam + (h lam)^2 / 2 per step.
    n, g, G, h = 20, 6.0, 1.0, 0.01
    offsets = (-3, -2, -1, 1, 2, 3)
    theta = 2 * np.pi * np.arange(n) / n
    lam = -g + G * sum(np.cos(theta * s) for s in offsets)
    mult = 1 + h * lam + (h * lam) ** 2 / 2
    expected = np.sort(np.log(np.abs(mult)) / h)[::-1][:5]

    def dfun(x, c, p):
        return -p["g"] * x + c

    problem = network_problem(
        dfun,
        Network(sparse.BCOO.fromdense(_ring(n, offsets)), (0,)),
        linear_coupling(),
        {"g": g, "G": G},
        jnp.linspace(-1.0, 1.0, n),
        h,
    )
    assert isinstance(problem.step_fn.weights, EllWeights)
    result = lyapunov_spectrum(
        problem, n_steps=2000, k=5, renorm_every=10, t_transient=20.0
    )
    np.testing.assert_allclose(result.exponents, expected, rtol=0, atol=1e-8)


def test_dense_all_to_all_kuramoto_refuses_a_size_that_cannot_fit():
    from lyapax.systems import kuramoto_network

    size = r"14901\.2" if float64_run() else r"7450\.6"  # 10^12 weights of 8 or 4 B
    with pytest.raises(MemoryError, match=rf"N=1000000 .* needs {size} GiB"):
        kuramoto_network(1_000_000)


# --- delayed networks: sparse weights read only their edges ------------------

from lyapax.dde import network_dde_problem  # noqa: E402
from lyapax.dde._step import SlotDelays  # noqa: E402

PLAIN_DELAYED = {("linear", False), ("kuramoto", True)}


# Two cases stay in the plain run (one per delay layout); the other four are
# slow: each is a pair of n = 500 compiles.
_DELAYED_CASES = [
    pytest.param(
        name,
        per_edge,
        marks=() if (name, per_edge) in PLAIN_DELAYED else pytest.mark.slow,
        id=f"{per_edge}-{name}",
    )
    for per_edge in (False, True)
    for name in sorted(COUPLINGS)
]


@pytest.mark.parametrize(("name", "per_edge"), _DELAYED_CASES)
def test_sparse_delayed_spectrum_equals_dense_at_n500(name, per_edge):
    coupling, dfun, n_sv = COUPLINGS[name]
    n, dt = 500, 0.01
    rng = np.random.default_rng(9)
    W = _ring(n, (-3, -1, 2, 5)) * rng.uniform(0.5, 1.5, (n, n))
    tau = np.where(W != 0, rng.integers(1, 8, (n, n)) * dt, 0.0) if per_edge else 0.05
    state0 = jnp.asarray(rng.uniform(-1, 1, (n_sv, n)))
    params = {"gamma": 0.3, "G": 0.8, "omega": jnp.linspace(-1, 1, n)}

    def run(weights, tau, is_sparse):
        problem = network_dde_problem(
            dfun, Network(weights, (0,)), coupling, params, state0, dt, tau=tau
        )
        ring = problem.step_fn.ring
        assert isinstance(ring.field.weights, EllWeights) == is_sparse
        assert isinstance(ring.delay, SlotDelays) == (is_sparse and per_edge)
        return lyapunov_spectrum(problem, n_steps=40, k=3, renorm_every=10)

    dense = run(jnp.asarray(W), tau, False)
    sparse_tau = sparse.BCOO.fromdense(tau) if per_edge else tau
    got = run(sparse.BCOO.fromdense(W), sparse_tau, True)
    # float32: the two programs' sums round differently on a TPU (3e-7 seen)
    np.testing.assert_allclose(
        got.exponents, dense.exponents, rtol=0, atol=tol(1e-10, OPS)
    )


def test_dense_per_edge_delays_refuse_a_size_that_cannot_fit(monkeypatch):
    from lyapax.dde import _build

    monkeypatch.setattr(_build, "check_dense_fits", _tiny_limit)
    W = _ring(50, (-1, 1))
    with pytest.raises(MemoryError, match=r"per-edge delays on dense \(50, 50\)"):
        network_dde_problem(
            lambda x, c, p: -x + c,
            Network(jnp.asarray(W), (0,)),
            linear_coupling(),
            {},
            jnp.ones(50),
            0.1,
            tau=W * 0.3,
        )


def _tiny_limit(what, n_bytes, hint):
    _sparse.check_dense_fits(what, n_bytes, hint, limit=1024)


@pytest.mark.slow
def test_network_sparse_option_chooses_the_layout():
    W = _ring(40, (-2, 3))
    assert isinstance(Network(W, (0,), sparse=True).weights, EllWeights)
    assert isinstance(Network(jnp.asarray(W), (0,)).weights, jax.Array)
    bcoo = sparse.BCOO.fromdense(W)
    assert isinstance(Network(bcoo, (0,), sparse=False).weights, sparse.BCOO)
    with pytest.raises(TypeError, match="sparse must be None, True or False"):
        Network(W, (0,), sparse="yes")
    # The forced neighbour list gives the dense spectrum.
    coupling, dfun, _ = COUPLINGS["kuramoto"]
    state0 = jnp.linspace(0.0, 6.0, 40)[None]
    a = _spectrum(jnp.asarray(W), coupling, dfun, state0, n_steps=50)
    params = {"omega": jnp.linspace(-1, 1, 40), "G": 0.8}
    problem = network_problem(
        dfun, Network(W, (0,), sparse=True), coupling, params, state0, 0.01
    )
    b = lyapunov_spectrum(problem, n_steps=50, k=5, renorm_every=10)
    np.testing.assert_allclose(b.exponents, a.exponents, rtol=0, atol=1e-10)
