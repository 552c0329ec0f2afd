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

import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import OPS, tol
from support.warned import assert_warned_here

from lyapax import lyapunov_spectrum
from lyapax.pde import (
    complex_ginzburg_landau,
    kuramoto_sivashinsky,
    semilinear_problem,
)
from tests.test_runtime_lengths import count_compiles


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
    np.testing.assert_allclose(
        np.asarray(r.exponents), expected, rtol=0, atol=tol(1e-9)
    )


def test_complex_field_linear_exponents_are_the_symbol():
    n = 16
    k = np.fft.fftfreq(n, 1.0 / n)
    symbol = 0.5 - 0.3 * k**2 - 0.7j * k**2
    u0 = np.random.default_rng(2).standard_normal(2 * n)
    p = semilinear_problem(symbol, _zero, u0, 0.05)
    r = lyapunov_spectrum(p, 200, k=5, t_transient=40.0)
    expected = np.sort(np.repeat(symbol.real, 2))[::-1][:5]
    np.testing.assert_allclose(
        np.asarray(r.exponents), expected, rtol=0, atol=tol(1e-9)
    )


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
    assert abs(float(jnp.mean(u)) - float(jnp.mean(ks22.state0))) < tol(1e-14, OPS)


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
    with pytest.warns(UserWarning, match="lose precision") as record:
        semilinear_problem(sym + 30.0, _zero, u0, 1.0)
    assert_warned_here(record, "lose precision")


# Published spectra of KS at L = 22 (the first ten exponents):
# - P. Cvitanovic, R. L. Davidchack, E. Siminos (2010), "On the state space
#   geometry of the Kuramoto-Sivashinsky flow in a periodic domain", SIAM J.
#   Appl. Dyn. Syst. 9, 1-33 (arXiv:0709.2944): the mean-zero subspace, so
#   no exponent for the conserved mean;
# - R. A. Edson, J. E. Bunder, T. W. Mattner, A. J. Roberts (2019),
#   "Lyapunov exponents of the Kuramoto-Sivashinsky PDE", ANZIAM J. 61,
#   270-285: the mean mode kept, as here.
# The numbers are as transcribed side by side in a third-party comparison
# (the KS reference arrays of the LiftAndLearn.jl operator-inference
# scripts); the papers' full texts were not reachable from here, so their
# table and section numbers are not given.
_KS22_CVITANOVIC = [0.048, 0, 0, -0.003, -0.189, -0.256, -0.290, -0.310, -1.963, -1.967]
_KS22_EDSON = [
    0.043,
    0.003,
    0.002,
    -0.004,
    -0.008,
    -0.185,
    -0.253,
    -0.296,
    -0.309,
    -1.965,
]


@pytest.mark.slow
@pytest.mark.parametrize("integrator", ["etdrk4", "ifrk4"])
def test_ks_l22_symmetry_zeros_and_published_spectrum(integrator):
    # Measured (T = 5000, 64 points, dt = 0.25), exponent +- standard error:
    # etdrk4 0.0472 +- 0.0027, then -0.190 -0.260 -0.299 -0.308 -1.964;
    # ifrk4 0.0437 +- 0.0030, then -0.194 -0.267 -0.297 -0.317 -1.987.
    p = kuramoto_sivashinsky(64, 22.0, dt=0.25, integrator=integrator)
    r = lyapunov_spectrum(p, 20000, k=10, renorm_every=4)
    lam, err = np.asarray(r.exponents), np.asarray(r.stderr)
    # Our exponent i pairs with Edson's i; with Cvitanovic's i - 1 past the
    # near-zero group (one zero fewer: no mean mode).
    pairs = [(0, 0, 0)] + [(i, i, i - 1) for i in range(5, 10)]
    for ours, e, c in pairs:
        lo, hi = sorted((_KS22_EDSON[e], _KS22_CVITANOVIC[c]))
        # The distance to the interval the two papers span, against three
        # standard errors plus 4% of the value (the time-step error of the
        # strongly damped exponents at dt = 0.25, largest for ifrk4).
        off = max(lo - lam[ours], lam[ours] - hi, 0.0)
        assert off < 3 * err[ours] + 0.04 * abs(hi), (
            ours,
            lam[ours],
            err[ours],
            lo,
            hi,
        )
    # Time and space translation, the conserved mean, and a near-zero
    # physical exponent (Edson: -0.004, -0.008): lambda_2..lambda_5 within 3
    # standard errors of zero, lambda_6 clearly negative.
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


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_cgl_benjamin_feir_turbulence_is_chaotic():
    p = complex_ginzburg_landau(64, 50.0, 2.0, -2.0)  # 1 + bc = -3 < 0
    r = lyapunov_spectrum(p, 4000, k=2)
    lam, err = np.asarray(r.exponents), np.asarray(r.stderr)
    assert lam[0] > 0.1 and lam[0] > 5 * err[0], (lam, err)


