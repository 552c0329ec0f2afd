"""What one row of a sweep runs: a step function and its initial phase point.

A sweep row is described by a *row builder*, a pytree whose static part (the
functions) is shared by every row and whose leaves are traced. Inside the
vmapped kernel ``builder.build(params_row, state_row)`` returns a :class:`Row`:
the step the Benettin kernel iterates, the initial phase point, and, for delay
equations, the shapes that split that point back into state and ring buffer.

Two builders:

* :class:`StepRows`: ``step_fn(state, params)`` (or ``step_fn(state)``).
* :class:`ProblemFamily`: ``make_problem(params) -> problem`` for problems
  (ODE, network or delay) whose parameters sit inside the problem; a delay
  problem's phase point is its state and history buffer flattened, as in
  :func:`lyapax.dde.lyapunov_spectrum_dde`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp


def is_problem(obj: Any) -> bool:
    """Anything with ``step_fn``, ``state0`` and ``dt`` (ODEProblem, DDEProblem)."""
    return all(hasattr(obj, name) for name in ("step_fn", "state0", "dt"))


def is_dde(problem: Any) -> bool:
    """Delay problems carry their history ring buffer as ``buf0``."""
    return is_problem(problem) and hasattr(problem, "buf0")


class Row(NamedTuple):
    """One row's step, initial phase point ``(d,)`` and DDE shapes (or None)."""

    step: Any
    z0: Any
    dde_shapes: tuple[tuple[int, ...], tuple[int, ...]] | None = None


@jax.tree_util.register_pytree_node_class
class ParamStep:
    """``step(state[, step_index])`` = ``fn(state[, step_index], params)``.

    Parameters are pytree leaves, so one compiled program serves every row; a
    step declaring ``uses_step_index`` keeps that declaration.
    """

    def __init__(self, fn: Any, params: Any) -> None:
        self.fn = fn
        self.params = params
        self.uses_step_index = getattr(fn, "uses_step_index", False)

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args, self.params)

    def tree_flatten(self):
        return (self.fn, self.params), None

    @classmethod
    def tree_unflatten(cls, _aux, children):
        return cls(*children)


@jax.tree_util.register_pytree_node_class
class StepRows:
    """Rows of ``step_fn(state, params)``; ``step_fn(state)`` if not ``has_params``."""

    def __init__(self, step_fn: Any, has_params: bool) -> None:
        self.step_fn = step_fn
        self.has_params = has_params

    def build(self, params: Any, state: Any) -> Row:
        step = ParamStep(self.step_fn, params) if self.has_params else self.step_fn
        return Row(step, state)

    def tree_flatten(self):
        return (self.step_fn,), self.has_params

    @classmethod
    def tree_unflatten(cls, has_params, children):
        return cls(children[0], has_params)


@jax.tree_util.register_pytree_node_class
class ProblemFamily:
    """A family of problems indexed by parameters: ``make_problem(params)``.

    Pass ``ProblemFamily(make_problem)`` (or :func:`lyapax.sweep.problem_family`)
    as the ``step_fn`` of a sweep to sweep parameters that live inside a
    problem, e.g. ``lambda p: dde_problem(mackey_glass(beta=p), 1.2, 17.0,
    0.1)``. Every row must have the same structure (functions, shapes, delays
    in steps, ``dt``); only numbers may differ. ``make_problem`` is traced
    once, with the parameters as abstract values, so it must not branch on
    them.
    """

    def __init__(
        self, make_problem: Callable[[Any], Any], use_state_rows: bool = False
    ) -> None:
        self.make_problem = make_problem
        self.use_state_rows = use_state_rows

    def build(self, params: Any, state: Any) -> Row:
        problem = self.make_problem(params)
        if is_dde(problem):
            from lyapax._dde_step import FlatStep  # lazy: delay support optional

            X0 = jnp.asarray(problem.state0)
            buf0 = jnp.asarray(problem.buf0, dtype=X0.dtype)
            params = getattr(problem, "params", None)
            step = FlatStep(
                problem.step_fn, {} if params is None else params, X0.shape, buf0.shape
            )
            z0 = jnp.concatenate([X0.ravel(), buf0.ravel()])
            return Row(step, z0, (X0.shape, buf0.shape))
        z0 = state if self.use_state_rows else jnp.asarray(problem.state0)
        return Row(problem.step_fn, z0)

    def tree_flatten(self):
        return (self.make_problem,), self.use_state_rows

    @classmethod
    def tree_unflatten(cls, use_state_rows, children):
        return cls(children[0], use_state_rows)


