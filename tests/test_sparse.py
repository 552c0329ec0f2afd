"""Padded neighbour-list (ELL) weights: conversion and products against dense."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse

from lyapax import _sparse
from lyapax._sparse import EllWeights, as_ell, ell_from_coo


def _random_sparse(n, density, seed=0):
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=(n, n)) * (rng.random((n, n)) < density)
    dense[3] = 0.0  # a node with no inputs
    return dense


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
        ell = as_ell(fmt(dense))
        np.testing.assert_array_equal(np.asarray(ell.todense()), dense)


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
    np.testing.assert_allclose(ell @ x, dense @ np.asarray(x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        ell @ x[:, 0], dense @ np.asarray(x[:, 0]), rtol=0, atol=1e-12
    )


def test_product_under_jit_and_jvp():
    dense = _random_sparse(20, 0.3, seed=3)
    ell = as_ell(dense)
    x = jax.random.normal(jax.random.PRNGKey(1), (20, 3))
    v = jax.random.normal(jax.random.PRNGKey(2), (20, 3))

    def push(w, x, v):
        return jax.jvp(lambda y: w @ jnp.sin(y), (x,), (v,))

    out, tangent = jax.jit(push)(ell, x, v)
    np.testing.assert_allclose(out, dense @ np.sin(np.asarray(x)), atol=1e-12)
    expected = dense @ (np.cos(np.asarray(x)) * np.asarray(v))
    np.testing.assert_allclose(tangent, expected, atol=1e-12)


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
    from lyapax._history import read_edges

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
