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

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lyapax import _validate as v
from lyapax._benettin import run_benettin
from lyapax._tree import split_static
from lyapax.diagnostics import (
    ConvergenceDrift,
    convergence_drift,
    kaplan_yorke_dimension,
)
from lyapax.integrators import ode_step

__all__ = [
    "LyapunovCheckpoint",
    "LyapunovResult",
    "ODEProblem",
    "ConvergenceDrift",
    "convergence_drift",
    "kaplan_yorke_dimension",
    "lyapunov_spectrum",
    "ode_problem",
]


class ODEProblem(NamedTuple):
    """A discrete-time problem: ``step_fn`` advances ``state0`` by ``dt``."""

    step_fn: Callable[[Any], Any]
    state0: Any
    dt: Any


def ode_problem(
    rhs: Callable[[Any], Any],
    state0: Any,
    dt: float,
    integrator: str | Callable[..., Any] = "rk4",
) -> ODEProblem:
    """Problem for the autonomous ODE ``dx/dt = rhs(x)`` on a fixed step ``dt``.

    Args:
        rhs: vector field ``(d,) -> (d,)``.
        state0: initial state ``(d,)``.
        dt: time step (model time units).
        integrator: ``"euler"``, ``"heun"``, ``"rk4"``, ``"rk6"`` or a builder
            ``(rhs, dt) -> step``.
    """
    v.positive_dt(dt)
    return ODEProblem(ode_step(rhs, dt, integrator), state0, dt)


class LyapunovCheckpoint(NamedTuple):
    """Everything needed to continue a run exactly (raw, unsorted columns).

    ``state (d,)``, ``Y (d, k)`` orthonormal frame, ``cum_log_growth (k,)``,
    ``elapsed_time`` since the end of the transient, ``dt``.
    """

    state: Any
    Y: Any
    cum_log_growth: Any
    elapsed_time: Any
    dt: Any


class LyapunovResult(NamedTuple):
    """Result of a Lyapunov run.

    ``exponents (k,)`` descending (1/time units); ``history (n_renorm, k)``
    running estimates after each renormalisation, columns ordered like the final
    row; ``times (n_renorm,)`` elapsed time since the transient (offset by the
    checkpoint on resume); ``checkpoint`` to resume; ``trajectory
    (n_steps // decimate, d)`` and ``save_times`` when ``save_states=True``;
    ``stderr (k,)`` standard error of each exponent (same order), NaN when the
    run has fewer than 2 renormalisation blocks.

    ``stderr`` comes from non-overlapping batch means over the renormalisation
    blocks with the square-root rule: the ``n`` blocks form
    ``b = max(2, floor(sqrt(n)))`` consecutive batches of ``n // b`` blocks, so
    batches lengthen (and decorrelate) as the run grows while enough remain to
    estimate a variance; the error is ``sqrt(tau * var(batch rates) / T)`` with
    ``tau`` the batch duration and ``T`` the elapsed time (see
    :mod:`lyapax._stats`). It measures statistical scatter only, not the bias
    of a finite step ``dt``.
    """

    exponents: Any
    history: Any
    times: Any
    checkpoint: LyapunovCheckpoint
    trajectory: Any = None
    save_times: Any = None
    stderr: Any = None


def _is_problem(obj: Any) -> bool:
    return all(hasattr(obj, name) for name in ("step_fn", "state0", "dt"))


def _resolve_call(step_fn_or_problem, state0, dt, n_steps):
    """Normalise both call forms to ``(step_fn, state0, dt, n_steps)``."""
    if _is_problem(step_fn_or_problem):
        problem = step_fn_or_problem
        if state0 is not None:
            if n_steps is not None:
                raise TypeError(
                    "lyapunov_spectrum(problem, ...) got n_steps twice: as the "
                    "second positional argument and as n_steps="
                )
            n_steps = state0
        v.same_dt(dt, problem.dt)
        return problem.step_fn, problem.state0, problem.dt, n_steps
    if not callable(step_fn_or_problem):
        raise TypeError(
            "lyapunov_spectrum expects a problem (with step_fn, state0, dt) or a "
            f"step function; got {type(step_fn_or_problem).__name__}"
        )
    missing = [
        name
        for name, val in (("state0", state0), ("dt", dt), ("n_steps", n_steps))
        if val is None
    ]
    if missing:
        raise TypeError(
            "lyapunov_spectrum(step_fn, ...) requires "
            + ", ".join(missing)
            + " (use dt=1.0 for maps)"
        )
    return step_fn_or_problem, state0, dt, n_steps


