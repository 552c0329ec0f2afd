"""Lyapunov spectra by the Benettin/QR method (the public engine).

``lyapunov_spectrum`` accepts either a problem (anything with ``step_fn``,
``state0`` and ``dt``, e.g. :class:`ODEProblem`) or a plain step function
``state (d,) -> state (d,)`` with ``state0``, ``dt`` and ``n_steps``.

The compiled program is cached by the *structure* of the step function (its
Python functions, integrator, shapes and the static arguments); numbers carried
as pytree leaves (parameters of :mod:`lyapax.systems`, ``dt``, the state) are
runtime inputs, so rebuilding a problem with new numbers does not recompile.
"""

from __future__ import annotations

from collections.abc import Callable

from jaxtyping import Array, Float

from lyapax._engine import run, validate
from lyapax._engine.abstract import (
    AbstractProblem,
    AbstractStep,
    EngineView,
    IncompatibleStepError,
)
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.problem import (
    LyapunovCheckpoint,
    ODEProblem,
    resolve_step_call,
)
from lyapax._engine.progress import TextSink
from lyapax._engine.run import LyapunovResult, RunOptions
from lyapax._engine.shapes import Scalar, StateLike, StepFn
from lyapax.diagnostics import (
    ConvergenceDrift,
    convergence_drift,
    kaplan_yorke_dimension,
)
from lyapax.integrators import ode_step, timed_ode_step

__all__ = [
    "AbstractProblem",
    "AbstractStep",
    "EngineView",
    "IncompatibleStepError",
    "LyapunovCheckpoint",
    "LyapunovResult",
    "ODEProblem",
    "ConvergenceDrift",
    "convergence_drift",
    "kaplan_yorke_dimension",
    "lyapunov_spectrum",
    "ode_problem",
]


