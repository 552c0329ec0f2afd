"""Self-checks: sum rule, per-exponent estimators, zero exponent, non-finite runs."""

import warnings
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import RUN, float64_range, float64_run, tol, warnings_as_errors
from support.warned import assert_warned_here

from lyapax import ODEProblem, lyapunov_spectrum, ode_problem, rk4_step
from lyapax.checks import InvariantReport, check_invariants
from lyapax.core import AbstractStep
from lyapax.coupling import linear_coupling
from lyapax.dde import dde_problem
from lyapax.network import Network, network_problem
from lyapax.systems import henon_map, lorenz, lorenz96, mackey_glass, rossler


def quiet_check(*args, **kwargs) -> InvariantReport:
    with warnings_as_errors():  # a passing run must not warn
        return check_invariants(*args, **kwargs)


def lorenz_run(n_steps=20_000):
    problem = ode_problem(lorenz(), jnp.ones(3), 0.01)
    return problem, lyapunov_spectrum(
        problem, n_steps, renorm_every=10, t_transient=20.0
    )


def test_lorenz_passes_every_check():
    problem, result = lorenz_run()
    report = quiet_check(problem, result)
    assert report.passed and report.failed == []
    assert report.names == ["tangents", "continuous_qr", "sum_rule", "zero_exponent"]
    assert all(c.passed for c in report.checks)
    # tr Df = -(sigma + 1 + beta) everywhere: the reference is exact
    rule = report["sum_rule"]
    assert rule.expected == pytest.approx(-(10.0 + 1.0 + 8.0 / 3.0), abs=tol(1e-7))
    # RK4 at dt = 0.01; in float32 also a run's rounding of the sum
    bound = 2e-4 + (0.0 if float64_run() else RUN * abs(rule.expected))
    assert abs(rule.value - rule.expected) < bound
    # the step's tangents and differences of its state update: an identity
    tangents = report["tangents"]
    np.testing.assert_allclose(tangents.value, tangents.expected, atol=tol(1e-6))
    np.testing.assert_allclose(report.window_exponents, tangents.value)
    assert "tangents" in str(report) and "pass" in str(report)


def test_a_float32_map_passes_its_sum_rule():
    """The sum rule's floor follows the run's dtype: a float32 Henon run's
    exponents summed to -1.203972, its ln|det| to -1.203976, and float64's
    floor (2.2e-6 here) failed it."""
    with jax.enable_x64(False):
        problem = ODEProblem(henon_map(), jnp.array([0.1, 0.1], jnp.float32), 1.0)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="state0 is float32")
            result = lyapunov_spectrum(problem, 5_000, t_transient=100.0)
        report = quiet_check(problem, result)
    rule = report["sum_rule"]
    assert result.exponents.dtype == np.float32 and rule.passed
    assert rule.tolerance == pytest.approx(
        1e3 * np.finfo(np.float32).eps * 2.2, rel=0.01
    )


def test_henon_sum_rule_is_ln_b():
    problem = ODEProblem(henon_map(), jnp.array([0.1, 0.1]), 1.0)
    result = lyapunov_spectrum(problem, 5_000, t_transient=100.0)
    report = quiet_check(problem, result)
    rule = report["sum_rule"]
    assert rule.expected == pytest.approx(np.log(0.3), abs=tol(1e-9))
    assert rule.value == pytest.approx(np.log(0.3), abs=tol(1e-9))
    assert rule.passed and report["tangents"].passed
    assert report["continuous_qr"].passed is None  # a map: no vector field
    assert report["zero_exponent"].passed is None


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_lorenz96_sum_rule_exact_trace():
    n = 8
    problem = ode_problem(lorenz96(), 8.0 + jnp.sin(jnp.arange(n, dtype=float)), 0.01)
    result = lyapunov_spectrum(problem, 5_000, renorm_every=10, t_transient=10.0)
    report = quiet_check(problem, result, 500)
    rule = report["sum_rule"]
    assert rule.expected == pytest.approx(-n, abs=1e-7)
    assert rule.stderr == 0.0 and "exact" in rule.note
    assert rule.passed and report.window_steps == 500


