"""What one row of a sweep runs: a problem built from the row's numbers.

A sweep row is described by a *row builder*, a pytree whose static part (the
functions) is shared by every row and whose leaves are traced. Inside the
vmapped kernel ``builder.build(params_row, state_row, dt)`` returns the row's
:class:`~lyapax._engine.problem.EngineView` (the step the Benettin kernel
iterates, its start point, its checkpoint factory), through the same problem
protocol a single run uses.

Two builders:

* :class:`StepRows`: ``step_fn(state, params)`` (or ``step_fn(state)``).
* :class:`ProblemFamily`: ``make_problem(params) -> problem`` for problems
  (ODE, network or delay) whose parameters sit inside the problem; a problem
  passed directly becomes a family whose rows change its parameters
  (``problem.with_params``) or nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from lyapax._engine.abstract import (
    AbstractProblem,
    AbstractStep,
    EngineView,
    declares_step_index,
)
from lyapax._engine.problem import ODEProblem, as_problem, is_problem


class ParamStep(AbstractStep):
    """``step(state[, step_index])`` = ``fn(state[, step_index], params)``.

    Unlike :class:`lyapax._engine.tree.Bound`, ``fn`` is a pytree child: a
    parametrized step may carry numbers of its own (a network's weights).
    Parameters are pytree leaves, so one compiled program serves every row; a
    ``fn`` declaring ``uses_step_index`` keeps that declaration.
    """

    uses_step_index: ClassVar[bool] = False
    fn: Any
    params: Any

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args, self.params)


class IndexedParamStep(ParamStep):
    """A :class:`ParamStep` whose ``fn`` takes the step index."""

    uses_step_index: ClassVar[bool] = True


class StepRows(eqx.Module):
    """Rows of ``step_fn(state, params)``; ``step_fn(state)`` if not ``has_params``."""

    step_fn: Any
    has_params: bool = eqx.field(static=True)

    def build(self, params: Any, state: Any, dt: Any) -> EngineView:
        if self.has_params:
            indexed = declares_step_index(self.step_fn)
            step = (IndexedParamStep if indexed else ParamStep)(self.step_fn, params)
        else:
            step = self.step_fn
        return ODEProblem(step, state, dt).for_engine()


class ProblemFamily(eqx.Module):
    """A family of problems indexed by parameters: ``make_problem(params)``.

    Pass ``ProblemFamily(make_problem)`` (or :func:`lyapax.sweep.problem_family`)
    as the ``step_fn`` of a sweep to sweep parameters that live inside a
    problem, e.g. ``lambda p: dde_problem(mackey_glass(beta=p), 1.2, 17.0,
    0.1)``. Every row must have the same structure (functions, shapes, delays
    in steps, ``dt``); only numbers may differ. ``make_problem`` is traced
    once, with the parameters as abstract values, so it must not branch on
    them.
    """

    make_problem: Callable[[Any], Any]
    use_state_rows: bool = eqx.field(static=True, default=False)

    def problem(self, params: Any, state: Any) -> AbstractProblem:
        """The row's problem (``state`` replaces its initial state if rows
        carry states)."""
        made = self.make_problem(params)
        if not is_problem(made):
            raise TypeError(
                "make_problem(params) must return a problem with step_fn, state0 "
                f"and dt; it returned {type(made).__name__}"
            )
        problem = as_problem(made)
        return problem.with_state(state) if self.use_state_rows else problem

    def build(self, params: Any, state: Any, dt: Any) -> EngineView:
        return self.problem(params, state).for_engine()


def problem_family(make_problem: Any) -> ProblemFamily:
    """Mark ``make_problem(params) -> problem`` as a sweepable family.

    Use it to sweep parameters that live inside a problem (ODE, network or
    delay), e.g. ``problem_family(lambda beta: dde_problem(mackey_glass(
    beta=beta), 1.2, tau=17.0, dt=0.1))`` with ``params_batch=betas``. Rows
    must share one structure (functions, shapes, delays in steps, ``dt``).
    """
    if not callable(make_problem):
        raise TypeError(
            f"make_problem must be callable; got {type(make_problem).__name__}"
        )
    return ProblemFamily(make_problem)


class _FromProblem(eqx.Module):
    """``make_problem`` of one problem: each row replaces its parameters
    (``with_params``), or, without swept parameters, returns it as it is (its
    numbers stay pytree leaves, so they are not baked into the program)."""

    problem: AbstractProblem
    swept_params: bool = eqx.field(static=True)

    def __call__(self, row: Any) -> AbstractProblem:
        return self.problem.with_params(row) if self.swept_params else self.problem


class Probe(NamedTuple):
    """Facts about a row, known before tracing: phase-space size ``d``, the
    present-state size ``n_state`` (``d`` unless a delay problem), ``dt`` (None
    for plain steps: the caller passes it), ``dtype`` and the engine view of
    the first row."""

    d: int
    n_state: int
    dt: Any
    dtype: Any
    view: EngineView | None


def probe(builder: Any, params_batch: Any, states: Any) -> Probe:
    """Build the first row eagerly to learn its sizes (cheap: no tracing).

    Raises:
        ValueError / TypeError: whatever the row's problem raises for the
            first row (e.g. swept parameters on a problem that has none).
    """
    if isinstance(builder, StepRows):
        d = int(states.shape[1])
        return Probe(d, d, None, states.dtype, None)
    row0 = None
    if params_batch is not None:
        row0 = jax.tree.map(lambda leaf: leaf[0], params_batch)
    view = builder.problem(row0, jnp.asarray(states[0])).for_engine()
    d = int(view.z0.shape[0])
    return Probe(d, view.n_state, view.dt, view.z0.dtype, view)


def builder_for(step_fn: Any, has_params: bool, has_state_rows: bool) -> Any:
    """The row builder for what the user passed as ``step_fn``.

    Raises:
        TypeError: ``step_fn`` is neither a step function, a problem nor a
            :class:`ProblemFamily`.
    """
    if isinstance(step_fn, ProblemFamily):
        return ProblemFamily(step_fn.make_problem, has_state_rows)
    if is_problem(step_fn):
        return ProblemFamily(
            _FromProblem(as_problem(step_fn), has_params), has_state_rows
        )
    if not callable(step_fn):
        raise TypeError(
            "step_fn must be a step_fn(state, params) -> state (step_fn(state) when "
            "params_batch is None), a problem, or a problem_family; got "
            f"{type(step_fn).__name__}"
        )
    return StepRows(step_fn, has_params)
