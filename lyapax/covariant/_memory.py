"""Segments of the forward pass and the memory each storage mode needs.

The forward pass runs in segments of at most ``saves_cap`` saved frames
(about :data:`SEGMENT_BYTES` of frames), so a run of any length is a loop of
calls of one compiled program. What a mode keeps between the passes:

- ``"device"``: every segment's frames and states on the device;
- ``"host"``: each segment's frames copied to host memory as it ends (the
  covariant vectors then overwrite them in place);
- ``"recompute"``: only the segment's starting point and frame (a
  checkpoint); the backward pass replays the segment from it with the same
  program, which regenerates the frames bit for bit.

Every mode keeps the ``R`` factors of the whole window on the device (``k *
k`` numbers per renormalisation block; only ``log diag R`` and the growth
rates come to the host) and returns the vectors as host arrays.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax

from lyapax._engine.benettin import capacity
from lyapax._internal.memory import device_free, host_available

__all__ = [
    "SEGMENT_BYTES",
    "STORAGE_MODES",
    "Footprint",
    "Segments",
    "available_bytes",
    "choose_storage",
    "footprints",
    "saved_calls",
    "segments",
]

#: Accepted values of ``storage=``.
STORAGE_MODES = ("auto", "device", "host", "recompute")
#: Frames per forward segment are chosen to hold about this many bytes.
SEGMENT_BYTES = 16 * 2**20
#: Segments are padded to at least 256 frames (runs of up to 256 saved
#: vectors share one program) while that costs at most this many bytes; past
#: it, to the power of two at or above the number of vectors.
PAD_BYTES = 4 * 2**20
#: Smallest number of blocks a segment's ``R`` buffer holds.
MIN_BLOCKS = 256
#: ``"auto"`` keeps the frames on the device while its need is below this
#: fraction of the memory free there.
AUTO_FRACTION = 0.5


class Segments(NamedTuple):
    """Static buffer sizes of the forward segments (powers of two)."""

    saves_cap: int
    blocks_cap: int


def segments(d: int, k: int, n_saved: int, itemsize: int) -> Segments:
    """Frames per segment (``saves_cap``) and ``R`` rows per call (``blocks_cap``).

    ``saves_cap`` is the largest power of two whose frames (``d (k + 1)``
    numbers each) fit in :data:`SEGMENT_BYTES`, at most the engine's buffer
    capacity for ``n_saved`` rows (see :data:`PAD_BYTES`); ``blocks_cap`` is
    ``saves_cap`` rounded up to :data:`MIN_BLOCKS`. Neither depends on the
    steps between saves, and both are powers of two: runs of similar lengths
    share one compiled program.
    """
    per_frame = d * (k + 1) * itemsize
    fit = max(1, SEGMENT_BYTES // per_frame)
    wanted = capacity(n_saved)
    if wanted * per_frame > PAD_BYTES:  # padding would cost memory: fit closer
        wanted = 1 << (max(n_saved, 1) - 1).bit_length()
    saves_cap = min(1 << (fit.bit_length() - 1), wanted)
    return Segments(saves_cap, max(MIN_BLOCKS, saves_cap))


def saved_calls(n_saved: int, s: int, seg: Segments):
    """The forward calls of the saved part of the window, grouped by segment.

    Yields ``(first, count, calls)``: the segment saves vectors ``first ..
    first + count - 1`` and runs ``calls``, a list of kernel lengths ``(m,
    s, tail)``, from one checkpoint. A saving interval longer than
    ``blocks_cap`` blocks is run as unsaved chunks, then one saved call.
    """
    B = seg.blocks_cap
    if s <= B:
        per = min(seg.saves_cap, B // s)
        for first in range(0, n_saved, per):
            count = min(per, n_saved - first)
            yield first, count, [(count, s, 0)]
        return
    last = s - B * ((s - 1) // B)
    calls = [(0, 1, B)] * ((s - 1) // B) + [(1, last, 0)]
    for first in range(n_saved):
        yield first, 1, calls


class Footprint(NamedTuple):
    """Predicted peak bytes of one storage mode on the device and the host."""

    device: int
    host: int


def footprints(
    *,
    d: int,
    k: int,
    n_blocks: int,
    n_saved: int,
    seg: Segments,
    itemsize: int,
) -> dict[str, Footprint]:
    """Predicted bytes of each storage mode (frames, states, R, buffers)."""
    frame = d * (k + 1) * itemsize  # Q and the state of one saved time
    buffers = 2 * ((seg.saves_cap + 1) * frame + seg.blocks_cap * k * k * itemsize)
    factors = capacity(n_blocks) * k * (k + 1) * itemsize  # R and growth
    small = n_saved * (k * k + 2 * k + 1) * itemsize  # C, growth, times
    out = n_saved * frame + small
    n_seg = math.ceil(n_saved / seg.saves_cap)
    kept = n_seg * (seg.saves_cap + 1) * frame
    checkpoints = n_seg * frame
    return {
        "device": Footprint(kept + buffers + factors, out),
        "host": Footprint(buffers + factors, out + (seg.saves_cap + 1) * frame),
        "recompute": Footprint(buffers + factors + checkpoints, out),
    }


def available_bytes() -> tuple[int, int, bool]:
    """``(device free, host available, shared)``: bytes free on the default
    device and in host memory, and whether they are the same memory (CPU)."""
    host = host_available()
    host = 2**63 if host is None else host
    device = jax.devices()[0]
    free = None if device.platform == "cpu" else device_free(device)
    if free is None:
        return host, host, True
    return free, host, False


def _fits(need: Footprint, device: int, host: int, shared: bool) -> bool:
    if shared:
        return need.device + need.host <= host
    return need.device <= device and need.host <= host


def choose_storage(
    storage: str, need: dict[str, Footprint], free: tuple[int, int, bool]
) -> str:
    """The mode to run: ``storage`` itself, or for ``"auto"`` ``"device"``
    while its need is below :data:`AUTO_FRACTION` of the free memory, else
    ``"host"``, else ``"recompute"``.

    Raises:
        MemoryError: the mode asked for (or, for ``"auto"``, every mode) needs
            more memory than is free; the message gives the bytes.
    """
    device, host, shared = free
    if storage == "auto":
        scaled = (int(device * AUTO_FRACTION), int(host * AUTO_FRACTION), shared)
        if _fits(need["device"], *scaled):
            return "device"
        for mode in ("host", "recompute"):
            if _fits(need[mode], device, host, shared):
                return mode
        modes: tuple[str, ...] = ("device", "host", "recompute")
    else:
        if _fits(need[storage], device, host, shared):
            return storage
        modes = (storage,)
    where = "host memory (shared with the CPU device)" if shared else "the device"
    lines = ", ".join(
        f'"{m}" needs {_gib(need[m].device)} on the device and '
        f"{_gib(need[m].host)} on the host"
        for m in modes
    )
    raise MemoryError(
        f"covariant_vectors(storage={storage!r}) cannot fit: {lines}; free: "
        f"{_gib(device)} on {where}, {_gib(host)} of host memory. Save fewer "
        "vectors (a larger save_every, a shorter run or a larger t_backward) "
        "or a smaller k"
    )


def _gib(n: int) -> str:
    return f"{n / 2**30:.3g} GiB ({n} bytes)"
