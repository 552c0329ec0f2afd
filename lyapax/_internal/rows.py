"""Batched rows: what a sweep or an indicator runs, one row at a time.

Sweeps and indicators run one orbit per row, all rows in one vmapped, jitted
program chunked, padded and placed on devices by
:class:`lyapax._internal.batching.Plan`. A row is described by a *row
builder*, a pytree whose static half (the functions) is shared by every row
and whose leaves are traced, so a second call with new numbers of the same
shapes reuses the compiled program. Inside a kernel ``builder.build(params_row,
state_row, dt)`` returns the row's :class:`~lyapax._engine.abstract.EngineView`,
through the problem protocol a single run uses.

What a row may be built from (:func:`resolve`, one set of checks and error
messages for every caller):

- a step function ``step_fn(state)`` (``dt`` given: 1.0 for maps), or
  ``step_fn(state, params)`` with ``params_batch`` (:class:`StepRows`);
- a problem (ODE, network, delay, driven ...): rows of ``state0_batch`` start
  it from other states, rows of ``params_batch`` set its parameters
  (``problem.with_params``);
- a :class:`ProblemFamily` ``make_problem(params) -> problem``, for
  parameters that live inside a problem.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax._engine.abstract import (
    AbstractProblem,
    AbstractStep,
    EngineView,
    check_step_output,
    declares_step_index,
)
from lyapax._engine.problem import ODEProblem, as_problem, is_problem
from lyapax._engine.tree import merge_static, split_static
from lyapax._internal import batching


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
    where a sweep or an indicator takes ``step_fn`` to sweep parameters that
    live inside a problem, e.g. ``lambda p: dde_problem(mackey_glass(beta=p),
    1.2, 17.0, 0.1)``. Every row must have the same structure (functions,
    shapes, delays in steps, ``dt``); only numbers may differ.
    ``make_problem`` is traced once, with the parameters as abstract values, so
    it must not branch on them.
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

    Raises:
        TypeError: ``make_problem`` is not callable.
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


class Rows(NamedTuple):
    """A resolved input.

    Attributes:
        builder: :class:`StepRows` or :class:`ProblemFamily`.
        batched_inputs: ``(params, states, seeds)``, host arrays with a
            leading axis of ``n`` (``params`` may be None).
        n: number of rows.
        d: phase-space size of a row.
        n_state: present-state size (``d`` unless a delay problem).
        dtype: the state's dtype.
        dt: model time per step.
        plan: the :class:`~lyapax._internal.batching.Plan` of the rows.
        batched: False for one row given without a batch (an indicator then
            returns unbatched fields).
        view: the first row's engine view (None for step functions).
    """

    builder: StepRows | ProblemFamily
    batched_inputs: tuple
    n: int
    d: int
    n_state: int
    dtype: Any
    dt: Any
    plan: batching.Plan
    batched: bool
    view: EngineView | None

    @property
    def min_transient_steps(self) -> int:
        return 0 if self.view is None else self.view.min_transient_steps

    def check_length(self, n_steps: int) -> None:
        """Raise the problem's ``ValueError`` unless each row can run steps
        ``0 .. n_steps - 1`` (a driven problem's inputs are finite: past their
        end a step would read the last slice again). The rows of a batch share
        their shapes, so the first row's limit is every row's."""
        if self.view is not None and self.view.check_steps is not None:
            self.view.check_steps(n_steps)


def _builder(
    caller: str, target: Any, has_params: bool, state_rows: bool
) -> StepRows | ProblemFamily:
    if isinstance(target, ProblemFamily):
        return ProblemFamily(target.make_problem, state_rows)
    if is_problem(target):
        return ProblemFamily(_FromProblem(as_problem(target), has_params), state_rows)
    if not callable(target):
        raise TypeError(
            f"{caller}: step_fn must be a step function step_fn(state) -> state "
            "(step_fn(state, params) with params_batch), a problem or a "
            f"problem_family; got {type(target).__name__}"
        )
    return StepRows(target, has_params)


def resolve(
    caller: str,
    target: Any,
    state0: Any,
    dt: Any,
    params_batch: Any,
    state0_batch: Any,
    seed: Any,
    plan_args: tuple = (None, None, True),
    *,
    one_row: bool = False,
) -> Rows:
    """Check a batched entry point's input and describe its rows.

    Args:
        caller: the entry point's name, for error messages.
        target: a step function, a problem or a :class:`ProblemFamily`.
        plan_args: ``(batch_size, devices, pad)`` of the plan.
        one_row: without ``params_batch`` and ``state0_batch`` the input is one
            row (``Rows.batched`` False; ``seed`` must be one integer); when
            False the batch size may also come from ``seed``.

    Raises:
        TypeError: a traced input; ``target`` neither a step, a problem nor a
            problem family; a step without ``dt`` or ``state0``; ``state0``
            beside a problem.
        ValueError: the batch checks (sizes, shapes, finite states,
            ``batch_size``, ``devices``), naming the argument; whatever the
            first row's problem raises (e.g. parameters swept on a problem
            that has none).
    """
    if validate.is_traced((params_batch, state0, state0_batch, dt)):
        raise TypeError(
            f"{caller} is an eager entry point (it jits and batches internally); "
            "call it outside jax.jit/vmap and pass the rows as params_batch or "
            "state0_batch"
        )
    # Typed PRNG keys (a batch of realisations) travel as their raw data: the
    # batch is sliced and padded with NumPy, which cannot hold key arrays.
    params_batch = jax.tree.map(_key_data, params_batch)
    batched = not one_row or params_batch is not None or state0_batch is not None
    if batched:
        n, _ = batching.batch_size_of(params_batch, state0_batch, seed)
    else:
        n = 1
        if np.ndim(seed) != 0:
            raise ValueError(
                f"seed must be one integer for a single orbit; got shape "
                f"{np.shape(seed)} (pass state0_batch or params_batch to batch)"
            )
    state_rows = state0_batch is not None
    builder = _builder(caller, target, params_batch is not None, state_rows)
    view = None
    if isinstance(builder, StepRows):
        if dt is None:
            raise TypeError(f"{caller}(step_fn, ...) requires dt (use dt=1.0 for maps)")
        if state0 is None and state0_batch is None:
            raise TypeError(
                f"{caller}(step_fn, ...) requires state0 (d,) or state0_batch (n, d)"
            )
        dt = validate.float_leaf(validate.positive_dt(dt))
        states = batching.state_batch(state0, state0_batch, n)
        d = n_state = int(states.shape[1])
        dtype = states.dtype
    else:
        if state0 is not None:
            raise TypeError(
                f"{caller}: a problem (or problem_family) carries its own state0; "
                "pass state0=None, or state0_batch to start it from other states"
            )
        states = (
            batching.state_batch(None, state0_batch, n)
            if state_rows
            else np.zeros((n, 1))
        )
        row0 = None
        if params_batch is not None:
            row0 = jax.tree.map(lambda leaf: leaf[0], params_batch)
        # The first row built eagerly (cheap: no tracing) to learn its sizes.
        view = builder.problem(row0, jnp.asarray(states[0])).for_engine()
        validate.same_dt(dt, view.dt)
        dt = validate.positive_dt(view.dt)
        d, n_state, dtype = int(view.z0.shape[0]), view.n_state, view.z0.dtype
    seeds = batching.seed_batch(seed, n)
    plan = batching.Plan(n, *plan_args)
    return Rows(
        builder,
        (params_batch, states, seeds),
        n,
        d,
        n_state,
        dtype,
        dt,
        plan,
        batched,
        view,
    )


def _key_data(leaf: Any) -> Any:
    dtype = getattr(leaf, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return jax.random.key_data(leaf)
    return leaf


def run_rows(rows: Rows, kernel: Any, data: tuple, **options: Any) -> Any:
    """``kernel(dynamic, params, states, seeds, dt, *data, static=static,
    **options)`` on every chunk of ``rows``' plan, rows joined: the builder
    goes in split into its traced half ``dynamic`` and its static half (a
    static argument of the jitted kernel, so a call with new numbers of the
    same shapes reuses the program); :func:`row_view` joins them again."""
    dynamic, static = split_static(rows.builder)
    return rows.plan.run(
        lambda *r: kernel(dynamic, *r, rows.dt, *data, static=static, **options),
        rows.batched_inputs,
    )


def row_view(dynamic: Any, static: Any, params: Any, state: Any, dt: Any) -> EngineView:
    """The row's engine view from the builder's halves (as :func:`run_rows`
    passes them), its step checked (at trace time) to map the state to its own
    shape and dtype.

    Raises:
        IncompatibleStepError: a step returning another shape or dtype.
    """
    view = merge_static(dynamic, static).build(params, state, dt)
    check_step_output(view.step, view.z0)
    return view


def unbatch(result: Any, rows: Rows, to_host: bool = True) -> Any:
    """``result`` (a NamedTuple of rows) as host arrays, without the batch
    axis when the input was a single row."""

    def one(x):
        x = np.asarray(x) if to_host else x
        return x if rows.batched else x[0]

    return jax.tree.map(one, result)
