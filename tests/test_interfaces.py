"""Declared interfaces: the built-ins derive from them, and a new step,
problem or coupling plugs in by subclassing them (docs/architecture.md)."""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import tol

from lyapax import (
    DDEProblem,
    Network,
    ODEProblem,
    covariant_vectors,
    dde_problem,
    lyapunov_spectrum,
    network_problem,
    ode_problem,
    sweep_lyapunov_spectrum,
)
from lyapax._engine.abstract import EngineView, as_step
from lyapax._engine.precision import float_cos, float_sin
from lyapax._engine.run import RunOptions
from lyapax.core import AbstractProblem, AbstractStep, IncompatibleStepError
from lyapax.coupling import (
    AbstractCoupling,
    AbstractSummedCoupling,
    KuramotoCoupling,
    LinearCoupling,
    SigmoidalCoupling,
    kuramoto_coupling,
)
from lyapax.dde import as_edge_coupling, network_dde_problem
from lyapax.integrators import IncompatibleIntegratorError, ODEStep, rk4_step
from lyapax.systems import kuramoto_network, lorenz, lorenz96

X0 = jnp.array([1.0, 1.0, 1.0])


def test_the_built_ins_derive_from_the_declared_bases():
    problem = kuramoto_network(6)
    assert isinstance(problem, AbstractProblem)
    assert isinstance(problem.step_fn, AbstractStep)
    assert isinstance(ode_problem(lorenz(), X0, 0.01), AbstractProblem)
    assert isinstance(rk4_step(lorenz(), 0.01), ODEStep | AbstractStep)
    dde = dde_problem(lambda x, y: -y, 1.0, tau=1.0, dt=0.1)
    assert isinstance(dde, DDEProblem) and isinstance(dde, AbstractProblem)
    assert isinstance(dde.for_engine().step, AbstractStep)
    assert dde.for_engine().step.uses_step_index
    for cls in (LinearCoupling, SigmoidalCoupling, KuramotoCoupling):
        assert issubclass(cls, AbstractSummedCoupling)
    assert as_edge_coupling(kuramoto_coupling()).summable
    assert not as_edge_coupling(lambda x, w, p: w @ x.T).summable


class _Scale(AbstractStep):
    """``z -> a z`` (``a`` elementwise) with a tangent of its own that is
    twice the JVP: if the engine runs it, every exponent grows by log 2."""

    uses_step_index: ClassVar[bool] = False
    a: Any

    def __call__(self, z):
        return self.a * z

    def tangent(self, z, Y, step):
        return self.a * z, (2.0 * self.a)[:, None] * Y  # deliberately not the JVP


def test_a_steps_own_tangent_is_what_the_engine_runs():
    a = jnp.array([0.5, 0.25])
    own = lyapunov_spectrum(_Scale(a), jnp.ones(2), 1.0, 50)
    plain = lyapunov_spectrum(lambda z: a * z, jnp.ones(2), 1.0, 50)
    # Same frames (same seed), every R factor twice as large: exactly log 2 more.
    np.testing.assert_allclose(
        own.exponents, plain.exponents + np.log(2.0), rtol=0, atol=tol(1e-12)
    )
    np.testing.assert_allclose(own.checkpoint.Y, plain.checkpoint.Y, atol=tol(1e-12))


class _Rotation(NamedTuple):
    """A new kind of problem: a rotation by ``angle`` scaled by ``r``."""

    angle: Any
    r: Any
    dt: Any = 1.0

    def for_engine(self) -> EngineView:
        # The library's: a TPU's emulated float64 cos of a scalar is
        # float32-accurate (docs/method.md, "Precision"), and |c + i s| != 1
        # moved the exponents by 1.4e-8 there (jnp.cos elsewhere).
        c, s = float_cos(self.angle), float_sin(self.angle)
        M = self.r * jnp.array([[c, -s], [s, c]])
        step = as_step(lambda z: M @ z)
        z0 = jnp.array([1.0, 0.0])

        def checkpoint(state, Y, cum, step, elapsed, dt):
            return (state, Y, cum, elapsed, dt)

        return EngineView(step, z0, self.dt, 2, 0, checkpoint, lambda ck: (ck[0], 0))

    def with_params(self, params: Any) -> _Rotation:
        return self._replace(r=params)

    def with_state(self, state0: Any) -> _Rotation:
        raise ValueError("a rotation starts at (1, 0)")


AbstractProblem.register(_Rotation)


