"""What both sweeps share beyond their rows (:mod:`lyapax._internal.rows`):
the warning before a large saved trajectory is allocated."""

from __future__ import annotations

from typing import Any

import numpy as np

from lyapax._engine.warn import warn_at_caller
from lyapax._internal import batching

#: Saved trajectories larger than this many bytes (on the device per call, or
#: on the host in total) trigger a ``UserWarning`` before they are allocated.
TRAJECTORY_WARN_BYTES = 2**30


def warn_trajectory(
    plan: batching.Plan, n_saved: int, d: int, dtype: Any, to_host: bool
):
    itemsize = np.dtype(dtype).itemsize
    host_bytes = plan.n * n_saved * d * itemsize
    device_bytes = plan.padded * n_saved * d * itemsize
    if not to_host and plan.chunk < plan.n:
        device_bytes = host_bytes  # chunks stay on the device until joined
    biggest, where = (host_bytes, "host") if to_host else (device_bytes, "device")
    if biggest > TRAJECTORY_WARN_BYTES:
        warn_at_caller(
            f"saving states will allocate {biggest / 2**30:.2f} GiB of trajectory "
            f"on the {where} ({plan.n} rows x {n_saved} saved states x d={d}); "
            "increase decimate, or pass batch_size with trajectory_to_host=True "
            "to keep one chunk at a time on the device"
        )