def _check_resume(resume: LyapunovCheckpoint, d: int, k: int, dt: Any, t_tr: float):
    if t_tr > 0:
        raise ValueError(
            f"t_transient={t_tr} and resume are mutually exclusive: a resumed run "
            "continues a run whose transient is already over"
        )
    Y = jnp.asarray(resume.Y)
    if Y.ndim != 2 or Y.shape[0] != d:
        raise ValueError(
            f"resume checkpoint has a frame of shape {Y.shape}, but the state has "
            f"dimension d={d}"
        )
    if Y.shape[1] != k:
        raise ValueError(
            f"resume checkpoint tracks k={Y.shape[1]} exponents, but k={k} was "
            "requested; pass the same k (or omit k)"
        )
    if not (v.is_traced(dt) or v.is_traced(resume.dt)):
        if not np.isclose(float(resume.dt), float(dt), rtol=1e-12, atol=0.0):
            raise ValueError(
                f"resume checkpoint was made with dt={float(resume.dt)!r}, but this "
                f"run uses dt={float(dt)!r}; a resumed run must keep its step"
            )


class _RunArgs(NamedTuple):
    """Validated run sizes shared by the ODE and DDE entry points."""

    n_steps: int
    k: int
    renorm_every: int
    decimate: int
    t_transient: float
    n_transient_blocks: int


