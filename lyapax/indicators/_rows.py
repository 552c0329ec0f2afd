"""What every indicator shares: its input resolved to a batch of rows.

An indicator runs one orbit per row, all rows in one vmapped, jitted program
chunked, padded and placed on devices by :class:`lyapax._internal.batching.Plan`
(the machinery of the sweeps). A row is described by :class:`RowBuilder`, a
pytree whose static half (functions) is shared by every row and whose leaves
are traced, so a second call with new numbers of the same shapes reuses the
compiled program. What a row may be built from:

- a step function ``step_fn(state)`` (``dt`` given: 1.0 for maps), or
  ``step_fn(state, params)`` with ``params_batch``;
- a problem (``ode_problem``, ``dde_problem``, a network problem): rows of
  ``state0_batch`` start it from other states, rows of ``params_batch`` set
  its parameters (``problem.with_params``);
- a :func:`lyapax.sweep.problem_family`.

Without ``params_batch``/``state0_batch`` the input is one row and the
indicator returns unbatched fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax._engine.abstract import AbstractStep, as_step, check_step_output
from lyapax._engine.problem import as_problem, is_problem
from lyapax._engine.tree import Bound, merge_static, split_static
from lyapax._internal import batching
from lyapax.sweep import ProblemFamily


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


def row_view(dynamic: Any, static: Any, params: Any, state: Any, dt: Any) -> RowView:
    """The row's :class:`RowView` from the builder's halves (as
    :func:`run_rows` passes them), its step checked (at trace time) to map
    the state to its own shape and dtype.

    Raises:
        IncompatibleStepError: a step returning another shape or dtype.
    """
    view = merge_static(dynamic, static).view(params, state, dt)
    check_step_output(view.step, view.z0)
    return view


class RowView(NamedTuple):
    """One row as a kernel runs it: the step, its start point ``z0 (d,)``,
    the model time per step and the problem's check of a run's length
    (:attr:`~lyapax._engine.abstract.EngineView.check_steps`; None: no
    limit)."""

    step: AbstractStep
    z0: Any
    dt: Any
    check_steps: Callable[[int], None] | None = None


class RowBuilder(eqx.Module):
    """Builds a row's :class:`RowView` from its parameters and state."""

    target: Any
    kind: str = eqx.field(static=True)  # "step", "step_params", "problem", "family"
    state_rows: bool = eqx.field(static=True)

    def view(self, params: Any, state: Any, dt: Any) -> RowView:
        if self.kind == "step":
            return RowView(as_step(self.target), state, dt)
        if self.kind == "step_params":
            return RowView(as_step(Bound(self.target, params)), state, dt)
        if self.kind == "family":
            problem = self.target.problem(params, state)
        else:
            problem = self.target if params is None else self.target.with_params(params)
            problem = problem.with_state(state) if self.state_rows else problem
        engine = problem.for_engine()
        return RowView(engine.step, engine.z0, engine.dt, engine.check_steps)


class Rows(NamedTuple):
    """A resolved input: ``builder``, the batched ``(params, states, seeds)``
    (host arrays with a leading axis of ``n``), phase-space size ``d``, dtype,
    ``dt``, the :class:`~lyapax._internal.batching.Plan`, ``batched``
    (False: one row, fields are returned without the batch axis) and the
    first row's ``check_steps`` (see :class:`RowView`; the rows of a batch
    share their shapes, so one row's limit is every row's)."""

    builder: RowBuilder
    batched_inputs: tuple
    n: int
    d: int
    dtype: Any
    dt: Any
    plan: batching.Plan
    batched: bool
    check_steps: Callable[[int], None] | None = None

    def check_length(self, n_steps: int) -> None:
        """Raise the problem's ``ValueError`` unless each row can run steps
        ``0 .. n_steps - 1`` (a driven problem's inputs are finite: past their
        end a step would read the last slice again)."""
        if self.check_steps is not None:
            self.check_steps(n_steps)


