"""Chaos indicators against exact references.

Two-trajectory exponent: linear maps (ln p) and flows (p), the tent map
(ln 2, not differentiable at 1/2), the asymmetric tent map (its entropy), a
NumPy step called through ``jax.pure_callback`` (never differentiated), and
Lorenz against the spectrum on the same orbit. GALI: the cat map's
exp(-(lambda_1 - lambda_2) n), a linear 3-D map's GALI_3, the standard map
at K = 1 and Hénon–Heiles orbits classified. Expansion entropy: ln 2 for
the tent map, the logistic map at r = 4 and the leaking tent map of slope 3
(whose restraining region loses points).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import OPS, float64_run, tol

import lyapax
from lyapax import lyapunov_spectrum, ode_problem
from lyapax._engine import stats
from lyapax.indicators import expansion_entropy, gali, two_trajectory_exponent
from lyapax.sweep import problem_family, sweep_lyapunov_spectrum, sweep_trajectory
from lyapax.systems import linear_system, logistic_map, lorenz, tent_map

LN2 = np.log(2.0)
# float32 cannot check these defaults of the library (open for float32 on a TPU).
D0_BELOW_FLOAT32 = (
    "the default d0 = 1e-9 is below float32's rounding of a state near 0.1: "
    "the perturbed orbit rounds onto the reference one (separation 0, nan)"
)
GALI_FLOOR = (
    "GALI computed in float32 stops near 1e-9, above the default threshold 1e-12"
)


# --- two-trajectory largest exponent ---------------------------------------


def scaled(x, p):
    return p["p"] * x


@pytest.mark.slow
def test_linear_maps_give_ln_p_in_one_batched_program():
    p = np.array([1.1, 0.8])
    # x' = 1.1 x from 0: the separation grows alone (no cancellation against
    # a reference orbit of size 1.1^n).
    res = two_trajectory_exponent(
        scaled, None, 1.0, 400, params_batch={"p": p}, state0_batch=[[0.0], [0.5]]
    )
    assert res.exponent.shape == (2,)
    # Rounding of w - z (|z| / d0 ~ 1e8 ulps) limits the agreement.
    np.testing.assert_allclose(res.exponent, np.log(p), rtol=1e-6)
    assert (res.rescalings > 0).all()  # both left the band and were pulled back
    np.testing.assert_allclose(res.times[0], np.arange(1, 401))


def test_linear_flows_give_p():
    family = problem_family(
        lambda A: ode_problem(linear_system(A), jnp.zeros(1), dt=0.01)
    )
    p = np.array([0.1, -0.4])
    res = two_trajectory_exponent(
        family, n_steps=4000, check_every=10, params_batch=p.reshape(2, 1, 1)
    )
    np.testing.assert_allclose(res.exponent, p, rtol=1e-6)


@pytest.mark.float64_only(D0_BELOW_FLOAT32)
def test_tent_map_gives_ln2():
    res = two_trajectory_exponent(tent_map(), jnp.array([0.1]), 1.0, 2000)
    np.testing.assert_allclose(res.exponent, LN2, rtol=1e-9)
    # The problem form, n_steps as the second positional argument.
    problem = lyapax.ODEProblem(tent_map(), jnp.array([0.1]), 1.0)
    again = two_trajectory_exponent(problem, 2000)
    assert again.exponent == res.exponent and again.state.shape == (1,)


def skew_tent(x, a=0.3):
    return jnp.where(x < a, x / a, (1.0 - x) / (1.0 - a))


@pytest.mark.float64_only(D0_BELOW_FLOAT32)
def test_asymmetric_tent_map_within_its_stderr():
    a = 0.3
    exact = -a * np.log(a) - (1 - a) * np.log(1 - a)
    res = two_trajectory_exponent(skew_tent, jnp.array([0.1234]), 1.0, 40_000)
    assert 0 < res.stderr < 0.01
    assert abs(res.exponent - exact) < 4 * res.stderr


def numpy_logistic(x):
    return (4.0 * x * (1.0 - x)).astype(x.dtype)


def callback_step(x):
    shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return jax.pure_callback(numpy_logistic, shape, x, vmap_method="sequential")


@pytest.mark.float64_only(D0_BELOW_FLOAT32)
def test_a_step_outside_jax_works():
    """A NumPy step has no derivative: the spectrum cannot run it, this can."""
    res = two_trajectory_exponent(callback_step, np.array([0.3]), 1.0, 1000)
    assert abs(res.exponent - LN2) < 4 * res.stderr
    with pytest.raises(Exception, match="(?i)jvp|differentiat"):
        lyapunov_spectrum(callback_step, np.array([0.3]), 1.0, 10)


@pytest.mark.slow
def test_lorenz_agrees_with_the_spectrum_within_its_stderr():
    problem = ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)
    args = dict(n_steps=20_000, t_transient=20.0)
    two = two_trajectory_exponent(problem, check_every=10, **args)
    spec = lyapunov_spectrum(problem, k=1, renorm_every=10, **args)
    assert abs(two.exponent - float(spec.exponents[0])) < float(spec.stderr[0])
    assert two.history.shape == (2000,)
    # The same batch-means rule, exactly: each error bar is what the rule gives
    # on its own history (running_stderr on the device for the two-trajectory
    # run, batch_means_stderr for the spectrum). rtol: cum = history * t, so
    # undoing the running means costs ~1e-16 * cum / growth ~ 2e-13 per block.
    for hist, times, got in [
        (np.asarray(two.history)[:, None], two.times, two.stderr),
        (np.asarray(spec.history), spec.times, spec.stderr[0]),
    ]:
        growth = stats.block_growths(hist, np.asarray(times), np.zeros(1))
        want = stats.batch_means_stderr(growth, 0.1, float(times[-1]))
        np.testing.assert_allclose(float(got), want[0], rtol=1e-9)
    # The two runs' orbits are the same only while both programs round alike
    # (jax 0.10.2: ratio 1 - 3e-5; jax 0.12 rounds the spectrum's orbit apart
    # and Lorenz separates them by t ~ 30: ratio 1.24). On separate orbits the
    # two are independent estimates of one error bar; from b = 44 batches each
    # scatters by ~1/sqrt(2 (b - 1)) = 11 %, their ratio by ~15 %: 0.5 is 3 sd.
    np.testing.assert_allclose(two.stderr, float(spec.stderr[0]), rtol=0.5)


@pytest.mark.parametrize(
    "entry",
    [sweep_lyapunov_spectrum, sweep_trajectory, two_trajectory_exponent, gali],
    ids=lambda f: f.__name__,
)
def test_batched_entry_points_check_their_rows_with_one_set_of_messages(entry):
    """Sweeps and indicators resolve their rows in one layer
    (lyapax._internal.rows): the same input error reads the same, naming the
    entry point."""
    name = entry.__name__
    rows = dict(params_batch=None, state0_batch=jnp.full((2, 1), 0.1), n_steps=10)
    with pytest.raises(TypeError, match=rf"^{name}\(step_fn, \.\.\.\) requires dt"):
        entry(tent_map(), state0=None, dt=None, **rows)
    with pytest.raises(TypeError, match=rf"^{name}: step_fn must be a step function"):
        entry(3.0, state0=None, dt=1.0, **rows)
    problem = ode_problem(lambda x: -x, jnp.ones(1), dt=0.01)
    with pytest.raises(TypeError, match=rf"^{name}: a problem .* carries its own"):
        entry(problem, state0=jnp.ones(1), dt=None, **rows)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(d0=0.0), "d0 must be a finite number > 0"),
        (dict(d0=1e-9, d_lower=1e-8), "d_lower <= d0 <= d_upper"),
        (dict(check_every=3), "multiple of check_every=3"),
        (dict(check_every=0), "check_every must be >= 1"),
        (dict(seed=[1, 2]), "seed must be one integer"),
    ],
)
def test_two_trajectory_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        two_trajectory_exponent(tent_map(), jnp.array([0.1]), 1.0, 100, **kwargs)


def test_two_trajectory_bad_calls():
    with pytest.raises(TypeError, match="requires dt"):
        two_trajectory_exponent(tent_map(), jnp.array([0.1]), None, 100)
    with pytest.raises(TypeError, match="step_fn must be a step function"):
        two_trajectory_exponent(3.0, jnp.array([0.1]), 1.0, 100)
    with pytest.raises(TypeError, match="requires n_steps"):
        two_trajectory_exponent(tent_map(), jnp.array([0.1]), 1.0)
    problem = ode_problem(lorenz(), jnp.ones(3), dt=0.01)
    with pytest.raises(TypeError, match="carries its own state0"):
        two_trajectory_exponent(problem, jnp.ones(3), n_steps=10)


# --- GALI and SALI -----------------------------------------------------------


def cat(x):
    return jnp.mod(jnp.array([[2.0, 1.0], [1.0, 1.0]]) @ x, 1.0)


def test_cat_map_gali2_decays_at_lambda1_minus_lambda2():
    res = gali(cat, jnp.array([0.1, 0.2]), 1.0, 30, record_every=1)
    # Past the first alignment, above rounding: float64's to n = 14; float32's
    # GALI_2 = 0 at 10, and on a TPU its float32 directions (rsqrt, mod) bend
    # the fit below 1e-6, so a float32 run fits n = 3..7.
    n = np.arange(3, 15 if float64_run() else 8)
    slope = np.polyfit(n, np.log(res.history[n - 1]), 1)[0]
    np.testing.assert_allclose(-slope, 1.924847, rtol=tol(1e-3, 3e-3))
    # Small angles: SALI = 2 sin(theta / 2) and GALI_2 = sin(theta) agree.
    np.testing.assert_allclose(res.sali_history[n - 1], res.history[n - 1], rtol=1e-3)
    assert res.chaotic and 0 < res.steps_to_threshold <= 30


def test_gali3_of_a_linear_map():
    """x' = diag(e^1, e^0.5, e^-0.2) x: GALI_3 ~ exp(-(0.5 + 1.2) n)."""
    scale = jnp.exp(jnp.array([1.0, 0.5, -0.2]))
    res = gali(lambda x: scale * x, jnp.ones(3), 1.0, 24, k=3, record_every=1)
    n = np.arange(10, 20) if float64_run() else np.arange(11, 16)  # above rounding
    slope = np.polyfit(n, np.log(res.history[n - 1]), 1)[0]
    np.testing.assert_allclose(-slope, 1.7, rtol=tol(1e-3, 3e-3))


