"""Shape-annotated types shared by the public signatures.

They cost nothing at run time; the test suite checks them on every call of the
public entry points (jaxtyping with beartype: ``tests/support/shape_check.py``), so an
annotation narrower than what a function accepts fails the suite.

Axis names: ``d`` phase-space size, ``k`` tracked exponents, ``n_renorm``
renormalisations, ``n_saved`` saved states, ``*batch`` the leading row axis a
sweep adds to every field.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

#: A time step or other real number given by the user (a number or 0-d array).
Scalar = float | int | Float[ArrayLike, ""]
#: An initial state as the user may give it (an array or a list of numbers).
StateLike = Float[ArrayLike, " d"] | Sequence[float]
#: ``state (d,) -> state (d,)``, or ``(state, step_index) -> state`` for a step
#: declaring ``uses_step_index``.
StepFn = Callable[..., Any]
#: A seed, or one seed per sweep row.
Seed = int | Int[ArrayLike, " *batch"]

Exponents = Float[Array, "*batch k"]
# Rows of a single run are NumPy (cut on the host); of a sweep, JAX arrays.
History = Float[Array, "*batch n_renorm k"] | Float[np.ndarray, "*batch n_renorm k"]
Times = Float[Array, "*batch n_renorm"] | Float[np.ndarray, "*batch n_renorm"]
Saved = Float[Array, "*batch n_saved d"] | Float[np.ndarray, "*batch n_saved d"]
SaveTimes = Float[Array, "*batch n_saved"] | Float[np.ndarray, "*batch n_saved"]
