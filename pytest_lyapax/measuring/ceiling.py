"""Whether a call fits in memory, predicted before it is made.

In a ceiling follow-up run (run/search.py sets ``PYTEST_LYAPAX_CEILING``),
the benchmark fixture asks :func:`check_fits` before its first call: the
compiled program's argument, output and temporary bytes
(``Compiled.memory_analysis()``) against what the device has free
(``Device.memory_stats()``: ``bytes_limit - bytes_in_use``; on a CPU, the
host's available memory with a safety margin).  A program predicted not to
fit raises :class:`MemoryError` with both numbers, which the plugin records
as an out-of-memory point, as it does a real out-of-memory error; the worker
goes on.  A program that cannot be lowered is simply called: the real call
decides.

``PYTEST_LYAPAX_MEMORY_LIMIT`` (bytes) replaces the device's free memory:
for tests, and to ask "would it fit in N bytes?".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

CEILING_ENV = "PYTEST_LYAPAX_CEILING"
LIMIT_ENV = "PYTEST_LYAPAX_MEMORY_LIMIT"
# Share of the host's available memory a CPU program may plan to use.
CPU_MARGIN = 0.8
GIB = 1024**3


def active() -> bool:
    """Whether this process runs a ceiling search's sizes."""
    return bool(os.environ.get(CEILING_ENV))


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def free_bytes() -> int | None:
    """Bytes a program may use on this process's default device (None: unknown)."""
    fake = os.environ.get(LIMIT_ENV, "").strip()
    if fake:
        try:
            return int(float(fake))
        except ValueError:
            return None
    import jax

    device = jax.devices()[0]
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - a backend without memory statistics
        stats = None
    if isinstance(stats, Mapping) and isinstance(stats.get("bytes_limit"), int):
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0) or 0)
    available = _meminfo_available()
    return None if available is None else int(available * CPU_MARGIN)


def program_bytes(function: Callable[..., Any], args: Any, kwargs: Any) -> int | None:
    """Argument + output + temporary bytes of ``function``'s compiled program
    for these arguments (None: it cannot be lowered or has no analysis)."""
    lower = getattr(function, "lower", None)
    if not callable(lower):
        return None
    try:
        stats = lower(*args, **kwargs).compile().memory_analysis()
    except Exception:  # noqa: BLE001 - not lowerable: the real call decides
        return None
    parts = [
        getattr(stats, name, None)
        for name in (
            "argument_size_in_bytes",
            "output_size_in_bytes",
            "temp_size_in_bytes",
        )
    ]
    if not all(isinstance(p, int) and p >= 0 for p in parts):
        return None
    return sum(int(p) for p in parts if isinstance(p, int))


def does_not_fit(asked: int, free: int) -> str:
    return f"does not fit ({asked / GIB:.3g} GiB asked, {free / GIB:.3g} GiB free)"


def check_fits(function: Callable[..., Any], args: Any, kwargs: Any) -> None:
    """Raise :class:`MemoryError` when ``function``'s program is predicted
    not to fit in the device's free memory."""
    asked = program_bytes(function, args, kwargs)
    if asked is None:
        return
    free = free_bytes()
    if free is not None and asked > free:
        raise MemoryError(does_not_fit(asked, free))
