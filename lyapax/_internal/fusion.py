"""Values computed once into memory instead of fused into their users (XLA:CPU).

XLA's CPU loop fusion copies a cheap producer into every consumer and
evaluates it again for each element the consumer writes. Measured in lyapax:
the double gyre's ``sin``/``cos``/``exp`` about 20 times per point and stage
where the primal needs 4 (:mod:`lyapax.finite_time._shared`); the Kuramoto
phases' ``sin`` and ``cos`` about 58 times per node and step where 4 are
needed (:class:`lyapax.network.coupling.KuramotoCoupling`). An expensive
producer (a gather) is instead written to memory and read back when its
consumer reads an element more than once: the neighbour-list product's 20 row
gathers per stage, 6.5x the products themselves at n = 10^4
(``benchmarks/sparse_profile.py``). No HLO op is duplicated, so counting ops in
the compiled text does not show it.

``lax.optimization_barrier`` does not help: the CPU pipeline removes it
before fusion. Two boundaries do. A conditional: :func:`computed_once`
evaluates a function in both of its branches, so the result does not depend
on the predicate, which is only there to be opaque to the compiler; on a GPU
a conditional costs a host round trip, so :func:`computed_apart` uses it on
CPU only (chosen when the program is lowered) and the FTLE field chooses from
its devices. A loop: XLA dissolves a conditional with small branches, which
the DDE's edge terms are, so :func:`materialized` runs the function once in a
``while_loop`` whose trip count XLA cannot fold, on every platform.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

__all__ = ["computed_apart", "computed_once", "materialized"]


def computed_once(fn: Any, pred: Any, *args: Any) -> Any:
    """``fn(*args)`` through a conditional on the scalar ``pred`` whose two
    branches are both ``fn``: the same value whatever ``pred`` is, computed
    once and materialised. ``pred`` must stay unbatched under ``vmap`` (a
    batched one turns the conditional into a select, and the boundary goes)."""
    return jax.lax.cond(pred, fn, fn, *args)


def computed_apart(fn: Any, key: Any, *args: Any) -> Any:
    """``fn(*args)``, through :func:`computed_once` on CPU, as it is elsewhere.

    The predicate is read from the first leaf of ``key`` (unbatched under
    ``vmap`` when ``key`` is, so the boundary stays); with no such leaf
    ``fn(*args)`` is returned as it is. The platform is chosen when the
    program is lowered (``lax.platform_dependent``).

    Small results too: a d = 20 Kuramoto network's 40 phases' sines and
    cosines, fused, took 60% of its step (7.3 against 4.6 us on CPU with the
    boundary; the conditional costs about 0.15 us), and a 10-node sparse
    ring's run 1.3 ms against 0.7 ms.
    """
    leaves = jax.tree.leaves(key)
    if not leaves or leaves[0].size == 0:
        return fn(*args)

    def apart(first: Any, *rest: Any) -> Any:
        return computed_once(fn, jnp.ravel(first)[0] == 0, *rest)

    return jax.lax.platform_dependent(
        leaves[0], *args, cpu=apart, default=lambda _, *rest: fn(*rest)
    )


def materialized(fn: Callable[..., Any], t: Any, *args: Any) -> Any:
    """``fn(*args)``, computed once into memory before its consumers run.

    Measured in the DDE edge sums (:mod:`lyapax.dde._edge_sums`), fused:
    sines of an ``(H, n)`` table read by ``n^2`` edges cost ``n^2`` sines (4x
    the whole step at n = 500), and per-edge sines read by ``k`` tangent
    products cost ``k + 1`` times the sines (4x a sparse step at n = 10^4).
    The result of a loop is always a buffer: ``fn`` runs
    in a ``while_loop`` whose trip count, 1, is data XLA cannot fold
    (``(t >= 0) + (t < 0)``) and whose body depends on its counter, so it can
    neither unroll the loop nor hoist ``fn`` out of it.
    """
    t = jnp.asarray(t)
    once = (t >= 0).astype(jnp.int32) + (t < 0).astype(jnp.int32)
    zeros = jax.tree.map(
        lambda s: jnp.zeros(s.shape, s.dtype), jax.eval_shape(fn, *args)
    )

    def body(carry):
        # The arguments shifted by 0 * counter: without that the body would be
        # loop-invariant, hoisted out of the loop and fused again.
        nudge = carry[0].astype(jnp.result_type(float)) * 0.0
        moved = jax.tree.map(lambda a: a + nudge.astype(a.dtype), args)
        return carry[0] + 1, fn(*moved)

    return jax.lax.while_loop(lambda c: c[0] < once, body, (jnp.int32(0), zeros))[1]
