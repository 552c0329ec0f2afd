"""Transcendental values computed once per point and stage on XLA:CPU.

XLA's CPU loop fusion evaluates a fused expression once per *output element*:
the stage's tangents ``J V (d, m)`` read the field's ``sin``, ``cos``, ``exp``
... of the point, and each of the ``d m`` tangent entries recomputes them
(measured on the double gyre: about 20 transcendental calls per point and
stage where the primal needs 4; see :mod:`lyapax._internal.fusion`).

:func:`shared_transcendentals` re-evaluates ``rhs(t, x)`` from its jaxpr with
each ``sin``, ``cos``, ``exp``, ``tanh`` replaced by a version whose value and
derivative are computed once per point by
:func:`~lyapax._internal.fusion.computed_once` (a conditional on ``t == t``,
which XLA cannot fold), and the tangents only multiply and add. The same
operations in a different order: results agree to rounding (about 1e-13 in
the FTLE, measured), not bit for bit. Measured on the double gyre (RK6,
8192 points, one core): about 15% less CPU time. Used for CPU devices only
(on a GPU a conditional would cost a host round trip per stage).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.extend.core import Literal

from lyapax._engine.sincos import sincos
from lyapax._internal.fusion import computed_once


def _shared(value_and_slope: Any) -> Any:
    """``f(z, keep)`` with ``f(z)`` and its jvp ``f'(z) dz`` from
    ``value_and_slope(z) -> (f(z), f'(z))``, both computed once."""

    @jax.custom_jvp
    def f(z: Any, keep: Any) -> Any:
        return computed_once(lambda z: value_and_slope(z)[0], keep, z)

    @f.defjvp
    def _jvp(primals: Any, tangents: Any) -> Any:
        z, keep = primals
        value, slope = computed_once(value_and_slope, keep, z)
        return value, slope * tangents[0]

    return f


def _tanh(z: Any) -> tuple[Any, Any]:
    y = jnp.tanh(z)
    return y, 1.0 - y * y


def _exp(z: Any) -> tuple[Any, Any]:
    y = jnp.exp(z)
    return y, y


def _fast_cos(z: Any) -> tuple[Any, Any]:
    s, c = sincos(z)
    return c, -s


_RULES = {
    "sin": _shared(lambda z: (jnp.sin(z), jnp.cos(z))),
    "cos": _shared(lambda z: (jnp.cos(z), -jnp.sin(z))),
    "exp": _shared(_exp),
    "tanh": _shared(_tanh),
}
#: float64 ``sin``/``cos`` from :func:`~lyapax._engine.sincos.sincos`.
_FAST_TRIG = {"sin": _shared(sincos), "cos": _shared(_fast_cos)}


def _rounded(value_and_slope: Any) -> Any:
    """``value_and_slope`` evaluated in float64 and rounded to the argument's
    dtype."""

    def rounded(z: Any) -> tuple[Any, Any]:
        value, slope = value_and_slope(z.astype(jnp.float64))
        return value.astype(z.dtype), slope.astype(z.dtype)

    return rounded


#: float32 ``sin``/``cos`` as the float64 ones rounded, where x64 is on: on
#: XLA:CPU a float32 double-gyre field ran 2.3x faster so (0.23 s against
#: 0.52 s for 256^2 points; the float64 field took 0.25 s), with the same
#: largest error against the float64 field.
_FAST_TRIG_32 = {"sin": _shared(_rounded(sincos)), "cos": _shared(_rounded(_fast_cos))}


def shared_transcendentals(rhs: Any, fast_trig: bool = False) -> Any:
    """``rhs(t, x)`` with its ``sin``/``cos``/``exp``/``tanh`` values (and
    their derivatives) computed once per point: see the module docstring.
    Other primitives are bound as they are (inside nested calls, such as a
    ``jax.jit``-decorated helper, nothing changes). ``fast_trig``: float64
    ``sin``/``cos`` (value and derivative from one evaluation) by
    :func:`~lyapax._engine.sincos.sincos`, ``nan`` beyond its range
    (float32 ones too where x64 is on: those rounded)."""

    x64 = jax.config.jax_enable_x64  # type: ignore[attr-defined]

    def shared_rhs(t: Any, x: Any) -> Any:
        closed = jax.make_jaxpr(rhs)(t, x)
        keep = t == t  # true for every finite time; XLA does not fold it
        env: dict[Any, Any] = {}

        def read(v: Any) -> Any:
            return v.val if isinstance(v, Literal) else env[v]

        jaxpr = closed.jaxpr
        env.update(zip(jaxpr.constvars, closed.consts, strict=True))
        env.update(zip(jaxpr.invars, (t, x), strict=True))
        for eqn in jaxpr.eqns:
            args = [read(v) for v in eqn.invars]
            name, dtype = eqn.primitive.name, jnp.result_type(args[0])
            rule = _RULES.get(name)
            if fast_trig and dtype == jnp.float64:
                rule = _FAST_TRIG.get(name, rule)
            elif fast_trig and dtype == jnp.float32 and x64:
                rule = _FAST_TRIG_32.get(name, rule)
            if (
                rule is not None
                and jnp.issubdtype(dtype, jnp.floating)
                and not eqn.params.get("accuracy")
            ):
                out = rule(args[0], keep)
            else:
                params = eqn.primitive.get_bind_params(eqn.params)
                out = eqn.primitive.bind(*args, **params)
            if eqn.primitive.multiple_results:
                env.update(zip(eqn.outvars, out, strict=True))
            else:
                env[eqn.outvars[0]] = out
        (result,) = [read(v) for v in jaxpr.outvars]
        return result

    return shared_rhs
