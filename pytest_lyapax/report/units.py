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


def format_bytes(value: float | None) -> str:
    """A byte count in binary units (``512 B``, ``1.5 KiB`` .. ``TiB``; ``-``
    when unknown). Whole bytes below 1 KiB (``1000 B``, not ``1e+03 B``)."""
    if value is None:
        return "-"
    for unit, power in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if value >= 2**power:
            return f"{value / 2**power:.3g} {unit}"
    return f"{value:.0f} B"
