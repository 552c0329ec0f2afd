"""Adaptive-step ODE integration through diffrax (optional extra ``lyapax[adaptive]``).

:func:`diffrax_adaptive_step` returns a step builder ``(rhs, dt) -> step`` like
the fixed-step builders in :mod:`lyapax.integrators`, so it plugs into
``ode_problem(rhs, state0, dt, integrator=diffrax_adaptive_step(...))``. ``dt``
keeps its lyapax meaning: the interval between two Benettin steps. Inside each
``dt`` an embedded Runge-Kutta pair (Tsit5, Dopri5 or Dopri8) chooses its own
sub-steps under a PID controller with tolerances ``rtol``/``atol``.

Tangents. By default (``tangent_control=True``) each ``dt`` is one solve of the
state together with its variational equation (tangent columns pushed by
``jax.jvp`` of ``rhs``), and the controller sizes the sub-steps by the error of
both. With ``tangent_control=False`` (what lyapax 0.3.0 did) only the state is
solved and the engine differentiates the solve with ``jax.jvp``: the sub-steps
then follow the state error alone (diffrax stops gradients through the
controller), which misses directions the state no longer excites, e.g. the fast
exponent of a stiff linear system. Differentiating an exponent:

* ``jax.jacfwd`` of an exponent with respect to a parameter works in either
  mode below.
* ``reverse_mode=False`` (default): the sub-step loop is a ``lax.while_loop``
  with a data-dependent trip count. Fastest, but ``jax.grad``/``jax.jacrev``
  raise JAX's "Reverse-mode differentiation does not work for lax.while_loop"
  error.
* ``reverse_mode=True``: the loop is bounded by ``max_steps`` (diffrax's
  ``DirectAdjoint``, nested scans whose unused iterations are skipped), which
  JAX can transpose, so ``jax.grad`` of an exponent works too. It costs memory
  proportional to ``max_steps`` per Benettin step when differentiated in
  reverse mode, and some speed; lower ``max_steps`` to what a ``dt`` needs.

Only the ODE path takes this integrator: network and delay problems evaluate
their coupling at every Runge-Kutta stage through their own fixed-step
schemes, and reject it with a ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from lyapax._engine import validate
from lyapax.integrators import AbstractStepBuilder

try:
    import diffrax
except ImportError:  # diffrax is the optional 'adaptive' extra
    diffrax = None  # type: ignore[assignment]

__all__ = ["SOLVERS", "AdaptiveStepBuilder", "diffrax_adaptive_step"]

#: Names accepted for ``solver`` and the diffrax class each one builds.
SOLVERS: tuple[str, ...] = ("tsit5", "dopri5", "dopri8")
# rtol/atol/dt0 configure the diffrax step-size controller when the step is built.
_WHY = "(it configures the step-size controller)"


def _require_diffrax() -> None:
    if diffrax is None:
        raise ImportError(
            "lyapax.adaptive needs the optional dependency diffrax, which is not "
            "installed; install the extra with `pip install lyapax[adaptive]` "
            "(or `pip install diffrax`)"
        )


def _resolve_solver(solver: Any) -> Any:
    if solver is None:
        return diffrax.Dopri5()
    if isinstance(solver, str):
        classes = {
            "tsit5": diffrax.Tsit5,
            "dopri5": diffrax.Dopri5,
            "dopri8": diffrax.Dopri8,
        }
        if solver.lower() not in classes:
            raise ValueError(
                f"solver={solver!r} is not known; valid names are {', '.join(SOLVERS)} "
                "(or pass a diffrax adaptive solver instance)"
            )
        return classes[solver.lower()]()
    if not isinstance(solver, diffrax.AbstractAdaptiveSolver):
        raise TypeError(
            f"solver must be one of {', '.join(SOLVERS)} or a diffrax solver with an "
            f"embedded error estimate (diffrax.AbstractAdaptiveSolver); got {solver!r} "
            f"of type {type(solver).__name__}"
        )
    return solver


class AdaptiveStepBuilder(AbstractStepBuilder):
    """``(rhs, dt) -> AdaptiveODEStep`` (see :func:`diffrax_adaptive_step`).

    Its steps choose their own sub-steps, so it declares no fixed stages and
    network and delay builders refuse it.
    """

    fixed_stages: ClassVar[bool] = False
    solver: Any
    rtol: Any
    atol: Any
    dt0: Any
    max_steps: int
    reverse_mode: bool
    tangent_control: bool

    def __call__(self, rhs: Callable[[Any], Any], dt: Any) -> Any:
        from lyapax._adaptive_step import AdaptiveODEStep

        return AdaptiveODEStep(
            rhs,
            dt,
            self.solver,
            self.rtol,
            self.atol,
            self.dt0,
            self.max_steps,
            self.reverse_mode,
            self.tangent_control,
        )


def diffrax_adaptive_step(
    solver: Any = None,
    rtol: float = 1e-6,
    atol: float = 1e-9,
    dt0: float | None = None,
    max_steps: int = 4096,
    *,
    reverse_mode: bool = False,
    tangent_control: bool = True,
) -> AdaptiveStepBuilder:
    """Step builder ``(rhs, dt) -> step`` with adaptive sub-steps inside each ``dt``.

    Args:
        solver: ``"tsit5"``, ``"dopri5"`` (default, also for ``None``),
            ``"dopri8"``, or any diffrax solver with an embedded error estimate
            (``diffrax.AbstractAdaptiveSolver``), e.g. ``diffrax.Tsit5()``.
        rtol: relative tolerance of the PID step-size controller (> 0).
        atol: absolute tolerance, in state units (> 0).
        dt0: first sub-step guess (model time units); ``None`` lets diffrax
            pick one from the vector field.
        max_steps: most sub-steps (accepted + rejected) per ``dt``; running out
            raises at run time (``RuntimeError`` naming ``max_steps exhausted``)
            rather than returning a state from an earlier time.
        reverse_mode: bound the sub-step loop by ``max_steps`` so that
            ``jax.grad`` of an exponent works (see the module docstring).
        tangent_control: size the sub-steps by the error of the state *and* of
            the tangent vectors (default). ``False`` sizes them by the state
            alone, as lyapax 0.3.0 did: cheaper, but exponents of directions
            the state does not excite (stiff, strongly contracting ones) come
            out wrong.

    Returns:
        A builder for ``ode_problem(..., integrator=...)`` producing an
        ``lyapax._adaptive_step.AdaptiveODEStep``
        (a pytree; its ``sub_steps(state)`` counts the sub-steps of one ``dt``).

    Raises:
        ImportError: diffrax is not installed (extra ``lyapax[adaptive]``).
        ValueError: unknown solver name, non-positive ``rtol``/``atol``/``dt0``,
            ``max_steps`` not a non-negative integer.
        TypeError: ``solver`` is not a name nor an adaptive diffrax solver.
    """
    _require_diffrax()
    solver = _resolve_solver(solver)
    rtol = validate.positive_float("rtol", rtol, why=_WHY)
    atol = validate.positive_float("atol", atol, why=_WHY)
    if dt0 is not None:
        dt0 = validate.positive_float("dt0", dt0, why=_WHY)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 0:
        raise ValueError(f"max_steps must be a non-negative integer; got {max_steps!r}")

    return AdaptiveStepBuilder(
        solver,
        rtol,
        atol,
        dt0,
        max_steps,
        bool(reverse_mode),
        bool(tangent_control),
    )
