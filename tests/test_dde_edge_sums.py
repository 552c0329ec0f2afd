"""Dense per-edge delays summed over the sources (``lyapax.dde._edge_sums``).

The fast path forms the coupling's source terms on the ring buffer and gathers
them per edge; it must equal the edge form of the coupling evaluated on the
``(n_cvar, n, n)`` delayed values, in value and in every tangent direction,
and a whole spectrum must not change when it is switched off.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import OPS, tol

import lyapax.dde as dde
from lyapax import lyapunov_spectrum
from lyapax._internal import history as _history
from lyapax._internal import sparse as _sparse
from lyapax.coupling import kuramoto_coupling, linear_coupling, sigmoidal_coupling
from lyapax.dde import _edge_sums, as_edge_coupling, network_dde_problem
from lyapax.network import Network


class _ProductSources(linear_coupling().__class__):
    """Two coupled variables whose only source term is their product (no
    ``source_slopes``: the generic jvp path)."""

    def sources(self, x):
        return x[:1] * x[1:2]

    def combine(self, sums, current, weights, params):
        return jnp.concatenate([sums, -sums], axis=0)

    def edges(self, delayed, current, weights, params):
        return self.combine(
            jnp.sum(weights[None] * self.sources(delayed), -1), current, weights, params
        )


CASES = {
    "linear": (linear_coupling(a=0.7, b=0.1), 1),
    "sigmoidal": (sigmoidal_coupling(a=1.2, midpoint=0.1, sigma=0.6), 1),
    "kuramoto": (kuramoto_coupling(alpha=0.4), 1),
    "kuramoto two variables": (kuramoto_coupling(alpha=-0.2), 2),
    "product of two variables": (_ProductSources(), 2),
}


def _history_buffers(rng, horizon, n_cvar, n, k):
    """A random ring buffer ``(H, n_cvar, n)``, its ``k`` tangents and the
    current coupled values ``(n_cvar, n)``."""
    buf = jnp.asarray(rng.uniform(-2, 2, (horizon, n_cvar, n)))
    dbuf = jnp.asarray(rng.normal(size=(horizon, n_cvar, n, k)))
    return buf, dbuf, jnp.asarray(rng.uniform(-1, 1, (n_cvar, n)))


def _assert_sums_match(reference, edge, sums, d_sums, buf, dbuf, current, w, params):
    """``combine(sums)`` equals ``reference(buf)`` (the edge form on the delayed
    values), and its derivative along each ``d_sums`` column equals the jvp of
    the reference along the matching ``dbuf`` column, to 1e-12 (float32: 1e-5)."""
    bound = tol(1e-12, 1e-5)  # sums of ~10 terms of size ~2
    np.testing.assert_allclose(
        edge.combine(sums, current, w, params), reference(buf), rtol=0, atol=bound
    )
    for col in range(dbuf.shape[-1]):
        want = jax.jvp(reference, (buf,), (dbuf[..., col],))[1]
        got = jax.jvp(
            lambda s: edge.combine(s, current, w, params), (sums,), (d_sums[..., col],)
        )[1]
        np.testing.assert_allclose(got, want, rtol=0, atol=bound)


# The two-variable cases are the costliest compiles; they run in the slow run.
_TWO_VARIABLES = ("kuramoto two variables", "product of two variables")


def _cases(slow: tuple[str, ...]) -> list:
    return [
        pytest.param(name, marks=pytest.mark.slow) if name in slow else name
        for name in sorted(CASES)
    ]


@pytest.mark.parametrize("name", _cases((*_TWO_VARIABLES, "kuramoto")))
def test_edge_sums_equal_the_edge_form_and_its_tangents(name):
    coupling, n_cvar = CASES[name]
    edge = as_edge_coupling(coupling)
    n, horizon, k, t = 23, 7, 4, 40  # n not a multiple of the block size
    rng = np.random.default_rng(3)
    weights = jnp.asarray(rng.normal(size=(n, n)))
    steps = jnp.asarray(rng.integers(0, horizon, (n, n)), jnp.int32)
    buf, dbuf, current = _history_buffers(rng, horizon, n_cvar, n, k)
    params = {"G": 1.3}

    def reference(b):
        delayed = _history.read_edges(b, t, steps)  # (n_cvar, n, n)
        return edge(delayed, current, weights, params)

    def fast(b, d=None):
        sums, d_sums = _edge_sums.edge_sums(edge, weights, b, t, steps, d)
        return sums, d_sums

    sums, d_sums = fast(buf, dbuf)
    _assert_sums_match(
        reference, edge, sums, d_sums, buf, dbuf, current, weights, params
    )
    # Two programs: a TPU's compiler orders their float32 sums differently.
    np.testing.assert_allclose(
        fast(buf)[0], sums, rtol=tol(0, OPS), atol=tol(1e-13, OPS)
    )
    assert fast(buf)[1].shape == (sums.shape[0], n, 0)


@pytest.mark.parametrize("name", _cases(_TWO_VARIABLES + ("kuramoto",)))
def test_slot_edge_sums_equal_the_edge_form_and_its_tangents(name):
    """The neighbour-list form (sparse weights): the same sums from ``n w`` slots."""
    coupling, n_cvar = CASES[name]
    edge = as_edge_coupling(coupling)
    n, w, horizon, k, t = 17, 4, 6, 3, 29
    rng = np.random.default_rng(4)
    sources = jnp.asarray(rng.integers(0, n, (n, w)), jnp.int32)
    values = jnp.asarray(rng.normal(size=(n, w)))
    steps = jnp.asarray(rng.integers(0, horizon, (n, w)), jnp.int32)
    buf, dbuf, current = _history_buffers(rng, horizon, n_cvar, n, k)
    params = {"G": 0.7}

    def reference(b):
        delayed = _sparse.read_edges_ell(b, t, steps, sources)  # (n_cvar, n, w)
        return edge(delayed, current, values, params)

    sums, d_sums = _edge_sums.slot_edge_sums(edge, values, buf, t, steps, sources, dbuf)
    _assert_sums_match(
        reference, edge, sums, d_sums, buf, dbuf, current, values, params
    )


def _kuramoto_problem(n, max_delay_steps, dt=0.01, seed=5):
    rng = np.random.default_rng(seed)
    W = jnp.asarray(rng.uniform(0.0, 1.0, (n, n)) * (1 - np.eye(n)))
    tau = rng.integers(1, max_delay_steps + 1, (n, n)) * dt
    params = {"omega": jnp.asarray(rng.normal(0.0, 1.0, n)), "G": 2.0}
    return network_dde_problem(
        lambda th, c, p: p["omega"] + c,
        Network(W, (0,)),
        kuramoto_coupling(alpha=0.2),
        params,
        jnp.asarray(rng.uniform(0, 2 * np.pi, n)),
        dt,
        tau=tau,
    )


@pytest.mark.slow
def test_spectrum_is_unchanged_by_the_summed_path(monkeypatch):
    fast = _kuramoto_problem(40, 12)
    assert fast.step_fn.ring.presummed
    monkeypatch.setattr(dde.problem, "presum_edges", lambda *a, **k: False)
    slow = _kuramoto_problem(40, 12)
    assert not slow.step_fn.ring.presummed
    run = dict(n_steps=60, k=4, renorm_every=10)
    got = lyapunov_spectrum(fast, **run)
    want = lyapunov_spectrum(slow, **run)
    np.testing.assert_allclose(got.exponents, want.exponents, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        got.checkpoint.state, want.checkpoint.state, rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(got.history, want.history, rtol=0, atol=1e-10)


def test_summed_path_only_where_it_saves_work():
    # H = 13 slots > n = 8 nodes: forming the terms on the buffer would cost
    # more than on the n^2 edges, so the edge form is used.
    assert not _kuramoto_problem(8, 12).step_fn.ring.presummed
    assert _kuramoto_problem(16, 12).step_fn.ring.presummed


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_sparse_spectrum_is_unchanged_by_the_summed_path(monkeypatch):
    from jax.experimental import sparse

    n, dt = 60, 0.01
    rng = np.random.default_rng(8)
    rows = np.repeat(np.arange(n), 4)
    cols = (rows + np.tile([-2, -1, 1, 3], n)) % n
    idx = jnp.asarray(np.stack([rows, cols], axis=1), jnp.int32)
    W = sparse.BCOO((jnp.asarray(rng.uniform(0.5, 1.5, rows.size)), idx), shape=(n, n))
    tau = sparse.BCOO(
        (jnp.asarray(rng.integers(1, 9, rows.size) * dt), idx), shape=(n, n)
    )
    theta0 = jnp.asarray(rng.uniform(0, 2 * np.pi, n))

    def build():
        return network_dde_problem(
            lambda th, c, p: p["omega"] + c,
            Network(W, (0,)),
            kuramoto_coupling(alpha=0.3),
            {"omega": jnp.linspace(-1, 1, n), "G": 1.5},
            theta0,
            dt,
            tau=tau,
        )

    fast = build()
    assert fast.step_fn.ring.presummed
    monkeypatch.setattr(dde.problem, "presum_edges", lambda *a, **k: False)
    slow = build()
    assert not slow.step_fn.ring.presummed
    run = dict(n_steps=60, k=4, renorm_every=10)
    got = lyapunov_spectrum(fast, **run)
    want = lyapunov_spectrum(slow, **run)
    np.testing.assert_allclose(got.exponents, want.exponents, rtol=0, atol=1e-12)
    np.testing.assert_allclose(got.history, want.history, rtol=0, atol=1e-10)


def test_edge_coupling_builders_match_their_formulas():
    rng = np.random.default_rng(7)
    n = 4
    delayed = jnp.asarray(rng.uniform(-2, 2, (1, n, n)))  # [c, target i, source j]
    current = jnp.asarray(rng.uniform(-1, 1, (1, n)))
    w = jnp.asarray(rng.uniform(0, 1, (n, n)))
    d, x = np.asarray(delayed[0]), np.asarray(current[0])
    params = {"G": 1.5}

    linear = dde.edge_linear_coupling(a=0.7, b=0.1, G_default=9.0)
    want = 1.5 * 0.7 * np.sum(np.asarray(w) * d, axis=1) + 0.1
    np.testing.assert_allclose(
        linear(delayed, current, w, params)[0], want, atol=tol(1e-14, OPS)
    )

    kuramoto = dde.edge_kuramoto_coupling(alpha=0.3, G_default=2.0)
    want = 2.0 / n * np.sum(np.asarray(w) * np.sin(d - x[:, None] + 0.3), axis=1)
    np.testing.assert_allclose(
        kuramoto(delayed, current, w, {})[0], want, atol=tol(1e-14, OPS)
    )

    def h(src, tgt):
        return src * tgt

    pairwise = dde.pairwise_edge_coupling(h, G_default=0.5, normalize=True)
    want = 1.5 / n * np.sum(np.asarray(w) * d * x[:, None], axis=1)
    np.testing.assert_allclose(
        pairwise(delayed, current, w, params)[0], want, atol=tol(1e-14, OPS)
    )

    # Undelayed (every source read now), each equals its plain coupling.
    now = jnp.broadcast_to(current[:, None, :], (1, n, n))
    np.testing.assert_allclose(
        linear(now, current, w, params),
        linear_coupling(0.7, 0.1, 9.0)(current, w, params),
        atol=tol(1e-14, OPS),
    )
    np.testing.assert_allclose(
        kuramoto(now, current, w, {}),
        kuramoto_coupling(0.3, 2.0)(current, w, {}),
        atol=tol(1e-14, OPS),
    )
