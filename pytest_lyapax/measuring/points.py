"""The points recorded per timed size that has no timing: out of memory,
over budget, skipped after a smaller size ran out of memory.

A benchmark that runs out of memory
(:func:`pytest_lyapax.measuring.measure.out_of_memory`)
is skipped with the error as the reason and recorded as an ``oom`` point;
larger sizes of its series on that backend are then skipped before they start
(``skipped_after_oom``).  Points travel to the controller like the records,
attached to the item's next test report.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_lyapax.measuring import measure
from pytest_lyapax.report.identity import is_size, series_key

POINT_ATTR = "pytest_lyapax_point"
# Per worker: (test, other parameters, label) -> smallest size that ran out of
# memory, and that test's id.
_OOM_KEY = pytest.StashKey[dict[tuple[str, str, str], tuple[int, str]]]()
# Per item: its out-of-memory point, until its report carries it.
_POINT_KEY = pytest.StashKey[dict[str, Any]]()


def series_of(item: pytest.Item, label: str) -> tuple[tuple[str, str, str], Any]:
    """The item's series (test id, other parameters, label) and its size."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return series_key(item.nodeid, params, label), params.get("jax_size")


def set_point(item: pytest.Item, point: dict[str, Any]) -> None:
    """Attach a point (out of memory, over budget) to the item's next report."""
    item.stash[_POINT_KEY] = point


def _point(item: pytest.Item, label: str, size: Any, status: str, message: str):
    item.stash[_POINT_KEY] = {
        "fullname": item.nodeid,
        "backend": label,
        "size": size if is_size(size) else None,
        "status": status,
        "message": message,
    }


def skip_after_oom(item: pytest.Item, label: str | None) -> None:
    """Skip (before set-up) a benchmark larger than a size of its series that
    ran out of memory on this backend in this worker."""
    if label is None or "benchmark" not in getattr(item, "fixturenames", ()):
        return
    key, size = series_of(item, label)
    seen = item.config.stash.get(_OOM_KEY, {}).get(key)
    if seen is None or not is_size(size) or size <= seen[0]:
        return
    reason = (
        f"skipped after out of memory: {seen[1]} ran out of memory at size "
        f"{seen[0]} on backend {label!r}"
    )
    _point(item, label, size, measure.SKIPPED_AFTER_OOM, reason)
    raise pytest.skip.Exception(reason, _use_item_location=True)


def oom_reason(item: pytest.Item, label: str | None, exc: BaseException) -> str | None:
    """If a benchmark's error says it ran out of memory: record the point,
    remember the size for its series, and return the skip reason."""
    if label is None or "benchmark" not in getattr(item, "fixturenames", ()):
        return None
    if not measure.out_of_memory(exc):
        return None
    key, size = series_of(item, label)
    message = measure.short_message(exc)
    if is_size(size):
        seen = item.config.stash.setdefault(_OOM_KEY, {})
        if key not in seen or size < seen[key][0]:
            seen[key] = (size, item.nodeid)
    _point(item, label, size, measure.OOM, message)
    at = f" at size {size}" if size is not None else ""
    return f"out of memory on backend {label!r}{at}: {message}"


def pop_point(item: pytest.Item) -> str | None:
    """The item's out-of-memory point, encoded for its report, once."""
    point = item.stash.get(_POINT_KEY, None)
    if point is None:
        return None
    del item.stash[_POINT_KEY]
    return json.dumps(point)
