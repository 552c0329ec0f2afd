"""Semilinear PDEs (lyapax.pde): oracles of the ETDRK4/IFRK4 problems.

Conventions checked here: the state is the grid field; the zero mode (the
mean) is kept and conserved; with the 2/3 rule the modes ``3|k| >= n`` stay in
the state and evolve under ``L`` alone. The discrete trace of ``L`` over the
retained real degrees of freedom of an ``rfft`` field of ``n`` points is
``L_0 + 2 sum_{k=1}^{n/2-1} Re L_k + L_{n/2}``; the advection term is
trace-free (its Jacobian's diagonal in Fourier space is ``-i q_k * mean(u)``,
odd in ``k``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lyapax import lyapunov_spectrum
from lyapax.pde import (
    complex_ginzburg_landau,
    kuramoto_sivashinsky,
    semilinear_problem,
)
from tests.test_runtime_lengths import count_compiles

jax.config.update("jax_enable_x64", True)


def _zero(u):
    return jnp.zeros_like(u)


def _rfft_dof_spectrum(symbol, n):
    """Re L per real degree of freedom of an rfft field, descending."""
    re = np.real(np.asarray(symbol))
    values = [re[0], re[n // 2], *np.repeat(re[1 : n // 2], 2)]
    return np.sort(values)[::-1]


def _trace(symbol, n):
    re = np.real(np.asarray(symbol))
    return re[0] + re[n // 2] + 2 * re[1 : n // 2].sum()


@pytest.mark.parametrize("integrator", ["etdrk4", "ifrk4"])
def test_linear_problem_exponents_are_the_symbol(integrator):
    n = 16
    q = 2 * np.pi * np.arange(n // 2 + 1) / 10.0
    symbol = 0.3 - 0.8 * q**2 + 0.05j * q  # distinct real parts per mode
    u0 = np.random.default_rng(1).standard_normal(n)
    p = semilinear_problem(symbol, _zero, u0, 0.1, integrator)
    r = lyapunov_spectrum(p, 200, k=6, t_transient=40.0)
    expected = _rfft_dof_spectrum(symbol, n)[:6]
    np.testing.assert_allclose(np.asarray(r.exponents), expected, rtol=0, atol=1e-9)


def test_complex_field_linear_exponents_are_the_symbol():
    n = 16
    k = np.fft.fftfreq(n, 1.0 / n)
    symbol = 0.5 - 0.3 * k**2 - 0.7j * k**2
    u0 = np.random.default_rng(2).standard_normal(2 * n)
    p = semilinear_problem(symbol, _zero, u0, 0.05)
    r = lyapunov_spectrum(p, 200, k=5, t_transient=40.0)
    expected = np.sort(np.repeat(symbol.real, 2))[::-1][:5]
    np.testing.assert_allclose(np.asarray(r.exponents), expected, rtol=0, atol=1e-9)


@pytest.fixture(scope="module")
def ks22():
    return kuramoto_sivashinsky(32, 22.0, dt=0.05)


def test_ks_sum_rule_is_the_discrete_trace(ks22):
    n = 32
    q = 2 * np.pi * np.arange(n // 2 + 1) / 22.0
    trace = _trace(q**2 - q**4, n)
    # renorm_every=1: the fastest decay (e^{-20.7} per step) must stay far
    # above rounding relative to the growing columns of the frame.
    r = lyapunov_spectrum(ks22, 2000, k=n)
    total = float(np.sum(r.exponents))
    # The sum is the time average of log|det J| / dt (tiny scatter); the
    # discrete scheme's det differs from e^{dt trace L} at O(dt^p): measured
    # -2585.483 vs -2585.536 at dt = 0.05 (2e-5 relative).
    assert abs(total - trace) < 5e-5 * abs(trace), (total, trace)


def test_ks_mean_is_conserved(ks22):
    u = ks22.step_fn(ks22.state0)
    assert abs(float(jnp.mean(u)) - float(jnp.mean(ks22.state0))) < 1e-14


def test_new_length_and_dt_do_not_recompile():
    p = kuramoto_sivashinsky(32, 22.0, dt=0.05, state0=np.sin(np.arange(32.0)))
    lyapunov_spectrum(p, 40, k=3)
    q = kuramoto_sivashinsky(32, 30.0, dt=0.04, state0=np.cos(np.arange(32.0)))
    with count_compiles() as compiles:
        r = lyapunov_spectrum(q, 80, k=3)
    assert compiles == []
    assert np.isfinite(np.asarray(r.exponents)).all()


def test_bad_input_names_the_argument():
    u0 = np.zeros(16)
    sym = np.zeros(9)
    with pytest.raises(ValueError, match="integrator"):
        semilinear_problem(sym, _zero, u0, 0.1, "rk4")
    with pytest.raises(ValueError, match="n_points"):
        kuramoto_sivashinsky(31, 22.0)
    with pytest.raises(ValueError, match="n_points"):
        kuramoto_sivashinsky(6, 22.0)
    with pytest.raises(ValueError, match="length"):
        kuramoto_sivashinsky(32, -1.0)
    with pytest.raises(ValueError, match="linear has shape"):
        semilinear_problem(np.zeros(7), _zero, u0, 0.1)
    with pytest.raises(ValueError, match="nonlinear must map"):
        semilinear_problem(sym, lambda u: u[:4], u0, 0.1)
    with pytest.raises(ValueError, match="nonlinear must map"):
        semilinear_problem(sym, lambda u: u.astype(jnp.complex128), u0, 0.1)
    with pytest.raises(ValueError, match="dt"):
        semilinear_problem(sym, _zero, u0, 0.0)
    with pytest.raises(ValueError, match="nonlinear_multiplier"):
        semilinear_problem(sym, _zero, u0, 0.1, nonlinear_multiplier=np.ones(3))
    with pytest.warns(UserWarning, match="lose precision"):
        semilinear_problem(sym + 30.0, _zero, u0, 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("integrator", ["etdrk4", "ifrk4"])
def test_ks_l22_symmetry_zeros_and_published_leading_exponent(integrator):
    # Leading exponent of KS at L = 22: lambda_1 ~ 0.043 (Edson, Bunder,
    # Mattner & Roberts 2019, "Lyapunov exponents of the Kuramoto-Sivashinsky
    # PDE", ANZIAM J. 61, 270-285); Cvitanovic, Davidchack & Siminos (2010)
    # quote 0.048. NOT VERIFIED against the papers' tables (only the
    # abstracts could be read): the band below covers both values.
    p = kuramoto_sivashinsky(64, 22.0, dt=0.25, integrator=integrator)
    r = lyapunov_spectrum(p, 20000, k=7, renorm_every=4)
    lam, err = np.asarray(r.exponents), np.asarray(r.stderr)
    assert 0.036 < lam[0] < 0.056, (lam[0], err[0])
    # Time and space translation, the conserved mean, and a near-zero
    # physical exponent (~ -0.003): lambda_2..lambda_5 within 3 standard
    # errors of zero, lambda_6 clearly negative.
    assert np.all(np.abs(lam[1:5]) < 3 * err[1:5] + 1e-3), (lam, err)
    assert lam[5] < -0.1


def _cgl_uniform_stability(n, length, b, c):
    """Growth rates of the uniform oscillation's perturbations, per mode:
    ``x_t = x_xx - b y_xx - 2x``, ``y_t = y_xx + b x_xx - 2c x`` for ``A = (1
    + x + i y) e^{-ict}``; modes the 2/3 rule truncates decay by ``1 - q^2``."""
    k = np.fft.fftfreq(n, 1.0 / n)
    values = []
    for kk, q in zip(k, 2 * np.pi * k / length, strict=True):
        if 3 * abs(kk) >= n:
            values += [1 - q**2] * 2
            continue
        M = np.array([[-(q**2) - 2, b * q**2], [-b * q**2 - 2 * c, -(q**2)]])
        values += list(np.linalg.eigvals(M).real)
    return np.sort(values)[::-1]


def test_cgl_uniform_oscillation_exponents_are_its_linear_stability():
    n, length, b, c = 32, 20.0, 0.5, 0.5  # 1 + bc > 0: stable
    u0 = np.concatenate([np.ones(n), np.zeros(n)])
    p = complex_ginzburg_landau(n, length, b, c, state0=u0, dt=0.05)
    r = lyapunov_spectrum(p, 4000, k=8, t_transient=50.0)
    expected = _cgl_uniform_stability(n, length, b, c)[:8]
    # Measured agreement ~1e-6 (the scheme's O(dt^4) amplitude error).
    np.testing.assert_allclose(np.asarray(r.exponents), expected, atol=1e-4)


def test_cgl_benjamin_feir_turbulence_is_chaotic():
    p = complex_ginzburg_landau(64, 50.0, 2.0, -2.0)  # 1 + bc = -3 < 0
    r = lyapunov_spectrum(p, 4000, k=2)
    lam, err = np.asarray(r.exponents), np.asarray(r.stderr)
    assert lam[0] > 0.1 and lam[0] > 5 * err[0], (lam, err)
