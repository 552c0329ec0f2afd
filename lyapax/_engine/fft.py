"""A real signal's autocorrelation that also exists in emulated float64.

A TPU has no float64 FFT (XLA refuses the program: "Unexpected operand type
for FFT: f64") and cannot even make a complex128 array from float64 ones
(its compiler aborts the process: "Unsupported CVT ... from f64 to c128").
Where float64 is emulated (:func:`lyapax._engine.precision.emulated_float64`)
the discrete Fourier transforms here are matrix products in real and
imaginary parts, no complex number anywhere: a length ``n = n1 n2`` splits
into ``n2`` transforms of length ``n1``, a twiddle, and ``n1`` of length
``n2`` (the "four-step" factorisation), down to dense transforms of at most
``_DENSE`` points, whose matrices and twiddles are built on the host in
float64 from exactly reduced angles. The cost is ``O(n (n1 + n2))`` products
at ``Precision.HIGHEST``; a prime length above ``_DENSE`` is one dense
``n x n`` product. Elsewhere the transforms are ``jnp.fft``'s.

:func:`dft`, :func:`rdft` and :func:`irdft` are the transforms of complex
arrays kept as real pairs (:class:`~lyapax._engine.pairs.Pair`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jax.numpy as jnp
import numpy as np

from lyapax._engine.pairs import Pair
from lyapax._engine.precision import HIGHEST, emulated_float64

__all__ = ["autocorrelation", "dft", "irdft", "rdft"]

#: Longest transform done as one dense product (the factors of a longer one
#: are chosen near its square root).
_DENSE = 64


def autocorrelation(x: Any, n_lags: int) -> Any:
    """``sum_j x[..., j] x[..., j + m]`` for ``m = 1 .. n_lags`` of a real ``x``
    along its last axis (no wrap-around), shape ``(..., n_lags)``."""
    x = jnp.asarray(x)
    n = x.shape[-1]
    if not emulated_float64(x.dtype):
        f = jnp.fft.rfft(x, 2 * n, axis=-1)
        power = jnp.real(f) ** 2 + jnp.imag(f) ** 2
        return jnp.fft.irfft(power, 2 * n, axis=-1)[..., 1 : n_lags + 1]
    padded = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, n)])
    re, im = _dft(padded, jnp.zeros_like(padded), -1)
    power = re**2 + im**2
    back, _ = _dft(power, jnp.zeros_like(power), 1)
    return back[..., 1 : n_lags + 1] / (2 * n)


def dft(z: Pair, inverse: bool = False) -> Pair:
    """``jnp.fft.fft`` (``ifft`` with ``inverse``) of a pair along its last axis."""
    n = z.re.shape[-1]
    re, im = _dft(z.re, z.im, 1 if inverse else -1)
    return Pair(re / n, im / n) if inverse else Pair(re, im)


def rdft(x: Any) -> Pair:
    """``jnp.fft.rfft`` of a real ``x`` along its last axis, as a pair."""
    n = x.shape[-1]
    re, im = _dft(x, jnp.zeros_like(x), -1)
    return Pair(re[..., : n // 2 + 1], im[..., : n // 2 + 1])


def irdft(z: Pair, n: int) -> Any:
    """``jnp.fft.irfft(z, n)`` of a pair of ``n // 2 + 1`` modes (``n``
    even), real: the modes' Hermitian extension transformed back."""
    # Modes n/2 - 1 .. 1, conjugated, are the modes n/2 + 1 .. n - 1; the
    # imaginary parts of modes 0 and n/2 reach only the (dropped) imaginary
    # output, as irfft ignores them.
    mirror = slice(n // 2 - 1, 0, -1)
    re = jnp.concatenate([z.re, z.re[..., mirror]], axis=-1)
    im = jnp.concatenate([z.im, -z.im[..., mirror]], axis=-1)
    back, _ = _dft(re, im, 1)
    return back / n


def _dft(re: Any, im: Any, sign: int) -> tuple[Any, Any]:
    """``sum_j x_j exp(sign 2 pi i j k / n)`` along the last axis, unnormalised."""
    n = re.shape[-1]
    n1 = _split(n)
    if n1 == 1:
        c, s = (jnp.asarray(m, re.dtype) for m in _phases(n, n, n, sign))
        return _mul(re, im, c, s)
    n2 = n // n1
    lead = re.shape[:-1]
    # j = n2 j1 + j2, k = k1 + n1 k2: first length-n1 transforms over j1.
    re, im = (jnp.swapaxes(a.reshape(*lead, n1, n2), -1, -2) for a in (re, im))
    re, im = _dft(re, im, sign)  # (..., j2, k1)
    c, s = (jnp.asarray(m, re.dtype) for m in _phases(n2, n1, n, sign))
    re, im = re * c - im * s, re * s + im * c
    re, im = (jnp.swapaxes(a, -1, -2) for a in (re, im))  # (..., k1, j2)
    re, im = _dft(re, im, sign)  # (..., k1, k2)
    re, im = (jnp.swapaxes(a, -1, -2).reshape(*lead, n) for a in (re, im))
    return re, im


def _mul(re: Any, im: Any, c: Any, s: Any) -> tuple[Any, Any]:
    """``(re + i im) @ (c + i s)`` in parts, at full precision."""

    def mm(a: Any, b: Any) -> Any:
        return jnp.matmul(a, b, precision=HIGHEST)

    return mm(re, c) - mm(im, s), mm(re, s) + mm(im, c)


def _split(n: int) -> int:
    """The largest divisor of ``n`` not above ``sqrt(n)`` (1: a dense transform)."""
    if n <= _DENSE:
        return 1
    for d in range(int(np.sqrt(n)), 1, -1):
        if n % d == 0:
            return d
    return 1


@lru_cache(maxsize=64)
def _phases(rows: int, cols: int, n: int, sign: int) -> tuple[np.ndarray, np.ndarray]:
    """``cos`` and ``sin`` of ``sign 2 pi j k / n`` for ``j < rows, k < cols``,
    the product ``j k`` reduced modulo ``n`` first (exact integers)."""
    angle = sign * 2.0 * np.pi * (np.outer(np.arange(rows), np.arange(cols)) % n) / n
    return np.cos(angle), np.sin(angle)
