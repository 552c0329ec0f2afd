"""A complex array as its real and imaginary parts, where complex numbers do
not exist (a TPU's emulated float64 has no complex128), with the arithmetic
a pseudo-spectral step needs, so that the step's code runs unchanged on
complex arrays or on pairs (the transforms: :mod:`lyapax._engine.fft`)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np

__all__ = ["Pair"]


class Pair(eqx.Module):
    """A complex array as two real ones, ``re + i im`` (same shape and
    dtype), where complex numbers do not exist (a TPU's float64). ``+``,
    ``-`` and ``*`` with a pair, a real array or a number; ``/`` by a real
    one."""

    re: Any
    im: Any

    # NumPy must hand ``ndarray * Pair`` to Pair, not make an object array.
    __array_ufunc__ = None

    @classmethod
    def of(cls, z: Any, dtype: Any) -> Pair:
        """The parts of a host complex (or real) array ``z`` as ``dtype``
        arrays, without making a complex array where they will live."""
        z = np.asarray(z)
        return cls(jnp.asarray(z.real, dtype), jnp.asarray(np.imag(z), dtype))

    def complex(self) -> Any:
        """The complex array (where complex numbers exist)."""
        return jnp.asarray(self.re) + 1j * jnp.asarray(self.im)

    def __add__(self, other: Any) -> Pair:
        if isinstance(other, Pair):
            return Pair(self.re + other.re, self.im + other.im)
        return Pair(self.re + other, self.im)

    __radd__ = __add__

    def __neg__(self) -> Pair:
        return Pair(-self.re, -self.im)

    def __sub__(self, other: Any) -> Pair:
        return self + (-other)

    def __rsub__(self, other: Any) -> Pair:
        return (-self) + other

    def __mul__(self, other: Any) -> Pair:
        if isinstance(other, Pair):
            return Pair(
                self.re * other.re - self.im * other.im,
                self.re * other.im + self.im * other.re,
            )
        return Pair(self.re * other, self.im * other)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Pair:
        if isinstance(other, Pair):
            raise TypeError("Pair / Pair is not defined (no step needs it)")
        return Pair(self.re / other, self.im / other)