# --- the other entry points on a KS problem ---------------------------------


@pytest.fixture(scope="module")
def ks22_coarse():
    """KS at L = 22 on 32 points, dt = 0.25: chaotic, small, quick."""
    return kuramoto_sivashinsky(32, 22.0, dt=0.25)


def _spectral_derivative(u, length):
    n = u.shape[-1]
    q = 2 * np.pi * np.fft.rfftfreq(n, 1.0 / n) / length
    return np.fft.irfft(1j * q * np.fft.rfft(u), n=n)


def _vector_field(problem, u):
    """``L u + N(u)`` on the grid: the continuous flow direction ``du/dt``."""
    sp = problem.step_fn.spectral
    v = sp.to_modes(jnp.asarray(u))
    return np.asarray(sp.to_grid(jnp.asarray(problem.linear) * v + sp.n_hat(u)))


def _residual_from_span(w, V):
    """Distance of the unit vector along ``w`` from the span of ``V``'s columns."""
    w = w / np.linalg.norm(w)
    Q, _ = np.linalg.qr(V)
    return float(np.linalg.norm(w - Q @ (Q.T @ w)))


@pytest.mark.slow
def test_ks_covariant_vectors_span_the_symmetry_directions(ks22_coarse):
    # At L = 22: lambda_1 > 0, then four exponents near zero (space and time
    # translation, the conserved mean with its Galilean partner u_x, and a
    # physical one of about -0.003), then a gap (lambda_6 ~ -0.18). The pair
    # of translations is covariant: the scheme commutes with Fourier shifts,
    # so J(u) u_x = (step u)_x exactly, and the discrete flow direction is
    # du/dt up to the scheme's local error. Both must lie in the span of the
    # near-zero CLVs 2..5 (not in 2..4: the spectrum there is degenerate).
    from lyapax import covariant_vectors

    r = covariant_vectors(
        ks22_coarse, n_steps=1000, k=6, t_transient=100.0, t_backward=150.0,
        save_every=50,
    )  # fmt: skip
    vectors, states = np.asarray(r.vectors), np.asarray(r.states)
    assert vectors.shape == (states.shape[0], 32, 6) and states.shape[0] >= 5
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-12)
    lam = np.asarray(r.exponents)
    assert lam[0] > 0.02 and lam[5] < -0.1 and np.all(np.abs(lam[1:5]) < 0.03), lam
    shift = [_residual_from_span(_spectral_derivative(u, 22.0), V[:, 1:5])
             for u, V in zip(states, vectors, strict=True)]  # fmt: skip
    flow = [_residual_from_span(_vector_field(ks22_coarse, u), V[:, 1:5])
            for u, V in zip(states, vectors, strict=True)]  # fmt: skip
    # Measured: u_x within 7e-5 (the CLV iterations' convergence); du/dt
    # within 5e-3 (ETDRK4 at dt = 0.25 is not the continuous flow).
    assert max(shift) < 1e-3, shift
    assert max(flow) < 3e-2, flow
    # The unstable CLV is not along either symmetry direction.
    assert _residual_from_span(_spectral_derivative(states[0], 22.0),
                               vectors[0][:, :1]) > 0.1  # fmt: skip


def test_ks_finite_time_exponents_average_to_the_spectrum(ks22_coarse):
    from lyapax import finite_time_exponents

    f = finite_time_exponents(ks22_coarse, n_steps=2000, window=50.0, k=6)
    s = lyapunov_spectrum(ks22_coarse, 2000, k=6)
    ftle = np.asarray(f.exponents)
    assert ftle.shape == (10, 6)
    # Windows that tile the run: the mean of the window rates is the run's
    # total growth over its length (same frame, same QR sequence).
    np.testing.assert_allclose(
        ftle.mean(axis=0), np.asarray(s.exponents), atol=tol(1e-10)
    )
    # and the windows scatter (chaos): the leading rate is not constant.
    assert ftle[:, 0].std() > 0.01


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_ks_sweep_over_length_equals_single_runs(ks22_coarse):
    from lyapax import problem_family, sweep_lyapunov_spectrum

    u0 = np.asarray(ks22_coarse.state0)
    family = problem_family(lambda L: kuramoto_sivashinsky(32, L, state0=u0, dt=0.25))
    lengths = np.array([20.0, 22.0, 24.0])
    sw = sweep_lyapunov_spectrum(family, None, jnp.asarray(lengths), None, 200, k=4)
    assert np.asarray(sw.exponents).shape == (3, 4)
    for row, length in zip(np.asarray(sw.exponents), lengths, strict=True):
        one = kuramoto_sivashinsky(32, length, state0=u0, dt=0.25)
        ref = np.asarray(lyapunov_spectrum(one, 200, k=4).exponents)
        np.testing.assert_allclose(row, ref, rtol=0, atol=1e-8)


