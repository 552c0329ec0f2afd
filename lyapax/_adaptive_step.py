"""diffrax-backed step of :mod:`lyapax.adaptive` (imported only when diffrax is)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from lyapax._engine.abstract import AbstractStep
from lyapax._engine.precision import emulated_float64


def _push_tangents(rhs: Callable[[Any], Any], y: Any, Y: Any) -> tuple[Any, Any]:
    """``(rhs(y), J(y) @ Y)`` with the Jacobian applied column by column (JVP)."""

    def one(v):
        return jax.jvp(rhs, (y,), (v,))

    return jax.vmap(one, in_axes=1, out_axes=(None, 1))(Y)


class _Field(eqx.Module):
    """diffrax vector field ``(t, y, args) -> rhs(y)`` of an autonomous ``rhs``."""

    rhs: Callable[[Any], Any]

    def __call__(self, t: Any, y: Any, args: Any) -> Any:
        return self.rhs(y)


class _VariationalField(eqx.Module):
    """Vector field of ``(y, Y)``: the ODE and its variational equation."""

    rhs: Callable[[Any], Any]

    def __call__(self, t: Any, yY: tuple[Any, Any], args: Any) -> tuple[Any, Any]:
        return _push_tangents(self.rhs, *yY)


class AdaptiveODEStep(AbstractStep):
    """``state -> state`` map advancing ``rhs`` by exactly ``dt`` adaptively.

    Built by :func:`lyapax.adaptive.diffrax_adaptive_step`; a pytree whose
    numbers (``dt``, tolerances) are leaves, so rebuilding it with new values
    reuses compiled programs. With ``tangent_control`` the engine advances the
    tangent frame through :meth:`tangent_step`, one solve of the state and its
    variational equation whose sub-steps are sized by the error of both.
    """

    uses_step_index: ClassVar[bool] = False
    rhs: Callable[[Any], Any]
    dt: Any
    solver: Any
    rtol: Any
    atol: Any
    dt0: Any
    max_steps: int = eqx.field(static=True)
    reverse_mode: bool = eqx.field(static=True)
    tangent_control: bool = eqx.field(static=True)

    def _solve(self, field: eqx.Module, y0: Any) -> Any:
        dtype = jnp.result_type(*jax.tree.leaves(y0))
        if emulated_float64(dtype):
            # Found on the lent TPU v5e (JAX 0.10.2): the program fails to
            # compile after a minute, so say it before compiling.
            raise ValueError(
                f"lyapax.adaptive: a {dtype} state cannot be solved by diffrax on a "
                "TPU: diffeqsolve always computes nextafter of its times, which "
                "XLA's float64 emulation there rejects ('Binary op and with "
                "different element types: s32[] and u32[]'). Pass precision='float32' "
                "or 'mixed', a float32 state, or run this problem on the CPU "
                "(jax.default_device(jax.devices('cpu')[0]))"
            )
        t1 = jnp.asarray(self.dt, dtype)
        dt0 = (
            None if self.dt0 is None else jnp.minimum(jnp.asarray(self.dt0, dtype), t1)
        )
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field),  # type: ignore[arg-type]  # a callable Module
            self.solver,
            t0=jnp.zeros((), dtype),
            t1=t1,
            dt0=dt0,
            y0=y0,
            stepsize_controller=diffrax.PIDController(rtol=self.rtol, atol=self.atol),
            saveat=diffrax.SaveAt(t1=True),
            # ForwardMode: a plain while_loop, fine under jax.jvp/jacfwd.
            # DirectAdjoint: a loop bounded by max_steps that jax.grad can reverse.
            adjoint=diffrax.DirectAdjoint()
            if self.reverse_mode
            else diffrax.ForwardMode(),
            max_steps=self.max_steps,
            throw=False,
        )
        # A truncated solve would return the state at an earlier time while the
        # engine books the full dt: fail loudly instead of biasing exponents.
        ys = eqx.error_if(
            jax.tree.map(lambda leaf: leaf[0], sol.ys),
            sol.result != diffrax.RESULTS.successful,
            "lyapax.adaptive: max_steps exhausted (or the solver failed) before "
            "reaching t + dt; raise max_steps or loosen rtol/atol",
        )
        return ys, sol.stats

    def __call__(self, state: Any) -> Any:
        return self._solve(_Field(self.rhs), state)[0]

    def tangent_step(self, state: Any, Y: Any) -> tuple[Any, Any]:
        """Advance ``state (d,)`` and the tangent frame ``Y (d, k)`` by ``dt``."""
        if not self.tangent_control:
            return _push_tangents(self, state, Y)
        return self._solve(_VariationalField(self.rhs), (state, Y))[0]

    def tangent(self, z: Any, Y: Any, step: Any) -> tuple[Any, Any]:
        """The engine's tangent step: :meth:`tangent_step`."""
        return self.tangent_step(z, Y)

    def sub_steps(self, state: Any, Y: Any = None) -> tuple[Any, Any]:
        """Accepted and rejected sub-step counts of one ``dt`` from ``state``.

        Pass the tangent frame ``Y (d, k)`` to count the steps of the solve the
        engine runs when ``tangent_control`` is on (the default).
        """
        if Y is None or not self.tangent_control:
            stats = self._solve(_Field(self.rhs), state)[1]
        else:
            stats = self._solve(_VariationalField(self.rhs), (state, Y))[1]
        return stats["num_accepted_steps"], stats["num_rejected_steps"]
