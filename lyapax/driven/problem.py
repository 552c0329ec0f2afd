"""Driven and random problems: exponents along an input sequence or a noise
realisation.

- :func:`driven_problem`: ``step(x, u_n)`` with ``u_n`` slice ``n`` of the
  inputs (an RNN or reservoir fed a sequence); the exponents are conditional
  on that sequence.
- :func:`random_problem`: ``step(x, key_n)`` with ``key_n = fold_in(key, n)``
  (random maps, random matrix products).
- :func:`sde_problem`: an SDE discretised by Euler-Maruyama (Ito) or
  stochastic Heun (Stratonovich); the exponents are those of the scheme's
  random map.

``n`` is the engine's global step counter (from the first transient step,
kept in checkpoints), so a run in one piece, in chunks or resumed sees the
same inputs and noise. Each problem runs through the engine's problem
protocol (its view is an ODE problem's, with a step that reads the counter).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax._engine.abstract import AbstractProblem, EngineView
from lyapax._engine.problem import ODEProblem, with_state0
from lyapax.driven._steps import DrivenStep, RandomStep, SDEStep, as_key

__all__ = [
    "NOISE_KINDS",
    "SCHEMES",
    "DrivenProblem",
    "RandomProblem",
    "SDEProblem",
    "driven_problem",
    "random_problem",
    "sde_problem",
]

NOISE_KINDS = ("diagonal", "general")
SCHEMES = ("euler_maruyama", "heun")


def _callable(name: str, fn: Any, what: str) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be callable ({what}); got {type(fn).__name__}")


def _input_length(inputs: Any) -> tuple[Any, int]:
    """``inputs`` with array leaves, and their common leading length.

    Raises:
        ValueError: no leaves, a scalar leaf, or leaves of different lengths.
    """
    leaves, treedef = jax.tree.flatten(inputs)
    if not leaves:
        raise ValueError(
            "inputs must hold at least one array (leading axis: the step index)"
        )
    arrays = [
        leaf if isinstance(leaf, jax.Array) else jnp.asarray(leaf) for leaf in leaves
    ]
    lengths = sorted({a.shape[0] if a.ndim else -1 for a in arrays})
    if lengths[0] < 0:
        raise ValueError(
            "every leaf of inputs must have a leading axis (the step index); "
            "got a scalar leaf"
        )
    if len(lengths) > 1:
        raise ValueError(
            "every leaf of inputs must have the same length along its leading "
            f"axis (the step index); got lengths {lengths}"
        )
    return jax.tree.unflatten(treedef, arrays), int(lengths[0])


def _inputs_check(n_inputs: int) -> Callable[[int], None]:
    def check(needed: int) -> None:
        if needed > n_inputs:
            raise ValueError(
                f"inputs has length {n_inputs} along its leading axis, but the "
                f"run needs {needed} steps (transient and measured steps from "
                "step 0, or from a resumed checkpoint's step); pass a longer "
                "input sequence or run fewer steps"
            )

    return check


class _DrivenProblemFields(NamedTuple):
    """The fields of :class:`DrivenProblem` (its published ``NamedTuple`` form)."""

    step_fn: DrivenStep
    state0: Any
    dt: Any
    inputs: Any
    n_inputs: int


class DrivenProblem(_DrivenProblemFields, AbstractProblem):
    """A map driven by an input sequence (see :func:`driven_problem`).

    ``step_fn`` the engine's step (reads slice ``n`` of ``inputs``),
    ``state0 (d,)``, ``dt``, ``inputs`` (pytree, leading axis = step index),
    ``n_inputs`` its length.
    """

    __slots__ = ()

    def for_engine(self) -> EngineView:
        """An ODE problem's view whose step reads the step counter, and a
        check that the inputs cover the run."""
        view = ODEProblem(self.step_fn, self.state0, self.dt).for_engine()
        return view._replace(check_steps=_inputs_check(self.n_inputs))

    def with_params(self, params: Any) -> DrivenProblem:
        """The problem driven by another input sequence (a sweep row: the
        same tree structure as ``inputs``)."""
        expected: Any = jax.tree.structure(self.inputs)
        got: Any = jax.tree.structure(params)
        if not expected == got:
            raise ValueError(
                "params_batch rows of a driven problem are input sequences with "
                f"the structure of its inputs ({expected}); got {got}"
            )
        inputs, n = _input_length(params)
        step = DrivenStep(self.step_fn.fn, inputs)
        return self._replace(step_fn=step, inputs=inputs, n_inputs=n)

    def with_state(self, state0: Any) -> DrivenProblem:
        return with_state0(self, state0)


class _RandomProblemFields(NamedTuple):
    """The fields of :class:`RandomProblem` (its published ``NamedTuple`` form)."""

    step_fn: RandomStep
    state0: Any
    dt: Any
    key: Any


class RandomProblem(_RandomProblemFields, AbstractProblem):
    """A random map (see :func:`random_problem`): ``step_fn`` the engine's
    step, ``state0 (d,)``, ``dt``, ``key`` the key's raw data."""

    __slots__ = ()

    def for_engine(self) -> EngineView:
        """An ODE problem's view whose step reads the step counter."""
        return ODEProblem(self.step_fn, self.state0, self.dt).for_engine()

    def with_params(self, params: Any) -> RandomProblem:
        """The problem with another key (a sweep row of keys)."""
        data, impl = _row_key(params, self.step_fn.impl)
        step = RandomStep(self.step_fn.fn, data, impl)
        return self._replace(step_fn=step, key=data)

    def with_state(self, state0: Any) -> RandomProblem:
        return with_state0(self, state0)


