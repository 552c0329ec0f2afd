"""The problem protocol: how a kind of problem presents itself to the engine.

The Benettin kernel iterates a map of a flat phase point ``z (d,)``. Every kind
of problem (an ODE or map, a network, a delay equation) says how it becomes
such a map through one method, :meth:`Problem.for_engine`, which returns an
:class:`EngineView`: the flat step, the start point, how many leading
coordinates are the present state, the transient a fresh run must pass, and
how a checkpoint is written and read back. ``lyapunov_spectrum``, the sweeps
and ``run_until_converged`` only call this interface; they know no subclass.

Besides ``for_engine`` a problem answers two questions sweeps ask:
``with_params(row)`` (the problem with one row of swept parameters) and
``with_state(x0)`` (the problem started from another initial state); each
raises ``ValueError`` saying why when its kind cannot do it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import jax.numpy as jnp

from lyapax._engine import validate
from lyapax._engine.shapes import Scalar, StateLike, StepFn

if TYPE_CHECKING:  # shape annotations only: jaxtyping costs ~0.1 s to import
    from jaxtyping import Array, Float, Int


class EngineView(NamedTuple):
    """A problem as the engine sees it.

    Attributes:
        step: ``z (d,) -> (d,)``, or ``(z, step_index) -> (d,)`` when it
            declares ``uses_step_index = True``; a pytree whose numbers are
            leaves (see :mod:`lyapax._engine.tree`).
        z0: start point ``(d,)`` of a fresh run.
        dt: model time per step.
        n_state: the leading ``n_state`` coordinates of ``z`` are the present
            state (saved trajectories keep these; the default ``k``).
        min_transient_steps: steps a fresh run passes before averaging.
        checkpoint: ``checkpoint(state, Y, cum, step, elapsed_time, dt)``
            builds the problem's checkpoint from the kernel's final carry
            (traceable: sweeps call it inside their compiled program).
        resume_point: ``resume_point(checkpoint) -> (z (d,), step_index)``;
            raises ``ValueError`` for a checkpoint of another problem.
        checkpoint_type: the checkpoint class a resumed run must receive, or
            None to accept anything with the checkpoint's fields.
    """

    step: StepFn
    z0: Float[Array, " d"]
    dt: Scalar
    n_state: int
    min_transient_steps: int
    checkpoint: Callable[..., Any]
    resume_point: Callable[[Any], tuple[Float[Array, " d"], Any]]
    checkpoint_type: type | None = None


class Problem(Protocol):
    """What the engine asks of a problem (see the module docstring)."""

    def for_engine(self) -> EngineView: ...

    def with_params(self, params: Any) -> Problem: ...

    def with_state(self, state0: Any) -> Problem: ...


class LyapunovCheckpoint(NamedTuple):
    """Everything needed to continue a run exactly (raw, unsorted columns).

    ``state (d,)``, ``Y (d, k)`` orthonormal frame, ``cum_log_growth (k,)``,
    ``elapsed_time`` since the end of the transient, ``dt``; ``step``: the
    step counter of a time-dependent ODE (its model time is ``t0 + step *
    dt``), None otherwise.
    """

    state: Float[Array, "*batch d"]
    Y: Float[Array, "*batch d k"]
    cum_log_growth: Float[Array, "*batch k"]
    elapsed_time: Float[Array, " *batch"]
    dt: Any
    step: Any = None


def _ode_checkpoint(state, Y, cum, _step, elapsed_time, dt) -> LyapunovCheckpoint:
    return LyapunovCheckpoint(state, Y, cum, elapsed_time, dt)


def _timed_checkpoint(state, Y, cum, step, elapsed_time, dt) -> LyapunovCheckpoint:
    # The time of a time-dependent right-hand side is the step counter's.
    return LyapunovCheckpoint(state, Y, cum, elapsed_time, dt, step)


class ODEProblem(NamedTuple):
    """A discrete-time problem: ``step_fn`` advances ``state0`` by ``dt``."""

    step_fn: StepFn
    state0: StateLike
    dt: Scalar

    def for_engine(self) -> EngineView:
        """The step itself on the state ``(d,)``; no minimum transient."""
        state0 = validate.as_state("state0", self.state0)
        dt = validate.positive_dt(self.dt)

        def resume_point(resume: Any) -> tuple[Float[Array, " d"], Int[Array, ""]]:
            state = jnp.asarray(resume.state, dtype=state0.dtype)
            if state.shape != state0.shape:
                raise ValueError(
                    f"resume checkpoint state has shape {state.shape}; "
                    f"expected {state0.shape}"
                )
            step = getattr(resume, "step", None) if timed else None
            return state, 0 if step is None else jnp.asarray(step, jnp.int32)

        n = int(state0.shape[0])
        timed = getattr(self.step_fn, "uses_step_index", False)
        checkpoint = _timed_checkpoint if timed else _ode_checkpoint
        return EngineView(self.step_fn, state0, dt, n, 0, checkpoint, resume_point)

    def with_params(self, params: Any) -> ODEProblem:
        raise ValueError(
            "params_batch was given with a problem whose parameters live inside "
            "its step_fn; pass problem_family(lambda p: make_problem(p)) or a "
            "step_fn(state, params) to sweep parameters"
        )

    def with_state(self, state0: Any) -> ODEProblem:
        if jnp.shape(state0) != jnp.shape(self.state0):
            raise ValueError(
                f"state0_batch rows have shape {jnp.shape(state0)}, but the "
                f"problem's state0 has shape {jnp.shape(self.state0)}"
            )
        return self._replace(state0=state0)


def _speaks_protocol(obj: Any) -> bool:
    # Not isinstance(obj, Problem): a runtime Protocol check costs ~20 us, paid
    # on every call of lyapunov_spectrum.
    return hasattr(obj, "for_engine")


def is_problem(obj: Any) -> bool:
    """A problem object: one of ours, or anything with ``step_fn``, ``state0``
    and ``dt`` (which is run as an :class:`ODEProblem`)."""
    return _speaks_protocol(obj) or all(
        hasattr(obj, name) for name in ("step_fn", "state0", "dt")
    )


def as_problem(obj: Any) -> Problem:
    """``obj`` as a :class:`Problem` (a duck-typed one becomes an ODEProblem).

    Raises:
        TypeError: ``obj`` is not a problem.
    """
    if _speaks_protocol(obj):
        return obj
    if is_problem(obj):
        return ODEProblem(obj.step_fn, obj.state0, obj.dt)
    raise TypeError(
        f"expected a problem (with step_fn, state0 and dt); got {type(obj).__name__}"
    )


def resolve_call(
    caller: str,
    obj: Any,
    n_steps: Any,
    second: Any,
    dt: Any,
    plain: Callable[[], Problem],
    required: tuple[tuple[str, Any], ...],
    hint: str = "",
) -> tuple[Problem, Any]:
    """Both call forms of an entry point as ``(problem, n_steps)``.

    Problem form ``caller(problem, n_steps, ...)``: the second positional
    argument ``second`` is ``n_steps``, and a ``dt`` given beside the problem
    must equal its own. Plain form ``caller(step_fn, ...)``: every argument in
    ``required`` (``(name, value)`` pairs) must be given, then ``plain()``
    builds the problem.

    Raises:
        TypeError: ``n_steps`` given twice, a missing argument of the plain
            form, or ``obj`` neither a problem nor callable.
    """
    if is_problem(obj):
        problem = as_problem(obj)
        if second is not None:
            if n_steps is not None:
                raise TypeError(
                    f"{caller}(problem, ...) got n_steps twice: as the second "
                    "positional argument and as n_steps="
                )
            n_steps = second
        validate.same_dt(dt, problem.dt)
        return problem, n_steps
    if not callable(obj):
        raise TypeError(
            f"{caller} expects a problem (with step_fn, state0, dt) or a step "
            f"function; got {type(obj).__name__}"
        )
    missing = [name for name, value in required if value is None]
    if missing:
        raise TypeError(f"{caller}(step_fn, ...) requires " + ", ".join(missing) + hint)
    return plain(), n_steps
