"""The call forms of the indicators that follow orbits for ``n_steps`` steps
(the two-trajectory exponent, GALI/SALI, MEGNO), resolved to the batched rows
of :mod:`lyapax._internal.rows`.

Without ``params_batch``/``state0_batch`` the input is one row and the
indicator returns unbatched fields (:func:`lyapax._internal.rows.unbatch`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lyapax._engine import validate
from lyapax._internal.rows import Rows, resolve


def resolve_orbit_rows(
    caller: str,
    target: Any,
    state0: Any,
    dt: Any,
    n_steps: Any,
    params_batch: Any,
    state0_batch: Any,
    seed: Any,
    batch_size: Any,
    devices: Any,
) -> tuple[Rows, int]:
    """The rows and ``n_steps`` of an indicator that runs ``n_steps`` steps
    of each orbit, from its call forms ``caller(problem, n_steps)``,
    ``caller(problem, n_steps=...)`` and ``caller(step_fn, state0, dt,
    n_steps)``.

    Raises:
        TypeError: as :func:`lyapax._internal.rows.resolve`; ``n_steps``
            missing or not an integer.
        ValueError: as :func:`lyapax._internal.rows.resolve`; ``n_steps`` < 1.
    """
    if n_steps is None and is_count(state0):  # caller(problem, 1000)
        n_steps, state0 = validate.as_int("n_steps", state0), None
    rows = resolve(
        caller,
        target,
        state0,
        dt,
        params_batch,
        state0_batch,
        seed,
        (batch_size, devices, True),
        one_row=True,
    )
    if n_steps is None:
        raise TypeError(f"{caller} requires n_steps")
    return rows, validate.as_int("n_steps", n_steps, minimum=1)


def is_count(x: Any) -> bool:
    """A Python/NumPy integer (the problem form's second argument)."""
    return isinstance(x, int | np.integer) and not isinstance(x, bool)
