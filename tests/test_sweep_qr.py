"""The small-frame Householder QR used by the Benettin kernel (and so by sweeps)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import OPS, float64_range, tol

from lyapax._engine.qr import SMALL_K, thin_qr
from lyapax._engine.qr import householder_qr as _householder_qr

# Jitted: run eagerly, every small op would compile on its own.
householder_qr = jax.jit(_householder_qr)


@pytest.mark.parametrize(("d", "k"), [(1, 1), (3, 3), (3, 1), (50, 5)])
def test_householder_qr_matches_lapack_up_to_column_signs(d, k):
    Y = jax.random.normal(jax.random.PRNGKey(10 * d + k), (d, k))
    Q, R = householder_qr(Y)
    Q_ref, R_ref = jnp.linalg.qr(Y)
    s = np.sign(np.diag(R)) * np.sign(np.diag(R_ref))
    np.testing.assert_allclose(Q * s, Q_ref, atol=tol(1e-14, OPS))
    np.testing.assert_allclose(R * s[:, None], R_ref, atol=tol(1e-13, OPS))
    np.testing.assert_allclose(np.triu(R), R)


def test_nearly_parallel_columns_stay_orthonormal():
    # Condition number ~1e12: Gram-Schmidt would lose orthogonality here.
    Y = jnp.array([[1.0, 1.0 + 1e-13], [1e-3, 1e-3], [0.0, 1e-12]])
    Q, R = householder_qr(Y)
    np.testing.assert_allclose(Q.T @ Q, np.eye(2), atol=tol(1e-15, OPS))
    np.testing.assert_allclose(Q @ R, Y, atol=tol(1e-15, OPS))


def test_a_vanishing_column_gives_a_zero_diagonal_and_a_finite_gradient():
    Q, R = householder_qr(jnp.array([[1.0, 2.0], [0.0, 0.0], [0.0, 0.0]]))
    assert float(R[1, 1]) == 0.0
    np.testing.assert_allclose(Q.T @ Q, np.eye(2), atol=1e-15)
    grad = jax.grad(
        lambda a: householder_qr(jnp.array([[a, 1.0], [0.0, 0.0]]))[1][0, 1]
    )
    assert np.isfinite(float(grad(2.0)))


def test_vmap_and_the_large_k_fallback():
    Ys = jax.random.normal(jax.random.PRNGKey(0), (16, 5, 3))
    Q, _ = jax.jit(jax.vmap(_householder_qr))(Ys)
    # Q^T Q on the host: the QR's error, not the device's product's.
    Q = np.asarray(Q)
    np.testing.assert_allclose(
        np.einsum("bij,bik->bjk", Q, Q),
        np.broadcast_to(np.eye(3), (16, 3, 3)),
        atol=tol(1e-14, OPS),
    )
    big = jax.random.normal(jax.random.PRNGKey(1), (12, SMALL_K + 1))
    np.testing.assert_array_equal(thin_qr(big)[0], jnp.linalg.qr(big)[0])


@pytest.mark.float64_only("2^600 and 2^-600 lie beyond float32's range")
@pytest.mark.parametrize("exponent", [600, -600])
def test_a_huge_or_tiny_frame_is_the_same_qr_scaled_exactly(exponent):
    # Each column is scaled by a power of two before its norm is taken, so
    # |x|^2 neither overflows nor underflows (a block's growth of 1e200 keeps
    # a finite R, as LAPACK's scaled norm does) and nothing else changes.
    if not float64_range():
        pytest.skip("emulated float64 (a TPU) has float32's exponent range")
    Y = jnp.asarray(np.random.default_rng(3).normal(size=(6, 4)))
    Q, R = _householder_qr(Y)
    Qs, Rs = _householder_qr(Y * 2.0**exponent)
    assert bool(jnp.all(Qs == Q))
    assert bool(jnp.all(Rs == R * 2.0**exponent))
    assert bool(jnp.all(jnp.isfinite(Rs)))
    Q1, R1 = _householder_qr(jnp.array([[2e256], [0.0]]))
    # Compiled (as in every run) the reflection's update may contract into an
    # FMA: R_00 is -2e256 to the last bit or one ulp off, never inf.
    assert float(R1[0, 0]) == pytest.approx(-2e256, rel=4e-16) and bool(
        jnp.all(jnp.abs(Q1[:, 0]) == jnp.array([1.0, 0.0]))
    )


def test_the_fused_qr_is_one_program_whatever_k():
    # The columns run in a loop: the traced program (nested bodies included)
    # is the same size for 2 columns as for 8, where unrolled reflections
    # made it grow with k (and its compile time with it).
    def lines(k):
        return len(str(jax.make_jaxpr(_householder_qr)(jnp.ones((16, k)))).splitlines())

    assert lines(2) == lines(8)  # (16, k): R[:k] is a slice for both


@pytest.mark.parametrize("shape", [(3, 3), (6, 4), (16, 5)])
def test_the_looped_and_unrolled_fused_qr_give_the_same_bits(shape):
    # Single runs take the loop (a smaller program), sweeps the unrolled
    # columns (faster under vmap): the same arithmetic, so the same bits,
    # compiled as every run compiles it, one frame and a batch of them.
    Y = jnp.asarray(np.random.default_rng(5).normal(size=(4, *shape)))
    looped = jax.jit(jax.vmap(_householder_qr))(Y)
    unrolled = jax.jit(jax.vmap(lambda y: _householder_qr(y, unroll=True)))(Y)
    one = jax.jit(_householder_qr)(Y[0])
    one_unrolled = jax.jit(lambda y: _householder_qr(y, unroll=True))(Y[0])
    # XLA:CPU keeps the order of every operation; a TPU's compiler may fuse
    # and contract the two programs differently (measured there in float32:
    # the (6, 4) frames were not bit-identical), so there the same
    # numbers are asked for within a few operations' rounding.
    exact = jax.default_backend() == "cpu"
    for a, b in [
        *zip(looped, unrolled, strict=True),
        *zip(one, one_unrolled, strict=True),
    ]:
        if exact:
            assert bool(jnp.all(a == b))
        else:
            np.testing.assert_allclose(a, b, rtol=tol(1e-12, OPS), atol=tol(1e-12, OPS))
