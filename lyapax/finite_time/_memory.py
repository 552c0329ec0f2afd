"""Memory an FTLE field needs, checked before anything runs."""

from __future__ import annotations

from typing import Any

import numpy as np

from lyapax._engine import validate
from lyapax._internal.memory import device_free, host_available

#: Default points per chunk when ``batch_size`` is None: large enough that a
#: chunk's loop amortises its launches, small enough to stay near the caches.
DEFAULT_CHUNK = 1 << 15
#: The default on a CPU, where a chunk's arrays should fit the core's cache
#: (double gyre, RK6, one chunk timed alone: 8 190 points 62 000 points/s,
#: 12 000 57 000, 16 384 40 000, 2 048 22 000).
CPU_CHUNK = 1 << 13
#: Chunk lengths on a CPU are multiples of this (per device): an odd length
#: ran at half the speed (8 191 points 30 000 points/s, 8 190 62 000), as
#: XLA:CPU's loops then do not vectorise.
CPU_ALIGN = 8


def even_chunk(
    n: int,
    batch_size: Any,
    n_devices: int = 1,
    default: int = DEFAULT_CHUNK,
    align: int = 1,
) -> int:
    """Points per chunk: ``n`` cut into ``ceil(n / batch_size)`` chunks of
    equal size (so the padded last chunk wastes at most a few points, where
    chunks of exactly ``batch_size`` could waste almost a whole one). With
    ``batch_size=None`` chunks have at most ``default`` points and there are
    at least ``n_devices`` of them, so that every device gets work. ``align``:
    the chunk is rounded up to a multiple of it (down where that would pass
    a given ``batch_size``).

    Raises:
        ValueError / TypeError: ``batch_size`` not an integer >= 1.
    """
    if batch_size is None:
        limit = min(default, -(-n // max(1, n_devices)))
    else:
        limit = validate.as_int("batch_size", batch_size, minimum=1)
    pieces = -(-n // limit)
    chunk = -(-n // pieces)
    if align > 1:
        up = -(-chunk // align) * align
        if batch_size is None or up <= limit:
            chunk = up
        elif limit >= align:
            chunk = limit // align * align
    return chunk


def chunk_bytes(chunk: int, d: int, n_stages: int, itemsize: int) -> int:
    """Device bytes of one chunk: the point and its ``d`` tangents (``d + d^2``
    numbers) for the carry, every stage and the stage sum, plus the outputs."""
    per_point = (d + d * d) * (n_stages + 3) + 3 * d + 2
    return chunk * per_point * itemsize


def result_bytes(n: int, d: int, itemsize: int) -> int:
    """Bytes of the returned field: ``ftle_max, ftle_min (n,)``, ``direction``
    and ``flow_map (n, d)``."""
    return n * (2 + 2 * d) * itemsize


def available_bytes(device: Any) -> int | None:
    """Free memory of ``device``: its allocator's limit minus use (GPU/TPU), or
    the host's available memory (CPU); None when unknown."""
    free = device_free(device)
    return host_available() if free is None else free


def check_fits(
    n: int, chunk: int, d: int, n_stages: int, dtype: Any, devices: list[Any], limit
) -> None:
    """Raise ``MemoryError`` when a chunk (per device) plus the result would not
    fit in ``limit`` bytes (None: what the first device reports free).

    Raises:
        MemoryError: naming the sizes and a ``batch_size`` that would fit.
    """
    itemsize = np.dtype(dtype).itemsize
    free = available_bytes(devices[0]) if limit is None else int(limit)
    if free is None:
        return
    per_device = -(-chunk // len(devices))
    need = chunk_bytes(per_device, d, n_stages, itemsize) + result_bytes(n, d, itemsize)
    if need <= free:
        return
    room = free - result_bytes(n, d, itemsize)
    per_point = chunk_bytes(1, d, n_stages, itemsize)
    if room < per_point:
        raise MemoryError(
            f"points has {n} rows of d={d}: the field alone needs "
            f"{result_bytes(n, d, itemsize) / 2**30:.2f} GiB and "
            f"{free / 2**30:.2f} GiB are free; compute it in parts (slices of "
            "points) and join them"
        )
    fits = max(1, room // per_point) * len(devices)
    raise MemoryError(
        f"an FTLE field of {n} points with batch_size={chunk} (d={d}, "
        f"{n_stages} stages) needs {need / 2**30:.2f} GiB and {free / 2**30:.2f} "
        f"GiB are free; pass batch_size={int(fits)} or less"
    )
