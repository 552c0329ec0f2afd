"""Free memory of the host and of a device, for checks made before a run.

Shared by the entry points that refuse a request too large to fit (covariant
vectors, FTLE fields): one reader of ``/proc/meminfo`` and of a device's
allocator statistics.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["device_free", "host_available"]


def host_available() -> int | None:
    """Bytes of host memory available now (``MemAvailable``, else the free
    physical pages); None where neither can be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def device_free(device: Any) -> int | None:
    """Bytes free in ``device``'s allocator (its limit minus its use), or None
    when the backend reports no limit (the CPU: host memory is the device's)."""
    try:
        stats = device.memory_stats()
    except Exception:  # noqa: BLE001 - not every backend reports statistics
        return None
    if not stats or "bytes_limit" not in stats:
        return None
    return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
