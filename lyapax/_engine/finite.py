"""Non-finite runs: say when a run went non-finite, from what it returns.

The kernel is not instrumented: a run already returns its running estimates
after every renormalisation block (``history``, cut on the host) and its final
state. Accumulated log-growth stays non-finite once it is (``nan`` and
``inf`` absorb every later finite growth), so the first non-finite row of
``history`` is the block in which a tangent (and, through the JVP, usually the
state) overflowed; the time is known to one block, ``renorm_every * dt``. A
finite run pays one ``isfinite`` over its ``k`` final estimates and over its
final state.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from lyapax._engine import validate
from lyapax._engine.warn import warn_at_caller

__all__ = ["NonFinite", "nonfinite_report", "warn_nonfinite_rows", "warn_or_raise"]


class NonFinite(NamedTuple):
    """Where a run went non-finite.

    Attributes:
        block: index of the first measured block with a non-finite estimate
            (-1 when only the final state is non-finite).
        step_range: ``(first, last)`` measured steps (1-based, counted from the
            end of the transient) between which it happened.
        time_range: ``(start, end)`` elapsed time of that block (since the
            transient; offset by the checkpoint on resume).
        in_transient: True when the estimates were non-finite from the first
            block on and a transient ran first (it may have happened there).
        state_only: the estimates are finite but the final state is not.
    """

    block: int
    step_range: tuple[int, int]
    time_range: tuple[float, float]
    in_transient: bool
    state_only: bool


def nonfinite_report(
    history: Any,
    times: Any,
    state: Any,
    *,
    renorm_every: int,
    n_transient_blocks: int,
    dt: Any,
    state_finite: Any = None,
) -> NonFinite | None:
    """None for a finite run (or under a trace), else :class:`NonFinite`.

    ``history (n_blocks, k)`` and ``times (n_blocks,)`` as the result holds
    them (host arrays), ``state`` the final state (any array); or, instead of
    ``state``, ``state_finite``: whether it is finite (a 0-d array computed
    where the state lives, so the state need not be fetched).
    """
    if validate.is_traced((history, state, state_finite)):
        return None
    history = np.asarray(history)
    finite_estimates = bool(np.isfinite(history[-1]).all())
    if state_finite is None:
        state_finite = np.isfinite(np.asarray(state)).all()
    # np.asarray: bool() of a JAX array takes ~30 us more than of its NumPy copy.
    if finite_estimates and bool(np.asarray(state_finite)):
        return None  # the common case: nothing below runs
    block_time = renorm_every * float(np.asarray(dt))
    if finite_estimates:
        n = history.shape[0]
        span = (float(times[0]) - block_time, float(times[-1]))
        return NonFinite(-1, (1, n * renorm_every), span, False, True)
    bad = ~np.isfinite(history).all(axis=1)
    block = int(np.argmax(bad))
    first, last = block * renorm_every + 1, (block + 1) * renorm_every
    in_transient = block == 0 and n_transient_blocks > 0
    span = (float(times[block]) - block_time, float(times[block]))
    return NonFinite(block, (first, last), span, in_transient, False)


def _message(where: NonFinite) -> str:
    if where.state_only:
        return (
            "the final state is non-finite (nan or inf) although the exponents "
            "are finite: the trajectory overflowed where the tangents did not "
            "see it; reduce dt, or check the model for a blow-up."
        )
    first, last = where.step_range
    t_lo, t_hi = where.time_range
    steps = (
        f"at measured step {first}"
        if first == last
        else (f"between measured steps {first} and {last}")
    )
    when = (
        f"{steps} (elapsed time {t_lo:.6g} to {t_hi:.6g}; the estimates are "
        "read once per renormalisation block)"
    )
    if where.in_transient:
        when = f"during the transient or the first measured block ({when})"
    return (
        f"the run became non-finite (nan or inf) {when}. The step may be too "
        "large for the dynamics (reduce dt), or the solution blows up (check "
        "the model and the initial state)."
    )


def warn_or_raise(where: NonFinite | None, *, check_finite: bool) -> None:
    """``FloatingPointError`` for non-finite estimates with ``check_finite``,
    else a ``UserWarning`` (also for a non-finite final state alone)."""
    if where is None:
        return
    message = _message(where)
    if check_finite and not where.state_only:
        raise FloatingPointError("non-finite Lyapunov estimates: " + message)
    hint = " result.nonfinite says when; check_finite=True raises instead."
    warn_at_caller(message + hint)


def warn_nonfinite_rows(history: Any) -> None:
    """A ``UserWarning`` naming the sweep rows whose final estimates are
    non-finite (``history (n, n_blocks, k)`` on the host; no-op under a trace)."""
    if validate.is_traced(history):
        return
    last = np.asarray(history)[:, -1, :]
    bad = np.flatnonzero(~np.isfinite(last).all(axis=1))
    if bad.size == 0:
        return
    blocks = ~np.isfinite(np.asarray(history)[bad]).all(axis=2)
    first = [int(np.argmax(b)) for b in blocks]
    shown = ", ".join(f"{r} (block {f})" for r, f in zip(bad[:10], first, strict=False))
    more = "" if bad.size <= 10 else f" and {bad.size - 10} more"
    warn_at_caller(
        f"{bad.size} of {last.shape[0]} sweep rows became non-finite (nan or inf): "
        f"rows {shown}{more}, with the first non-finite renormalisation block "
        "of each. The step may be too large for those parameters (reduce dt), "
        "or their solutions blow up."
    )