@pytest.mark.slow
def test_lorenz96_sum_rule_hutchinson_has_an_error_bar():
    n = 70  # above EXACT_MAX_D: Hutchinson's estimate of tr Df
    problem = ode_problem(lorenz96(), 8.0 + jnp.sin(jnp.arange(n, dtype=float)), 0.01)
    result = lyapunov_spectrum(problem, 200, renorm_every=10)
    report = check_invariants(problem, result, 100, n_probes=8, warn=False)
    rule = report["sum_rule"]
    assert "hutchinson" in rule.note
    assert rule.stderr > 0
    assert abs(rule.expected + n) <= 4 * rule.stderr
    assert report["tangents"].passed


@pytest.mark.slow
def test_linear_network_sum_rule_is_the_trace():
    n, gamma, G = 5, -0.7, 0.4
    rng = np.random.default_rng(1)
    W = rng.uniform(0, 1, (n, n))
    problem = network_problem(
        lambda x, c, p: p["gamma"] * x + c,
        Network(W, (0,)),
        linear_coupling(),
        {"gamma": gamma, "G": G},
        jnp.ones(n),
        0.01,
    )
    result = lyapunov_spectrum(problem, 2_000, renorm_every=10)
    report = quiet_check(problem, result, 500)
    assert "bounded attractor" in report["zero_exponent"].note  # |f| grows: n/a
    rule = report["sum_rule"]
    assert rule.expected == pytest.approx(n * gamma + G * np.trace(W), abs=1e-7)
    assert rule.passed and report["continuous_qr"].passed


def _lorenz_hiding_a_derivative(x):
    # z enters rho - z without its derivative: the tangents miss -x dz in y'
    sigma, rho, beta = 10.0, 28.0, 8.0 / 3.0
    z = jax.lax.stop_gradient(x[2])
    return jnp.array(
        [sigma * (x[1] - x[0]), x[0] * (rho - z) - x[1], x[0] * x[1] - beta * x[2]]
    )


# At dt = 0.01 the tangent check's bound 1e3 eps^(2/3) steps / T (1 + |lambda|)
# (differences of the state update with h ~ eps^(1/3)) is 2.4 (1 + |lambda|).
FD_IN_FLOAT32 = (
    "in float32 the tangent check's bound is 2.4 (1 + |lambda|) here: float32 "
    "differences cannot tell a wrong tangent from rounding"
)


@pytest.mark.float64_only(FD_IN_FLOAT32)
def test_stop_gradient_is_flagged():
    problem = ode_problem(_lorenz_hiding_a_derivative, jnp.ones(3), 0.01)
    result = lyapunov_spectrum(problem, 5_000, renorm_every=10, t_transient=20.0)
    with pytest.warns(UserWarning, match="tangents") as record:
        report = check_invariants(problem, result)
    assert "tangents" in report.failed and "continuous_qr" in report.failed
    assert "stop_gradient" in str(record[0].message)
    assert not report.passed


class _MismatchedStep(AbstractStep):
    """A step whose fused tangent uses another dt than its state update."""

    uses_step_index: ClassVar[bool] = False
    dt: float

    def __call__(self, x):
        return rk4_step(lorenz(), self.dt)(x)

    def tangent(self, x, Y, step):
        wrong = rk4_step(lorenz(), 1.1 * self.dt)

        def one(v):
            return jax.jvp(wrong, (x,), (v,))[1]

        return self(x), jax.vmap(one, in_axes=1, out_axes=1)(Y)


@pytest.mark.float64_only(FD_IN_FLOAT32)
def test_state_update_and_tangent_that_disagree_are_flagged():
    problem = ODEProblem(_MismatchedStep(0.01), jnp.ones(3), 0.01)
    result = lyapunov_spectrum(problem, 5_000, renorm_every=10, t_transient=20.0)
    # no vector field is known: the sum rule reads ln|det| of the step
    with pytest.warns(UserWarning, match="sum_rule") as record:
        report = check_invariants(problem, result)
    assert_warned_here(record, "sum_rule")
    assert {"tangents", "sum_rule"} <= set(report.failed)
    assert "ln|det" in report["sum_rule"].note


