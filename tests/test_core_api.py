"""Engine behaviour: call forms, resume, caching, composability, bad input."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import OPS, float64_range, float64_run, tol
from support.warned import assert_warned_here

from lyapax._engine.benettin import tangent_step
from lyapax.core import (
    LyapunovCheckpoint,
    ODEProblem,
    lyapunov_spectrum,
    ode_problem,
)
from lyapax.integrators import rk4_step
from lyapax.systems import henon_map, linear_system, lorenz
from lyapax.utils import simulate_trajectory

X0 = jnp.array([1.0, 1.0, 1.0])


def _lorenz_problem(rho=28.0, dt=0.01):
    return ode_problem(lorenz(rho=rho), X0, dt)


# ---------------------------------------------------------------- call forms


def test_problem_and_plain_forms_agree_and_second_positional_is_n_steps():
    problem = _lorenz_problem()
    a = lyapunov_spectrum(problem, 2000, renorm_every=10)
    b = lyapunov_spectrum(problem.step_fn, X0, 0.01, 2000, renorm_every=10)
    c = lyapunov_spectrum(problem, n_steps=2000, dt=0.01, renorm_every=10)
    np.testing.assert_array_equal(a.exponents, b.exponents)
    np.testing.assert_array_equal(a.exponents, c.exponents)
    assert a.history.shape == (200, 3) and a.times.shape == (200,)
    np.testing.assert_allclose(a.times[-1], 20.0, rtol=tol(1e-14, OPS))
    np.testing.assert_array_equal(a.history[-1], a.exponents)
    assert np.all(np.diff(np.asarray(a.exponents)) <= 0)


def test_rows_are_contiguous_host_arrays_equal_to_the_traced_run():
    # The compiled run fetches history and times as one packed buffer.
    res = lyapunov_spectrum(_lorenz_problem(), 500, renorm_every=10)
    traced = jax.jit(
        lambda x0: lyapunov_spectrum(
            ode_problem(lorenz(), x0, 0.01), 500, renorm_every=10
        )
    )(X0)
    for name, shape in (("history", (50, 3)), ("times", (50,))):
        rows = getattr(res, name)
        assert type(rows) is np.ndarray and rows.flags.c_contiguous
        assert rows.shape == shape
        np.testing.assert_allclose(rows, np.asarray(getattr(traced, name)), rtol=1e-12)


def test_a_traced_run_gives_the_kernel_its_constants_as_run_time_values():
    """Inside a caller's ``jit`` the problem's parameters and ``dt`` are
    constants of the caller's program. On a TPU, emulated float64 computes a
    constant minus a one-element array 1.8e-8 relative off (``28.0 - x[2]`` in
    Lorenz's field), and the README's Lorenz call inside a ``jit`` came out
    3.9e-9 off the CPU's (docs/method.md, "Precision"). The run passes them
    to its kernel through an optimization barrier, as run-time values, as an
    untraced run passes its arguments (then 1.6e-14 on the chip)."""
    closed = jax.make_jaxpr(
        lambda x0: (
            lyapunov_spectrum(
                ode_problem(lorenz(rho=28.5), x0, 0.01), 20, renorm_every=10
            ).exponents
        )
    )(X0)
    consts = dict(zip(closed.jaxpr.constvars, closed.consts, strict=True))

    def value(v):
        if isinstance(v, jax.extend.core.Literal):
            return float(v.val)
        return float(consts[v]) if v in consts and np.ndim(consts[v]) == 0 else None

    eqns = closed.jaxpr.eqns
    at = [i for i, e in enumerate(eqns) if e.primitive.name == "optimization_barrier"]
    assert len(at) == 1
    barrier = eqns[at[0]]
    assert {28.5, 10.0, 8.0 / 3.0, 0.01} <= {value(v) for v in barrier.invars}
    kernel = next(e for e in eqns[at[0] :] if e.primitive.name in ("jit", "pjit"))
    assert all(any(o is v for v in kernel.invars) for o in barrier.outvars)


def test_history_columns_follow_the_final_order():
    res = lyapunov_spectrum(_lorenz_problem(), 3000, renorm_every=10)
    np.testing.assert_array_equal(res.history[-1], res.exponents)
    # history * times recovers the accumulated log growth of each column.
    cum = res.history * res.times[:, None]
    final_cum = np.asarray(res.checkpoint.cum_log_growth)
    np.testing.assert_allclose(np.sort(cum[-1]), np.sort(final_cum), rtol=1e-12)


def test_tangent_action_equals_jacfwd_times_basis():
    step = rk4_step(lorenz(), 0.01)
    x = jnp.array([1.3, -0.4, 20.0])
    Y = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(3), (3, 2)))[0]
    new_x, new_Y = tangent_step(step, x, Y, jnp.int32(0))
    J = jax.jacfwd(step)(x)
    np.testing.assert_allclose(new_Y, J @ Y, atol=tol(1e-10, OPS), rtol=0)
    np.testing.assert_allclose(new_x, step(x), atol=tol(1e-14, 1e-5), rtol=0)


@pytest.mark.slow
def test_partial_spectrum_equals_leading_columns_of_full():
    problem = _lorenz_problem()
    full = lyapunov_spectrum(problem, 20_000, renorm_every=10, t_transient=30.0)
    for k in (1, 2):
        part = lyapunov_spectrum(
            problem, 20_000, k=k, renorm_every=10, t_transient=30.0
        )
        # After the transient both frames span the same leading subspace up to
        # exp(-(lambda_k - lambda_{k+1}) t_transient) <= exp(-27).
        np.testing.assert_allclose(part.exponents, full.exponents[:k], atol=1e-8)


def test_seed_sets_the_initial_frame():
    problem = _lorenz_problem()
    a = lyapunov_spectrum(problem, 200, seed=1)
    b = lyapunov_spectrum(problem, 200, seed=1)
    c = lyapunov_spectrum(problem, 200, seed=2)
    np.testing.assert_array_equal(a.exponents, b.exponents)
    assert not np.array_equal(np.asarray(a.exponents), np.asarray(c.exponents))


# ---------------------------------------------------------------- resume


@pytest.mark.parametrize("k", [3, 2])
def test_resume_in_two_chunks_equals_one_run(k):
    problem = _lorenz_problem()
    one = lyapunov_spectrum(problem, 4000, k=k, renorm_every=10, t_transient=5.0)
    first = lyapunov_spectrum(problem, 1500, k=k, renorm_every=10, t_transient=5.0)
    second = lyapunov_spectrum(problem, 2500, renorm_every=10, resume=first.checkpoint)
    np.testing.assert_allclose(second.exponents, one.exponents, atol=1e-8, rtol=0)
    np.testing.assert_allclose(second.times, one.times[150:], atol=tol(1e-12), rtol=0)
    np.testing.assert_allclose(
        second.checkpoint.elapsed_time, one.checkpoint.elapsed_time, atol=tol(1e-12)
    )
    assert isinstance(second.checkpoint, LyapunovCheckpoint)


def test_resume_mismatches_are_rejected():
    problem = _lorenz_problem()
    ck = lyapunov_spectrum(problem, 100, k=2).checkpoint
    with pytest.raises(ValueError, match="mutually exclusive"):
        lyapunov_spectrum(problem, 100, resume=ck, t_transient=1.0)
    with pytest.raises(ValueError, match="k=3"):
        lyapunov_spectrum(problem, 100, k=3, resume=ck)
    with pytest.raises(ValueError, match="dt="):
        lyapunov_spectrum(_lorenz_problem(dt=0.02), 100, resume=ck)
    other = lyapunov_spectrum(henon_map(), jnp.array([0.1, 0.1]), dt=0.01, n_steps=10)
    with pytest.raises(ValueError, match="dimension d=3"):
        lyapunov_spectrum(problem, 100, resume=other.checkpoint)


# ---------------------------------------------------------------- save states


def test_save_states_matches_simulate_trajectory():
    problem = _lorenz_problem()
    res = lyapunov_spectrum(problem, 600, renorm_every=6, save_states=True, decimate=3)
    traj = simulate_trajectory(problem.step_fn, X0, 600, dt=0.01, decimate=3)
    assert res.trajectory.shape == (200, 3)
    np.testing.assert_allclose(res.trajectory, traj.states, atol=tol(1e-12), rtol=0)
    np.testing.assert_allclose(res.save_times, traj.times, atol=tol(1e-12), rtol=0)
    plain = lyapunov_spectrum(problem, 600, renorm_every=6)
    assert plain.trajectory is None and plain.save_times is None


# ---------------------------------------------------------------- cache


def test_rebuilt_problems_and_repeated_calls_do_not_retrace():
    traces = []

    def rhs(x, p):
        traces.append(1)  # runs only while JAX traces
        return p["a"] * x

    from lyapax._engine.tree import Bound

    def problem(a):
        return ode_problem(Bound(rhs, {"a": a}), jnp.ones(2), 0.01)

    lyapunov_spectrum(problem(-1.0), n_steps=100, renorm_every=10)
    after_first = len(traces)
    assert after_first > 0
    for a in (-0.5, -2.0, 0.3):
        res = lyapunov_spectrum(problem(a), n_steps=100, renorm_every=10)
        np.testing.assert_allclose(res.exponents, [a, a], atol=tol(1e-10))
    # New numbers, new dt and a new state: still no new trace.
    lyapunov_spectrum(
        ode_problem(Bound(rhs, {"a": 0.1}), jnp.zeros(2) + 3.0, 0.02),
        n_steps=100,
        renorm_every=10,
    )
    assert len(traces) == after_first
    # Run lengths are data: a new n_steps does not retrace either...
    lyapunov_spectrum(problem(-1.0), n_steps=200, renorm_every=10)
    assert len(traces) == after_first
    # ...but a new structure (k) does.
    lyapunov_spectrum(problem(-1.0), n_steps=200, renorm_every=10, k=1)
    assert len(traces) > after_first


def test_systems_builders_hit_the_cache_across_parameters():
    from lyapax._engine.benettin import run_benettin

    lyapunov_spectrum(_lorenz_problem(rho=28.0), n_steps=50, renorm_every=5)
    size = run_benettin._cache_size()
    for rho in (10.0, 20.0, 99.0):
        lyapunov_spectrum(_lorenz_problem(rho=rho), n_steps=50, renorm_every=5)
    assert run_benettin._cache_size() == size


# ---------------------------------------------------------------- composability


def test_inside_jit_and_vmap():
    problem = _lorenz_problem()
    eager = lyapunov_spectrum(problem, 500, renorm_every=10).exponents

    @jax.jit
    def jitted(x0):
        return lyapunov_spectrum(problem._replace(state0=x0), 500, renorm_every=10)

    np.testing.assert_allclose(jitted(X0).exponents, eager, atol=1e-12)
    batch = jnp.stack([X0, X0 + 0.1])
    out = jax.vmap(
        lambda x0: (
            lyapunov_spectrum(
                problem._replace(state0=x0), 500, renorm_every=10
            ).exponents
        )
    )(batch)
    assert out.shape == (2, 3)
    # Batched, the steps compile into another program: the same numbers up to
    # the rounding of a run (on a TPU in float32, 7e-7 on lambda_2 ~ 0.009).
    np.testing.assert_allclose(out[0], eager, atol=tol(1e-10))


def test_is_traced_finds_a_tracer_in_any_tree_and_none_in_concrete_values():
    """The fast paths (a concrete leaf by its type, tuples and lists walked
    item by item) answer as walking the whole tree does."""
    from typing import NamedTuple

    from lyapax._engine.validate import is_traced, under_transformation

    class Pair(NamedTuple):
        a: object
        b: object

    x = jnp.ones(3)
    concrete = [x, np.ones(2), np.float64(1.0), 1, 1.5, True, None, (), [], "s"]
    concrete += [(x, [1.0, {"w": x}]), Pair(x, None), {"a": (x, 2)}]
    for value in concrete:
        assert is_traced(value) is False, value
    assert not under_transformation(*concrete)

    def traced_in(t):
        return [
            is_traced(t),
            is_traced((x, [1.0, {"w": t}])),
            is_traced(Pair(None, t)),
            is_traced({"a": (1, t)}),
            is_traced([x, (t,)]),
            under_transformation(),
            under_transformation(x, 2.0),
        ]

    seen = []
    jax.jit(lambda t: seen.append(traced_in(t)) or t)(x)
    jax.vmap(lambda t: seen.append(traced_in(t)) or t)(x)
    jax.grad(lambda t: seen.append(traced_in(t)) or t)(1.0)
    assert seen == [[True] * 7] * 3
    assert is_traced(x) is False  # the array type stays concrete after a trace


def test_read_fields_reads_what_attribute_access_reads():
    """The host reads the kernel's records with tree.read_fields: the same
    objects as attribute access, jit outputs and traced values alike."""
    from lyapax._engine.benettin import BenettinState, KernelOutput
    from lyapax._engine.tree import read_fields

    carry = BenettinState(X0, jnp.eye(3), jnp.zeros(3), jnp.asarray(4, jnp.int32))
    out = jax.jit(lambda c: KernelOutput(c, jnp.ones((2, 3))))(carry)
    names = ("state", "Y", "cum", "step")
    got = read_fields(out.carry, *names)
    assert all(a is getattr(out.carry, n) for a, n in zip(got, names, strict=True))
    cum, saved = read_fields(out, "cum", "saved")
    assert cum is out.cum and saved is None

    def traced(c):
        state, step = read_fields(c, "state", "step")
        assert state is c.state and step is c.step
        return state

    np.testing.assert_array_equal(jax.jit(traced)(carry), X0)
    with pytest.raises(AttributeError):
        read_fields(out, "missing")


def _leading_exponent(p):
    A = jnp.array([[p, 1.0], [0.0, -1.0]])
    problem = ode_problem(linear_system(A), jnp.ones(2), 0.01)
    return lyapunov_spectrum(problem, 4000, renorm_every=10, t_transient=5.0).exponents[
        0
    ]


@pytest.mark.parametrize(
    "transform",
    [pytest.param(t, marks=pytest.mark.slow) for t in (jax.grad, jax.jacfwd)],
)
def test_derivative_wrt_parameter_matches_finite_differences(transform):
    p, h = -0.3, 1e-5
    g = float(transform(_leading_exponent)(p))
    fd = (float(_leading_exponent(p + h)) - float(_leading_exponent(p - h))) / (2 * h)
    assert g == pytest.approx(fd, abs=1e-6)
    # lambda_1 = p exactly (up to the O(1/T) offset), so d lambda_1 / dp ~ 1.
    assert g == pytest.approx(1.0, abs=2e-2)


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_closed_over_parameter_is_differentiable():
    def lam(b):
        step = lambda x: jnp.array([b * x[0], 0.5 * x[1]])
        return lyapunov_spectrum(step, jnp.ones(2), dt=1.0, n_steps=50).exponents[1]

    # Map x -> diag(b, 0.5) x: exponents log b and log 0.5.
    assert float(jax.grad(lam)(0.25)) == pytest.approx(4.0, rel=1e-8)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"k": 0}, ValueError, "k must satisfy 1 <= k <= d=3; got k=0"),
        ({"k": 4}, ValueError, "got k=4"),
        ({"n_steps": 0}, ValueError, "n_steps must be >= 1; got n_steps=0"),
        ({"n_steps": -5}, ValueError, "n_steps=-5"),
        ({"n_steps": 105, "renorm_every": 10}, ValueError, "multiple of renorm_every"),
        ({"renorm_every": 0}, ValueError, "renorm_every must be >= 1"),
        ({"n_steps": 10.5}, TypeError, "n_steps must be an integer"),
        ({"dt": 0.02}, ValueError, "different values"),
        ({"t_transient": -1.0}, ValueError, "t_transient"),
        (
            {"save_states": True, "renorm_every": 10, "decimate": 3},
            ValueError,
            "decimate=3 must divide renorm_every=10",
        ),
        ({"decimate": 0}, ValueError, "decimate must be >= 1"),
    ],
)
def test_bad_arguments_name_the_argument_and_value(kwargs, exc, match):
    args = {"n_steps": 100}
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        lyapunov_spectrum(_lorenz_problem(), **args)


def test_plain_form_requires_state_dt_and_n_steps():
    step = rk4_step(lorenz(), 0.01)
    with pytest.raises(TypeError, match="requires state0, dt"):
        lyapunov_spectrum(step, n_steps=10)
    with pytest.raises(TypeError, match="n_steps"):
        lyapunov_spectrum(step, X0, 0.01)
    with pytest.raises(TypeError, match="problem"):
        lyapunov_spectrum(42, X0, 0.01, 10)


@pytest.mark.parametrize(
    "state0, match",
    [
        (jnp.ones((3, 1)), "1-D array"),
        (jnp.array([1.0, jnp.nan, 1.0]), "finite"),
        (jnp.array([1.0, jnp.inf, 1.0]), r"entries \[1\]"),
    ],
)
def test_bad_state0(state0, match):
    with pytest.raises(ValueError, match=match):
        lyapunov_spectrum(rk4_step(lorenz(), 0.01), state0, 0.01, 10)


def test_bad_dt():
    with pytest.raises(ValueError, match="dt must be a finite number > 0"):
        lyapunov_spectrum(rk4_step(lorenz(), 0.01), X0, -0.01, 10)
    with pytest.raises(ValueError, match="dt must be a finite number > 0"):
        ode_problem(lorenz(), X0, 0.0)


def test_step_with_wrong_output_is_reported():
    with pytest.raises(ValueError, match=r"returned shape \(2,\)"):
        lyapunov_spectrum(lambda x: x[:2], X0, 1.0, 10)
    # A dtype other than the state's (float64, or float32 in a float32 run).
    other = jnp.float32 if float64_run() else jnp.float16
    with pytest.raises(ValueError, match=f"dtype {jnp.dtype(other).name}"):
        lyapunov_spectrum(lambda x: x.astype(other), X0, 1.0, 10)


def test_check_finite_raises_on_overflow():
    blow_up = lambda x: x * x  # doubly exponential growth overflows
    # 10**(2**9) passes float64's 1.8e308 at step 10, 10**(2**6) float32's 3.4e38 at 7.
    step = 10 if float64_range() else 7
    with pytest.warns(UserWarning, match=f"non-finite.*measured step {step}") as w:
        res = lyapunov_spectrum(blow_up, jnp.array([10.0]), dt=1.0, n_steps=20)
    assert_warned_here(w, "non-finite")
    assert not np.isfinite(np.asarray(res.exponents)).all()
    with pytest.raises(FloatingPointError, match="non-finite"):
        lyapunov_spectrum(
            blow_up, jnp.array([10.0]), dt=1.0, n_steps=20, check_finite=True
        )


@pytest.mark.slow
def test_float32_state_without_x64_warns():
    code = textwrap.dedent(
        """
        import warnings, jax.numpy as jnp
        from lyapax import lyapunov_spectrum
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            lyapunov_spectrum(lambda x: 0.5 * x, jnp.ones(2, jnp.float32), 1.0, 10)
        print([str(x.message) for x in w if "float32" in str(x.message)])
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "JAX_ENABLE_X64": "0"},
    )
    assert "jax_enable_x64" in out.stdout


def test_odeproblem_is_a_pytree_of_numbers():
    problem = _lorenz_problem(rho=30.0)
    assert isinstance(problem, ODEProblem)
    assert 30.0 in jax.tree.leaves(problem)