def _check_run_args(
    *,
    d: int,
    dt: Any,
    n_steps: Any,
    k: Any,
    renorm_every: Any,
    t_transient: Any,
    save_states: bool,
    decimate: Any,
    dtype: Any,
    min_transient_steps: int = 0,
) -> _RunArgs:
    """Range checks of the run arguments (``k`` already defaulted by the caller).

    ``min_transient_steps`` raises the transient to at least that many steps,
    rounded up to whole renormalisation blocks (used by delay equations).
    """
    n_steps = v.as_int("n_steps", n_steps, minimum=1)
    renorm_every = v.as_int("renorm_every", renorm_every, minimum=1)
    if n_steps % renorm_every:
        raise ValueError(
            f"n_steps={n_steps} must be a multiple of renorm_every={renorm_every}"
        )
    k = v.as_int("k", k)
    if not 1 <= k <= d:
        raise ValueError(f"k must satisfy 1 <= k <= d={d}; got k={k}")
    decimate = v.as_int("decimate", decimate, minimum=1)
    if save_states and renorm_every % decimate:
        raise ValueError(
            f"decimate={decimate} must divide renorm_every={renorm_every} "
            "when save_states=True"
        )
    if v.is_traced(t_transient):
        raise TypeError("t_transient must be a concrete number, not a traced value")
    t_transient = float(t_transient)
    if not np.isfinite(t_transient) or t_transient < 0:
        raise ValueError(f"t_transient must be a finite number >= 0; got {t_transient}")
    if dtype == jnp.float32 and not jax.config.jax_enable_x64:
        warnings.warn(
            "state0 is float32 and jax_enable_x64 is off: exponents will carry "
            "single-precision errors; call jax.config.update('jax_enable_x64', True)",
            UserWarning,
            stacklevel=3,
        )

    n_transient_blocks = 0
    if t_transient > 0:
        dt_value = v.concrete_float("dt", dt, why="when t_transient > 0")
        n_transient_blocks = max(1, round(t_transient / dt_value / renorm_every))
    if min_transient_steps > 0:
        n_transient_blocks = max(
            n_transient_blocks, -(-min_transient_steps // renorm_every)
        )
    return _RunArgs(n_steps, k, renorm_every, decimate, t_transient, n_transient_blocks)


def _run_and_assemble(
    step_fn: Any,
    start_state: Any,
    Y0: Any,
    cum0: Any,
    seed: Any,
    dt: Any,
    t0: Any,
    args: _RunArgs,
    *,
    save_states: bool,
    check_finite: bool,
    make_checkpoint: Callable[[Any, Any], Any],
    step0: Any = 0,
    n_state: int | None = None,
) -> LyapunovResult:
    """Run the kernel and build the :class:`LyapunovResult`.

    ``make_checkpoint(carry, elapsed_time)`` builds the checkpoint from the
    kernel's final carry; ``n_state`` keeps only the first ``n_state``
    coordinates of saved states (the present state of a delay equation).
    """
    n_steps, k, renorm_every = args.n_steps, args.k, args.renorm_every
    decimate, n_transient_blocks = args.decimate, args.n_transient_blocks
    dynamic, static = split_static(step_fn)
    out = run_benettin(
        dynamic,
        start_state,
        Y0,
        cum0,
        seed,
        dt,
        t0,
        step0,
        static=static,
        k=k,
        n_blocks=n_steps // renorm_every,
        n_transient_blocks=n_transient_blocks,
        renorm_every=renorm_every,
        decimate=decimate,
        save_states=bool(save_states),
    )
    carry = out["carry"]
    checkpoint = make_checkpoint(carry, out["elapsed"])
    trajectory = save_times = None
    if save_states:
        trajectory = out["saved"]
        if n_state is not None:
            trajectory = trajectory[:, :n_state]
        save_times = out["save_times"]
    exponents = out["exponents"]
    if check_finite and not v.is_traced(exponents):
        bad = ~np.isfinite(np.asarray(exponents))
        if bad.any():
            raise FloatingPointError(
                f"non-finite Lyapunov estimates at positions "
                f"{np.flatnonzero(bad).tolist()}: the trajectory or tangent frame "
                "overflowed; reduce dt or renorm_every, or check the model"
            )
    return LyapunovResult(
        exponents,
        out["history"],
        out["times"],
        checkpoint,
        trajectory,
        save_times,
        out["stderr"],
    )


def lyapunov_spectrum(
    step_fn_or_problem: Any,
    state0: Any = None,
    dt: Any = None,
    n_steps: int | None = None,
    k: int | None = None,
    renorm_every: int = 1,
    t_transient: float = 0.0,
    seed: int = 0,
    check_finite: bool = False,
    resume: LyapunovCheckpoint | None = None,
    save_states: bool = False,
    decimate: int = 1,
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
        check_finite: raise ``FloatingPointError`` on non-finite estimates.
        resume: a :class:`LyapunovCheckpoint` to continue exactly.
        save_states: also return the trajectory every ``decimate`` steps.
        decimate: must divide ``renorm_every``.

    Returns:
        :class:`LyapunovResult`.

    Raises:
        TypeError / ValueError: missing or out-of-range arguments, naming each.
        FloatingPointError: with ``check_finite=True`` and a non-finite estimate.

    Method: Benettin et al. (1980): the frame is propagated with ``jax.jvp``
    batched by ``jax.vmap`` and the exponents are the time averages of
    ``log|diag R|`` of its QR factors.
    """
    if _is_problem(step_fn_or_problem) and hasattr(step_fn_or_problem, "buf0"):
        # A delay problem: its phase space includes the history ring buffer.
        from lyapax.dde import lyapunov_spectrum_dde  # lazy: lyapax.dde imports core

        return lyapunov_spectrum_dde(
            step_fn_or_problem,
            state0,
            dt,
            n_steps,
            k,
            renorm_every,
            t_transient,
            seed,
            check_finite,
            resume,
            save_states,
            decimate,
        )
    step_fn, state0, dt, n_steps = _resolve_call(
        step_fn_or_problem, state0, dt, n_steps
    )
    state0 = v.as_state("state0", state0)
    dt = v.positive_dt(dt)
    d = state0.shape[0]
    if resume is not None and k is None:
        k = int(jnp.shape(resume.Y)[1])
    args = _check_run_args(
        d=d,
        dt=dt,
        n_steps=n_steps,
        k=d if k is None else k,
        renorm_every=renorm_every,
        t_transient=t_transient,
        save_states=save_states,
        decimate=decimate,
        dtype=state0.dtype,
    )
    k, t_transient = args.k, args.t_transient

    if resume is not None:
        _check_resume(resume, d, k, dt, t_transient)
        Y0 = jnp.asarray(resume.Y, dtype=state0.dtype)
        cum0 = jnp.asarray(resume.cum_log_growth, dtype=state0.dtype)
        t0 = resume.elapsed_time
        start_state = jnp.asarray(resume.state, dtype=state0.dtype)
        if start_state.shape != (d,):
            raise ValueError(
                f"resume checkpoint state has shape {start_state.shape}; "
                f"expected ({d},)"
            )
    else:
        Y0 = cum0 = None
        t0 = 0.0
        start_state = state0

    return _run_and_assemble(
        step_fn,
        start_state,
        Y0,
        cum0,
        seed,
        dt,
        t0,
        args,
        save_states=save_states,
        check_finite=check_finite,
        make_checkpoint=lambda carry, t_end: LyapunovCheckpoint(
            carry.state, carry.Y, carry.cum, t_end, dt
        ),
    )
