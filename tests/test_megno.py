"""MEGNO against its exact limits.

Cincotta & Simó (2000): ``<Y>`` -> 0 on the harmonic oscillator (isochronous:
deviations stay bounded), -> 2 on a libration of the pendulum (quasi-periodic
and non-isochronous: deviations grow linearly by shear), and ``<Y> ≈ λ t/2``
on a chaotic Hénon–Heiles orbit with ``λ`` from ``lyapunov_spectrum`` on the
same orbit. A batch of rows is the rows run one by one, in one program that a
new batch of the same shapes reuses; bad input is refused.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import tol

from lyapax import hamiltonian_problem, lyapunov_spectrum
from lyapax.indicators import MEGNO_MIN_STEPS, megno
from lyapax.systems import henon_heiles


def identity(p):
    return p


def henon_heiles_row(y, energy=0.125):
    """``(q1, q2, p1, p2)`` on ``H = energy`` with ``q1 = p2 = 0``."""
    px = np.sqrt(2.0 * (energy - 0.5 * y * y + y**3 / 3.0))
    return np.array([0.0, y, px, 0.0])


@pytest.fixture(scope="module")
def chaotic_hh():
    row = henon_heiles_row(-0.2)
    return henon_heiles().problem(row[:2], row[2:], 0.05, "yoshida4")


def test_harmonic_oscillator_tends_to_zero():
    prob = hamiltonian_problem(identity, identity, [1.0], [0.0], 0.05, "leapfrog")
    res = megno(prob, 20_000, save_every=100)
    assert res.megno.shape == res.mean_megno.shape == res.times.shape == (200,)
    np.testing.assert_allclose(res.times[-1], 1000.0)
    # The tangent map is the step itself: |δ| bounded, Y oscillates about 0.
    assert abs(res.mean_megno[-1]) < 1e-3
    assert np.abs(res.megno).max() < 0.1
    assert res.verdict == "regular" and res.chaotic is False


def test_pendulum_libration_tends_to_two():
    prob = hamiltonian_problem(identity, jnp.sin, [2.0], [0.0], 0.1, "yoshida4")
    res = megno(prob, 50_000, save_every=500)
    mean = res.mean_megno
    # 2 - <Y> shrinks like ln(t)/t: monotone on the decades sampled here.
    gaps = 2.0 - mean[[9, 19, 49, 99]]
    assert np.all(gaps > 0) and np.all(np.diff(gaps) < 0), mean[[9, 19, 49, 99]]
    assert abs(mean[-1] - 2.0) < 0.15
    assert res.verdict == "regular"
    assert abs(res.lyapunov) < 1e-3


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_chaotic_henon_heiles_grows_like_lambda_t_over_two(chaotic_hh):
    n = 20_000
    res = megno(chaotic_hh, n)
    lam = float(lyapunov_spectrum(chaotic_hh, n, k=1).exponents[0])
    t = n * 0.05
    assert lam > 0.03
    assert res.mean_megno[-1] == pytest.approx(lam * t / 2, rel=0.1)
    # The slope fit over the whole run (REBOUND's estimator, times 2).
    assert res.lyapunov == pytest.approx(lam, rel=0.25)
    assert res.verdict == "chaotic" and res.chaotic is True


@pytest.mark.slow
def test_a_batch_is_its_rows_in_one_program(chaotic_hh):
    from lyapax.indicators._megno import _kernel

    rows = np.stack([henon_heiles_row(y) for y in (-0.2, 0.0, 0.3)])
    batch = megno(chaotic_hh, 2000, state0_batch=rows, save_every=500, batch_size=2)
    assert batch.mean_megno.shape == (3, 4) and batch.verdict.shape == (3,)
    for i, row in enumerate(rows):
        one = megno(chaotic_hh.with_state(row), 2000, save_every=500)
        # A chaotic row amplifies the rounding of vmapped and single programs.
        np.testing.assert_allclose(batch.mean_megno[i], one.mean_megno, rtol=1e-8)
        np.testing.assert_allclose(batch.lyapunov[i], one.lyapunov, rtol=1e-8)
        assert batch.verdict[i] == one.verdict
    size = _kernel._cache_size()
    megno(chaotic_hh, 3000, state0_batch=rows + 1e-3, save_every=500, batch_size=2)
    assert _kernel._cache_size() == size


def test_a_step_function_with_params_batch():
    # A map (dt = 1): the rotation x -> R(a) x is isochronous, <Y> = 0 for
    # every angle a.
    def rotation(x, p):
        c, s = jnp.cos(p["a"]), jnp.sin(p["a"])
        return jnp.stack([c * x[0] - s * x[1], s * x[0] + c * x[1]])

    res = megno(
        rotation, [1.0, 0.0], 1.0, 500, params_batch={"a": np.array([0.1, 0.7])}
    )
    np.testing.assert_allclose(res.mean_megno[:, -1], 0.0, atol=tol(1e-12))
    assert list(res.verdict) == ["regular", "regular"]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n_steps": MEGNO_MIN_STEPS - 1}, ValueError, "too short for MEGNO"),
        ({"threshold": 1.5}, ValueError, "threshold must be > 2"),
        ({"save_every": 0}, ValueError, "save_every must be >= 1"),
        ({"save_every": 10_000}, ValueError, "save_every must be <= n_steps"),
        ({"n_steps": None}, TypeError, "requires n_steps"),
    ],
)
def test_bad_input_is_refused(chaotic_hh, kwargs, error, match):
    args = {"n_steps": 1000} | kwargs
    with pytest.raises(error, match=match):
        megno(chaotic_hh, **args)


def test_a_problem_family_over_parameters():
    # FPUT at beta = 0 is a linear chain (isochronous): <Y> stays near 0;
    # the nonlinear chains are not (shear), and each row has its own beta.
    from lyapax.sweep import problem_family
    from lyapax.systems import fput_beta

    def chain(p):
        return fput_beta(4, beta=p["beta"]).problem(
            np.zeros(4), np.full(4, 0.8), 0.1, "leapfrog"
        )

    res = megno(problem_family(chain), 500, params_batch={"beta": np.array([0.0, 1.0])})
    assert abs(res.mean_megno[0, -1]) < 0.05
    assert res.mean_megno[1, -1] > 0.5