@pytest.mark.slow
def test_zero_exponent_passes_rossler():
    problem = ode_problem(rossler(), jnp.array([1.0, 1.0, 0.0]), 0.02)
    result = lyapunov_spectrum(problem, 100_000, renorm_every=10, t_transient=100.0)
    report = quiet_check(problem, result)
    assert report["zero_exponent"].passed
    assert report.passed


def _linear_field(z):
    return jnp.array([-z[0] + 0.5 * z[1], -2.0 * z[1]])


class _LinearFlowStep(AbstractStep):
    """RK4 on z' = A z, A = [[-1, 0.5], [0, -2]], written by a user."""

    uses_step_index: ClassVar[bool] = False
    dt: float

    def __call__(self, z):
        return rk4_step(_linear_field, self.dt)(z)


class _DeclaredLinearFlowStep(_LinearFlowStep):
    def vector_field(self):
        return _linear_field


def test_a_step_declaring_its_vector_field_gets_the_continuous_checks():
    """The checks learn the vector field from the step's declaration
    (``AbstractStep.vector_field``), not from its concrete class."""
    reports = {}
    for cls in (_LinearFlowStep, _DeclaredLinearFlowStep):
        problem = ODEProblem(cls(0.01), jnp.array([1.0, 1.0]), 0.01)
        result = lyapunov_spectrum(problem, 2_000, renorm_every=10)
        reports[cls] = check_invariants(problem, result)
    assert reports[_LinearFlowStep]["continuous_qr"].passed is None
    declared = reports[_DeclaredLinearFlowStep]
    assert declared["continuous_qr"].passed
    # tr A = -3 exactly: the sum rule reads the declared field's trace
    assert declared["sum_rule"].expected == pytest.approx(-3.0, abs=tol(1e-9))
    assert declared["sum_rule"].passed


class _ForcedOscillator(AbstractStep):
    """x'' + 0.2 x' + x = cos(t), the time read from the step counter: a
    forced system presented as a flow of (x, x') alone."""

    uses_step_index: ClassVar[bool] = True
    dt: float

    def __call__(self, state, i):
        t = i * self.dt

        def rhs(y):
            return jnp.array([y[1], -0.2 * y[1] - y[0] + jnp.cos(t)])

        return rk4_step(rhs, self.dt)(state)


@pytest.mark.float64_only(
    "the zero-exponent check fits ln|f(x(t))| from float32 moment sums, whose "
    "scatter cancels to 0 here: it calls the orbit unbounded and checks nothing"
)
def test_zero_exponent_flags_a_forced_system():
    problem = ODEProblem(_ForcedOscillator(0.01), jnp.array([1.0, 0.0]), 0.01)
    result = lyapunov_spectrum(problem, 20_000, renorm_every=10, t_transient=50.0)
    np.testing.assert_allclose(result.exponents, [-0.1, -0.1], atol=1e-3)
    # the step counter says time-dependent: not checked by default ...
    assert quiet_check(problem, result)["zero_exponent"].passed is None
    # ... and flagged when the system is declared autonomous
    with pytest.warns(UserWarning, match="zero_exponent"):
        report = check_invariants(problem, result, autonomous=True)
    check = report["zero_exponent"]
    assert check.passed is False and "forced" in check.note
    assert check.value == pytest.approx(-0.1, abs=1e-3)


@pytest.mark.slow
def test_delay_problem_checks_its_tangents():
    problem = dde_problem(mackey_glass(), jnp.array([1.2]), tau=17.0, dt=0.1)
    result = lyapunov_spectrum(problem, 2_000, k=3, renorm_every=10)
    report = quiet_check(problem, result, 300)
    assert report["tangents"].passed
    assert report["sum_rule"].passed is None  # partial spectrum


