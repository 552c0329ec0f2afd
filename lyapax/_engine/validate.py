"""Call-time argument checks shared by the public entry points.

Each check raises ``ValueError``/``TypeError`` naming the argument, the value
received and what is allowed, before anything is traced.
"""

from __future__ import annotations

import math
import operator
import weakref
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import find_top_trace


def is_traced(x: Any) -> bool:
    """True for values that are abstract inside a jit/vmap/grad trace."""
    kind = type(x)
    if kind in _CONCRETE:  # one concrete leaf: no tree to walk
        return False
    if kind is tuple or kind is list:
        return any([is_traced(item) for item in x])
    if isinstance(x, _TRACER):
        return True
    if isinstance(x, _ARRAYS):
        # A concrete array's type (a tracer's is a Tracer subclass, above).
        _CONCRETE.add(kind)
        return False
    return any(isinstance(leaf, _TRACER) for leaf in jax.tree_util.tree_leaves(x))


_TRACER = jax.core.Tracer
_ARRAYS = (jax.Array, np.ndarray, np.generic)

#: Types of leaves that are never traced: Python numbers, None and the
#: concrete array types met so far (a run asks about a few values several
#: times a call; walking a one-leaf tree costs ~1 us, the lookup ~0.03 us).
_CONCRETE: set[type] = {bool, int, float, complex, type(None), np.ndarray}


def under_transformation(*values: Any) -> bool:
    """True when called inside a ``jit``/``grad``/``vmap`` trace, including
    through values that a step function only closes over (then no argument is
    a tracer): a tracer among ``values``, or a current trace that is not
    JAX's eager one (public :func:`jax.extend.core.find_top_trace`). A trace
    whose kind cannot be told reads as a caller's trace, whose run is correct
    anywhere."""
    if is_traced(values):
        return True
    return type(find_top_trace(())).__name__ != "EvalTrace"


def as_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    """``value`` as a Python int (integral floats accepted), at least ``minimum``."""
    if isinstance(value, bool) or value is None:
        raise TypeError(f"{name} must be an integer; got {value!r}")
    try:
        out = operator.index(value)
    except TypeError:
        if isinstance(value, float | np.floating) and float(value).is_integer():
            out = int(value)
        else:
            raise TypeError(
                f"{name} must be an integer; got {value!r} "
                f"of type {type(value).__name__}"
            ) from None
    if minimum is not None and out < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {name}={out}")
    return out


def as_state(name: str, state: Any) -> jax.Array:
    """A 1-D inexact state vector; finite when its values are known."""
    if state is None:
        raise TypeError(f"{name} is required (a 1-D array of the initial state)")
    # A JAX array passes as it is: jnp.asarray would cost a dispatch per call.
    arr = state if isinstance(state, jax.Array) else jnp.asarray(state)
    last = _LAST_FINITE.get("state")
    if last is not None and last() is arr:  # checked last time; arrays are immutable
        return arr
    if arr.ndim != 1:
        raise ValueError(
            f"{name} must be a 1-D array of shape (d,); got shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{name} must have at least one entry; got shape (0,)")
    if not jnp.issubdtype(arr.dtype, jnp.inexact):
        arr = arr.astype(jnp.result_type(float))
    # numpy on the host: an eager jnp reduction would compile a program per shape.
    if not is_traced(arr) and not np.isfinite(host := np.asarray(arr)).all():
        bad = np.flatnonzero(~np.isfinite(host))
        raise ValueError(
            f"{name} must be finite; entries {bad[:10].tolist()} are nan or inf"
        )
    if isinstance(arr, jax.Array) and not is_traced(arr):
        # A problem called again, or rebuilt around a kept state, is not read
        # back again (~4 us a call at d = 20); the weak reference keeps a freed
        # array's id, reused by a new one, from matching.
        _LAST_FINITE["state"] = weakref.ref(arr)
    return arr


#: The concrete array :func:`as_state` found finite last (see there).
_LAST_FINITE: dict[str, weakref.ref[Any]] = {}


