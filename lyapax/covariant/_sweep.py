"""``sweep_covariant_vectors``: covariant vectors of a batch of problems."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import numpy as np

from lyapax._engine.abstract import AbstractProblem
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._internal import batching
from lyapax._internal.rows import problem_family
from lyapax.covariant import _memory as memory
from lyapax.covariant._run import CovariantResult, covariant_vectors

__all__ = ["sweep_covariant_vectors"]


@holds_one_blas_thread
def sweep_covariant_vectors(
    make_problem: Callable[[Any], AbstractProblem],
    params_batch: Any,
    n_steps: int,
    *,
    k: int | None = None,
    renorm_every: int = 1,
    t_transient: float = 0.0,
    seed: int = 0,
    t_backward: float | None = None,
    save_every: int | None = None,
    batch_size: int | None = None,
) -> CovariantResult:
    """Covariant vectors of ``make_problem(row)`` for every row of ``params_batch``.

    One ``jax.vmap``-ed, jitted program runs ``batch_size`` rows at a time
    (default: the whole batch); every array field of the result gains a
    leading batch axis (``vectors (n_batch, n_saved, d, k)``), as NumPy
    arrays. Rows must share one structure (functions, shapes, ``dt``). The
    same is ``jax.vmap(lambda p: covariant_vectors(make_problem(p), ...))``
    written by hand: inside a trace ``covariant_vectors`` runs on the device
    in one piece (``storage="device"``).

    Args:
        make_problem: ``row -> problem`` (any kind); ``row`` is one slice of
            ``params_batch`` along its leading axis.
        params_batch: a pytree whose leaves share a leading batch axis.
        n_steps, k, renorm_every, t_transient, seed, t_backward, save_every:
            as :func:`~lyapax.covariant.covariant_vectors`, shared by all rows.
        batch_size: rows per program call (the last chunk is padded).

    Raises:
        TypeError: ``make_problem`` is not callable.
        ValueError: no leaves, a scalar leaf, leaves of different batch
            sizes (each named), an empty batch, a bad ``batch_size``.
        MemoryError: a chunk whose vectors cannot fit in free memory.
    """
    make_problem = problem_family(make_problem).make_problem  # checked once
    if not jax.tree.leaves(params_batch):
        raise ValueError(
            "params_batch must be a pytree of arrays with a leading batch axis "
            f"(one entry per row); got {params_batch!r}"
        )
    # The sweeps' own check: one leading size, each scalar leaf named.
    n, _ = batching.batch_size_of(params_batch, None, None)
    size, _ = batching.chunk_layout(n, batch_size, 1, pad=True)  # the sweeps' chunk
    kw = dict(
        k=k,
        renorm_every=renorm_every,
        t_transient=t_transient,
        seed=seed,
        t_backward=t_backward,
        save_every=save_every,
    )

    one = partial(_one_row, make_problem, n_steps, kw)
    row0 = jax.tree.map(lambda x: x[0], params_batch)
    shapes = jax.eval_shape(one, row0)
    per_row = sum(
        math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(shapes)
    )
    free = memory.available_bytes()
    if 2 * size * per_row > free[0]:
        raise MemoryError(
            f"sweep_covariant_vectors: {size} rows per call need about "
            f"{2 * size * per_row} bytes on the device ({per_row} per row, "
            f"twice for the buffers); {free[0]} are free. Pass a smaller "
            "batch_size, a larger save_every or a smaller k"
        )

    plan = batching.Plan(n, size, None, True)
    static = (make_problem, n_steps, tuple(kw.items()), plan.mesh)
    compiled: Callable[[Any], Any]
    try:
        hash(static)
    except TypeError:  # an unhashable option: a program for this call only
        compiled = jax.jit(batching.split_rows(jax.vmap(one), plan.mesh))
    else:
        # One program per family and options: a new jax.jit of a new closure
        # at every call compiled again each time (~1 s).
        compiled = partial(_sweep_program, static=static)

    def chunk(rows):
        # NumPy rows, as single runs return (gathered from every process in a
        # multi-process job).
        return jax.tree.map(batching.host_array, compiled(rows))

    out, extra = plan.run(chunk, (params_batch,))
    t_back, steps = (np.asarray(x)[0] for x in extra)
    return CovariantResult(
        storage="device",
        t_backward=float(t_back),
        steps=steps,
        **{key: out[key] for key in _ARRAYS},  # type: ignore[arg-type]
    )


_ARRAYS = ("exponents", "times", "states", "vectors", "local_growth", "stderr")


def _one_row(make_problem: Any, n_steps: int, kw: dict[str, Any], p: Any) -> Any:
    """One row's arrays and ``(t_backward, steps)``."""
    res = covariant_vectors(make_problem(p), n_steps, **kw)
    return {name: getattr(res, name) for name in _ARRAYS}, (res.t_backward, res.steps)


@partial(jax.jit, static_argnames=("static",))
def _sweep_program(rows: Any, *, static: tuple[Any, Any, Any, Any]) -> Any:
    """The sweep of ``rows``, compiled once per ``static``: ``(make_problem,
    n_steps, options as items, mesh)``."""
    make_problem, n_steps, items, mesh = static
    one = partial(_one_row, make_problem, n_steps, dict(items))
    return batching.split_rows(jax.vmap(one), mesh)(rows)
