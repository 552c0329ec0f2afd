"""Evaluate a vector field so that its transcendental values are computed once
per point and stage, then shared by the primal and every tangent.

XLA fuses the ``d`` tangents of a stage into loops over ``(point, tangent)``
entries and recomputes the field's ``sin``/``cos``/``exp`` for each entry: for
the double gyre that is ~4x the transcendental work of the primal. Wrapping
each transcendental result in ``lax.optimization_barrier`` makes it a value of
its own, computed once per point (measured on one double-gyre stage in
isolation: 150 -> 86 ns per point on the 2-core CPU, the primal alone 47; in
the whole integration loop the difference was within the noise of a loaded
machine, so :func:`~lyapax.finite_time.ftle_field` leaves it off by default
and ``benchmarks/ftle_bench.py`` measures both). The field is
re-evaluated from its jaxpr with those barriers; the numbers are unchanged.
Primitives inside nested calls (``jit``-ed helpers, ``custom_jvp`` functions)
are left as they are; a field that cannot be traced this way is used as given.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.extend import core as jex

#: Primitives whose results are worth materialising once (elementwise and
#: expensive compared with a multiply-add).
EXPENSIVE = frozenset(
    "sin cos tan asin acos atan atan2 sinh cosh tanh asinh acosh atanh exp exp2 "
    "log log1p expm1 logistic pow erf erfc erf_inv lgamma digamma".split()
)


def _eval_sharing(jaxpr: Any, consts: list[Any], *args: Any) -> list[Any]:
    env: dict[Any, Any] = {}

    def read(v):
        return v.val if isinstance(v, jex.Literal) else env[v]

    for var, val in zip(jaxpr.constvars, consts, strict=True):
        env[var] = val
    for var, val in zip(jaxpr.invars, args, strict=True):
        env[var] = val
    for eqn in jaxpr.eqns:
        params = eqn.primitive.get_bind_params(eqn.params)
        out = eqn.primitive.bind(*map(read, eqn.invars), **params)
        if eqn.primitive.name in EXPENSIVE:
            out = jax.lax.optimization_barrier(out)
        outs = out if eqn.primitive.multiple_results else [out]
        for var, val in zip(eqn.outvars, outs, strict=True):
            env[var] = val
    return [read(v) for v in jaxpr.outvars]


class SharedTranscendentals:
    """``rhs(t, x)`` evaluated with its transcendental results materialised
    (see the module docstring); a pytree node, so numbers in ``rhs`` stay
    traced leaves."""

    def __init__(self, rhs: Any) -> None:
        self.rhs = rhs

    def __call__(self, t: Any, x: Any) -> Any:
        try:
            closed = jax.make_jaxpr(self.rhs)(t, x)
        except Exception:  # noqa: BLE001 - fall back to the field as given
            return self.rhs(t, x)
        if not any(e.primitive.name in EXPENSIVE for e in closed.jaxpr.eqns):
            return self.rhs(t, x)
        out_tree = jax.tree.structure(jax.eval_shape(self.rhs, t, x))
        flat = _eval_sharing(closed.jaxpr, closed.consts, t, x)
        return jax.tree.unflatten(out_tree, flat)


jax.tree_util.register_pytree_node(
    SharedTranscendentals,
    lambda s: ((s.rhs,), None),
    lambda _, children: SharedTranscendentals(children[0]),
)