@jax.tree_util.register_pytree_node_class
class _UpdatedParams:
    """``make_problem`` for one delay problem whose ``params`` dict the rows
    update (batched entries replace the problem's own)."""

    def __init__(self, problem: Any) -> None:
        self.problem = problem

    def __call__(self, row: Any) -> Any:
        base = self.problem.params or {}
        if isinstance(base, dict) and isinstance(row, dict):
            return self.problem._replace(params={**base, **row})
        return self.problem._replace(params=row)

    def tree_flatten(self):
        return (self.problem,), None

    @classmethod
    def tree_unflatten(cls, _aux, children):
        return cls(children[0])


@jax.tree_util.register_pytree_node_class
class _Fixed:
    """``make_problem`` that ignores the row and returns one problem (whose
    numbers stay pytree leaves, so they are not baked into the program)."""

    def __init__(self, problem: Any) -> None:
        self.problem = problem

    def __call__(self, _row: Any) -> Any:
        return self.problem

    def tree_flatten(self):
        return (self.problem,), None

    @classmethod
    def tree_unflatten(cls, _aux, children):
        return cls(children[0])


class Probe(NamedTuple):
    """Facts about a row, known before tracing: phase-space size ``d``, the
    present-state size ``n_state`` (``d`` unless a delay problem), ``dt`` (None
    for plain steps: the caller passes it), ``dtype``, the history length a
    fresh delay run must pass first, and whether rows are delay problems."""

    d: int
    n_state: int
    dt: Any
    dtype: Any
    min_transient_steps: int
    dde_shapes: tuple[tuple[int, ...], tuple[int, ...]] | None


def probe(builder: Any, params_batch: Any, states: Any) -> Probe:
    """Build the first row eagerly to learn its sizes (cheap: no tracing)."""
    if isinstance(builder, StepRows):
        d = int(states.shape[1])
        return Probe(d, d, None, states.dtype, 0, None)
    row0 = None
    if params_batch is not None:
        row0 = jax.tree.map(lambda leaf: leaf[0], params_batch)
    problem = builder.make_problem(row0)
    if not is_problem(problem):
        raise TypeError(
            "make_problem(params) must return a problem with step_fn, state0 and "
            f"dt; it returned {type(problem).__name__}"
        )
    if is_dde(problem):
        X0 = jnp.asarray(problem.state0)
        buf0 = jnp.asarray(problem.buf0)
        d = int(X0.size + buf0.size)
        shapes = (X0.shape, buf0.shape)
        return Probe(d, int(X0.size), problem.dt, X0.dtype, buf0.shape[0], shapes)
    x0 = jnp.asarray(problem.state0)
    if builder.use_state_rows and states.shape[1:] != x0.shape:
        raise ValueError(
            f"state0_batch rows have shape {states.shape[1:]}, but the problem's "
            f"state0 has shape {x0.shape}"
        )
    if x0.ndim != 1:
        raise ValueError(f"the problem's state0 must be 1-D (d,); got shape {x0.shape}")
    d = int(x0.shape[0])
    return Probe(d, d, problem.dt, x0.dtype, 0, None)


def builder_for(step_fn: Any, has_params: bool, has_state_rows: bool) -> Any:
    """The row builder for what the user passed as ``step_fn``.

    Raises:
        ValueError: an ODE problem with ``params_batch`` (its parameters are
            inside it: use a :class:`ProblemFamily`), or a delay problem with
            ``state0_batch`` (its initial history is tied to its state).
    """
    if isinstance(step_fn, ProblemFamily):
        return ProblemFamily(step_fn.make_problem, has_state_rows)
    if is_dde(step_fn):
        if has_state_rows:
            raise ValueError(
                "state0_batch cannot be used with a delay problem: its initial "
                "history buffer belongs to its state0. Sweep initial states with "
                "problem_family(lambda x0: dde_problem(..., state0=x0, ...)) and "
                "params_batch=x0s instead"
            )
        return ProblemFamily(_UpdatedParams(step_fn))
    if is_problem(step_fn):
        if has_params:
            raise ValueError(
                "params_batch was given with a problem whose parameters live inside "
                "its step_fn; pass problem_family(lambda p: make_problem(p)) or a "
                "step_fn(state, params) to sweep parameters"
            )
        return ProblemFamily(_Fixed(step_fn), has_state_rows)
    if not callable(step_fn):
        raise TypeError(
            "step_fn must be a step_fn(state, params) -> state (step_fn(state) when "
            "params_batch is None), a problem, or a problem_family; got "
            f"{type(step_fn).__name__}"
        )
    return StepRows(step_fn, has_params)
