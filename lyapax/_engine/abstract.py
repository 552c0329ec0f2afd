"""Declared interfaces of the engine: what a step and a problem are.

As in diffrax (``AbstractTerm``, ``AbstractSolver``), a kind of step or problem
says what it can do by subclassing a base here, not by carrying optional
attributes that the engine looks for:

- :class:`AbstractStep`: the map the Benettin kernel iterates, ``z (d,) ->
  (d,)``, or ``(z, step_index) -> (d,)`` when it declares
  ``uses_step_index``; :meth:`AbstractStep.tangent` pushes a tangent frame
  through the step (by default ``jax.jvp`` batched by ``jax.vmap``; a step
  with a cheaper fused form, such as a network step, overrides it).
- :class:`AbstractProblem`: a kind of problem (ODE or map, network, delay
  equation) presents itself to the engine through ``for_engine()``, which
  returns an :class:`EngineView` (its flat step, start point, checkpoint
  factory), and answers the two questions sweeps ask, ``with_params`` and
  ``with_state``.

:func:`as_step` is the one compatibility check between what a user passes as a
step and the engine: a declared step passes as it is, a plain callable is
wrapped in :class:`FunctionStep`, anything else raises ``TypeError``;
:func:`check_step_output` checks, once per trace, that a step maps the state
to its own shape and dtype, and raises :class:`IncompatibleStepError`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from lyapax._engine import _legacy

if TYPE_CHECKING:  # shape annotations only: jaxtyping costs ~0.1 s to import
    from jaxtyping import Array, Float, Int

    from lyapax._engine.shapes import Scalar

__all__ = [
    "AbstractProblem",
    "AbstractStep",
    "EngineView",
    "FunctionStep",
    "IncompatibleStepError",
    "IndexedFunctionStep",
    "as_step",
    "check_step_output",
    "declares_step_index",
]


class IncompatibleStepError(ValueError):
    """A step the engine cannot run: it returns a state of another shape or
    dtype than it was given."""


class AbstractStep(eqx.Module):
    """A step of the engine: ``z (d,) -> (d,)`` (see the module docstring).

    Subclasses set the class attribute ``uses_step_index``: True means the
    step is called ``step(z, step_index)`` with the int32 step counter of the
    run (ring buffers of delay equations read it).
    """

    uses_step_index: eqx.AbstractClassVar[bool]

    @abc.abstractmethod
    def __call__(self, z: Any, *step_index: Any) -> Any:
        """The next point ``(d,)``."""

    def advance(self, z: Float[Array, " d"], step: Int[Array, ""]) -> Any:
        """The next point, called the way the step declares."""
        return self(z, step) if self.uses_step_index else self(z)

    def vector_field(self) -> Callable[[Any], Any] | None:
        """The autonomous vector field ``f(z (d,)) -> (d,)`` whose flow over
        one step this step follows, or None (a map, a time-dependent or driven
        step, or a step that does not say). Continuous-time checks
        (:func:`lyapax.checks.check_invariants`) read it; a pytree, so its
        numbers stay traced."""
        return None

    def tangent(
        self, z: Float[Array, " d"], Y: Float[Array, "d k"], step: Int[Array, ""]
    ) -> tuple[Float[Array, " d"], Float[Array, "d k"]]:
        """``(z_next, J Y)``: the next point and the frame ``Y (d, k)`` pushed
        through the step's Jacobian ``J`` (``jax.jvp`` batched by ``jax.vmap``)."""

        def one(v):
            return jax.jvp(lambda x: self.advance(x, step), (z,), (v,))

        return jax.vmap(one, in_axes=1, out_axes=(None, 1))(Y)


class FunctionStep(AbstractStep):
    """A plain callable used as a step (what :func:`as_step` makes of it).

    ``fn`` is a pytree child, so the numbers of a callable pytree (an
    ``equinox.Module`` of the user's) stay traced leaves.
    """

    uses_step_index: ClassVar[bool] = False
    fn: Any

    def __call__(self, z: Any, *step_index: Any) -> Any:
        return self.fn(z, *step_index)


class IndexedFunctionStep(FunctionStep):
    """A plain callable called ``fn(z, step_index)``."""

    uses_step_index: ClassVar[bool] = True


def as_step(step: Any) -> AbstractStep:
    """``step`` as an :class:`AbstractStep` (a plain callable is wrapped).

    Raises:
        TypeError: ``step`` is not callable.
    """
    if isinstance(step, AbstractStep):
        return step
    if not callable(step):
        raise TypeError(
            f"step_fn must be callable (state (d,) -> state (d,)); got "
            f"{type(step).__name__}"
        )
    if declares_step_index(step):
        return IndexedFunctionStep(step)
    return FunctionStep(step)


