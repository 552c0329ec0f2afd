"""The fused QR's exact power-of-two scaling, built from float operations only.

The TPU's float64 emulation rejects the 64-bit integer shifts of the earlier
bit-trick version; the float-only version must give the same factor
bit for bit on every input, and so the same QR.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lyapax._engine.qr import (
    _inverse_power_of_two,
    _inverse_power_of_two_float_only,
    householder_qr,
)


def _bit_trick_reference(m):
    """The earlier implementation (lyapax/_engine/qr.py at main a3bedab), kept
    here as the reference: the factor from the exponent bits, clamped."""
    info = jnp.finfo(m.dtype)
    bias = int(info.maxexp) - 1
    ints = jnp.int64 if m.dtype == jnp.float64 else jnp.int32
    bits = jax.lax.bitcast_convert_type(m, ints)
    biased = jnp.clip((bits >> info.nmant) & (2 * bias + 1), 1, 2 * bias - 1)
    return jax.lax.bitcast_convert_type((2 * bias - biased) << info.nmant, m.dtype)


def _inputs(dtype):
    info = np.finfo(dtype)
    rng = np.random.default_rng(67)
    special = [
        0.0,
        info.smallest_subnormal,
        info.smallest_subnormal * 3,
        info.smallest_normal / 2,
        info.smallest_normal,
        np.nextafter(info.smallest_normal, 1, dtype=dtype),
        info.max,
        info.max / 2,
        np.inf,
        np.nan,
        1.0,
        np.nextafter(1.0, 0, dtype=dtype),
        2.0,
        np.nextafter(2.0, 0, dtype=dtype),
        0.5,
        3.0,
    ]
    # Exact powers of two over the whole range, and their neighbours.
    powers = [2.0**e for e in range(info.minexp - info.nmant, info.maxexp)]
    powers = np.array(powers, dtype=dtype)
    powers = powers[np.isfinite(powers) & (powers > 0)]
    neighbours = np.concatenate(
        [np.nextafter(powers, 0, dtype=dtype), np.nextafter(powers, np.inf)]
    )
    # Random bit patterns: every exponent, normal and subnormal, many mantissas.
    uint = np.uint64 if dtype == np.float64 else np.uint32
    raw = rng.integers(0, np.iinfo(uint).max, size=20000, dtype=uint).view(dtype)
    values = np.concatenate([np.array(special, dtype), powers, neighbours, raw])
    return np.abs(values).astype(dtype)


def _numpy_reference(m):
    """The same bit trick in NumPy, on the host: a reference for any device."""
    info = np.finfo(m.dtype)
    bias = int(info.maxexp) - 1
    uint = np.uint64 if m.dtype == np.float64 else np.uint32
    biased = np.clip((m.view(uint) >> info.nmant) & (2 * bias + 1), 1, 2 * bias - 1)
    return ((2 * bias - biased).astype(uint) << uint(info.nmant)).view(m.dtype)


F64 = "float64 arrays exist with x64 on only"
FLOAT64 = pytest.param(np.float64, marks=pytest.mark.float64_only(F64))


def _on_tpu():
    return jax.default_backend() == "tpu"


@pytest.mark.parametrize("dtype", [FLOAT64, np.float32])
def test_the_factor_is_bit_identical_to_the_bit_trick_version(dtype):
    values = _inputs(dtype)
    if _on_tpu() and dtype == np.float32:
        # The chip flushes subnormals: zero and the normal range there (the
        # full range is compared on CPU and GPU).
        keep = (values == 0) | ((values >= 2.0**-126) & (values < 2.0**127))
        values = values[keep]
    elif _on_tpu():
        # Emulated float64 is a pair of float32 words with float32's exponent
        # range, and the low word (2^-53 of the value) flushes below 2^-126:
        # on the chip (TPU v5e) 54 of 3193 factors in [2^-126, 2^127)
        # differed, zero's 2^1022 came out 2^127, and in [2^-100, 2^100) the
        # 26 values 2^e (1 - 2^-53) with e <= -74 counted as 2^e.
        values = values[(values >= 2.0**-70) & (values < 2.0**100)]
    uint = np.uint64 if dtype == np.float64 else np.uint32
    # The factor the platform uses, and the float-only search (the TPU's
    # float64 branch) run here too: both equal the bit trick.
    for fn in (_inverse_power_of_two, _inverse_power_of_two_float_only):
        new = np.asarray(jax.jit(jax.vmap(fn))(jnp.asarray(values)))
        assert new.dtype == dtype
        reference = _numpy_reference(values).view(uint)
        np.testing.assert_array_equal(new.view(uint), reference)
        if not _on_tpu():  # the old JAX version itself, where it compiles
            old = jax.jit(jax.vmap(_bit_trick_reference))(jnp.asarray(values))
            np.testing.assert_array_equal(new.view(uint), np.asarray(old).view(uint))


def test_the_float_only_factor_uses_no_integer_bit_operations():
    text = str(jax.make_jaxpr(_inverse_power_of_two_float_only)(jnp.float64(3.0)))
    for banned in ("bitcast", "shift", "int64", "int32", "pow", "exp"):
        assert banned not in text, banned


@pytest.mark.float64_only(F64)
def test_float64_lowered_for_a_tpu_takes_the_float_only_branch():
    """The TPU's float64 emulation rejects 64-bit shifts: the program lowered
    for a TPU has none, the CPU's keeps the cheaper bit trick."""
    traced = jax.jit(_inverse_power_of_two).trace(jnp.float64(3.0))
    tpu = traced.lower(lowering_platforms=("tpu",)).as_text()
    cpu = traced.lower(lowering_platforms=("cpu",)).as_text()
    assert "shift_right" not in tpu and "bitcast_convert" not in tpu
    assert "shift_right" in cpu


@pytest.mark.parametrize("dtype", [FLOAT64, np.float32])
@pytest.mark.parametrize("scale", [1.0, 1e-300, 1e300, 1e-310, 1e-40, 1e30])
def test_householder_qr_is_bit_identical_to_the_bit_trick_version(dtype, scale):
    # The QR with the old scaling swapped in, on frames of extreme magnitudes.
    import lyapax._engine.qr as qr

    if dtype == np.float32 and not 1e-44 < scale < 1e37:
        pytest.skip("out of float32's range")
    if _on_tpu():
        pytest.skip("the bit-trick reference does not compile on a TPU")
    rng = np.random.default_rng(int(-np.log10(scale) * 7) % 1000)
    Y = (rng.standard_normal((6, 4)) * scale).astype(dtype)
    Y[2, 1] = 0.0
    new = jax.jit(householder_qr)(jnp.asarray(Y))
    original = qr._inverse_power_of_two
    try:
        qr._inverse_power_of_two = _bit_trick_reference
        old = jax.jit(householder_qr)(jnp.asarray(Y))
    finally:
        qr._inverse_power_of_two = original
    for a, b in zip(new, old, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