def _fixed_horizon_exponents(n, dt, length=22.0, horizon=20.0):
    """Exponents over ``[0, horizon]`` from one smooth field and one frame of
    low Fourier modes, sampled on ``n`` points: the same continuous problem
    at every resolution, so only the discretisation changes."""
    from lyapax import LyapunovCheckpoint

    y = 2 * np.pi * np.arange(n) / n
    u0 = np.cos(y) * (1 + np.sin(y)) + 0.5 * np.cos(3 * y)
    frame = np.stack([np.cos(y), np.sin(y), np.cos(2 * y)], 1) / np.sqrt(n / 2)
    p = kuramoto_sivashinsky(n, length, state0=u0, dt=dt)
    start = LyapunovCheckpoint(
        jnp.asarray(u0), jnp.asarray(frame), jnp.zeros(3), 0.0, dt
    )
    steps = int(round(horizon / dt))
    return np.asarray(lyapunov_spectrum(p, steps, k=3, resume=start).exponents)


@pytest.mark.slow
def test_ks_exponents_converge_in_n_points_and_dt():
    # Spectral convergence in n (measured differences from n = 64: 3e-3 at
    # n = 24, 8e-6 at 32, 3e-9 at 48, 4e-14 at 96) ...
    ref = _fixed_horizon_exponents(64, 0.25)
    errors = [np.abs(_fixed_horizon_exponents(n, 0.25) - ref).max() for n in (32, 48)]
    assert errors[0] < 1e-4 and errors[1] < 1e-7 and errors[1] < errors[0] / 100
    assert np.abs(_fixed_horizon_exponents(96, 0.25) - ref).max() < 1e-11
    # ... and high order in dt: halving dt shrinks the change by a factor of
    # about 8 (ETDRK4's order on this stiff problem; measured 6-9).
    lam = {dt: _fixed_horizon_exponents(64, dt) for dt in (0.25, 0.125, 0.0625)}
    d1 = np.abs(lam[0.25] - lam[0.125])
    d2 = np.abs(lam[0.125] - lam[0.0625])
    assert np.all(d2 < d1 / 4) and d2.max() < 1e-5, (d1, d2)


@pytest.mark.slow
def test_ks_chaos_is_extensive_in_length():
    # KS at L = 50, 100, 200 at the resolution of 64 points per 22 units,
    # dt = 0.25, T = 1000 after a transient of 100, QR every 4 steps. The number of
    # significantly positive exponents (lambda_i > 3 stderr_i) and the
    # Kaplan-Yorke dimension grow linearly in L. Measured (one run each):
    # D_KY = 10.81, 22.59, 44.71 -> slope 0.225 per unit length (0.229 at
    # T = 2000), rms residual 0.22; positive counts 3, 10, 21 -> slope 0.119,
    # rms residual 0.46. No published density was verified for this check:
    # the bands below are the measured values with a 15% (slope) tolerance.
    from lyapax import kaplan_yorke_dimension

    lengths = np.array([50.0, 100.0, 200.0])
    d_ky, n_pos = [], []
    for length in lengths:
        n = 2 * round(length * 32 / 22)
        p = kuramoto_sivashinsky(n, length, dt=0.25)
        # QR every 4 steps: the frame's columns stay far from parallel (D_KY
        # measured equal to 1e-3 with QR every step).
        k = int(0.25 * length) + 8
        r = lyapunov_spectrum(p, 4000, k=k, t_transient=100.0, renorm_every=4)
        lam, err = np.asarray(r.exponents), np.asarray(r.stderr)
        d_ky.append(kaplan_yorke_dimension(lam))
        n_pos.append(int(np.sum(lam > 3 * err)))
        assert np.cumsum(lam)[-1] < 0  # k reached past the dimension
    for y, slope_ref, rms_max in ((d_ky, 0.229, 1.0), (n_pos, 0.119, 1.0)):
        (slope, _), res, *_ = np.polyfit(lengths, np.asarray(y, float), 1, full=True)
        rms = float(np.sqrt(res[0] / lengths.size))
        assert abs(slope - slope_ref) < 0.15 * slope_ref, (y, slope)
        assert rms < rms_max, (y, rms)
    # Extensive: the dimension per unit length is the same at L = 100 and 200.
    assert abs(d_ky[2] / 200 - d_ky[1] / 100) < 0.1 * d_ky[2] / 200, d_ky