def declares_step_index(fn: Any) -> bool:
    """Whether ``fn`` is called with the step index: a step's declaration, or
    that of a plain function (see :mod:`lyapax._engine._legacy`)."""
    if isinstance(fn, AbstractStep):
        return fn.uses_step_index
    return _legacy.declares_step_index(fn)


def check_step_output(step: AbstractStep, state: jax.Array) -> None:
    """Raise :class:`IncompatibleStepError` unless ``step`` maps ``state`` to
    its own shape and dtype (traced on shapes only: runs at trace time, so
    cached calls pay nothing for it)."""
    # A closure, not the bound method: jax caches functions by hash, and a
    # module's hash reads its leaves (traced under a caller's vmap).
    out = jax.eval_shape(
        lambda z, i: step.advance(z, i), state, jnp.zeros((), jnp.int32)
    )
    shape = getattr(out, "shape", None)
    dtype = getattr(out, "dtype", None)
    if shape != state.shape or dtype != state.dtype:
        raise IncompatibleStepError(
            f"step_fn must map a state of shape {state.shape} and dtype {state.dtype} "
            f"to the same shape and dtype; it returned shape {shape} and dtype {dtype}"
        )


class EngineView(NamedTuple):
    """A problem as the engine sees it.

    Attributes:
        step: the :class:`~lyapax._engine.abstract.AbstractStep` the kernel
            iterates; a pytree whose numbers are leaves (see
            :mod:`lyapax._engine.tree`).
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
        check_steps: ``check_steps(n)`` raises ``ValueError`` unless the
            problem can run steps ``0 .. n - 1`` of the global step counter
            (a driven problem's inputs are finite); None: no limit.
    """

    step: AbstractStep
    z0: Float[Array, " d"]
    dt: Scalar
    n_state: int
    min_transient_steps: int
    checkpoint: Callable[..., Any]
    resume_point: Callable[[Any], tuple[Float[Array, " d"], Any]]
    checkpoint_type: type | None = None
    check_steps: Callable[[int], None] | None = None


class AbstractProblem(abc.ABC):
    """A kind of problem, as the engine and the sweeps see it.

    Every kind subclasses this. The problems of lyapax keep their published
    ``NamedTuple`` form by subclassing their fields' ``NamedTuple`` and this
    (``class ODEProblem(_ODEProblemFields, AbstractProblem)``). A concrete
    subclass (one whose name does not start with ``Abstract``) is checked
    when it is created: it must implement every abstract method and provide
    every name of :attr:`abstract_vars` (a field or an attribute), or
    ``TypeError`` says what it lacks.
    """

    __slots__ = ()

    #: Model time per step (a problem's own ``dt``, compared with a ``dt``
    #: passed beside it).
    dt: Any

    #: Names a concrete kind must provide: ``dt``, the model time per step (a
    #: problem's own ``dt``, compared with a ``dt`` passed beside it).
    abstract_vars: ClassVar[tuple[str, ...]] = ("dt",)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__name__.startswith("Abstract"):
            return
        missing = [
            name
            for name in sorted(AbstractProblem.__abstractmethods__)
            if getattr(getattr(cls, name, None), "__isabstractmethod__", False)
            or getattr(cls, name, None) is None
        ]
        # Fields of a NamedTuple or a dataclass (equinox.Module), annotations.
        declared = set(getattr(cls, "_fields", ()))
        declared |= set(getattr(cls, "__dataclass_fields__", ()))
        for base in cls.__mro__:
            if base is not AbstractProblem:
                declared |= set(vars(base).get("__annotations__", ()))
        missing += [
            name
            for name in cls.abstract_vars
            if name not in declared and not hasattr(cls, name)
        ]
        if missing:
            raise TypeError(
                f"{cls.__name__} subclasses AbstractProblem but does not define "
                f"{', '.join(missing)}; a kind of problem implements for_engine, "
                "with_params and with_state and has a dt (a field or attribute)"
            )

    @abc.abstractmethod
    def for_engine(self) -> EngineView:
        """The problem as the engine runs it (see :class:`EngineView`)."""

    @abc.abstractmethod
    def with_params(self, params: Any) -> AbstractProblem:
        """The problem with one row of swept parameters (``ValueError`` saying
        why when its kind has none)."""

    @abc.abstractmethod
    def with_state(self, state0: Any) -> AbstractProblem:
        """The problem started from another initial state (``ValueError``
        saying why when its kind cannot)."""