def test_a_registered_problem_runs_through_every_entry_point():
    problem = _Rotation(0.3, 0.9)
    res = lyapunov_spectrum(problem, 40)
    np.testing.assert_allclose(res.exponents, [np.log(0.9)] * 2, atol=tol(1e-12))
    rows = sweep_lyapunov_spectrum(problem, None, jnp.array([0.5, 2.0]), None, 40)
    np.testing.assert_allclose(
        rows.exponents, np.log([[0.5, 0.5], [2.0, 2.0]]), atol=tol(1e-12)
    )


class _Diffusive(AbstractSummedCoupling):
    """``G sum_j w_ij (x_j - x_i)`` as ``combine(W x, x)``: declared summable."""

    G: Any = 0.8

    def __call__(self, x, weights, params):
        return self.combine((weights @ x.T).T, x, weights, params)

    def sources(self, x):
        return x

    def combine(self, sums, current, weights, params):
        return self.G * (sums - jnp.sum(weights, axis=1) * current)


@pytest.mark.slow
def test_a_declared_summed_coupling_takes_the_fast_delayed_path():
    n, dt = 12, 0.01
    rng = np.random.default_rng(3)
    W = jnp.asarray(rng.uniform(0.0, 1.0, (n, n)) * (1 - np.eye(n)))
    tau = rng.integers(1, 6, (n, n)) * dt
    x0 = jnp.asarray(rng.normal(size=n))

    def problem(coupling):
        return network_dde_problem(
            lambda x, c, p: -x + c, Network(W, (0,)), coupling, {}, x0, dt, tau=tau
        )

    declared = problem(_Diffusive())
    assert declared.step_fn.ring.presummed
    # The same coupling as a plain function: evaluated per target, no fast path.
    plain = problem(lambda x, w, p: _Diffusive()(x, w, p))
    assert not plain.step_fn.ring.presummed
    run = dict(n_steps=40, k=3, renorm_every=10)
    np.testing.assert_allclose(
        lyapunov_spectrum(declared, **run).exponents,
        lyapunov_spectrum(plain, **run).exponents,
        rtol=0,
        atol=1e-10,
    )
    assert isinstance(_Diffusive(), AbstractCoupling)


def test_a_step_returning_another_shape_is_a_named_error():
    with pytest.raises(IncompatibleStepError, match="same shape and dtype"):
        lyapunov_spectrum(lambda z: z[:2], X0, 1.0, 10)
    with pytest.raises(TypeError, match="step_fn must be callable"):
        lyapunov_spectrum(ODEProblem(3.0, X0, 0.1), 10)


def test_an_adaptive_integrator_is_refused_by_fixed_stage_builders():
    pytest.importorskip("diffrax")
    from lyapax.adaptive import diffrax_adaptive_step

    adaptive = diffrax_adaptive_step()
    assert isinstance(adaptive(lorenz(), 0.01), AbstractStep)
    with pytest.raises(IncompatibleIntegratorError, match="not for network_problem"):
        network_problem(
            lambda x, c, p: -x + c,
            Network(jnp.zeros((2, 2)), (0,)),
            lambda x, w, p: w @ x.T,
            {},
            jnp.ones(2),
            0.1,
            integrator=adaptive,
        )
    with pytest.raises(TypeError, match="must be a name"):
        dde_problem(lambda x, y: -y, 1.0, tau=1.0, dt=0.1, integrator=rk4_step)


def test_run_options_are_checked_once_with_named_errors():
    opts = RunOptions.of(renorm_every=10, decimate=5, save_states=True)
    assert (opts.renorm.every, opts.saving.decimate, opts.saving.states) == (10, 5, 1)
    assert opts.renorm.method(batched=False) == "lapack"
    assert opts.renorm.method(batched=True) == "small_unrolled"
    # Tall frames too: LAPACK, run with one OpenBLAS thread on CPU.
    assert opts.renorm.method(batched=False, d=1000, k=10) == "lapack"
    assert opts.renorm.method(batched=False, d=2048, k=5) == "lapack"
    assert opts.renorm.method(batched=False, d=40, k=40) == "lapack"
    assert opts.renorm.method(batched=False, d=10_000, k=17) == "lapack"
    # A single run's tiny frame (Lorenz) gets the fused QR: LAPACK's call
    # would cost more than the factorisation.
    assert opts.renorm.method(batched=False, d=3, k=3) == "small"
    assert opts.renorm.method(batched=False, d=16, k=5) == "small"
    assert opts.renorm.method(batched=False, d=17, k=5) == "lapack"
    assert opts.renorm.method(batched=True, d=1000, k=10) == "small_unrolled"
    explicit = RunOptions.of(qr="lapack").renorm
    assert explicit.method(batched=False, d=1000, k=10) == "lapack"
    with pytest.raises(ValueError, match="qr must be one of"):
        RunOptions.of(qr="givens")
    with pytest.raises(TypeError, match="static_renorm_every must be True or False"):
        RunOptions.of(static_renorm_every="yes")
    with pytest.raises(ValueError, match="renorm_every must be >= 1"):
        RunOptions.of(renorm_every=0)
    # Built by keyword: a misspelt name is an error, not a default.
    with pytest.raises(TypeError, match="renorm_evry"):
        RunOptions.of(renorm_evry=10)
    # Built directly, the fields are checked too (equinox's __check_init__).
    with pytest.raises(ValueError, match="qr must be one of"):
        RunOptions(renorm=opts.renorm._replace(qr="givens"))
    with pytest.raises(ValueError, match="decimate must be >= 1"):
        RunOptions(saving=opts.saving._replace(decimate=0))


