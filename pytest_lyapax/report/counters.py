"""Readers of the exact counters a benchmark records, for tables and gates.

``extra_info["counters"]`` (``measuring/counters.py``) holds per benchmark
``flops``, ``bytes``, ``temp_bytes``, ``compiles`` and ``executions`` (and
``argument_bytes``, ``output_bytes``), each a number or
``{"unavailable": reason}``.  They are fixed by the compiled programs, so a
gate on them (``flops:5%``) needs no noise test and no quiet machine.
Reports are untrusted input: a missing or malformed counter reads as not
available, with the reason, never as zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_lyapax.report.identity import extra_info
from pytest_lyapax.report.units import format_bytes

#: Gate name -> the counter it reads.
GATED = {
    "flops": "flops",
    "bytes": "bytes",
    "temp": "temp_bytes",
    "compiles": "compiles",
}
#: Gates that also take an absolute limit, a bare count (``compiles:1``).
COUNTED = ("compiles",)
#: What the counters table shows, in its order, with its column titles.
SHOWN = (
    ("flops", "FLOP / call"),
    ("bytes", "bytes accessed"),
    ("temp_bytes", "temp"),
    ("compiles", "compiles"),
    ("executions", "launches / call"),
)
NOT_RECORDED = "not recorded (a report without counters, or --jax-no-extras)"


def counter(record: Mapping[str, Any], name: str) -> tuple[float | None, str]:
    """A counter of a record: ``(value, "")``, or ``(None, why not)``."""
    entry = extra_info(record).get("counters")
    if not isinstance(entry, Mapping):
        return None, NOT_RECORDED
    value = entry.get(name)
    if isinstance(value, Mapping):
        why = value.get("unavailable")
        return None, str(why) if why else f"{name} is malformed"
    if value is None:
        return None, f"{name} not recorded"
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        return None, f"{name} is malformed ({value!r})"
    return float(value), ""


def has_counters(record: Mapping[str, Any]) -> bool:
    """Whether the record carries a ``counters`` entry at all."""
    return isinstance(extra_info(record).get("counters"), Mapping)


def _si(value: float) -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}"
    return f"{value:.0f} "


def format_counter(name: str, value: float | None) -> str:
    """A counter in readable units (``-`` when unknown): FLOPs with an SI
    prefix, bytes in binary units, counts as integers."""
    if value is None:
        return "-"
    if name == "flops":
        return _si(value) + "FLOP"
    if name.endswith("bytes"):
        return format_bytes(value)
    return f"{value:.0f}"


def cell(record: Mapping[str, Any], name: str) -> str:
    """A table cell: the value, or ``n/a`` when the counter is unavailable."""
    value, _ = counter(record, name)
    return format_counter(name, value) if value is not None else "n/a"


def unavailable_reasons(record: Mapping[str, Any]) -> dict[str, str]:
    """Per shown counter that is not available, why."""
    out = {}
    for name, _ in SHOWN:
        value, why = counter(record, name)
        if value is None:
            out[name] = why
    return out
