"""Adaptive sub-steps through diffrax (lyapax.adaptive)."""

import builtins
import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lyapax
from lyapax import systems

pytest.importorskip("diffrax")
from lyapax.adaptive import diffrax_adaptive_step  # noqa: E402

LORENZ_L1 = 0.9056  # Sprott's reference value for sigma=10, rho=28, beta=8/3
RK4_STABILITY = 2.785  # |h * lambda| limit of classical RK4 on the negative real axis


def _stiff_rhs():
    # Symmetric matrix with eigenvalues -1 and -1000, rotated off the axes so
    # that both state components see both rates.
    c, s = np.cos(0.3), np.sin(0.3)
    rot = np.array([[c, -s], [s, c]])
    a = jnp.asarray(rot @ np.diag([-1.0, -1000.0]) @ rot.T)
    return lambda y: a @ y


def _stiff_run(integrator, dt=0.01, n_steps=100):
    problem = lyapax.ode_problem(
        _stiff_rhs(), jnp.array([1.0, 0.5]), dt, integrator=integrator
    )
    return lyapax.lyapunov_spectrum(problem, n_steps=n_steps, t_transient=0.1)


def _decaying_rotation_l1(a, **options):
    """lambda_1 of y' = [[-a, 1], [-1, -a]] y (exactly -a)."""

    def rhs(y):
        return jnp.array([[-a, 1.0], [-1.0, -a]]) @ y

    integrator = diffrax_adaptive_step(rtol=1e-9, atol=1e-12, **options)
    problem = lyapax.ode_problem(rhs, jnp.array([1.0, 0.3]), 0.2, integrator=integrator)
    return lyapax.lyapunov_spectrum(problem, n_steps=5, k=1).exponents[0]


@pytest.fixture(scope="module")
def stiff_adaptive():
    integrator = diffrax_adaptive_step("dopri8", rtol=1e-8, atol=1e-11)
    return integrator, _stiff_run(integrator, dt=0.01)


def test_stiff_linear_both_exponents_where_fixed_rk4_at_same_dt_diverges(
    stiff_adaptive,
):
    dt = 0.01  # |dt * -1000| = 10 > RK4_STABILITY
    result = stiff_adaptive[1]
    np.testing.assert_allclose(result.exponents, [-1.0, -1000.0], rtol=1e-5)

    # One RK4 step per dt amplifies the fast direction by its stability
    # polynomial R(z) = 1 + z + z^2/2 + z^3/6 + z^4/24 at z = -10, i.e. 291:
    # a spurious positive exponent log(291)/dt instead of -1000.
    z = -1000.0 * dt
    growth = np.log(abs(1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24)) / dt
    fixed = lyapax.ode_problem(_stiff_rhs(), jnp.array([1.0, 0.5]), dt, "rk4")
    rk4 = lyapax.lyapunov_spectrum(fixed, n_steps=100, t_transient=0.1)
    assert float(rk4.exponents[0]) == pytest.approx(growth, rel=1e-6)
    assert growth > 500.0


@pytest.mark.slow
def test_stiff_linear_fixed_rk4_at_adaptive_average_step(stiff_adaptive):
    integrator, result = stiff_adaptive
    dt = 0.01
    accepted, rejected = integrator(_stiff_rhs(), dt).sub_steps(
        result.checkpoint.state, result.checkpoint.Y
    )
    h = dt / int(accepted)
    # Measured: the accurate adaptive run needs sub-steps inside RK4's stability
    # region (the -1000 tangent must be resolved), so RK4 at that step is stable
    # and agrees; the adaptive run got there without choosing a step.
    assert h * 1000.0 < RK4_STABILITY
    fixed = lyapax.ode_problem(_stiff_rhs(), jnp.array([1.0, 0.5]), h, "rk4")
    rk4 = lyapax.lyapunov_spectrum(fixed, n_steps=int(round(1.0 / h)), t_transient=0.1)
    np.testing.assert_allclose(rk4.exponents, [-1.0, -1000.0], rtol=5e-3)
    # the 8th-order pair is more accurate than RK4 at the same mean step
    assert abs(float(rk4.exponents[1]) + 1000) > abs(float(result.exponents[1]) + 1000)


def test_state_only_error_control_misses_the_stiff_exponent():
    # lyapax 0.3.0 sized sub-steps by the state error alone; the state has no
    # fast component after the transient, so the -1000 tangent is not resolved.
    loose = _stiff_run(
        diffrax_adaptive_step("dopri5", 1e-6, 1e-9, tangent_control=False)
    )
    assert abs(float(loose.exponents[1]) + 1000.0) > 100.0


@pytest.mark.slow
def test_lorenz_l1_converges_as_tolerances_tighten():
    errors = []
    for rtol in (1e-5, 1e-8, 1e-10):
        integrator = diffrax_adaptive_step("dopri5", rtol=rtol, atol=rtol * 1e-2)
        problem = lyapax.ode_problem(
            systems.lorenz(), jnp.array([1.0, 1.0, 1.0]), 0.1, integrator=integrator
        )
        result = lyapax.lyapunov_spectrum(problem, n_steps=20_000, t_transient=50.0)
        errors.append(abs(float(result.exponents[0]) - LORENZ_L1))
        # exponents sum to the constant divergence -(sigma + 1 + beta)
        assert float(jnp.sum(result.exponents)) == pytest.approx(
            -(11 + 8 / 3), abs=2e-3
        )
    assert errors[-1] < 0.02, errors


