"""Run lengths are data: one compiled program per problem structure.

``n_steps``, ``renorm_every``, ``t_transient`` and ``decimate`` are the trip
counts of the kernel's loops, not constants of its program. These tests count
XLA compilations (every program, eager ones included) across calls of
different lengths, and compare the results with a static reference kernel
written here with ``lax.scan`` (what the engine compiled before).
"""

from __future__ import annotations

import contextlib
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import OPS, float64_run, tol

from lyapax import ODEProblem, lyapunov_spectrum, ode_problem, run_until_converged
from lyapax._engine.benettin import (
    MEMO_FRAME_ENTRIES,
    MIN_CAPACITY,
    capacity,
    fresh_frame,
    initial_frame,
)
from lyapax._engine.precision import growth_log
from lyapax._engine.stats import batch_means_stderr, block_growths
from lyapax._engine.tree import merge_static, split_static
from lyapax.dde import lyapunov_spectrum_dde
from lyapax.sweep import sweep_lyapunov_spectrum
from lyapax.systems import henon_map, lorenz, mackey_glass

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def count_compiles():
    """Counts XLA compilations (jit programs and eager ops) inside the block."""
    seen = []

    def listener(event, duration, **_):
        if event == BACKEND_COMPILE:
            seen.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


def lorenz_problem(rho=28.0):
    return ode_problem(lorenz(rho=rho), jnp.array([1.0, 1.0, 1.0]), 0.01)


# ------------------------------------------------------------ static reference


@partial(jax.jit, static_argnames=("static", "n_blocks", "n_tr", "every"))
def _static_reference(x0, Y0, dynamic, *, static, n_blocks, n_tr, every):
    """Benettin with lengths baked into the program (lax.scan), LAPACK QR."""
    step = merge_static(dynamic, static)

    def advance(c, _):
        x, Y = jax.vmap(lambda v: jax.jvp(step, (c[0],), (v,)), 1, (None, 1))(c[1])
        return (x, Y), None

    def block(c, _):
        (x, Y), _ = jax.lax.scan(advance, (c[0], c[1]), None, length=every)
        Q, R = jnp.linalg.qr(Y)
        diag = jnp.diagonal(R)
        Q = Q * jnp.where(diag < 0, -1.0, 1.0)
        # The engine's log of a growth (a TPU's own float32 log is ~4000 ulp off)
        cum = c[2] + growth_log(jnp.abs(diag))
        return (x, Q, cum), cum

    zero = jnp.zeros(Y0.shape[1])
    c, _ = jax.lax.scan(block, (x0, Y0, zero), None, length=n_tr)
    c, cum = jax.lax.scan(block, (c[0], c[1], zero), None, length=n_blocks)
    return c[0], cum


def reference(problem, n_steps, renorm_every, n_tr=0, seed=0):
    """history, times, stderr and final state of the static program."""
    x0 = problem.state0
    d = x0.shape[0]
    Y0, _ = initial_frame(seed, d=d, k=d, dtype=x0.dtype)
    n = n_steps // renorm_every
    dynamic, static = split_static(problem.step_fn)
    x, cum = _static_reference(
        x0, Y0, dynamic, static=static, n_blocks=n, n_tr=n_tr, every=renorm_every
    )
    cum = np.asarray(cum)
    times = problem.dt * renorm_every * np.arange(1, n + 1)
    raw = cum / times[:, None]
    order = np.argsort(-raw[-1], kind="stable")
    history = raw[:, order]
    growth = block_growths(history, times, np.zeros(d))
    stderr = batch_means_stderr(growth, problem.dt * renorm_every, times[-1])
    return history, times, stderr, np.asarray(x)


# ------------------------------------------------------------ one program