class _SDEProblemFields(NamedTuple):
    """The fields of :class:`SDEProblem` (its published ``NamedTuple`` form)."""

    step_fn: SDEStep
    state0: Any
    dt: Any
    key: Any
    noise: str
    scheme: str


class SDEProblem(_SDEProblemFields, AbstractProblem):
    """An SDE's scheme as a random map (see :func:`sde_problem`)."""

    __slots__ = ()

    def for_engine(self) -> EngineView:
        """An ODE problem's view whose step reads the step counter."""
        return ODEProblem(self.step_fn, self.state0, self.dt).for_engine()

    def with_params(self, params: Any) -> SDEProblem:
        """The problem with another key (a sweep row of keys)."""
        data, impl = _row_key(params, self.step_fn.impl)
        step = SDEStep(
            self.step_fn.drift,
            self.step_fn.diffusion,
            data,
            self.step_fn.dt,
            impl,
            self.step_fn.m,
            self.step_fn.general,
            self.step_fn.heun,
        )
        return self._replace(step_fn=step, key=data)

    def with_state(self, state0: Any) -> SDEProblem:
        return with_state0(self, state0)


def _row_key(row: Any, impl: str | None) -> tuple[Any, str | None]:
    """A sweep row's key: a typed key, or raw ``uint32`` key data read with
    the problem's own implementation (batches of typed keys may also be
    passed as ``jax.random.key_data(keys)``)."""
    if getattr(row, "dtype", None) == np.uint32 and getattr(row, "shape", None) == (2,):
        return row, impl
    return as_key("params_batch row (a key)", row)


def driven_problem(
    step: Callable[[Any, Any], Any], state0: Any, inputs: Any, dt: Any = 1.0
) -> DrivenProblem:
    """A map driven by an input sequence: ``x_{n+1} = step(x_n, u_n)``.

    Args:
        step: ``step(x (d,), u) -> (d,)``, ``u`` slice ``n`` of every leaf of
            ``inputs`` (same tree structure).
        state0: initial state ``(d,)``.
        inputs: a pytree of arrays sharing a leading axis (the step index):
            step ``n`` (counted from the first transient step, so a run with
            a transient of ``m`` steps measures slices ``m, m + 1, ...``)
            reads slice ``n``. Traced leaves are differentiable.
        dt: model time per step (exponents are per unit of it).

    Returns:
        :class:`DrivenProblem`, accepted by every engine entry point;
        sweeps take a batch of input sequences as ``params_batch``. The
        exponents are conditional on the input sequence.

    Raises:
        TypeError: ``step`` not callable.
        ValueError: ``inputs`` without leaves, with a scalar leaf or leaves of
            different lengths. A run needing more steps than ``inputs`` holds
            raises ``ValueError`` when it is called.
    """
    _callable("step", step, "step(x (d,), u) -> (d,)")
    inputs, n = _input_length(inputs)
    x0 = validate.as_state("state0", state0)
    return DrivenProblem(DrivenStep(step, inputs), x0, validate.as_dt(dt), inputs, n)


