"""Shape-annotated types shared by the public signatures (documentation only:
nothing checks them at run time).

Axis names: ``d`` phase-space size, ``k`` tracked exponents, ``n_renorm``
renormalisations, ``n_saved`` saved states, ``*batch`` the leading row axis a
sweep adds to every field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxtyping import Array, ArrayLike, Float, Int

#: A time step or other real number given by the user (a float or 0-d array).
Scalar = float | Float[ArrayLike, ""]
#: An initial state as the user may give it.
StateLike = Float[ArrayLike, " d"]
#: ``state (d,) -> state (d,)``, or ``(state, step_index) -> state`` for a step
#: declaring ``uses_step_index``.
StepFn = Callable[..., Any]
#: A seed, or one seed per sweep row.
Seed = int | Int[ArrayLike, " *batch"]

Exponents = Float[Array, "*batch k"]
History = Float[Array, "*batch n_renorm k"]
Times = Float[Array, "*batch n_renorm"]
Saved = Float[Array, "*batch n_saved d"]
SaveTimes = Float[Array, "*batch n_saved"]