def test_one_compile_across_lengths_transients_and_resume():
    problem = lorenz_problem()
    lyapunov_spectrum(problem, n_steps=100, renorm_every=10)  # compiles
    lyapunov_spectrum(problem, n_steps=100, renorm_every=10, save_states=True)
    with count_compiles() as compiles:
        a = lyapunov_spectrum(problem, n_steps=200, renorm_every=5, t_transient=1.0)
        b = lyapunov_spectrum(problem, n_steps=630, renorm_every=7)
        c = lyapunov_spectrum(problem, n_steps=40, renorm_every=40, t_transient=3.3)
        d = lyapunov_spectrum(problem, n_steps=90, renorm_every=3, resume=c.checkpoint)
        e = lyapunov_spectrum(
            problem, n_steps=120, renorm_every=6, save_states=True, decimate=3
        )
    assert compiles == []
    assert a.history.shape == (40, 3) and b.history.shape == (90, 3)
    assert c.history.shape == (1, 3) and d.history.shape == (30, 3)
    assert e.trajectory.shape == (40, 3) and e.save_times.shape == (40,)


def test_the_pages_warm_up_compiles_its_timed_call():
    """The GPU page warms up with 10 steps / renorm 5, then times 200 / 10."""
    problem = lorenz_problem()
    lyapunov_spectrum(problem, n_steps=10, k=2, renorm_every=5, t_transient=0.0)
    with count_compiles() as compiles:
        res = lyapunov_spectrum(
            problem, n_steps=200, k=2, renorm_every=10, t_transient=0.0
        )
    assert compiles == [] and res.history.shape == (20, 2)


def test_capacity_buckets_are_powers_of_two():
    assert capacity(1) == capacity(MIN_CAPACITY) == MIN_CAPACITY
    assert capacity(MIN_CAPACITY + 1) == 2 * MIN_CAPACITY
    assert capacity(4096) == 4096 and capacity(4097) == 8192


def test_a_longer_bucket_compiles_once_and_stays_correct():
    problem = lorenz_problem()
    n = MIN_CAPACITY + 1  # blocks: the next bucket
    lyapunov_spectrum(problem, n_steps=n, renorm_every=1)
    with count_compiles() as compiles:
        res = lyapunov_spectrum(problem, n_steps=2 * n, renorm_every=2)
    assert compiles == []
    history, times, stderr, _ = reference(problem, 2 * n, 2)
    # float32 also relative: the reference's QR is another one, and the last
    # column's growth (the smallest) is the least accurate (6e-4 of -21.7 seen)
    np.testing.assert_allclose(res.history, history, rtol=tol(0), atol=tol(1e-12))
    np.testing.assert_allclose(res.times, times, rtol=0, atol=tol(1e-12))
    np.testing.assert_allclose(
        res.stderr, stderr, rtol=tol(1e-12), atol=tol(1e-14, OPS)
    )


def test_the_static_fast_path_compiles_once_per_renorm_every():
    """static_renorm_every=True: renorm_every compiled in, the rest still data."""
    problem = lorenz_problem()
    fast = partial(lyapunov_spectrum, problem, static_renorm_every=True)
    fast(n_steps=100, renorm_every=10)  # compiles
    fast(n_steps=100, renorm_every=10, save_states=True)  # a program of its own
    with count_compiles() as compiles:
        a = fast(n_steps=300, renorm_every=10, t_transient=1.0)
        b = fast(n_steps=50, renorm_every=10, resume=a.checkpoint)
        c = fast(n_steps=40, renorm_every=10, save_states=True, decimate=5)
    assert compiles == []
    assert a.history.shape == (30, 3) and b.history.shape == (5, 3)
    assert c.trajectory.shape == (8, 3)
    with count_compiles() as compiles:
        fast(n_steps=100, renorm_every=5)
    assert compiles, "a new renorm_every should compile a program of its own"