def resolve_rows(
    caller: str,
    target: Any,
    state0: Any,
    dt: Any,
    params_batch: Any,
    state0_batch: Any,
    seed: Any,
    plan_args: tuple = (None, None, True),
) -> Rows:
    """Check an indicator's input and describe its rows.

    Raises:
        TypeError: a traced input; ``target`` neither a step, a problem nor a
            problem family; a step without ``dt``; ``state0`` beside a problem.
        ValueError: the batch checks of the sweeps (sizes, shapes, finite
            states, ``batch_size``, ``devices``), naming the argument.
    """
    if validate.is_traced((params_batch, state0, state0_batch, dt)):
        raise TypeError(
            f"{caller} is an eager entry point (it jits and batches internally); "
            "call it outside jax.jit/vmap"
        )
    batched = params_batch is not None or state0_batch is not None
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
    check_steps = None
    if isinstance(target, ProblemFamily) or is_problem(target):
        if state0 is not None:
            raise TypeError(
                f"{caller}: a problem (or problem_family) carries its own state0; "
                "pass state0=None, or state0_batch to start it from other states"
            )
        if isinstance(target, ProblemFamily):
            builder = RowBuilder(
                ProblemFamily(target.make_problem, state_rows), "family", state_rows
            )
        else:
            builder = RowBuilder(as_problem(target), "problem", state_rows)
        states = (
            batching.state_batch(None, state0_batch, n)
            if state_rows
            else np.zeros((n, 1))
        )
        row0 = (
            None if params_batch is None else jax.tree.map(lambda x: x[0], params_batch)
        )
        view = builder.view(row0, jnp.asarray(states[0]), None)
        validate.same_dt(dt, view.dt)
        dt, check_steps = view.dt, view.check_steps
        d, dtype = int(view.z0.shape[0]), view.z0.dtype
    elif callable(target):
        if dt is None:
            raise TypeError(f"{caller}(step_fn, ...) requires dt (use dt=1.0 for maps)")
        if state0 is None and state0_batch is None:
            raise TypeError(
                f"{caller}(step_fn, ...) requires state0 (d,) or state0_batch (n, d)"
            )
        validate.positive_dt(dt)
        dt = validate.float_leaf(dt)
        kind = "step" if params_batch is None else "step_params"
        builder = RowBuilder(target, kind, True)
        states = batching.state_batch(state0, state0_batch, n)
        d, dtype = int(states.shape[1]), states.dtype
    else:
        raise TypeError(
            f"{caller} expects a step function, a problem or a problem_family; got "
            f"{type(target).__name__}"
        )
    seeds = batching.seed_batch(seed, n)
    plan = batching.Plan(n, *plan_args)
    inputs = (params_batch, states, seeds)
    return Rows(builder, inputs, n, d, dtype, dt, plan, batched, check_steps)


def resolve_orbit_rows(
    caller: str,
    target: Any,
    state0: Any,
    dt: Any,
    n_steps: Any,
    params_batch: Any,
    state0_batch: Any,
    seed: Any,
    batch_size: Any,
    devices: Any,
) -> tuple[Rows, int]:
    """The rows and ``n_steps`` of an indicator that runs ``n_steps`` steps
    of each orbit, from its call forms ``caller(problem, n_steps)``,
    ``caller(problem, n_steps=...)`` and ``caller(step_fn, state0, dt,
    n_steps)``.

    Raises:
        TypeError: as :func:`resolve_rows`; ``n_steps`` missing or not an
            integer.
        ValueError: as :func:`resolve_rows`; ``n_steps`` < 1.
    """
    if n_steps is None and is_count(state0):  # caller(problem, 1000)
        n_steps, state0 = validate.as_int("n_steps", state0), None
    rows = resolve_rows(
        caller,
        target,
        state0,
        dt,
        params_batch,
        state0_batch,
        seed,
        (batch_size, devices, True),
    )
    if n_steps is None:
        raise TypeError(f"{caller} requires n_steps")
    return rows, validate.as_int("n_steps", n_steps, minimum=1)


def is_count(x: Any) -> bool:
    """A Python/NumPy integer (the problem form's second argument)."""
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def unbatch(result: Any, rows: Rows, to_host: bool = True) -> Any:
    """``result`` (a NamedTuple of rows) as host arrays, without the batch
    axis when the input was a single row."""

    def one(x):
        x = np.asarray(x) if to_host else x
        return x if rows.batched else x[0]

    return jax.tree.map(one, result)
