"""Thin QR of a tall ``(d, k)`` frame, fast when ``k`` is small.

The Benettin kernel re-orthonormalises a ``(d, k)`` frame every
``renorm_every`` steps. ``jnp.linalg.qr`` calls LAPACK (``geqrf``/``orgqr``)
on CPU: for the small frames of low-dimensional systems the call overhead
dominates, and under ``vmap`` (sweeps) it runs one small LAPACK call per batch
row. For ``k <= SMALL_K`` the same Householder factorisation is written here in
plain ``jax.numpy``: ``k`` reflections of ``O(d k)`` vector work each, in a
loop over the columns, which XLA fuses and vectorises across a batch.
Householder QR is backward stable, like LAPACK's, so the frame stays
orthonormal to rounding even when its columns are nearly parallel (stiff
spectra, long ``renorm_every``). Larger frames keep LAPACK: the thresholds
below were measured, with the columns unrolled then (docs/performance.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

__all__ = ["SMALL_D", "SMALL_K", "householder_qr", "power_of_two_split", "thin_qr"]

#: Frames with at most this many columns use :func:`householder_qr`...
SMALL_K = 8
#: ...and at most this many rows: on tall frames (networks, delay buffers) the
#: O(d k^2) jnp passes cost more than LAPACK's call overhead (measured 2.6 ms vs
#: 0.35 ms at d = 16000, k = 5).
SMALL_D = 256


def householder_qr(
    Y: Float[Array, "d k"], *, unroll: bool = False
) -> tuple[Float[Array, "d k"], Float[Array, "k k"]]:
    """Thin QR ``Y = Q R`` of ``Y (d, k)``, ``k <= d``, by Householder reflections.

    Returns ``Q (d, k)`` with orthonormal columns and upper-triangular
    ``R (k, k)`` (diagonal signs as the reflections leave them, as LAPACK's).
    A column that is exactly zero after the previous reflections gives
    ``R_jj = 0`` and is skipped (no reflection), as LAPACK does.

    Written with row masks and broadcasts instead of slices and dots (the
    same arithmetic, fewer and simpler XLA ops that fuse), and with the
    columns in a ``fori_loop``: one copy of a reflection in the program
    whatever ``k``. Unrolled (``unroll=True``), each column's chain of
    reductions is a few kernels of its own, and XLA:CPU's compile time
    follows the kernel count (Lorenz, k = 3: 51 kernels against 34); under
    ``vmap`` (sweeps) the unrolled columns run 7-10 % faster
    (docs/performance.md). Both give the same bits.
    """
    d, k = Y.shape
    rows = jnp.arange(d)

    def reflection(j, R):
        """Column ``j``'s reflection ``(v, beta)`` of ``R``."""
        if isinstance(j, int):  # unrolled: static slices, as the old program
            x = jnp.where(rows >= j, R[:, j], 0.0)
        else:
            x = jnp.where(rows >= j, jax.lax.dynamic_index_in_dim(R, j, 1, False), 0.0)
        # The column scaled by a power of two near its largest entry: exact,
        # so the reflection is bit for bit the unscaled one, and |x|^2 can
        # neither overflow nor underflow (a block's growth of 1e200 is a
        # finite R_jj, as LAPACK's scaled norm gives).
        x = x * _inverse_power_of_two(jnp.max(jnp.abs(x)))
        ss = jnp.sum(x * x)
        # Safe sqrt and division: a vanishing column must not give NaN gradients.
        alpha = jnp.where(ss > 0, jnp.sqrt(jnp.where(ss > 0, ss, 1.0)), 0.0)
        # Reflect x onto -sign(x_j) |x| e_j: no cancellation in v_j.
        x_j = (
            x[j] if isinstance(j, int) else jax.lax.dynamic_index_in_dim(x, j, 0, False)
        )
        sign = jnp.where(x_j < 0, -1.0, 1.0).astype(Y.dtype)
        v = jnp.where(rows == j, x + sign * alpha, x)
        vv = jnp.sum(v * v)
        beta = jnp.where(vv > 0, 2.0 / jnp.where(vv > 0, vv, 1.0), 0.0)
        return v, beta

    if unroll:
        R, reflections = Y, []
        for j in range(k):
            v, beta = reflection(j, R)
            R = _reflect(R, v, beta)
            reflections.append((v, beta))
        Q = jnp.eye(d, k, dtype=Y.dtype)
        for v, beta in reversed(reflections):
            Q = _reflect(Q, v, beta)
        return Q, jnp.triu(R[:k])

    def column(j, carry):
        R, V, betas = carry
        v, beta = reflection(j, R)
        return _reflect(R, v, beta), V.at[j].set(v), betas.at[j].set(beta)

    def back(i, Q):
        # The reflections applied to the identity's columns, last one first.
        return _reflect(Q, V[k - 1 - i], betas[k - 1 - i])

    carry = (Y, jnp.zeros((k, d), Y.dtype), jnp.zeros((k,), Y.dtype))
    R, V, betas = jax.lax.fori_loop(0, k, column, carry)
    Q = jax.lax.fori_loop(0, k, back, jnp.eye(d, k, dtype=Y.dtype))
    return Q, jnp.triu(R[:k])


def _inverse_power_of_two(m: Float[Array, ""]) -> Float[Array, ""]:
    """``2**-e`` with ``2**e <= m < 2**(e+1)``, ``e`` clamped to the normal
    exponents but the extreme ones, so that the factor is a normal number
    (zero and subnormal ``m`` get the largest factor, inf and NaN the
    smallest): read from the exponent bits, except for float64 on a TPU,
    whose emulation rejects 64-bit integer shifts; there the float-only
    search gives the same factor (bit-identical, tests/test_qr_scaling.py)
    at about 240 ns more per QR on a CPU, which is why it is not used
    everywhere."""
    if m.dtype != jnp.float64:
        return _inverse_power_of_two_bits(m)
    return jax.lax.platform_dependent(
        m,
        tpu=_inverse_power_of_two_float_only,
        default=_inverse_power_of_two_bits,
    )


def _inverse_power_of_two_bits(m: Float[Array, ""]) -> Float[Array, ""]:
    """:func:`_inverse_power_of_two` from the exponent bits, cheaper than
    ``frexp`` and ``ldexp``."""
    info = jnp.finfo(m.dtype)
    mantissa_bits = info.nmant
    bias = int(info.maxexp) - 1  # 1023 for float64, 127 for float32
    ints = jnp.int64 if m.dtype == jnp.float64 else jnp.int32
    bits = jax.lax.bitcast_convert_type(m, ints)
    biased = jnp.clip((bits >> mantissa_bits) & (2 * bias + 1), 1, 2 * bias - 1)
    return jax.lax.bitcast_convert_type((2 * bias - biased) << mantissa_bits, m.dtype)


def _inverse_power_of_two_float_only(m: Float[Array, ""]) -> Float[Array, ""]:
    """``2**-e`` with ``2**e <= m < 2**(e+1)``, ``e`` clamped to the normal
    exponents but the extreme ones (``|e| <= 1022`` in float64, ``126`` in
    float32), so that the factor is a normal number; zero and subnormal ``m``
    get the largest factor, inf and NaN the smallest.

    Built from float comparisons and multiplications by powers of two only
    (all exact): no integer bit tricks, whose 64-bit forms the TPU's float64
    emulation rejects ("shift-right-arithmetic with different element types"),
    and no ``frexp``/``ldexp``, which JAX builds from the same bit tricks and
    ``pow``. See :func:`power_of_two_split`.
    """
    return power_of_two_split(m)[0]


def power_of_two_split(
    m: Float[Array, "*s"],
) -> tuple[Float[Array, "*s"], Float[Array, "*s"]]:
    """``(2**-e, e)`` with ``2**e <= m < 2**(e+1)``, elementwise, ``e`` a
    float of ``m``'s dtype and clamped as in
    :func:`_inverse_power_of_two_float_only`, found without integer bit
    tricks (``frexp`` where the TPU's float64 emulation has none).

    The exponent is found by binary search: ``m`` is scaled into ``[1, 2)``
    by ``2**(+-2**i)`` for ``i`` from high to low, and the same factors
    multiply into the answer; ``e`` sums the steps (small integers, exact).
    """
    dtype = m.dtype
    bias = int(jnp.finfo(dtype).maxexp) - 1  # 1023 for float64, 127 for float32
    # Clamp m to [2**-(bias - 1), 2**(bias - 1)]; NaN fails `<=` and takes the top.
    lo = jnp.asarray(2.0 ** -(bias - 1), dtype)
    hi = jnp.asarray(2.0 ** (bias - 1), dtype)
    s = jnp.where(m < lo, lo, m)
    s = jnp.where(s <= hi, s, hi)
    factor = jnp.ones(m.shape, dtype)
    exponent = jnp.zeros(m.shape, dtype)
    one = jnp.ones((), dtype)
    for i in reversed(range(bias.bit_length())):
        step = 2**i
        # Greedy on the binary digits of |e|: every product stays a normal
        # power of two (or a normal s), so each multiplication is exact.
        above = s >= jnp.asarray(2.0**step, dtype)
        below = s < jnp.asarray(2.0 ** (1 - step), dtype)
        down = jnp.where(above, 2.0**-step, one)
        up = jnp.where(below, 2.0**step, one)
        by = (down * up).astype(dtype)
        s = s * by
        factor = factor * by
        exponent = exponent + (
            jnp.where(above, step, 0).astype(dtype)
            - jnp.where(below, step, 0).astype(dtype)
        )
    return factor, exponent


def _reflect(
    A: Float[Array, "d m"], v: Float[Array, " d"], beta: Float[Array, ""]
) -> Float[Array, "d m"]:
    """``(I - beta v v^T) A`` for ``A (d, m)``."""
    return A - (beta * v)[:, None] * jnp.sum(v[:, None] * A, axis=0)[None, :]


def thin_qr(
    Y: Float[Array, "d k"], *, unroll: bool = False
) -> tuple[Float[Array, "d k"], Float[Array, "k k"]]:
    """Thin QR of ``Y (d, k)``: :func:`householder_qr` (``unroll`` as there)
    for small frames (``k <= SMALL_K`` and ``d <= SMALL_D``),
    ``jnp.linalg.qr`` otherwise."""
    if Y.shape[1] <= SMALL_K and Y.shape[0] <= SMALL_D:
        return householder_qr(Y, unroll=unroll)
    return jnp.linalg.qr(Y)
