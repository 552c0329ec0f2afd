"""Covariant Lyapunov vectors (Ginelli's method) for every problem kind.

:func:`covariant_vectors` runs a forward Benettin pass that keeps the ``R``
factors of every renormalisation and the frames at the saved times, then a
backward pass over ``R`` that turns the frames into the covariant vectors;
:func:`sweep_covariant_vectors` runs a batch of problems in one program;
:func:`subspace_angles` compares subspaces (degenerate exponents define only
a subspace). See :mod:`lyapax.covariant._memory` for the storage modes.
"""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax.covariant._angles import subspace_angles
    from lyapax.covariant._memory import STORAGE_MODES
    from lyapax.covariant._run import CovariantResult, covariant_vectors
    from lyapax.covariant._sweep import sweep_covariant_vectors

__all__ = [
    "STORAGE_MODES",
    "CovariantResult",
    "covariant_vectors",
    "subspace_angles",
    "sweep_covariant_vectors",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.covariant._angles": ("subspace_angles",),
        "lyapax.covariant._memory": ("STORAGE_MODES",),
        "lyapax.covariant._run": ("CovariantResult", "covariant_vectors"),
        "lyapax.covariant._sweep": ("sweep_covariant_vectors",),
    },
)
