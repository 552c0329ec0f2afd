"""The pseudo-spectral step of ``u_t = L u + N(u)``: ETDRK4 or IFRK4.

The state is the grid field (real fields row after row, or a complex field
as its real part then its imaginary part). One step goes to Fourier space
(``rfft`` of real fields, ``fft`` of a complex one), advances the modes by the
exponential integrator, with ``N`` evaluated on the grid, and comes back. The
engine differentiates this step with ``jax.jvp``: the tangents are those of
the discrete scheme, not of a second, linearised implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from lyapax._engine import fft as fourier
from lyapax._engine.abstract import AbstractStep
from lyapax._engine.pairs import Pair
from lyapax._engine.precision import emulated_float64


class Spectral(eqx.Module):
    """Grid <-> modes of the state layout, and the nonlinear term in modes.

    ``N̂(v) = mask * multiplier * F[N(F^{-1} v)]``: ``mask`` the 2/3 rule (or
    ones), ``multiplier`` an optional Fourier multiplier of the nonlinear
    term (``-i q / 2`` for ``-(u^2/2)_x``), so a derivative of ``N`` costs no
    extra transform.
    """

    nonlinear: Callable[[Any], Any]
    mask: Any
    multiplier: Any
    n_points: int = eqx.field(static=True)
    n_fields: int = eqx.field(static=True)
    complex_field: bool = eqx.field(static=True)

    def to_modes(self, u: Any) -> Any:
        if emulated_float64(u.dtype):
            if self.complex_field:
                return fourier.dft(Pair(u[: self.n_points], u[self.n_points :]))
            return fourier.rdft(u.reshape(self.n_fields, self.n_points))
        if self.complex_field:
            return jnp.fft.fft(u[: self.n_points] + 1j * u[self.n_points :])
        return jnp.fft.rfft(u.reshape(self.n_fields, self.n_points), axis=-1)

    def to_grid(self, v: Any) -> Any:
        if isinstance(v, Pair):
            if self.complex_field:
                back = fourier.dft(v, inverse=True)
                return jnp.concatenate([back.re, back.im])
            return fourier.irdft(v, self.n_points).reshape(-1)
        if self.complex_field:
            a = jnp.fft.ifft(v)
            return jnp.concatenate([a.real, a.imag])
        return jnp.fft.irfft(v, n=self.n_points, axis=-1).reshape(-1)

    def n_hat(self, u: Any) -> Any:
        """``N̂`` of the grid field ``u``."""
        out = self.to_modes(self.nonlinear(u)) * self.mask
        return out if self.multiplier is None else out * self.multiplier


def in_form(tree: Any, dtype: Any) -> Any:
    """``tree`` (a :class:`Spectral`, coefficients) in the form a ``dtype``
    field is stepped in: complex values as :class:`Pair` where that float64
    is emulated, as complex arrays elsewhere (a problem built on a TPU and
    run in float32 by ``precision=``)."""
    emulated = emulated_float64(dtype)

    def form(x: Any) -> Any:
        if isinstance(x, Pair):
            return x if emulated else x.complex()
        kind = getattr(x, "dtype", None)
        if emulated and kind is not None and jnp.issubdtype(kind, jnp.complexfloating):
            # Found on the lent TPU v5e (JAX 0.10.2): refuse at the call, not
            # after a minute of compiling or an aborted process.
            raise ValueError(
                f"lyapax.pde: this problem was built where complex numbers "
                f"exist and cannot be stepped in {jnp.dtype(dtype)} on a TPU, "
                "whose float64 emulation has no complex128 (the compiler "
                "aborts converting f64 to c128): build it with the TPU as the "
                "default device, pass precision='float32' or 'mixed', or run "
                "it on the CPU (jax.default_device(jax.devices('cpu')[0]))"
            )
        return x

    return jax.tree.map(form, tree, is_leaf=lambda x: isinstance(x, Pair))


class ETDRK4Step(AbstractStep):
    """Cox & Matthews' ETDRK4 step (Kassam & Trefethen's coefficients)."""

    uses_step_index: ClassVar[bool] = False
    spectral: Spectral
    coeffs: Any

    def __call__(self, u: Any, *step_index: Any) -> Any:
        sp, c = in_form((self.spectral, self.coeffs), u.dtype)
        v = sp.to_modes(u)
        nv = sp.n_hat(u)
        a = c.E2 * v + c.Q * nv
        na = sp.n_hat(sp.to_grid(a))
        b = c.E2 * v + c.Q * na
        nb = sp.n_hat(sp.to_grid(b))
        cc = c.E2 * a + c.Q * (2 * nb - nv)
        nc = sp.n_hat(sp.to_grid(cc))
        v = c.E * v + nv * c.f1 + 2 * (na + nb) * c.f2 + nc * c.f3
        return sp.to_grid(v)


class IFRK4Step(AbstractStep):
    """Classical RK4 on ``e^{-tL} v`` (the integrating factor)."""

    uses_step_index: ClassVar[bool] = False
    spectral: Spectral
    coeffs: Any
    dt: Any

    def __call__(self, u: Any, *step_index: Any) -> Any:
        (sp, c), h = in_form((self.spectral, self.coeffs), u.dtype), self.dt
        v = sp.to_modes(u)
        k1 = h * sp.n_hat(u)
        k2 = h * sp.n_hat(sp.to_grid(c.E2 * (v + k1 / 2)))
        k3 = h * sp.n_hat(sp.to_grid(c.E2 * v + k2 / 2))
        k4 = h * sp.n_hat(sp.to_grid(c.E * v + c.E2 * k3))
        v = c.E * v + (c.E * k1 + 2 * c.E2 * (k2 + k3) + k4) / 6
        return sp.to_grid(v)