def standard_map(x, K=1.0):
    p = x[1] + K * jnp.sin(x[0])
    return jnp.mod(jnp.stack([x[0] + p, p]), 2 * jnp.pi)


@pytest.mark.float64_only(GALI_FLOOR)
def test_standard_map_chaotic_and_regular_orbits():
    start = np.array([[0.001, 0.008], [np.pi, 0.01]])
    res = gali(standard_map, None, 1.0, 10_000, state0_batch=start, record_every=1)
    assert res.history.shape == (2, 10_000)
    assert res.history[0, :50].min() < 1e-12
    assert res.chaotic[0] and res.steps_to_threshold[0] <= 50
    assert res.history[1].min() > 1e-12 and not res.chaotic[1]
    assert res.steps_to_threshold[1] == -1 and np.isnan(res.time_to_threshold[1])


def test_a_chunked_padded_batch_gives_the_same_numbers():
    grid = np.random.default_rng(3).uniform(0, 2 * np.pi, (5, 2))
    whole = gali(standard_map, None, 1.0, 300, state0_batch=grid)
    chunked = gali(standard_map, None, 1.0, 300, state0_batch=grid, batch_size=2)
    np.testing.assert_array_equal(whole.gali, chunked.gali)
    np.testing.assert_array_equal(whole.steps_to_threshold, chunked.steps_to_threshold)
    # Stopped orbits stop: the value is the one at the threshold crossing.
    assert (whole.gali[whole.chaotic] < 1e-12).all()
    if float64_run():  # float32's GALI may fall from above 1e-12 to 0 in one step
        assert (whole.gali[whole.chaotic] > 1e-14).all()


