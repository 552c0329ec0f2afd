"""Delays in model time -> delays in steps, with the checks every entry point shares.

Two readings of a delay exist. *Grid* mode rounds ``tau / dt`` to a whole number
of steps (:func:`resolve_tau_steps`) and reads one stored sample per step.
*Interpolated* mode keeps ``tau / dt`` as a real number of steps (at least 1)
and reads between stored samples. Every delay handed to the step functions has
been through one of these, so the step code never sees a bad value.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from lyapax._engine import validate
from lyapax._engine.warn import warn_at_caller

# Relative tolerance for "tau is a multiple of dt": tau / dt computed in
# floating point (0.3 / 0.01 = 29.999999999999996) must count as whole.
_WHOLE_RTOL = 1e-9


def _concrete_dt(dt: Any) -> float:
    validate.positive_dt(dt)
    return validate.concrete_float("dt", dt, why="to size the delay ring buffer")


def _concrete_tau(tau: Any) -> float:
    if tau is None:
        raise TypeError("tau is required: the delay, in model time units")
    return validate.positive_float("tau", tau, why="to size the delay ring buffer")


def _snap(ratio: float) -> float:
    """``ratio`` replaced by the nearest integer when it is one up to rounding."""
    nearest = round(ratio)
    if abs(ratio - nearest) <= _WHOLE_RTOL * max(1.0, abs(ratio)):
        return float(nearest)
    return ratio


def resolve_tau_steps(tau: float, dt: float, warn_tol: float = 1e-6) -> int:
    """The delay ``tau`` as a whole number of steps of size ``dt`` (grid mode).

    Args:
        tau: delay in model time units (finite, > 0).
        dt: time step (finite, > 0).
        warn_tol: relative mismatch ``|tau_steps * dt - tau| / tau`` above
            which to warn (>= 0).

    Returns:
        ``round(tau / dt)``, at least 1. The delay actually simulated is then
        ``tau_eff(tau_steps, dt) = tau_steps * dt``.

    Warns:
        UserWarning: when ``tau`` is not a multiple of ``dt`` within
        ``warn_tol``; the message gives the delay actually used.

    Raises:
        ValueError: ``tau`` or ``dt`` not finite and positive, ``tau < dt / 2``
            (it would round to no delay at all), ``warn_tol`` negative.
    """
    if not float(warn_tol) >= 0:
        raise ValueError(f"warn_tol must be a number >= 0; got warn_tol={warn_tol!r}")
    tau_value, dt_value = _concrete_tau(tau), _concrete_dt(dt)
    ratio = tau_value / dt_value
    steps = round(ratio)
    if steps < 1:
        raise ValueError(
            f"tau={tau_value!r} is shorter than dt/2 (dt={dt_value!r}): it rounds to "
            "zero steps, i.e. no delay. Use a step dt <= tau."
        )
    if abs(steps * dt_value - tau_value) > float(warn_tol) * tau_value:
        warn_at_caller(
            f"tau={tau_value!r} is not a multiple of dt={dt_value!r}; the delay "
            f"used is tau_steps={steps} steps, i.e. tau_eff={steps * dt_value!r}. "
            "Pass interpolate=True to use tau exactly."
        )
    return steps


def effective_tau(tau: float, dt: float, interpolate: bool = False) -> float:
    """The delay actually simulated for a requested ``tau`` at step ``dt``.

    Grid mode (default) rounds to ``resolve_tau_steps(tau, dt) * dt`` (without
    the warning); interpolated mode uses ``tau`` itself (requires ``tau >= dt``).
    """
    if interpolate:
        return interpolated_tau_steps(tau, dt) * _concrete_dt(dt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return resolve_tau_steps(tau, dt) * _concrete_dt(dt)


def interpolated_tau_steps(tau: float, dt: float) -> float:
    """``tau / dt`` as a real number of steps for interpolated reads (>= 1).

    Raises:
        ValueError: ``tau < dt``: the delayed value at a Runge-Kutta stage would
            lie inside the step being computed.
    """
    tau_value, dt_value = _concrete_tau(tau), _concrete_dt(dt)
    ratio = _snap(tau_value / dt_value)
    if ratio < 1.0:
        raise ValueError(
            f"interpolate=True needs tau >= dt (tau_steps >= 1), but "
            f"tau={tau_value!r} < dt={dt_value!r}: the delayed value would fall "
            "inside the step being computed. Reduce dt or use interpolate=False."
        )
    return ratio


def horizon_for(max_steps: float) -> int:
    """Ring-buffer slots needed for delays of up to ``max_steps`` steps.

    The buffer holds the present sample and ``ceil(max_steps)`` past ones.
    """
    return int(math.ceil(max_steps)) + 1


def _as_square(
    name: str, matrix: Any, n: int, *, integer: bool, at: Any = None
) -> np.ndarray:
    """``matrix (n, n)`` checked, as floats; ``at(matrix)`` (its entries on the
    stored edges of sparse weights) instead of the whole matrix when given."""
    if validate.is_traced(matrix):
        raise TypeError(
            f"{name} must be concrete (it sets the ring-buffer length); got a "
            "traced value"
        )
    shape = tuple(getattr(matrix, "shape", np.shape(matrix)))
    arr = np.asarray(matrix) if at is None else at(matrix)
    if shape != (n, n):
        raise ValueError(
            f"{name} must be an (n, n) = ({n}, {n}) matrix indexed [target, "
            f"source] like the weights; got shape {shape}"
        )
    if integer and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating) or not np.all(
            np.isfinite(arr) & (arr == np.round(arr))
        ):
            raise ValueError(f"{name} must hold whole numbers of steps; got {arr!r}")
    arr = arr.astype(float)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite; it holds nan or inf entries")
    if np.any(arr < 0):
        bad = np.argwhere(arr < 0)[:5].tolist()
        raise ValueError(f"{name} must be >= 0; negative entries at {bad}")
    return arr


def edge_delay_steps(
    weights: np.ndarray,
    dt: Any,
    *,
    tau: Any = None,
    delay_steps: Any = None,
    interpolate: bool,
    at: Any = None,
) -> np.ndarray:
    """Per-edge delays in steps: integers (grid) or reals >= 1 (interpolated).

    Exactly one of ``tau`` (model time, ``(n, n)``) and ``delay_steps`` (whole
    steps, ``(n, n)``) is given. Edges with zero weight never contribute, so
    their delay is clamped into the valid range instead of being rejected.
    With sparse weights, ``weights`` is their ``(n, w)`` slot values and
    ``at(matrix)`` reads a delay matrix on those slots (dense or sparse).

    Raises:
        ValueError: wrong shape, negative or non-finite entries, a non-integer
            ``delay_steps``, or (interpolated) a weighted edge delayed by less
            than one step.
    """
    n = weights.shape[0]
    dt_value = _concrete_dt(dt)
    if tau is not None:
        steps = _as_square("tau", tau, n, integer=False, at=at) / dt_value
        steps = np.vectorize(_snap)(steps) if steps.size else steps
    else:
        steps = _as_square("delay_steps", delay_steps, n, integer=True, at=at)
    live = np.asarray(weights) != 0
    if interpolate:
        short = live & (steps < 1.0)
        if short.any():
            bad = np.argwhere(short)[:5].tolist()
            raise ValueError(
                "interpolate=True needs every weighted edge delayed by at least "
                f"one step (tau >= dt); edges {bad} are shorter. Reduce dt or use "
                "interpolate=False."
            )
        return np.where(live, steps, np.maximum(steps, 1.0))
    rounded = np.round(steps)
    if tau is not None and np.any(live & (rounded != steps)):
        warn_at_caller(
            f"some per-edge delays are not multiples of dt={dt_value!r}; they are "
            "rounded to whole steps (max change "
            f"{float(np.max(np.abs(rounded - steps)) * dt_value)!r} time units). "
            "Pass interpolate=True to use them exactly."
        )
    return rounded.astype(np.int64)
