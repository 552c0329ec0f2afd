"""Self-checks of Lyapunov runs: invariants every spectrum obeys.

:func:`check_invariants` continues a finished run for a window of steps and
checks the sum rule, each exponent against an independent estimator on the
same frames, and the zero exponent of autonomous flows; a failed check
warns by name.
"""

from typing import TYPE_CHECKING

from lyapax._internal.lazy import lazy_exports

if TYPE_CHECKING:
    from lyapax.checks._invariants import Check, InvariantReport, check_invariants

__all__ = ["Check", "InvariantReport", "check_invariants"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.checks._invariants": ("Check", "InvariantReport", "check_invariants"),
    },
)