def ode_problem(
    rhs: Callable[[Float[Array, " d"]], Float[Array, " d"]],
    state0: StateLike,
    dt: float,
    integrator: str | Callable[..., StepFn] = "rk4",
    t0: float = 0.0,
    time_dependent: bool = False,
    backward: bool = False,
) -> ODEProblem:
    """AbstractProblem for the ODE ``dx/dt = rhs(x)`` (or ``rhs(t, x)``) on a
    fixed step.

    Args:
        rhs: vector field ``(d,) -> (d,)``; ``rhs(t, x)`` with
            ``time_dependent=True``.
        state0: initial state ``(d,)`` at time ``t0``.
        dt: time step (model time units); ``dt < 0`` integrates backward in
            time (as ``backward=True`` with ``|dt|``).
        integrator: ``"euler"``, ``"heun"``, ``"rk4"``, ``"rk6"`` or a builder
            ``(rhs, dt) -> step`` (names only when ``time_dependent``).
        t0: start time of a time-dependent field; every stage is evaluated at
            its own time and the time is part of the checkpoint.
        time_dependent: ``rhs`` takes ``(t, x)``.
        backward: integrate backward in time, steps of ``-|dt|``. The
            exponents are those of the time-reversed flow; ``problem.dt`` is
            ``|dt|`` (time per step, as the averages need).

    Raises:
        ValueError: ``dt`` zero or not finite; a builder with ``time_dependent``.
        TypeError: ``time_dependent`` or ``backward`` not a bool.
    """
    for name, flag in (("time_dependent", time_dependent), ("backward", backward)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False; got {flag!r}")
    if validate.is_traced(dt) or not (backward or time_dependent or float(dt) < 0):
        validate.positive_dt(dt)
        return ODEProblem(ode_step(rhs, dt, integrator), state0, dt)
    # --- time-dependent or backward ---
    step_size = abs(float(dt))
    validate.positive_dt(step_size if dt != 0 else dt)
    signed = -step_size if (backward or float(dt) < 0) else step_size
    if time_dependent:
        step = timed_ode_step(rhs, signed, validate.float_leaf(t0), integrator)
    else:
        step = ode_step(rhs, signed, integrator)
    return ODEProblem(step, state0, step_size)


@holds_one_blas_thread
def lyapunov_spectrum(
    step_fn_or_problem: AbstractProblem | StepFn,
    state0: StateLike | int | None = None,
    dt: Scalar | None = None,
    n_steps: int | None = None,
    k: int | None = None,
    renorm_every: int = 1,
    t_transient: float = 0.0,
    seed: int = 0,
    check_finite: bool = False,
    resume: LyapunovCheckpoint | None = None,
    save_states: bool = False,
    decimate: int = 1,
    qr: str = "auto",
    static_renorm_every: bool = False,
    *,
    progress: bool | TextSink = False,
    precision: str | None = None,
) -> LyapunovResult:
    """Leading ``k`` Lyapunov exponents of a map or a discretised flow.

    Args:
        step_fn_or_problem: a problem with ``step_fn, state0, dt`` (then a second
            positional argument is ``n_steps``), or ``step_fn(state (d,)) -> (d,)``.
        state0: initial state ``(d,)`` (plain form).
        dt: time per step (1.0 for maps); must equal ``problem.dt`` if both given.
        n_steps: measured steps, a positive multiple of ``renorm_every``.
        k: number of exponents, ``1 <= k <= d`` (default ``d``).
        renorm_every: steps between QR re-orthonormalisations (>= 1).
        t_transient: model time run first (tangents and QR included, growth
            discarded): ``renorm_every * max(1, round(t/dt/renorm_every))`` steps.
        seed: ``PRNGKey`` seed of the random initial frame.
        check_finite: raise ``FloatingPointError`` on non-finite estimates
            (by default a run that becomes non-finite warns instead, and
            ``result.nonfinite`` says when).
        resume: a :class:`LyapunovCheckpoint` to continue exactly.
        save_states: also return the trajectory every ``decimate`` steps.
        decimate: must divide ``renorm_every``.
        qr: re-orthonormalisation: ``"lapack"`` (``jnp.linalg.qr``),
            ``"householder"`` (reflections in fused ``jax.numpy`` ops, one
            column per loop iteration) or ``"auto"``: LAPACK for a single run (on CPU
            with OpenBLAS held to one thread while the run's programs
            execute: its threads would compete with XLA's), the fused
            Householder QR of small frames (``k <= 8``, ``d <= 256``) in
            sweeps, the rule measured fastest on CPU. Results agree to
            rounding.
        static_renorm_every: compile ``renorm_every`` into the program (the
            static fast path). By default every run length is data and one
            program serves any ``n_steps``, ``renorm_every``, ``t_transient``
            and ``decimate``. With True, the loop over a block's steps has a
            known trip count, which XLA runs without testing a loop condition
            at every step: ~25 ns less per step on CPU, worth 3-9% for a
            3-variable ODE such as Lorenz and nothing measurable from d ~ 20
            up; each new ``renorm_every`` then compiles a program of its own.
        progress: True for a progress bar (tqdm) on stderr, or a text file to
            draw it in; updated from the device loop 16 times a run (the first
            call with a bar compiles a program of its own). Silent by default;
            ignored, with a warning, under ``jax.jit``/``vmap``/``grad``.
        precision: None (the state's dtype), ``"float64"``, ``"float32"``
            (the state and the problem's floating parameters cast to that
            dtype), or ``"mixed"``: state and tangents in float32, the sums of
            ``log|diag R|`` in float64 where x64 is on (float32 otherwise), for
            float64-grade averages at float32 speed on hardware without fast
            float64. ``"float64"`` with x64 off runs in float32 and warns.

    Returns:
        :class:`LyapunovResult`.

    Raises:
        TypeError / ValueError: missing or out-of-range arguments, naming each.
        FloatingPointError: with ``check_finite=True`` and a non-finite estimate.

    Warns:
        UserWarning: the run became non-finite (the measured steps and time,
        to one renormalisation block), unless ``check_finite=True``.

    Method: Benettin et al. (1980): the frame is propagated with ``jax.jvp``
    batched by ``jax.vmap`` and the exponents are the time averages of
    ``log|diag R|`` of its QR factors.
    """
    problem, n_steps = resolve_step_call(
        "lyapunov_spectrum", step_fn_or_problem, state0, dt, n_steps
    )
    options = RunOptions.of(
        k=k,
        renorm_every=renorm_every,
        t_transient=t_transient,
        seed=seed,
        check_finite=check_finite,
        resume=resume,
        save_states=save_states,
        decimate=decimate,
        qr=qr,
        static_renorm_every=static_renorm_every,
        progress=progress,
    )
    return run.spectrum(problem, n_steps, options, precision=precision)