def concrete_float(name: str, value: Any, *, why: str) -> float:
    """``value`` as a Python float; a clear error if it is a tracer."""
    if is_traced(value):
        raise TypeError(
            f"{name} must be a concrete number {why}; got a traced value. Pass it "
            "as a Python float (close over it) instead of as a jit argument."
        )
    return float(value)


def positive_float(
    name: str,
    value: Any,
    *,
    allowed: str = "a finite number > 0",
    why: str = "(a concrete number)",
) -> float:
    """``value`` as a Python float, finite and > 0: the one check of a scalar
    option that must be a positive amount (a tolerance, a delay, a time).

    Args:
        name: the argument's name, as the caller spells it.
        value: a real number (Python, NumPy or a concrete 0-d JAX array).
        allowed: what the error says is allowed, e.g. ``"a finite time > 0"``.
        why: why the value must be concrete (said when it is traced).

    Raises:
        TypeError: a bool, a value that is not a number, or a traced value.
        ValueError: nan, inf or a value <= 0 (the message names ``name``,
            the value and ``allowed``).
    """
    if isinstance(value, bool | str | bytes) or value is None:
        raise TypeError(f"{name} must be {allowed}; got {value!r}")
    try:
        number = concrete_float(name, value, why=why)
    except (ValueError, TypeError) as err:
        if is_traced(value):
            raise
        raise TypeError(
            f"{name} must be {allowed}; got {value!r} of type {type(value).__name__}"
        ) from err
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be {allowed}; got {name}={number!r}")
    return number


def positive_dt(dt: Any) -> Any:
    """``dt`` must be a finite positive number (checked when concrete)."""
    if dt is None:
        raise TypeError("dt is required (the time step; use dt=1.0 for maps)")
    if type(dt) is float and math.isfinite(dt) and dt > 0:
        return dt  # the common case, without numpy (~1.5 us)
    if not is_traced(dt):
        arr = np.asarray(dt)
        if arr.ndim != 0:
            raise ValueError(f"dt must be a scalar; got an array of shape {arr.shape}")
        value = float(arr)
        if not np.isfinite(value) or value <= 0:
            raise ValueError(
                f"dt must be a finite number > 0; got dt={value!r} (backward time "
                "is for ODEs: ode_problem(..., dt < 0 or backward=True); maps and "
                "delay equations run forward only)"
            )
    return dt


def same_dt(given: Any, expected: Any) -> None:
    """A ``dt`` passed beside a problem must agree with the problem's own."""
    if given is None or is_traced(given) or is_traced(expected):
        return
    if not np.isclose(float(given), float(expected), rtol=1e-12, atol=0.0):
        raise ValueError(
            f"dt={given!r} and problem.dt={expected!r} have different values; "
            "omit dt or build the problem with the step you want"
        )


def float_leaf(x: Any) -> Any:
    """A Python int becomes a float: ints in a pytree stay static (they often
    set shapes), so a parameter given as ``2`` would compile once per value."""
    return float(x) if isinstance(x, int) and not isinstance(x, bool) else x


def float_params(params: Any) -> Any:
    """A mapping of parameters as a dict with :func:`float_leaf` values; any
    other pytree unchanged."""
    if isinstance(params, Mapping):
        return {key: float_leaf(x) for key, x in params.items()}
    return params


def as_dt(dt: Any) -> Any:
    """A checked ``dt`` (:func:`positive_dt`) passed through :func:`float_leaf`."""
    return float_leaf(positive_dt(dt))


def finite_array(name: str, x: Any, dtype: Any = None) -> Any:
    """A non-empty inexact array, finite when its values are known.

    Raises:
        ValueError: an empty or 0-d array, or nan/inf entries.
    """
    arr = jnp.asarray(x) if dtype is None else jnp.asarray(x, dtype=dtype)
    if arr.ndim == 0 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty array; got shape {arr.shape}")
    if not jnp.issubdtype(arr.dtype, jnp.inexact):
        arr = arr.astype(jnp.result_type(float))
    # numpy on the host: an eager jnp reduction would compile a program per shape.
    if not is_traced(arr) and not np.isfinite(np.asarray(arr)).all():
        raise ValueError(f"{name} must be finite; it holds nan or inf")
    return arr