@pytest.mark.parametrize("save_states", [False, True])
def test_the_static_fast_path_gives_the_same_numbers(save_states):
    problem = lorenz_problem()
    kw = dict(n_steps=300, renorm_every=10, t_transient=0.5, save_states=save_states)
    kw["decimate"] = 5 if save_states else 1
    data = lyapunov_spectrum(problem, **kw)
    fast = lyapunov_spectrum(problem, **kw, static_renorm_every=True)
    for a, b in zip(jax.tree.leaves(data), jax.tree.leaves(fast), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    assert (fast.trajectory is None) == (not save_states)


@pytest.mark.slow
def test_the_static_fast_path_steps_a_delay_ring_buffer_alike():
    """Delay steps read the step counter: it must advance the same way."""
    from lyapax.dde import dde_problem

    problem = dde_problem(mackey_glass(), jnp.array([1.1]), tau=17.0, dt=0.5)
    kw = {"k": 2, "renorm_every": 10}
    data = lyapunov_spectrum_dde(problem, 200, **kw)
    fast = lyapunov_spectrum_dde(problem, 200, **kw, static_renorm_every=True)
    np.testing.assert_allclose(fast.history, data.history, rtol=0, atol=1e-12)
    assert int(fast.checkpoint.t) == int(data.checkpoint.t) > 200


@pytest.mark.parametrize("value", [1, "yes", None])
def test_static_renorm_every_must_be_a_bool(value):
    with pytest.raises(TypeError, match="static_renorm_every must be True or False"):
        lyapunov_spectrum(lorenz_problem(), n_steps=10, static_renorm_every=value)


def test_rows_are_host_arrays_and_estimates_device_arrays():
    """The rows are cut to the run's length on the host (NumPy); inside a
    caller's jit every field is traced."""
    res = lyapunov_spectrum(
        lorenz_problem(), n_steps=40, renorm_every=4, save_states=True, decimate=2
    )
    for rows in (res.history, res.times, res.trajectory, res.save_times):
        assert isinstance(rows, np.ndarray)
    for estimate in (res.exponents, res.stderr, res.checkpoint.Y):
        assert isinstance(estimate, jax.Array)
    traced = jax.jit(
        lambda x0: (
            lyapunov_spectrum(
                ODEProblem(lorenz_problem().step_fn, x0, 0.01),
                n_steps=40,
                renorm_every=4,
            ).history
        )
    )(lorenz_problem().state0)
    assert isinstance(traced, jax.Array)
    np.testing.assert_allclose(traced, res.history, rtol=0, atol=1e-12)


def test_fresh_frames_are_memoised_only_where_that_is_exact():
    """Small frames of integer seeds are shared between calls; the key holds
    everything the frame depends on, and large frames are not kept."""
    dtype = jnp.float64 if float64_run() else jnp.float32
    first = fresh_frame(3, d=4, k=2, dtype=dtype)
    assert fresh_frame(np.int64(3), d=4, k=2, dtype=dtype) is first
    for a, b in zip(first, initial_frame(3, d=4, k=2, dtype=dtype), strict=True):
        np.testing.assert_array_equal(a, b)
    other = fresh_frame(4, d=4, k=2, dtype=dtype)
    assert other is not first and not np.allclose(other[0], first[0])
    with jax.default_device(jax.devices()[0]):
        assert fresh_frame(3, d=4, k=2, dtype=dtype) is not first
    assert fresh_frame(jnp.asarray(3), d=4, k=2, dtype=dtype) is not first
    big = MEMO_FRAME_ENTRIES + 1
    assert fresh_frame(0, d=big, k=1, dtype=dtype) is not fresh_frame(
        0, d=big, k=1, dtype=dtype
    )


def test_a_frame_drawn_under_a_trace_is_not_memoised():
    """A run inside a caller's jit, then the same run eagerly: the memo must
    not hand the eager run the traced frame (UnexpectedTracerError)."""

    def exponents(rho):
        problem = ode_problem(lorenz(rho=rho), jnp.ones(3), 0.01)
        return lyapunov_spectrum(problem, 100, seed=11).exponents

    traced = jax.jit(exponents)(28.0)
    np.testing.assert_allclose(exponents(28.0), traced, rtol=0, atol=1e-12)


# ------------------------------------------------------------ same numbers


@pytest.mark.parametrize(
    "n_steps, renorm_every, t_transient",
    [(300, 1, 0.0), (300, 10, 0.0), (300, 10, 1.0), (250, 25, 0.5), (20, 20, 0.0)],
)
def test_equals_the_static_program(n_steps, renorm_every, t_transient):
    problem = lorenz_problem()
    res = lyapunov_spectrum(
        problem, n_steps=n_steps, renorm_every=renorm_every, t_transient=t_transient
    )
    n_tr = round(t_transient / 0.01 / renorm_every) if t_transient else 0
    n_tr = max(1, n_tr) if t_transient else 0
    history, times, stderr, state = reference(problem, n_steps, renorm_every, n_tr)
    # float32 also relative: the reference's QR is another one, and the last
    # column's growth (the smallest) is the least accurate (6e-4 of -21.7 seen)
    np.testing.assert_allclose(res.history, history, rtol=tol(0), atol=tol(1e-12))
    np.testing.assert_allclose(res.exponents, history[-1], rtol=tol(0), atol=tol(1e-12))
    np.testing.assert_allclose(res.times, times, rtol=0, atol=tol(1e-12))
    np.testing.assert_allclose(res.checkpoint.state, state, rtol=0, atol=tol(1e-12))
    assert float(res.checkpoint.elapsed_time) == pytest.approx(
        times[-1], abs=tol(1e-12)
    )
    if n_steps // renorm_every < 2:
        assert np.all(np.isnan(res.stderr)) and np.all(np.isnan(stderr))
    else:
        np.testing.assert_allclose(
            res.stderr, stderr, rtol=tol(1e-12), atol=tol(1e-14, OPS)
        )


def test_resumed_chunks_equal_one_run():
    problem = lorenz_problem()
    whole = lyapunov_spectrum(problem, n_steps=400, renorm_every=10)
    first = lyapunov_spectrum(problem, n_steps=150, renorm_every=10)
    rest = lyapunov_spectrum(
        problem, n_steps=250, renorm_every=10, resume=first.checkpoint
    )
    np.testing.assert_allclose(rest.exponents, whole.exponents, rtol=0, atol=tol(1e-12))
    np.testing.assert_allclose(rest.times, whole.times[15:], rtol=0, atol=tol(1e-12))


def test_saved_states_follow_the_trajectory_after_the_transient():
    problem = lorenz_problem()
    res = lyapunov_spectrum(
        problem,
        n_steps=60,
        renorm_every=6,
        t_transient=0.12,
        save_states=True,
        decimate=2,
    )
    # 12 transient steps, then a state every 2 steps.
    x = problem.state0
    states = []
    for i in range(12 + 60):
        x = problem.step_fn(x)
        if i >= 12 and (i - 11) % 2 == 0:
            states.append(x)
    np.testing.assert_allclose(
        res.trajectory, np.stack(states), rtol=0, atol=tol(1e-12)
    )
    np.testing.assert_allclose(
        res.save_times, 0.02 * np.arange(1, 31), rtol=0, atol=tol(1e-12)
    )


def test_maps_and_delay_equations_reuse_their_program():
    henon = ODEProblem(henon_map(), jnp.array([0.1, 0.1]), 1.0)
    lyapunov_spectrum(henon, n_steps=100, renorm_every=1, t_transient=10.0)
    mg = mackey_glass()
    dde_kwargs = {"k": 2, "renorm_every": 10}
    from lyapax.dde import dde_problem

    problem = dde_problem(mg, jnp.array([1.1]), tau=17.0, dt=0.5)
    first = lyapunov_spectrum_dde(problem, 200, **dde_kwargs)
    with count_compiles() as compiles:
        res = lyapunov_spectrum(henon, n_steps=1000, renorm_every=5, t_transient=1.0)
        more = lyapunov_spectrum_dde(problem, 400, **dde_kwargs)
        resumed = lyapunov_spectrum_dde(
            problem, 100, **dde_kwargs, resume=first.checkpoint
        )
    assert compiles == []
    # det J = -b everywhere: the exponents sum to log(b) (b = 0.3).
    assert float(jnp.sum(res.exponents)) == pytest.approx(np.log(0.3), abs=tol(1e-10))
    assert more.history.shape == (40, 2) and resumed.history.shape == (10, 2)


@pytest.mark.slow
def test_sweeps_reuse_their_program_across_lengths():
    rhos = {"rho": jnp.array([20.0, 28.0])}

    def step(x, p):
        return lorenz_problem(p["rho"]).step_fn(x)

    x0 = jnp.array([1.0, 1.0, 1.0])
    sweep = partial(sweep_lyapunov_spectrum, step, x0, rhos, 0.01)
    sweep(100, renorm_every=10)
    with count_compiles() as compiles:
        res = sweep(300, renorm_every=5, t_transient=0.5)
    # Eager ops of the result assembly would show up here too.
    assert compiles == []
    for row, rho in enumerate((20.0, 28.0)):
        one = lyapunov_spectrum(
            lorenz_problem(rho), n_steps=300, renorm_every=5, t_transient=0.5
        )
        np.testing.assert_allclose(res.history[row], one.history, atol=1e-12)
        np.testing.assert_allclose(res.stderr[row], one.stderr, rtol=1e-12)
        np.testing.assert_allclose(
            res.checkpoint.elapsed_time[row], one.checkpoint.elapsed_time, rtol=0
        )


def test_run_until_converged_compiles_once():
    problem = lorenz_problem()
    kwargs = {"tol": 1e-9, "renorm_every": 10, "max_steps": 700, "min_blocks": 2}
    run_until_converged(problem, chunk_steps=300, **kwargs)
    with count_compiles() as compiles:
        # chunks of 200, 200, 200 and a last one of 100 steps
        run = run_until_converged(problem, chunk_steps=200, **kwargs)
    assert compiles == [] and run.n_steps == 700


def test_inside_jit_the_lengths_stay_python_ints():
    problem = lorenz_problem()

    @jax.jit
    def leading(x0):
        p = ODEProblem(problem.step_fn, x0, 0.01)
        return lyapunov_spectrum(p, n_steps=200, renorm_every=10).exponents

    eager = lyapunov_spectrum(problem, n_steps=200, renorm_every=10).exponents
    np.testing.assert_allclose(leading(problem.state0), eager, rtol=0, atol=1e-12)


# ------------------------------------------------------------ bad lengths


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_steps": 105, "renorm_every": 10}, "n_steps=105 must be a multiple"),
        ({"n_steps": 0}, "n_steps"),
        ({"n_steps": 100, "renorm_every": 0}, "renorm_every"),
        ({"n_steps": 100, "t_transient": -1.0}, "t_transient must be a finite"),
        (
            {"n_steps": 100, "renorm_every": 10, "save_states": True, "decimate": 3},
            "decimate=3 must divide renorm_every=10",
        ),
        ({"n_steps": 100, "qr": "givens"}, "qr must be one of"),
    ],
)
def test_bad_lengths_raise_the_same_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        lyapunov_spectrum(lorenz_problem(), **kwargs)