@pytest.mark.parametrize(
    "solver",
    [
        "dopri5",
        pytest.param("tsit5", marks=pytest.mark.slow),
        pytest.param("dopri8", marks=pytest.mark.slow),
    ],
)
def test_agrees_with_fixed_rk4_at_small_dt(solver):
    # Short horizon from the same state: both runs follow the same trajectory,
    # so their finite-time exponents agree far better than the chaotic scatter.
    state0 = jnp.array([1.0, 1.0, 1.0])
    rk4 = lyapax.ode_problem(systems.lorenz(), state0, 1e-3, "rk4")
    ref = lyapax.lyapunov_spectrum(rk4, n_steps=5_000, renorm_every=100, t_transient=0)
    integrator = diffrax_adaptive_step(solver, rtol=1e-10, atol=1e-12)
    problem = lyapax.ode_problem(systems.lorenz(), state0, 0.1, integrator=integrator)
    result = lyapax.lyapunov_spectrum(problem, n_steps=50, t_transient=0)
    np.testing.assert_allclose(result.exponents, ref.exponents, atol=1e-4)


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_jacfwd_of_exponent_matches_exact_derivative():
    grad = jax.jacfwd(_decaying_rotation_l1)(0.5)
    assert float(grad) == pytest.approx(-1.0, abs=1e-6)


@pytest.mark.slow
def test_reverse_mode_needs_the_bounded_loop():
    with pytest.raises(ValueError, match="Reverse-mode differentiation"):
        jax.grad(_decaying_rotation_l1)(0.5)
    grad = jax.grad(lambda a: _decaying_rotation_l1(a, reverse_mode=True, max_steps=16))
    assert float(grad(0.5)) == pytest.approx(-1.0, abs=1e-6)


@pytest.mark.slow
def test_max_steps_exhausted_raises_instead_of_truncating():
    integrator = diffrax_adaptive_step(rtol=1e-9, atol=1e-11, max_steps=2)
    problem = lyapax.ode_problem(
        systems.lorenz(), jnp.array([1.0, 1.0, 1.0]), 0.1, integrator=integrator
    )
    with pytest.raises(RuntimeError, match="max_steps exhausted"):
        lyapax.lyapunov_spectrum(problem, n_steps=2, t_transient=0)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"solver": "rk45"}, ValueError, "solver='rk45'.*tsit5, dopri5, dopri8"),
        ({"solver": 3}, TypeError, "solver must be"),
        ({"rtol": 0.0}, ValueError, "rtol must be a finite number > 0; got rtol=0.0"),
        # inf passed the old hand-written check (inf > 0) and reached diffrax.
        ({"rtol": float("inf")}, ValueError, "rtol must be a finite number > 0"),
        ({"atol": float("nan")}, ValueError, "atol must be a finite number > 0"),
        ({"dt0": float("inf")}, ValueError, "dt0 must be a finite number > 0"),
        ({"atol": True}, TypeError, "atol must be a finite number > 0; got True"),
        ({"atol": -1}, ValueError, "atol must be"),
        ({"dt0": 0}, ValueError, "dt0 must be"),
        ({"max_steps": 2.5}, ValueError, "max_steps must be a non-negative integer"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        diffrax_adaptive_step(**kwargs)


def test_accepts_diffrax_solver_instances():
    import diffrax

    builder = diffrax_adaptive_step(solver=diffrax.Tsit5())
    assert isinstance(builder(systems.lorenz(), 0.1).solver, diffrax.Tsit5)


def test_missing_diffrax_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def no_diffrax(name, *args, **kwargs):
        if name == "diffrax" or name.startswith("diffrax."):
            raise ImportError("No module named 'diffrax'")
        return real_import(name, *args, **kwargs)

    import lyapax.adaptive as adaptive

    monkeypatch.setattr(builtins, "__import__", no_diffrax)
    try:
        reloaded = importlib.reload(adaptive)
        with pytest.raises(ImportError, match=r"lyapax\[adaptive\]"):
            reloaded.diffrax_adaptive_step()
    finally:
        monkeypatch.undo()
        importlib.reload(adaptive)


def test_new_tolerances_and_dt_reuse_the_compiled_program():
    from lyapax._engine.benettin import run_benettin

    def run(rtol, dt):
        integrator = diffrax_adaptive_step("tsit5", rtol=rtol, atol=rtol * 1e-3)
        problem = lyapax.ode_problem(
            systems.lorenz(), jnp.array([1.0, 1.0, 1.0]), dt, integrator=integrator
        )
        return lyapax.lyapunov_spectrum(problem, n_steps=5, t_transient=0)

    run(1e-6, 0.1)
    size = run_benettin._cache_size()
    run(1e-8, 0.05)
    assert run_benettin._cache_size() == size