def test_bad_input():
    problem, result = lorenz_run(100)
    with pytest.raises(TypeError, match="result"):
        check_invariants(problem, result.exponents)
    with pytest.raises(TypeError, match="rhs"):
        check_invariants(problem, result, rhs=3)
    with pytest.raises(ValueError, match="n_steps"):
        check_invariants(problem, result, 0)
    other = ode_problem(lorenz96(), jnp.ones(5), 0.01)
    with pytest.raises(ValueError):
        check_invariants(other, result)
    with pytest.warns(UserWarning, match="non-finite"):
        blown = lyapunov_spectrum(blow_up(), 200)
    with pytest.raises(ValueError, match="non-finite run"):
        check_invariants(blow_up(), blown)
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), result.checkpoint)
    with pytest.raises(ValueError, match="batch of runs"):
        check_invariants(problem, result._replace(checkpoint=batch))


# -- non-finite runs -------------------------------------------------------


def blow_up():
    # x' = x^2 from x = 1 blows up at t = 1; RK4 at dt = 0.01 overflows at step
    # BLOW_UP_STEP (float32's range ends one step before float64's)
    return ode_problem(lambda x: x**2, jnp.array([1.0, 0.5]), 0.01)


BLOW_UP_STEP = 103 if float64_range() else 102


def test_non_finite_run_warns_with_the_step():
    step = BLOW_UP_STEP
    with pytest.warns(UserWarning, match=f"non-finite.*at measured step {step}") as w:
        result = lyapunov_spectrum(blow_up(), 1_000)
    assert_warned_here(w, "non-finite")
    assert result.nonfinite.step_range == (step, step)
    assert result.nonfinite.time_range == pytest.approx((step / 100 - 0.01, step / 100))
    assert not np.isfinite(np.asarray(result.exponents)).all()
    with pytest.warns(UserWarning, match="between measured steps 101 and 110"):
        blocked = lyapunov_spectrum(blow_up(), 1_000, renorm_every=10)
    assert blocked.nonfinite.block == 10


def test_non_finite_in_the_transient_says_so():
    with pytest.warns(UserWarning, match="during the transient"):
        result = lyapunov_spectrum(blow_up(), 100, renorm_every=10, t_transient=2.0)
    assert result.nonfinite.in_transient


def test_check_finite_still_raises():
    with pytest.raises(FloatingPointError, match=f"non-finite.*step {BLOW_UP_STEP}"):
        lyapunov_spectrum(blow_up(), 1_000, check_finite=True)


def test_finite_run_has_no_report_and_no_warning():
    with warnings_as_errors():
        _, result = lorenz_run(1_000)
    assert result.nonfinite is None


def test_overflowing_state_with_finite_exponents_warns():
    # x' = 800 x: the state overflows, the renormalised tangent does not
    problem = ode_problem(lambda x: 800.0 * x, jnp.array([1.0]), 0.01)
    with pytest.warns(UserWarning, match="final state is non-finite"):
        result = lyapunov_spectrum(problem, 1_000, check_finite=True)
    assert result.nonfinite.state_only
    assert np.isfinite(np.asarray(result.exponents)).all()


def test_non_finite_inside_jit_is_silent():
    @jax.jit
    def top(x0):
        return lyapunov_spectrum(ode_problem(lambda x: x**2, x0, 0.01), 1_000).exponents

    with warnings_as_errors():
        out = top(jnp.array([1.0, 0.5]))
    assert not np.isfinite(np.asarray(out)).all()


def test_sweep_names_its_non_finite_rows():
    from lyapax.sweep import sweep_lyapunov_spectrum

    def step(x, p):
        return x + 0.01 * p["c"] * x**2

    with pytest.warns(UserWarning, match="1 of 3 sweep rows.*rows 2") as record:
        res = sweep_lyapunov_spectrum(
            step, jnp.array([1.0]), {"c": jnp.array([-1.0, 0.0, 1.0])}, 0.01, 1_000
        )
    assert_warned_here(record, "sweep rows")
    assert np.isfinite(np.asarray(res.exponents[:2])).all()