def henon_heiles(x):
    X, Y, px, py = x
    return jnp.stack([px, py, -X - 2 * X * Y, -Y - X**2 + Y**2])


def test_henon_heiles_orbits_are_classified():
    start = np.array([[0.0, 0.295456, 0.407308431, 0.0], [0.0, -0.25, 0.42081, 0.0]])
    problem = ode_problem(henon_heiles, jnp.array(start[0]), dt=0.05)
    res = gali(problem, n_steps=30_000, state0_batch=start)
    assert res.chaotic.tolist() == [False, True]
    assert res.gali[0] > 1e-4  # periodic: a power-law decay, far above 1e-12
    assert res.time_to_threshold[1] < 1500.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(k=1), "2 <= k <= d=2"),
        (dict(k=3), "2 <= k <= d=2"),
        (dict(threshold=1.0), r"threshold must lie in \(0, 1\)"),
        (dict(threshold=-1e-3), "threshold must be a finite number > 0"),
        (dict(record_every=-1), "record_every must be >= 0"),
    ],
)
def test_gali_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gali(cat, jnp.array([0.1, 0.2]), 1.0, 10, **kwargs)


# --- expansion entropy -------------------------------------------------------


def unit_interval(x):
    return (x[0] >= 0.0) & (x[0] <= 1.0)


