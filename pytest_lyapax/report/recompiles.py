"""The reader of ``extra_info["recompiles"]``: XLA compiles counted during a
benchmark's rounds, and JAX's reasons (written by ``measuring/recompiles.py``).

Tolerant like every reader of a report: a missing or malformed entry reads
as None (not recorded), never as zero compiles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_lyapax.report.identity import extra_info


@dataclass(frozen=True)
class Recompiles:
    """Compiles during the rounds (``count``) and one reason per kind."""

    count: int
    reasons: tuple[str, ...]


def recompiles_of(record: Mapping[str, Any]) -> Recompiles | None:
    """A record's compiles during its rounds (None: not recorded)."""
    entry = extra_info(record).get("recompiles")
    if not isinstance(entry, Mapping):
        return None
    count = entry.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        return None
    reasons = entry.get("reasons")
    listed = tuple(str(r) for r in reasons) if isinstance(reasons, list) else ()
    return Recompiles(count, listed)
