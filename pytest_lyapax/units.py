"""Durations as text, for every report view. It imports nothing of the
package, so the analysis and the tables can both import it (a circle
between them before)."""

from __future__ import annotations

import math


def format_seconds(value: float | None) -> str:
    """Format a duration with a readable unit (ns, us, ms or s)."""
    if value is None or not math.isfinite(value):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"
