"""The problem interface: how a kind of problem presents itself to the engine.

The Benettin kernel iterates a map of a flat phase point ``z (d,)``. Every kind
of problem (an ODE or map, a network, a delay equation) is an
:class:`~lyapax._engine.abstract.AbstractProblem` and says how it becomes such
a map through one method, ``for_engine()``, which returns an
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
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import jax.numpy as jnp
import numpy as np

from lyapax._engine import _legacy, validate
from lyapax._engine.abstract import AbstractProblem, EngineView, as_step
from lyapax._engine.shapes import Scalar, StateLike, StepFn

if TYPE_CHECKING:  # shape annotations only: jaxtyping costs ~0.1 s to import
    from jaxtyping import Array, Float


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


class _ODEProblemFields(NamedTuple):
    """The fields of :class:`ODEProblem` (its published ``NamedTuple`` form)."""

    step_fn: StepFn
    state0: StateLike
    dt: Scalar


class ODEProblem(_ODEProblemFields, AbstractProblem):
    """A discrete-time problem: ``step_fn`` advances ``state0`` by ``dt``."""

    __slots__ = ()

    def for_engine(self) -> EngineView:
        """The step itself on the state ``(d,)``; no minimum transient."""
        state0 = validate.as_state("state0", self.state0)
        dt = validate.positive_dt(self.dt)

        def resume_point(resume: Any) -> tuple[Float[Array, " d"], Any]:
            state = jnp.asarray(resume.state, dtype=state0.dtype)
            if state.shape != state0.shape:
                raise ValueError(
                    f"resume checkpoint state has shape {state.shape}; "
                    f"expected {state0.shape}"
                )
            step = (
                resume.step
                if timed and isinstance(resume, LyapunovCheckpoint)
                else None
            )
            return state, 0 if step is None else jnp.asarray(step, jnp.int32)

        n = int(state0.shape[0])
        step = as_step(self.step_fn)
        # A step that reads the step counter (a time-dependent field) keeps it
        # in the checkpoint, so a resumed run continues at the right time.
        timed = step.uses_step_index
        checkpoint = _timed_checkpoint if timed else _ode_checkpoint
        return EngineView(step, state0, dt, n, 0, checkpoint, resume_point)

    def with_params(self, params: Any) -> ODEProblem:
        raise ValueError(
            "params_batch was given with a problem whose parameters live inside "
            "its step_fn; pass problem_family(lambda p: make_problem(p)) or a "
            "step_fn(state, params) to sweep parameters"
        )

    def with_state(self, state0: Any) -> ODEProblem:
        return with_state0(self, state0)


def with_state0(problem: Any, state0: Any, what: str = "problem's state0") -> Any:
    """``problem`` (a NamedTuple with a ``state0`` field) started from
    ``state0``, a row of ``state0_batch``: the ``with_state`` of every
    problem whose start is its ``state0`` alone.

    Raises:
        ValueError: ``state0`` has another shape (``what`` names the
            problem's state in the message).
    """
    if np.shape(state0) != np.shape(problem.state0):
        raise ValueError(
            f"state0_batch rows have shape {np.shape(state0)}, but the "
            f"{what} has shape {np.shape(problem.state0)}"
        )
    return problem._replace(state0=state0)


def plain_problem(step_fn: Any, state0: Any, dt: Any) -> AbstractProblem:
    """The plain call form's problem (``resolve_call`` checked its arguments);
    registered, not inherited (a NamedTuple): cast for the type checker."""
    return cast(AbstractProblem, ODEProblem(step_fn, state0, dt))


def is_problem(obj: Any) -> bool:
    """A problem object: an :class:`AbstractProblem`, or one of lyapax 0.3.0's
    form (``step_fn``, ``state0`` and ``dt``), which is run as an
    :class:`ODEProblem`."""
    return isinstance(obj, AbstractProblem) or _legacy.looks_like_problem(obj)


def as_problem(obj: Any) -> AbstractProblem:
    """``obj`` as an :class:`AbstractProblem` (one of the 0.3.0 form becomes
    an :class:`ODEProblem`).

    Raises:
        TypeError: ``obj`` is not a problem.
    """
    if isinstance(obj, AbstractProblem):
        return obj
    if _legacy.looks_like_problem(obj):
        # Registered, not inherited (a NamedTuple): cast for the type checker.
        return cast(AbstractProblem, ODEProblem(obj.step_fn, obj.state0, obj.dt))
    raise TypeError(
        f"expected a problem (with step_fn, state0 and dt); got {type(obj).__name__}"
    )


def resolve_call(
    caller: str,
    obj: Any,
    n_steps: Any,
    second: Any,
    dt: Any,
    plain: Callable[[], AbstractProblem],
    required: tuple[tuple[str, Any], ...],
    hint: str = "",
) -> tuple[AbstractProblem, Any]:
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


def resolve_step_call(
    caller: str, obj: Any, state0: Any, dt: Any, n_steps: Any
) -> tuple[AbstractProblem, Any]:
    """:func:`resolve_call` of an entry point taking ``caller(problem,
    n_steps, ...)`` or ``caller(step_fn, state0, dt, n_steps, ...)`` (the
    plain form run as an :class:`ODEProblem`).

    Raises:
        TypeError: as :func:`resolve_call`.
    """
    return resolve_call(
        caller,
        obj,
        n_steps,
        state0,
        dt,
        lambda: plain_problem(obj, state0, dt),
        (("state0", state0), ("dt", dt), ("n_steps", n_steps)),
        " (use dt=1.0 for maps)",
    )
