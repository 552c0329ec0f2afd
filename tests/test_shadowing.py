"""Least-squares shadowing sensitivities against exact and published values.

A stable linear flow (the finite window's derivative in closed form, its
limit ``1/a`` and ``-p/a^2``); the Lorenz system at rho = 15, whose orbit
settles on a stable fixed point with ``z* = rho - 1`` (so ``d<z>/drho = 1``,
``d<z>/dsigma = d<z>/dbeta = 0``); Lorenz at rho = 28 against the published
``d<z>/drho ~ 1.01`` (Lea, Allen & Haine 2000, Tellus 52A 523-532, by
ensembles of adjoints; reproduced by least-squares shadowing in Wang, Hu &
Blonigan 2014, J. Comput. Phys. 267, 210-224, arXiv:1204.0159) and against
finite differences of long-time averages (slow); a limit cycle whose period
depends on the parameters, where the flow direction's time dilation matters
(slow). Bad input is refused naming the argument.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import tol

import lyapax
from lyapax import shadowing_sensitivity
from lyapax.shadowing import sensitivity as _sensitivity


def linear(x, p):
    return -p["a"] * x + p["p"]


def first(x, p):
    return x[0]


def lorenz(u, p):
    x, y, z = u
    return jnp.stack(
        [p["sigma"] * (y - x), x * (p["rho"] - z) - y, x * y - p["beta"] * z]
    )


def z_of(u, p):
    return u[2]


def lorenz_params(rho):
    return {"rho": rho, "sigma": 10.0, "beta": 8.0 / 3.0}


A, P, DT, K, S = 2.0, 1.5, 0.01, 50, 100
T = K * S * DT


def window_derivatives(a, p, t):
    """d<x>/dp and d<x>/da over a window of length t started on the
    equilibrium x* = p/a with zero tangents: v_p = (1 - e^{-at})/a and
    v_a = -(p/a^2)(1 - e^{-at})."""
    tail = (1.0 - math.exp(-a * t)) / (a * t)
    return (1.0 - tail) / a, -(p / a**2) * (1.0 - tail)


@pytest.fixture(scope="module")
def linear_result():
    # n_unstable from a spectrum run: the one exponent is -a.
    return shadowing_sensitivity(
        linear, jnp.array([P / A]), {"a": A, "p": P}, first, DT, K, S
    )


def test_stable_linear_flow_gives_the_exact_window_derivative(linear_result):
    res = linear_result
    dp, da = window_derivatives(A, P, T)
    assert float(res.average) == pytest.approx(P / A, rel=tol(1e-12))
    # RK4 tangents of this linear flow are exact to (a dt)^5 / 120 per step.
    assert float(res.gradient["p"]) == pytest.approx(dp, rel=tol(1e-9))
    assert float(res.gradient["a"]) == pytest.approx(da, rel=tol(1e-9))
    # ...and the window's derivative tends to 1/a and -p/a^2 like 1/(a T).
    assert abs(float(res.gradient["p"]) - 1 / A) <= 1.0 / (A**2 * T) + tol(1e-12, 1e-5)
    assert abs(float(res.gradient["a"]) + P / A**2) <= P / (A**3 * T) + tol(1e-12, 1e-5)
    assert res.n_unstable == 0 and res.n_segments == K
    assert np.asarray(res.spectrum) == pytest.approx([-A], rel=tol(1e-6))
    assert not bool(res.flow_direction)  # an equilibrium has no flow direction
    assert set(res.stderr) == {"a", "p"}


def test_new_numbers_reuse_the_compiled_program(linear_result):
    before = _sensitivity._run._cache_size()
    res = shadowing_sensitivity(
        linear, jnp.array([1.0]), {"a": 4.0, "p": 4.0}, first, DT, K, S, n_unstable=0
    )
    assert _sensitivity._run._cache_size() == before
    dp, da = window_derivatives(4.0, 4.0, T)
    assert float(res.gradient["p"]) == pytest.approx(dp, rel=tol(1e-8))
    assert float(res.gradient["a"]) == pytest.approx(da, rel=tol(1e-8))


def test_vmap_over_params_equals_the_exact_rows():
    a = jnp.array([1.0, 2.0, 3.0])
    p = jnp.array([0.5, 1.5, 3.0])

    def one(a_, p_):
        res = shadowing_sensitivity(
            linear,
            (p_ / a_)[None],
            {"a": a_, "p": p_},
            first,
            DT,
            20,
            100,
            n_unstable=0,
        )
        return res.gradient

    grads = jax.vmap(one)(a, p)
    for i in range(3):
        dp, da = window_derivatives(float(a[i]), float(p[i]), 20.0)
        assert float(grads["p"][i]) == pytest.approx(dp, rel=tol(1e-8))
        assert float(grads["a"][i]) == pytest.approx(da, rel=tol(1e-8))


def lorenz_run(rho, n_unstable=1, t_transient=60.0):
    """100 segments of 1 time unit: rho = 15 and 28 share one program."""
    return shadowing_sensitivity(
        lorenz,
        jnp.array([1.0, 1.0, 20.0]),
        lorenz_params(rho),
        z_of,
        0.01,
        100,
        100,
        n_unstable=n_unstable,
        t_transient=t_transient,
    )


def check_fixed_point_sensitivity(res):
    assert not bool(res.flow_direction)
    assert float(res.average) == pytest.approx(14.0, abs=1e-6)
    # Zero tangents at the window's start relax to dx*/dparams at the
    # pair's rate (0.35): a window of T = 100 keeps a bias of order
    # |dx*/dbeta| / (0.35 T) ~ 0.03 at most (7e-4 measured).
    assert float(res.gradient["rho"]) == pytest.approx(1.0, abs=5e-3)
    assert abs(float(res.gradient["sigma"])) < 5e-3
    assert abs(float(res.gradient["beta"])) < 5e-3


@pytest.mark.slow
def test_lorenz_at_rho_15_settles_and_gives_dz_drho_one():
    # One homogeneous tangent more than needed (a stable direction here) is
    # harmless: the least-squares problem uses it or not.
    res = lorenz_run(15.0)
    assert float(res.exponents[0]) < 0
    check_fixed_point_sensitivity(res)


@pytest.mark.slow
def test_lorenz_at_rho_15_counts_no_unstable_direction():
    res = lorenz_run(15.0, n_unstable=None)
    # n_unstable from the spectrum: every exponent negative at a stable point.
    assert res.spectrum is not None and np.all(np.asarray(res.spectrum) < 0)
    assert res.n_unstable == 0
    check_fixed_point_sensitivity(res)


@pytest.fixture(scope="module")
def lorenz28():
    return shadowing_sensitivity(
        lorenz,
        jnp.array([1.0, 1.0, 20.0]),
        lorenz_params(28.0),
        z_of,
        0.01,
        100,
        100,
        n_unstable=1,
        t_transient=20.0,
    )


def test_lorenz_at_rho_28_matches_the_published_sensitivity(lorenz28):
    res = lorenz28
    g, se = float(res.gradient["rho"]), float(res.stderr["rho"])
    assert 0 < se < 0.02
    # Published ~1.01 (two digits); the window of T = 100 adds its own scatter.
    assert abs(g - 1.01) < 0.01 + 4 * se
    assert bool(res.flow_direction)
    assert float(res.exponents[0]) == pytest.approx(0.906, abs=0.08)
    assert float(res.average) == pytest.approx(23.5, abs=0.5)


@pytest.mark.slow
def test_lorenz_at_rho_28_long_run_and_finite_differences():
    res = shadowing_sensitivity(
        lorenz,
        jnp.array([1.0, 1.0, 20.0]),
        lorenz_params(28.0),
        z_of,
        0.01,
        1000,
        100,
        n_unstable=1,
        t_transient=20.0,
    )
    g, se = float(res.gradient["rho"]), float(res.stderr["rho"])
    assert abs(g - 1.01) < 0.01 + 4 * se

    # Finite differences of long-time averages: 32 orbits per rho, each
    # averaged over 1000 time units after a transient of 20.
    def mean_z(rho, x0):
        step = lyapax.rk4_step(lambda u: lorenz(u, lorenz_params(rho)), 0.01)
        u = jax.lax.fori_loop(0, 2000, lambda _, u: step(u), x0)
        _, zs = jax.lax.scan(lambda u, _: (step(u), u[2]), u, length=100_000)
        return jnp.mean(zs)

    x0 = jnp.array([1.0, 1.0, 20.0]) + jax.random.normal(jax.random.key(1), (32, 3))
    h = 1.0
    runs = jax.jit(jax.vmap(jax.vmap(mean_z, (None, 0)), (0, None)))(
        jnp.array([28.0 - h, 28.0 + h]), x0
    )
    runs = np.asarray(runs)
    fd = (runs[1].mean() - runs[0].mean()) / (2 * h)
    fd_se = np.sqrt(runs[1].var(ddof=1) / 32 + runs[0].var(ddof=1) / 32) / (2 * h)
    # Shadowing and the finite differences agree to 2 % (measured: 1.017 +-
    # 0.001 against 1.000 +- 0.003); the rest is the shadowing direction's
    # own bias on an attractor that is not uniformly hyperbolic, which a
    # longer window does not remove (1.017 for segments of 0.5, 1 and 2).
    assert abs(g - fd) < 0.025 + 4 * math.hypot(se, fd_se)


def hopf(u, p):
    x, y = u
    r2 = x * x + y * y
    w = p["omega"] + p["b"] * r2
    return jnp.stack([x * (p["mu"] - r2) - w * y, y * (p["mu"] - r2) + w * x])


@pytest.mark.slow
def test_limit_cycle_with_parameter_dependent_period():
    # Cycle r^2 = mu with angular speed omega + b mu: <x^2> = mu / 2 exactly,
    # whatever the period, so d/dmu = 1/2 and d/domega = d/db = 0. The phase
    # drifts with every parameter: without the flow direction's time dilation
    # the tangents would grow linearly and the derivative would be wrong.
    res = shadowing_sensitivity(
        hopf,
        jnp.array([1.0, 0.0]),
        {"mu": 1.0, "omega": 1.0, "b": 1.0},
        lambda u, p: u[0] ** 2,
        0.01,
        400,
        100,
        t_transient=20.0,
    )
    assert res.n_unstable == 0 and bool(res.flow_direction)
    for name, exact in (("mu", 0.5), ("omega", 0.0), ("b", 0.0)):
        g, se = float(res.gradient[name]), float(res.stderr[name])
        assert abs(g - exact) < max(4 * se, 2e-3), (name, g, se)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"objective": lambda x, p: x}, ValueError, "objective must return a scalar"),
        ({"n_segments": 0}, ValueError, "n_segments must be >= 1"),
        ({"segment_steps": 0}, ValueError, "segment_steps must be >= 1"),
        ({"params": {"a": 1.0}}, TypeError, "params do not fit rhs"),
        ({"params": {"a": 1, "p": jnp.array(1)}}, TypeError, "floating-point"),
        ({"n_unstable": 2}, ValueError, "n_unstable must be at most"),
        ({"rhs": lambda x, p: jnp.zeros(2)}, ValueError, "state's shape"),
        ({"t_transient": -1.0}, ValueError, "t_transient"),
        ({"dt": 0.0}, ValueError, "dt"),
    ],
)
def test_bad_input_names_the_argument(kwargs, error, match):
    args = {
        "rhs": linear,
        "state0": jnp.array([0.5]),
        "params": {"a": 1.0, "p": 0.5},
        "objective": first,
        "dt": 0.01,
        "n_segments": 4,
        "segment_steps": 10,
    }
    args.update(kwargs)
    with pytest.raises(error, match=match):
        shadowing_sensitivity(**args)


def test_n_unstable_none_under_vmap_is_refused():
    def one(a_):
        return shadowing_sensitivity(
            linear, jnp.array([0.5]), {"a": a_, "p": 0.5}, first, 0.01, 4, 10
        ).average

    with pytest.raises(TypeError, match="n_unstable"):
        jax.vmap(one)(jnp.array([1.0, 2.0]))
