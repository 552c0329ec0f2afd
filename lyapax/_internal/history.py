"""The delay ring buffer: its time convention, reads, writes and initial contents.

Convention (the published lyapax convention). The buffer has ``horizon`` slots of
the coupled variables, ``(horizon, n_cvar, n_nodes)``; with interpolation each
slot holds the value and the time derivative, ``(horizon, 2, n_cvar, n_nodes)``
(index 0 value, index 1 derivative, in state units per model time unit).
Slot ``m % horizon`` holds the sample at time ``m * dt``. At step ``t`` (going
from time ``t*dt`` to ``(t+1)*dt``) the value delayed by ``s`` steps is read from
slot ``(t - s) % horizon``, before the new state is written into slot
``(t + 1) % horizon``. So slot ``t % horizon`` always holds the present value
and the buffer covers times ``(t - horizon + 1) * dt ... t * dt``.

Initial-history slot order (``t = 0``): slot 0 holds the present value ``x(0)``
and slot ``horizon - j`` holds ``x(-j * dt)`` for ``j = 1 ... horizon - 1``; that
is, slots ``1, 2, ..., horizon - 1`` run from the oldest sample
``x(-(horizon - 1) dt)`` to the newest past sample ``x(-dt)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

#: A step counter or slot index (traced int32, or a Python int).
Slot = Any  # int | Int[ArrayLike, ""]: a step or slot index, traced or not


def _at(values: Float[Array, "H ..."], slot: Slot) -> Float[Array, ...]:
    return jax.lax.dynamic_index_in_dim(values, slot, axis=0, keepdims=False)


def read_slot(values: Float[Array, "H ..."], t: Slot, s: Slot) -> Float[Array, ...]:
    """Sample delayed by ``s`` whole steps at step ``t``: ``values[(t - s) % H]``.

    ``values`` is ``(H, ...)`` (a grid buffer, or one component of an
    interpolating buffer).
    """
    return _at(values, jnp.mod(t - s, values.shape[0]))


def read_edges(
    values: Float[Array, "H n_cvar n"], t: Slot, steps: Int[Array, "n n"]
) -> Float[Array, "n_cvar n n"]:
    """Per-edge samples ``out[c, i, j] = values[(t - steps[i, j]) % H, c, j]``.

    ``values (H, n_cvar, n)``, ``steps (n, n)`` integer; returns
    ``(n_cvar, n_target, n_source)``.
    """
    horizon, _, n = values.shape
    slots = jnp.mod(t - steps, horizon)
    # Advanced indices on axes 0 and 2 move to the front: (n, n, n_cvar).
    picked = values[slots, :, jnp.arange(n)[None, :]]
    return jnp.moveaxis(picked, -1, 0)


def _hermite_weights(theta: jax.Array):
    """Cubic Hermite basis on [0, 1]: weights of y0, m0*h, y1, m1*h."""
    # "-theta + 1.0" is "1.0 - theta" to the bit, and exact in a TPU's
    # emulated float64, which computes a constant minus a one-element array
    # 1.8e-8 off (docs/method.md, "Precision").
    one_m = -theta + 1.0
    return (
        (1.0 + 2.0 * theta) * one_m**2,
        theta * one_m**2,
        theta**2 * (-(2.0 * theta) + 3.0),
        theta**2 * (theta - 1.0),
    )


def _offset_and_fraction(position: jax.Array):
    """Left bracket (a step offset <= -1 relative to ``t``) and fraction in [0, 1].

    ``position`` is the read time in steps relative to ``t`` (<= 0 since delays
    are >= 1 step). The bracket never uses slot ``t + 1``, which is not yet
    written; at ``position == 0`` the fraction is 1 on the bracket ``[t-1, t]``.
    """
    left = jnp.minimum(jnp.floor(position), -1.0)
    return left.astype(jnp.int32), position - left


def hermite_uniform(
    buf: jax.Array, t: Any, position: Any, dt: Any, slope_now: Any = None
) -> jax.Array:
    """Cubic Hermite value at time ``(t + position) * dt`` from ``buf (H, 2, ...)``.

    ``position`` (steps relative to ``t``, scalar) lies in ``[-(H - 1), 0]``.
    ``slope_now`` replaces the derivative stored for time ``t`` (the present
    slope, known within the step before it is written to the buffer).
    """
    left, theta = _offset_and_fraction(jnp.asarray(position, dtype=buf.dtype))
    lo = _at(buf, jnp.mod(t + left, buf.shape[0]))
    hi = _at(buf, jnp.mod(t + left + 1, buf.shape[0]))
    m1 = hi[1] if slope_now is None else jnp.where(left == -1, slope_now, hi[1])
    w0, w1, w2, w3 = _hermite_weights(theta)
    return w0 * lo[0] + w1 * dt * lo[1] + w2 * hi[0] + w3 * dt * m1


def hermite_edges(
    buf: jax.Array, t: Any, positions: jax.Array, dt: Any, slope_now: Any = None
) -> jax.Array:
    """Per-edge cubic Hermite reads; ``positions (n, n)`` steps relative to ``t``.

    ``buf (H, 2, n_cvar, n)``; returns ``(n_cvar, n_target, n_source)``;
    ``slope_now (n_cvar, n)`` as in :func:`hermite_uniform`.
    """
    left, theta = _offset_and_fraction(positions)
    vals, ders = buf[:, 0], buf[:, 1]
    y0, m0 = read_edges(vals, t, -left), read_edges(ders, t, -left)
    y1, m1 = read_edges(vals, t, -left - 1), read_edges(ders, t, -left - 1)
    if slope_now is not None:
        m1 = jnp.where(left == -1, slope_now[:, None, :], m1)
    w0, w1, w2, w3 = _hermite_weights(theta)
    return w0 * y0 + w1 * dt * m0 + w2 * y1 + w3 * dt * m1


def value_slot(t: Slot, horizon: int) -> Slot:
    """Slot that receives the state of time ``(t + 1) * dt`` at step ``t``."""
    return jnp.mod(t + 1, horizon)


def slope_slot(t: Slot, horizon: int) -> Slot:
    """Slot whose derivative (interpolation) is written at step ``t``."""
    return jnp.mod(t, horizon)


def put(
    buf: Float[Array, "H ..."], slot: Slot, part: int | None, x: Float[Array, ...]
) -> Float[Array, "H ..."]:
    """``buf[slot] = x`` (or ``buf[slot, part] = x``) by ``dynamic_update_slice``.

    Not ``.at[].set`` (a scatter): a slice update is simpler to compile and to
    batch over tangent vectors, and XLA performs it in place.
    """
    head = (slot,) if part is None else (slot, part)
    update = jnp.reshape(x, (1,) * len(head) + x.shape).astype(buf.dtype)
    start = tuple(jnp.asarray(i, jnp.int32) for i in head) + (jnp.int32(0),) * x.ndim
    return jax.lax.dynamic_update_slice(buf, update, start)


def flat_offset(buf_shape: tuple[int, ...], slot: Slot, part: int | None) -> Slot:
    """Offset of ``buf[slot]`` (or ``buf[slot, part]``) in ``buf.ravel()``."""
    offset = slot * int(np.prod(buf_shape[1:]))
    if part is not None:
        offset = offset + part * int(np.prod(buf_shape[2:]))
    return offset


def buffer_shape(horizon: int, cvar_shape: tuple[int, ...], interpolate: bool):
    """``(horizon, *cvar_shape)``, or ``(horizon, 2, *cvar_shape)`` interpolating."""
    return (horizon, 2, *cvar_shape) if interpolate else (horizon, *cvar_shape)


def constant_history_buf0(
    cvar_state0: Any, horizon: int, interpolate: bool = False
) -> jax.Array:
    """Ring buffer of a constant history equal to ``cvar_state0`` for all t <= 0.

    Args:
        cvar_state0: present values of the coupled variables ``(n_cvar, n_nodes)``.
        horizon: number of slots (largest delay in steps + 1).
        interpolate: also store derivatives (all zero for a constant history).

    Returns:
        ``(horizon, n_cvar, n_nodes)`` or ``(horizon, 2, n_cvar, n_nodes)``.
    """
    x = jnp.asarray(cvar_state0)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    horizon = int(horizon)
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1 slot; got {horizon}")
    values = jnp.broadcast_to(x, (horizon, *x.shape))
    if not interpolate:
        return values
    return jnp.stack([values, jnp.zeros_like(values)], axis=1)


def sampled_history_buf0(
    history: Callable[[Any], Any],
    cvar_of: Callable[[jax.Array], jax.Array],
    cvar_now: jax.Array,
    horizon: int,
    dt: float,
    interpolate: bool,
) -> jax.Array:
    """Ring buffer filled from a history function ``history(t)`` for t < 0.

    ``history(t)`` returns the state at model time ``t`` (any shape
    ``cvar_of`` accepts); slot 0 takes ``cvar_now`` (the present state), and
    derivatives come from ``jax.jvp`` of ``history`` in ``t``.
    """
    lags = np.arange(horizon)  # slot k holds lag (-k) % horizon
    times = jnp.asarray(-(np.mod(-lags, horizon)) * float(dt), dtype=cvar_now.dtype)

    def sample(t):
        return cvar_of(jnp.asarray(history(t), dtype=cvar_now.dtype))

    if interpolate:

        def value_and_slope(t):
            return jax.jvp(sample, (t,), (jnp.ones_like(t),))

        values, slopes = jax.vmap(value_and_slope)(times)
    else:
        values = jax.vmap(sample)(times)
    values = values.at[0].set(cvar_now)
    if not interpolate:
        return values
    return jnp.stack([values, slopes], axis=1)