def random_problem(
    step: Callable[[Any, Any], Any], state0: Any, key: Any, dt: Any = 1.0
) -> RandomProblem:
    """A random map: ``x_{n+1} = step(x_n, jax.random.fold_in(key, n))``.

    Args:
        step: ``step(x (d,), key_n) -> (d,)``.
        state0: initial state ``(d,)``.
        key: a JAX PRNG key (``jax.random.key`` or ``jax.random.PRNGKey``);
            ``key_n`` has the same kind. ``n`` is the global step index from
            the first transient step, so chunked and resumed runs see the
            same realisation.
        dt: model time per step.

    Returns:
        :class:`RandomProblem`, accepted by every engine entry point; sweeps
        take a batch of keys as ``params_batch``.

    Raises:
        TypeError: ``step`` not callable, ``key`` not a PRNG key.
    """
    _callable("step", step, "step(x (d,), key_n) -> (d,)")
    data, impl = as_key("key", key)
    x0 = validate.as_state("state0", state0)
    return RandomProblem(RandomStep(step, data, impl), x0, validate.as_dt(dt), data)


def sde_problem(
    drift: Callable[[Any], Any],
    diffusion: Callable[[Any], Any],
    state0: Any,
    dt: Any,
    key: Any,
    noise: str = "diagonal",
    scheme: str = "euler_maruyama",
) -> SDEProblem:
    """The SDE ``dx = drift(x) dt + diffusion(x) dW`` as its scheme's random map.

    The increment of step ``n`` is ``sqrt(dt) * jax.random.normal(
    jax.random.fold_in(key, n), (m,))`` in the state's dtype (``m = d`` for
    diagonal noise), so it can be replayed.

    Args:
        drift: ``drift(x (d,)) -> (d,)``.
        diffusion: ``diffusion(x (d,))`` -> ``(d,)`` for ``noise="diagonal"``
            (``diffusion(x) * dW``) or ``(d, m)`` for ``noise="general"``
            (``diffusion(x) @ dW``).
        state0: initial state ``(d,)``.
        dt: time step (model time units).
        key: a JAX PRNG key.
        noise: ``"diagonal"`` or ``"general"``.
        scheme: ``"euler_maruyama"`` (Ito) or ``"heun"`` (stochastic Heun,
            Stratonovich).

    Returns:
        :class:`SDEProblem`, accepted by every engine entry point; its
        exponents are those of the scheme's random map (an ``O(dt)`` bias
        from the SDE's for Euler-Maruyama).

    Raises:
        TypeError: ``drift``/``diffusion`` not callable, ``key`` not a PRNG key.
        ValueError: unknown ``noise`` or ``scheme``, ``drift`` or
            ``diffusion`` returning the wrong shape or dtype.
    """
    if noise not in NOISE_KINDS:
        raise ValueError(f"noise must be one of {NOISE_KINDS}; got noise={noise!r}")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}; got scheme={scheme!r}")
    _callable("drift", drift, "drift(x (d,)) -> (d,)")
    what = "(d,)" if noise == "diagonal" else "(d, m)"
    _callable("diffusion", diffusion, f"diffusion(x (d,)) -> {what}")
    data, impl = as_key("key", key)
    x0 = validate.as_state("state0", state0)
    dt = validate.as_dt(dt)
    d = int(x0.shape[0])
    f = jax.eval_shape(drift, x0)
    if getattr(f, "shape", None) != (d,) or getattr(f, "dtype", None) != x0.dtype:
        raise ValueError(
            f"drift must map the state of shape {(d,)} and dtype {x0.dtype} to the "
            f"same; it returned shape {getattr(f, 'shape', None)} and dtype "
            f"{getattr(f, 'dtype', None)}"
        )
    g = jax.eval_shape(diffusion, x0)
    shape: Any = getattr(g, "shape", None)
    general = noise == "general"
    ok = shape is not None and (
        (len(shape) == 2 and shape[0] == d) if general else shape == (d,)
    )
    if not ok or getattr(g, "dtype", None) != x0.dtype:
        raise ValueError(
            f"diffusion must return an array of shape {what} with d={d} and dtype "
            f"{x0.dtype} for noise={noise!r}; it returned shape {shape} and dtype "
            f"{getattr(g, 'dtype', None)}"
        )
    m = int(shape[1]) if general else d
    step = SDEStep(drift, diffusion, data, dt, impl, m, general, scheme == "heun")
    return SDEProblem(step, x0, dt, data, noise, scheme)
