"""The call forms of the indicators that follow orbits for ``n_steps`` steps
(the two-trajectory exponent, GALI/SALI, MEGNO), resolved to the batched rows
of :mod:`lyapax._internal.rows`, and the values they record every few steps
inside their loops (:func:`record`).

Without ``params_batch``/``state0_batch`` the input is one row and the
indicator returns unbatched fields (:func:`lyapax._internal.rows.unbatch`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax._internal.rows import Rows, resolve


def resolve_orbit_rows(caller: str, arguments: Mapping[str, Any]) -> tuple[Rows, int]:
    """The rows and ``n_steps`` of an indicator that runs ``n_steps`` steps
    of each orbit, from its call forms ``caller(problem, n_steps)``,
    ``caller(problem, n_steps=...)`` and ``caller(step_fn, state0, dt,
    n_steps)``.

    ``arguments`` maps the indicator's published argument names
    (``step_fn_or_problem``, ``state0``, ``dt``, ``n_steps``,
    ``params_batch``, ``state0_batch``, ``seed``, ``batch_size``,
    ``devices``) to their values: the indicator's ``locals()``.

    Raises:
        TypeError: as :func:`lyapax._internal.rows.resolve`; ``n_steps``
            missing or not an integer.
        ValueError: as :func:`lyapax._internal.rows.resolve`; ``n_steps`` < 1.
    """
    state0, n_steps = arguments["state0"], arguments["n_steps"]
    if n_steps is None and is_count(state0):  # caller(problem, 1000)
        n_steps, state0 = validate.as_int("n_steps", state0), None
    rows = resolve(
        caller,
        arguments["step_fn_or_problem"],
        state0,
        arguments["dt"],
        arguments["params_batch"],
        arguments["state0_batch"],
        arguments["seed"],
        (arguments["batch_size"], arguments["devices"], True),
        one_row=True,
    )
    if n_steps is None:
        raise TypeError(f"{caller} requires n_steps")
    return rows, validate.as_int("n_steps", n_steps, minimum=1)


def is_count(x: Any) -> bool:
    """A Python/NumPy integer (the problem form's second argument)."""
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


def record(
    buffers: tuple[jax.Array, ...], values: tuple[Any, ...], n: Any, every: Any
) -> tuple[jax.Array, ...]:
    """``buffers`` with ``values`` written at slot ``n // every - 1`` when
    ``n``, the steps done, is a multiple of ``every``: one record every
    ``every`` steps (inside the traced loop; ``every`` is data)."""
    every = jnp.maximum(every, 1)
    write = n % every == 0
    j = jnp.clip(n // every - 1, 0, buffers[0].shape[0] - 1)
    return tuple(
        b.at[j].set(jnp.where(write, v, b[j]))
        for b, v in zip(buffers, values, strict=True)
    )
