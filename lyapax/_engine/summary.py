"""From the kernel's output buffers to the arrays of a result.

The kernel (:mod:`~lyapax._engine.benettin`) writes the accumulated
log-growth of each block, and the saved states, into buffers with room for
more rows than the run produced, so that runs of different lengths share one
compiled program. :func:`finish` turns the growth buffer into the final
estimates, error bars and running estimates with the number of blocks as
data: one program per buffer shape, shared by every step function (a new
step function compiles only its loop). :func:`keep_rows` then keeps the rows
a run produced, on the host, as NumPy arrays: an eager device slice of a new
length would compile a program of its own, which costs more than a short run,
and putting the cut rows back on a device would cost a small warm run 15-20%
(0.3-0.4 ms per call right after a kernel on CPU, for a 2 ms run). Under a
trace (a user's ``jit``) the slice is traced.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine.benettin import Lengths
from lyapax._engine.stats import running_stderr
from lyapax._engine.validate import is_traced

__all__ = [
    "Estimates",
    "ProgramEstimates",
    "column_order",
    "finish",
    "finish_program",
    "keep_rows",
    "split_rows",
]


class Estimates(eqx.Module):
    """The estimates of a run: ``exponents (k,)`` descending, ``stderr (k,)``
    (same order, see :func:`~lyapax._engine.stats.running_stderr`), the
    ``elapsed ()`` model time, and the running estimates ``history (n, k)``
    (columns ordered like ``exponents``) at ``times (n,)``. From
    :func:`finish` the rows are the growth buffer's ``capacity``, of which the
    first ``n_blocks`` are the run's."""

    exponents: Any
    stderr: Any
    elapsed: Any
    history: Any
    times: Any


class ProgramEstimates(eqx.Module):
    """:func:`finish_program`'s output: :class:`Estimates`' ``exponents``,
    ``stderr`` and ``elapsed``, with ``rows (capacity, k + 1)`` (``history``
    beside ``times``: the host fetches them in one transfer) and
    ``state_finite ()`` (the host need not fetch the state to check it)."""

    exponents: Any
    stderr: Any
    elapsed: Any
    rows: Any
    state_finite: Any


def column_order(cum: Any, elapsed: Any, xp: Any = jnp) -> Any:
    """The engine's column order of a result: exponents descending, by the
    final estimates ``cum / elapsed`` (a stable sort), computed with ``xp``
    (``jax.numpy``, or ``numpy`` on the host: the same division and order)."""
    if xp is np:
        return np.argsort(-cum / elapsed, kind="stable")
    return jnp.argsort(-cum / elapsed)


def finish(
    cum: jax.Array,
    cum0: jax.Array,
    n_blocks: Any,
    dt: Any,
    renorm_every: Any,
    t0: Any,
) -> Estimates:
    """Estimates of a run from its growth buffer (``n_blocks`` may be traced).

    Args:
        cum: ``(capacity, k)`` accumulated log-growth after each measured block
            (raw column order); rows from ``n_blocks`` on are ignored.
        cum0: ``(k,)`` accumulated log-growth at the start.
        n_blocks: measured blocks; dt: model time per step; renorm_every:
            steps per block; t0: elapsed model time at the start.

    Returns:
        :class:`Estimates` with ``history (capacity, k)`` / ``times
        (capacity,)`` of which the first ``n_blocks`` rows are the result's.
    """
    dtype = cum.dtype
    block_time = dt * renorm_every
    times = t0 + block_time * jnp.arange(1, cum.shape[0] + 1, dtype=dtype)
    last = n_blocks - 1
    elapsed = times[last]
    order = column_order(cum[last], elapsed)
    history = (cum / times[:, None])[:, order]
    stderr = running_stderr(cum, cum0, n_blocks, block_time, elapsed)[order]
    return Estimates(history[last], stderr, elapsed, history, times)


@jax.jit
def finish_program(
    cum: jax.Array, cum0: jax.Array, lengths: Any, scalars: Any, state: jax.Array
) -> ProgramEstimates:
    """:func:`finish` as a program of its own, cached by buffer shape and
    shared by every step function (folded into the kernel it would add its
    compile to every new step function's). ``lengths`` as packed by
    :meth:`~lyapax._engine.benettin.Lengths.pack`, ``scalars`` = ``[dt, t0]``,
    ``state`` the run's final state.

    Returns :class:`ProgramEstimates`."""
    sizes = Lengths.unpack(lengths)
    dt, t0 = scalars[0], scalars[1]
    est = finish(cum, cum0, sizes.n_blocks, dt, sizes.renorm_every, t0)
    rows = jnp.concatenate([est.history, est.times[:, None]], axis=1)
    state_finite = jnp.isfinite(state).all()
    return ProgramEstimates(est.exponents, est.stderr, est.elapsed, rows, state_finite)


def split_rows(rows: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(history (n, k), times (n,))`` of :func:`finish_program`'s ``rows``,
    fetched to the host once and cut there (contiguous copies)."""
    host = np.asarray(rows)[:n]
    return np.ascontiguousarray(host[:, :-1]), np.ascontiguousarray(host[:, -1])


def keep_rows(x: Any, n: int, *, axis: int, cols: int | None = None) -> Any:
    """``x`` cut to its first ``n`` entries along ``axis`` (and its first
    ``cols`` along the last axis): a host NumPy array unless ``x`` is traced,
    in which case the slice is part of the trace."""
    if x is None:
        return None
    x = x if is_traced(x) else np.asarray(x)
    index = [slice(None)] * x.ndim
    index[axis] = slice(0, n)
    if cols is not None:
        index[-1] = slice(0, cols)
    return x[tuple(index)]