def test_tent_map_expansion_entropy_is_ln2():
    points = np.random.default_rng(0).uniform(0, 1, (4, 100, 1))
    res = expansion_entropy(tent_map(), points, 1.0, 20, inside=unit_interval)
    np.testing.assert_allclose(res.entropy, LN2, rtol=tol(1e-12, OPS))
    exact = np.broadcast_to(LN2 * res.times, res.log_expansion.shape)
    np.testing.assert_allclose(res.log_expansion, exact, rtol=tol(1e-12, OPS))
    assert res.spread < tol(1e-12, OPS) and res.fraction_inside.min() == 1.0


@pytest.mark.float64_only(
    "in float32 some of these orbits land on the fixed point 0 (0.3 % by step "
    "30: x = 1/2 -> 1 -> 0), whose expansion 4^T biases the mean (0.73, not ln 2)"
)
def test_logistic_map_expansion_entropy_is_ln2():
    points = np.random.default_rng(1).uniform(0, 1, (20, 500, 1))
    res = expansion_entropy(logistic_map(4.0), points, 1.0, 30, inside=unit_interval)
    assert res.slopes.shape == (20,) and 0 < res.stderr < 1e-3
    # ln of a sample mean is biased low (here by ~1e-3, more than the
    # stderr of the batch spread): the reference is ln 2 to 0.5%.
    np.testing.assert_allclose(res.entropy, LN2, rtol=5e-3)


def leaky_tent(x):
    return jnp.where(x < 0.5, 3.0 * x, 3.0 * (1.0 - x))


def test_points_that_leave_the_region_count_zero():
    """Slope-3 tent on [0, 1]: (2/3)^T of the points stay, each with G = 3^T,
    so E_T = 2^T (the entropy of the invariant Cantor set)."""
    grid = (np.arange(40_000) + 0.5) / 40_000
    points = grid.reshape(-1, 4).T[:, :, None]  # 4 interleaved batches
    res = expansion_entropy(leaky_tent, points, 1.0, 12, inside=unit_interval)
    np.testing.assert_allclose(res.fraction_inside[0], (2 / 3) ** res.times, rtol=0.05)
    np.testing.assert_allclose(res.entropy, LN2, rtol=0.01)


@pytest.mark.parametrize(
    ("points", "kwargs", "error", "match"),
    [
        (np.zeros((10, 1)), {}, ValueError, "points must have shape"),
        (np.full((2, 3, 1), np.nan), {}, ValueError, "points must be finite"),
        (np.zeros((2, 3, 1)), dict(fit_from=10), ValueError, "fit_from=10"),
        (np.zeros((2, 3, 1)), dict(inside=1), TypeError, "inside must be"),
        (
            np.zeros((2, 3, 1)),
            dict(inside=lambda x: x),
            TypeError,
            "boolean scalar",
        ),
    ],
)
def test_expansion_entropy_bad_input(points, kwargs, error, match):
    with pytest.raises(error, match=match):
        expansion_entropy(tent_map(), points, 1.0, 10, **kwargs)


def test_the_indicators_are_exported():
    for name in ("two_trajectory_exponent", "gali", "expansion_entropy"):
        assert name in lyapax.__all__


def test_a_step_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="same shape and dtype"):
        gali(lambda x: x[:1], jnp.ones(2), 1.0, 10)
    with pytest.raises(ValueError, match="same shape and dtype"):
        two_trajectory_exponent(lambda x: x[:1], jnp.ones(2), 1.0, 10)