# ------------------------------------------------------------ QR choice


@pytest.mark.parametrize(
    "qr", ["auto", pytest.param("householder", marks=pytest.mark.slow), "lapack"]
)
def test_qr_choices_agree(qr):
    problem = lorenz_problem()
    base = lyapunov_spectrum(problem, n_steps=500, renorm_every=10, qr="lapack")
    res = lyapunov_spectrum(problem, n_steps=500, renorm_every=10, qr=qr)
    np.testing.assert_allclose(res.history, base.history, rtol=0, atol=tol(1e-10))
    x0 = jnp.array([1.0, 1.0, 1.0])
    sweep = sweep_lyapunov_spectrum(
        lambda x, p: lorenz_problem(p).step_fn(x),
        x0,
        jnp.array([28.0]),
        0.01,
        500,
        renorm_every=10,
        qr=qr,
    )
    np.testing.assert_allclose(sweep.history[0], base.history, rtol=0, atol=tol(1e-10))


@pytest.mark.slow
def test_sweeps_across_processes_finish_on_the_devices(monkeypatch):
    import lyapax.sweep.spectrum as sweep_module

    x0 = jnp.array([1.0, 1.0, 1.0])
    kwargs = {"renorm_every": 5, "save_states": True, "decimate": 5}
    rhos = {"rho": jnp.array([20.0, 28.0])}

    def step(x, p):
        return lorenz_problem(p["rho"]).step_fn(x)

    host = sweep_lyapunov_spectrum(step, x0, rhos, 0.01, 100, **kwargs)
    monkeypatch.setattr(sweep_module, "_addressable", lambda buffers: False)
    device = sweep_lyapunov_spectrum(step, x0, rhos, 0.01, 100, **kwargs)
    for a, b in zip(jax.tree.leaves(host), jax.tree.leaves(device), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
