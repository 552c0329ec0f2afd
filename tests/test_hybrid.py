"""Hybrid systems (impacts, switches) against exact references.

Impact oscillator ``x'' = -x`` with a wall at ``x = 0`` and restitution
``r``: state ``(x, v)``, event ``x`` (from ``> 0`` to ``<= 0`` at the wall),
reset ``(x, v) -> (x, -r v)``. Between impacts the flow is a rotation (the
tangent keeps its length); at an impact the saltation matrix is

    S = DR + (f+ - DR f-) e1^T / (e1 . f-),   f- = (v, 0), f+ = (-r v, 0),
      = diag(1, -r) + diag(-(1 + r), 0) = -r I,

so the tangent map over a run holding ``N`` impacts is ``r^N`` times a
rotation: both exponents are ``N ln r / T`` exactly (``ln r / pi`` as ``T``
grows, one impact per half-turn of duration ``pi``). The naive tangent
``DR = diag(1, -r)`` would give ``{0, N ln r / T}``, sum ``ln r / pi``.

Each test that runs a spectrum shares its compiled program through
module-scoped fixtures.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import OPS, tol

import lyapax
from lyapax import hybrid_problem, lyapunov_spectrum, ode_problem

DT = 0.01
N_STEPS = 20_000  # T = 200


def oscillator(x):
    return jnp.stack([x[1], -x[0]])


def wall(x):
    return x[0]


class Bounce(eqx.Module):
    """The reset ``(x, v) -> (x, -r v)``; ``r`` a leaf, so problems of every
    ``r`` share one compiled program."""

    r: float

    def __call__(self, x):
        return jnp.stack([x[0], -self.r * x[1]])


def impact_problem(r, dt=DT, saltation=True):
    return hybrid_problem(
        oscillator, wall, Bounce(r), jnp.array([1.0, 0.0]), dt, saltation=saltation
    )


def impacts_until(t):
    """Impacts of ``x = cos t`` (from ``(1, 0)``) in ``(0, t]``: at pi/2 + k pi."""
    return int(np.floor((t - np.pi / 2) / np.pi)) + 1


@pytest.fixture(scope="module")
def impact_runs():
    return {
        (r, salt): lyapunov_spectrum(impact_problem(r, saltation=salt), N_STEPS)
        for r in (0.5, 0.8, 1.0)
        for salt in (True, False)
    }


@pytest.mark.parametrize("r", [0.5, 0.8, 1.0])
def test_impact_oscillator_exponents_are_ln_r_per_half_turn(impact_runs, r):
    T = N_STEPS * DT
    exact = impacts_until(T) * np.log(r) / T
    res = impact_runs[(r, True)]
    # Error: the Runge-Kutta step's own (~dt^4 per unit time) and rounding.
    np.testing.assert_allclose(res.exponents, [exact, exact], atol=tol(1e-9))
    # ... which is ln r / pi up to the phase of the last half-turn.
    np.testing.assert_allclose(res.exponents, np.log(r) / np.pi, atol=np.pi / T)


@pytest.mark.parametrize("r", [0.5, 0.8])
def test_tangents_are_not_the_naive_reset_jacobian(impact_runs, r):
    T = N_STEPS * DT
    n = impacts_until(T)
    right = impact_runs[(r, True)].exponents
    naive = impact_runs[(r, False)].exponents
    np.testing.assert_allclose(np.sum(right), 2 * n * np.log(r) / T, atol=tol(1e-9))
    # Without the saltation term: DR = diag(1, -r) between rotations, whose
    # determinants give the sum n ln r / T (ln r / pi), half the right one.
    np.testing.assert_allclose(np.sum(naive), n * np.log(r) / T, atol=tol(1e-9))
    assert abs(np.sum(right) - np.sum(naive)) > 0.5 * abs(np.log(r)) / np.pi


def test_crossing_time_is_located_to_rounding():
    """From ``(1, 0)`` the first impact is at ``pi/2`` with ``v = -1``; after
    it ``v = r`` (times the Runge-Kutta step's own error, ~dt^4)."""
    r = 0.5
    prob = impact_problem(r, dt=0.1)
    step = prob.step_fn

    @jax.jit
    def probe(x0):
        x = jax.lax.fori_loop(0, 15, lambda _i, x: step(x), x0)  # t = 1.5
        t_loc = step._crossing_time(x, jnp.asarray(0.1))
        # The step from t = 1.5 crosses at pi/2 ~ 1.5708, inside (1.5, 1.6].
        return step(x), t_loc, step.flow(x, t_loc)

    after, t_loc, before_reset = probe(prob.state0)
    t_star = np.pi / 2 - 1.5
    tau = 0.1 - t_star
    # Exact flow of the remaining time from (0, r): (r sin tau, r cos tau);
    # 16 RK4 steps of 0.1 err by ~1e-6 (local error dt^5 / 120 each, the
    # error of x also moving the crossing time).
    np.testing.assert_allclose(
        after, [r * np.sin(tau), r * np.cos(tau)], rtol=0, atol=2e-6
    )
    # Location to rounding on the step's own continuous extension: the state
    # just before the reset has x = 0 to within a few ulps.
    assert abs(float(before_reset[0])) < tol(1e-15, OPS)
    assert abs(float(t_loc) - t_star) < 2e-6  # RK4's own error


def test_several_events_in_one_step_land_on_the_exact_orbit():
    """An elastic ball (``x'' = -1``, floor at ``x = 0``, ``v -> -v``) from
    ``(1/8, 0)``: impacts at ``t = 1/2 + k`` with ``v = -1/2``; steps of 2.3
    hold 2, 3 and 2 impacts. RK4 integrates a constant force exactly, so
    after three steps (``t = 6.9``, ``0.4`` after the last impact) the state
    is ``(0.5 * 0.4 - 0.4^2 / 2, 0.5 - 0.4) = (0.12, 0.1)`` to rounding."""
    prob = hybrid_problem(
        lambda x: jnp.stack([x[1], -1.0 + 0 * x[0]]),
        wall,
        lambda x: jnp.stack([x[0], -x[1]]),
        jnp.array([0.125, 0.0]),
        2.3,
    )
    step = jax.jit(prob.step_fn)
    x = prob.state0
    for _ in range(3):
        x = step(x)
    # float32: seven located impacts, each rounding the crossing time.
    np.testing.assert_allclose(x, [0.12, 0.1], rtol=0, atol=tol(1e-13, 1e-5))


@pytest.mark.slow  # compiles of its own; hybrid_problem keeps quick plain tests
def test_event_free_limit_equals_ode_problem_bit_for_bit():
    def lorenz(x):
        return jnp.stack(
            [10 * (x[1] - x[0]), x[0] * (28 - x[2]) - x[1], x[0] * x[1] - 8 / 3 * x[2]]
        )

    x0 = jnp.array([1.0, 1.0, 20.0])

    def never(x):  # positive all along this run: no event
        return 1e6 + 0 * x[0]

    hyb = hybrid_problem(lorenz, never, lambda x: -x, x0, 0.01)
    ode = ode_problem(lorenz, x0, 0.01)
    a = lyapunov_spectrum(hyb, 500, save_states=True)
    b = lyapunov_spectrum(ode, 500, save_states=True)
    np.testing.assert_array_equal(a.trajectory, b.trajectory)
    np.testing.assert_array_equal(a.exponents, b.exponents)


def switching_focus(a1, w1, a2, w2):
    """``x' = A_i x`` with ``A_i = [[-a_i, -w_i], [w_i, -a_i]]``, ``A_1`` for
    ``x1 > 0``, ``A_2`` for ``x1 < 0``; state ``(x1, x2, s)`` with the mode
    ``s = +-1`` saying which field applies (the event is ``s x1``, the reset
    flips ``s``), so no Runge-Kutta stage mixes the two fields."""

    def rhs(z):
        a = jnp.where(z[2] > 0, a1, a2)
        w = jnp.where(z[2] > 0, w1, w2)
        return jnp.stack([-a * z[0] - w * z[1], w * z[0] - a * z[1], 0 * z[2]])

    return hybrid_problem(
        rhs,
        lambda z: z[2] * z[0],
        lambda z: z.at[2].multiply(-1.0),
        jnp.array([1.0, 0.0, 1.0]),
        DT,
    )


@pytest.mark.slow  # compiles of its own; hybrid_problem keeps quick plain tests
def test_switching_focus_exponents_from_the_exact_half_turns():
    """Closed form. In each half-plane the flow is ``e^{-a_i t} R(w_i t)``:
    a half-turn takes ``pi / w_i`` and maps ``x -> -e^{-a_i pi / w_i} x``.
    At the crossing ``x = (0, x2)`` (reset = identity on ``x``), with
    ``f- = A_1 x``, ``f+ = A_2 x`` and ``grad g = (1, 0)``, the saltation
    matrix is the shear ``S_12 = [[w2/w1, 0], [(a2 - a1)/w1, 1]]``; the way
    back gives ``S_21 = [[w1/w2, 0], [(a1 - a2)/w2, 1]]``, and ``S_21 S_12 =
    I``. The half-turn maps are multiples of ``I`` and commute with the
    shears, so the map of a full turn (time ``P = pi/w1 + pi/w2``) is
    ``mu I`` with ``ln mu = -pi (a1/w1 + a2/w2)``: both exponents of ``x``
    are ``ln mu / P``; the mode ``s`` adds an exact 0 (its tangent is only
    ever flipped). Over a run of ``T`` the tangent is ``mu^{T/P}`` times a
    bounded shear, whence the ``~1/T`` tolerance.
    """
    a1, w1, a2, w2 = 0.1, 1.0, 0.3, 2.0
    lam = -np.pi * (a1 / w1 + a2 / w2) / (np.pi / w1 + np.pi / w2)
    res = lyapunov_spectrum(switching_focus(a1, w1, a2, w2), N_STEPS)
    T = N_STEPS * DT
    bound = np.log(1 + abs(a2 - a1) / min(w1, w2) + max(w1 / w2, w2 / w1)) / T
    np.testing.assert_allclose(res.exponents, [0.0, lam, lam], atol=bound)
    np.testing.assert_allclose(np.sum(res.exponents), 2 * lam, atol=bound)


@pytest.mark.slow  # compiles of its own; hybrid_problem keeps quick plain tests
def test_engine_entry_points_accept_the_problem(impact_runs):
    prob = impact_problem(0.8)
    res = impact_runs[(0.8, True)]
    # Resuming from a checkpoint continues the same run.
    half = lyapunov_spectrum(prob, N_STEPS // 2)
    resumed = lyapunov_spectrum(prob, N_STEPS // 2, resume=half.checkpoint)
    np.testing.assert_allclose(resumed.exponents, res.exponents, rtol=1e-12)
    clv = lyapax.covariant_vectors(prob, 2000, t_backward=5.0)
    assert np.asarray(clv.exponents).shape == (2,)
    # Windows of 4 model times hold one or two impacts: the sum of each
    # window's exponents is (number of impacts) 2 ln r / 4.
    ft = lyapax.finite_time_exponents(prob, 2000, window=4.0)
    sums = np.sum(np.asarray(ft.exponents), axis=-1) * 4.0 / (2 * np.log(0.8))
    np.testing.assert_allclose(sums, np.round(sums), atol=1e-8)
    assert set(np.round(sums).astype(int).tolist()) <= {1, 2}
    starts = jnp.array([[1.0, 0.0], [2.0, 0.5]])
    swept = lyapax.sweep_lyapunov_spectrum(
        prob, None, None, None, N_STEPS, state0_batch=starts
    )
    np.testing.assert_allclose(swept.exponents[0], res.exponents, rtol=1e-10)
    np.testing.assert_allclose(swept.exponents[1], np.log(0.8) / np.pi, atol=0.02)
    # A parameter sweep over the restitution equals the single runs.
    family = lyapax.problem_family(impact_problem)
    by_r = lyapax.sweep_lyapunov_spectrum(
        family, None, jnp.array([0.5, 0.8]), None, N_STEPS
    )
    for row, r in zip(by_r.exponents, (0.5, 0.8), strict=True):
        np.testing.assert_allclose(row, impact_runs[(r, True)].exponents, rtol=1e-10)


@pytest.mark.slow  # compiles of its own; hybrid_problem keeps quick plain tests
def test_zeno_accumulation_is_reported():
    """A ball under gravity on a floor, restitution 0.5: bounces shrink
    geometrically and accumulate in finite time."""
    prob = hybrid_problem(
        lambda x: jnp.stack([x[1], -1.0 + 0 * x[0]]),
        lambda x: x[0],
        lambda x: jnp.stack([x[0], -0.5 * x[1]]),
        jnp.array([1.0, 0.0]),
        0.05,
        max_events=4,
    )
    # Raised inside the compiled run: JAX reports it as a runtime error
    # carrying the message (equinox.EquinoxRuntimeError under filter_jit).
    with pytest.raises(
        (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="Zeno"
    ):
        lyapunov_spectrum(prob, 400).exponents.block_until_ready()


def test_bad_input_names_the_argument():
    x0 = jnp.array([1.0, 0.0])
    with pytest.raises(ValueError, match=r"event\(x\) must return a scalar"):
        hybrid_problem(oscillator, lambda x: x, lambda x: x, x0, DT)
    with pytest.raises(ValueError, match=r"reset\(x\) must return the state's"):
        hybrid_problem(oscillator, wall, lambda x: x[:1], x0, DT)
    with pytest.raises(ValueError, match=r"rhs\(x\)"):
        hybrid_problem(lambda x: x[0], wall, lambda x: x, x0, DT)
    with pytest.raises(TypeError, match="reset must be callable"):
        hybrid_problem(oscillator, wall, 3.0, x0, DT)
    with pytest.raises(ValueError, match="max_events must be >= 1"):
        hybrid_problem(oscillator, wall, lambda x: x, x0, DT, max_events=0)
    with pytest.raises(ValueError, match="dt must be"):
        hybrid_problem(oscillator, wall, lambda x: x, x0, -1.0)
    with pytest.raises(ValueError, match="integrator="):
        hybrid_problem(oscillator, wall, lambda x: x, x0, DT, integrator="rk5")
    with pytest.raises(ValueError, match="params_batch"):
        lyapax.sweep_lyapunov_spectrum(
            impact_problem(0.5), None, {"a": np.ones(2)}, None, 10
        )


@pytest.mark.slow  # compiles of its own; hybrid_problem keeps quick plain tests
def test_exponents_differentiate_through_the_restitution():
    """``d/dr (N ln r / T) = N / (r T)``: a derivative of the exponents that
    passes through the located impacts, the reset and the saltation matrix
    (forward mode; second derivatives of the step)."""
    T = 2000 * DT
    n = impacts_until(T)

    def exponents(r):
        return lyapunov_spectrum(impact_problem(r), 2000).exponents

    r = 0.7
    d = jax.jacfwd(exponents)(jnp.asarray(r))
    np.testing.assert_allclose(d, [n / (r * T), n / (r * T)], rtol=1e-7)