def test_a_jitted_call_traces_through_the_declared_step():
    problem = ode_problem(lorenz(), X0, 0.01)

    @jax.jit
    def leading(x0):
        return lyapunov_spectrum(problem._replace(state0=x0), 200, k=1).exponents[0]

    eager = lyapunov_spectrum(problem, 200, k=1).exponents[0]
    np.testing.assert_allclose(leading(X0), eager, rtol=tol(1e-10))


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_a_vmapped_call_over_numbers_inside_the_step():
    """The declared step wraps a step whose numbers are traced (a caller's
    vmap): nothing may hash it (examples/13_vmap_sweep.py does this)."""

    def leading(r):
        step = jax.tree_util.Partial(lambda r, x: r * x * (1.0 - x), r)
        return lyapunov_spectrum(step, jnp.array([0.3]), 1.0, 200).exponents[0]

    rs = jnp.array([3.7, 3.9])
    batched = jax.vmap(leading)(rs)
    np.testing.assert_allclose(batched, [leading(r) for r in rs], rtol=1e-9)


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_tall_frame_householder_qr_agrees_with_lapack():
    # A tall frame (d (k - 1) = 8192): the Householder QR gives the same
    # numbers to rounding as LAPACK's ("auto"), and the same CLVs.
    problem = ode_problem(lorenz96(), 8.0 + 0.01 * jnp.sin(jnp.arange(2048.0)), 0.01)
    auto = lyapunov_spectrum(problem, 20, k=5, t_transient=0.05, qr="householder")
    lapack = lyapunov_spectrum(problem, 20, k=5, t_transient=0.05)
    np.testing.assert_allclose(auto.exponents, lapack.exponents, rtol=0, atol=1e-10)
    np.testing.assert_allclose(auto.history, lapack.history, rtol=0, atol=1e-10)
    clv_auto = covariant_vectors(problem, 20, k=5, t_backward=0.05, qr="householder")
    clv_lapack = covariant_vectors(problem, 20, k=5, t_backward=0.05)
    np.testing.assert_allclose(clv_auto.vectors, clv_lapack.vectors, atol=1e-10)
    np.testing.assert_allclose(
        clv_auto.exponents, clv_lapack.exponents, rtol=0, atol=1e-10
    )


@pytest.mark.cpu_backend_only("the OpenBLAS policy holds where JAX computes on the CPU")
def test_runs_hold_openblas_to_one_thread_and_restore_it():
    # The engine's single runs on CPU set every loaded OpenBLAS to one thread
    # while their programs execute (its threads compete with XLA's), and put
    # the previous count back after; nested uses restore once, at the end.
    from lyapax._engine import blas_threads

    problem = ode_problem(lorenz(), X0, 0.01)
    lyapunov_spectrum(problem, 20, k=2)  # LAPACK is loaded by now
    controls = blas_threads.blas_thread_controls()
    if not controls:
        pytest.skip("no OpenBLAS loaded in this process (not Linux, or MKL)")
    seen = []
    before = [get() for _, get in controls]
    with blas_threads.one_blas_thread():
        with blas_threads.one_blas_thread():
            seen.append([get() for _, get in controls])
        seen.append([get() for _, get in controls])
    assert seen == [[1] * len(controls)] * 2
    assert [get() for _, get in controls] == before
    with blas_threads.one_blas_thread(False):
        assert [get() for _, get in controls] == before
    # Inside a run: the step reads the count when the program is traced.
    counts = []

    def step(x):
        counts.append([get() for _, get in controls])
        return 0.5 * x

    lyapunov_spectrum(step, jnp.ones(3), 1.0, 10)
    assert counts and counts[-1] == [1] * len(controls)
    assert [get() for _, get in controls] == before
    assert not blas_threads.on_cpu(1.0)
    assert blas_threads.on_cpu(jnp.ones(2)) == (jax.default_backend() == "cpu")
