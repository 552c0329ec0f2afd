"""Batch bookkeeping for sweeps: sizes, chunks, padding and device sharding.

A sweep's batched inputs (parameter pytree, initial states, seeds) share one
leading axis of length ``n``. Here that axis is validated, cut into chunks of
``batch_size``, padded so every chunk has one shape (one compiled program) and a
multiple of the device count, and placed on a 1-D device mesh along axis
``"batch"``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from lyapax._engine import validate

BATCH_AXIS = "batch"


def _leading_sizes(name: str, tree: Any) -> dict[str, int]:
    """``{leaf path: leading size}``; a leaf without a leading axis is an error."""
    sizes = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        where = name + jax.tree_util.keystr(path)
        shape = np.shape(leaf)
        if len(shape) == 0:
            raise ValueError(
                f"{where} is a scalar, but every leaf of {name} needs a leading "
                "batch axis (one entry per sweep point); close over shared "
                "constants in step_fn or broadcast them to the batch size"
            )
        sizes[where] = shape[0]
    return sizes


def batch_size_of(
    params_batch: Any, state0_batch: Any, seed: Any
) -> tuple[int, dict[str, int]]:
    """The common leading size ``n`` of every batched input, and who set it.

    Raises:
        ValueError: leaves with different leading sizes (each named with its
            size), an empty batch, or nothing batched at all.
    """
    sizes: dict[str, int] = {}
    if params_batch is not None:
        leaves = jax.tree.leaves(params_batch)
        if not leaves:
            raise ValueError(
                "params_batch has no array leaves; pass a pytree of arrays with a "
                "leading batch axis, or params_batch=None to sweep state0_batch only"
            )
        sizes.update(_leading_sizes("params_batch", params_batch))
    if state0_batch is not None:
        sizes["state0_batch"] = np.shape(state0_batch)[0]
    if np.ndim(seed) == 1:
        sizes["seed"] = np.shape(seed)[0]
    if not sizes:
        raise ValueError(
            "nothing to sweep: pass params_batch (a pytree of arrays with a leading "
            "batch axis), state0_batch (n, d) or a 1-D array of seeds"
        )
    distinct = set(sizes.values())
    if len(distinct) > 1:
        listing = ", ".join(f"{k}: {n}" for k, n in sizes.items())
        raise ValueError(
            "batched inputs must share one leading batch size; got " + listing
        )
    n = distinct.pop()
    if n < 1:
        raise ValueError(f"the batch is empty: leading size 0 ({', '.join(sizes)})")
    return n, sizes


def state_batch(state0: Any, state0_batch: Any, n: int) -> np.ndarray:
    """Initial states ``(n, d)`` (host array) from ``state0 (d,)`` and/or
    ``state0_batch``.

    Raises:
        ValueError: ``state0_batch`` not 2-D, not finite, or its rows not the
            shape of ``state0``. TypeError: neither given.
    """
    if state0_batch is None:
        x0 = np.asarray(validate.as_state("state0", state0))
        return np.broadcast_to(x0, (n, x0.shape[0]))
    arr = np.asarray(state0_batch)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError(
            "state0_batch must have shape (n, d): one initial state per sweep "
            f"point; got shape {arr.shape}"
        )
    if state0 is not None and np.shape(state0) != arr.shape[1:]:
        raise ValueError(
            f"state0_batch rows have shape {arr.shape[1:]}, but state0 has shape "
            f"{np.shape(state0)}; they must describe the same state (or pass "
            "state0=None)"
        )
    if not np.issubdtype(arr.dtype, np.inexact):
        arr = arr.astype(jnp.result_type(float))
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        rows = np.flatnonzero(~finite)
        raise ValueError(
            f"state0_batch must be finite; rows {rows[:10].tolist()} hold nan or inf"
        )
    return arr


def seed_batch(seed: Any, n: int) -> np.ndarray:
    """Seeds ``(n,)`` (host array) from one integer seed or a 1-D array of them."""
    arr = np.asarray(seed)
    if arr.ndim > 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"seed must be an integer or a 1-D integer array of length n; got "
            f"{arr.dtype} array of shape {arr.shape}"
        )
    return np.broadcast_to(arr, (n,))


def resolve_devices(devices: Any) -> list[Any]:
    """Devices to shard over: all visible (None), the first ``n`` (int), or a list.

    Raises:
        ValueError: ``n`` < 1 or more than are visible, an empty list, or
            devices from different platforms. TypeError: anything else.
    """
    visible = jax.devices()
    if devices is None:
        return list(visible)
    if isinstance(devices, int) and not isinstance(devices, bool):
        if not 1 <= devices <= len(visible):
            raise ValueError(
                f"devices={devices} must be between 1 and the {len(visible)} visible "
                f"{visible[0].platform} device(s)"
            )
        return list(visible[:devices])
    if not isinstance(devices, Sequence) or not all(
        isinstance(d, jax.Device) for d in devices
    ):
        raise TypeError(
            "devices must be None (all visible), an int (the first n) or a list of "
            f"jax.Device; got {devices!r}"
        )
    if not devices:
        raise ValueError("devices is an empty list; pass None to use all devices")
    platforms = {d.platform for d in devices}
    if len(platforms) > 1:
        raise ValueError(
            f"devices mixes platforms {sorted(platforms)}; a sweep shards over one "
            "kind of device"
        )
    return list(devices)


def chunk_layout(n: int, batch_size: Any, n_devices: int, pad: bool) -> tuple[int, int]:
    """``(chunk, padded_chunk)``: points per chunk and its padded length.

    Raises:
        ValueError: ``batch_size`` < 1, or ``pad=False`` with a chunk that does
            not divide evenly over the devices.
    """
    if batch_size is None:
        chunk = n
    else:
        chunk = min(n, validate.as_int("batch_size", batch_size, minimum=1))
    padded = math.ceil(chunk / n_devices) * n_devices
    if padded != chunk and not pad:
        raise ValueError(
            f"chunks of {chunk} sweep points do not split evenly over {n_devices} "
            "devices; pass pad=True (pads with copies of the last point, discarded "
            f"afterwards), a batch_size that is a multiple of {n_devices}, or "
            "devices=1"
        )
    return chunk, padded


def take(tree: Any, start: int, stop: int, length: int) -> Any:
    """Rows ``start:stop`` of every leaf, padded to ``length`` by repeating the
    last row (a real point, so padding never produces nan or inf)."""

    def one(leaf):
        # Sliced on the host: eager device slices would compile one small
        # program per new shape, and NumPy inputs carry no weak types (which
        # would otherwise compile a second kernel for the same shapes).
        rows = np.asarray(leaf)[start:stop]
        missing = length - rows.shape[0]
        if missing:
            tail = np.broadcast_to(rows[-1:], (missing, *rows.shape[1:]))
            rows = np.concatenate([rows, tail])
        return rows

    return jax.tree.map(one, tree)


def batch_sharding(devices: list[Any]) -> NamedSharding:
    """Sharding that splits a leading batch axis over ``devices`` (1-D mesh)."""
    mesh = Mesh(np.asarray(devices), (BATCH_AXIS,))
    return NamedSharding(mesh, PartitionSpec(BATCH_AXIS))


def shard(tree: Any, sharding: NamedSharding) -> Any:
    """Place every leaf on ``sharding``; each process supplies its own shards, so
    this also works for a mesh spanning several hosts (``jax.distributed``)."""

    def one(leaf):
        host = np.asarray(leaf)
        return jax.make_array_from_callback(host.shape, sharding, lambda i: host[i])

    return jax.tree.map(one, tree)


def split_rows(f: Any, mesh: Any) -> Any:
    """``f(*batched)`` split over ``mesh`` along the leading row axis of every
    argument and output (unchanged when ``mesh`` is None); rows must be
    independent (no collective inside)."""
    if mesh is None:
        return f
    rows = PartitionSpec(BATCH_AXIS)
    return jax.shard_map(f, mesh=mesh, in_specs=rows, out_specs=rows, check_vma=False)


class Plan:
    """How a batch of ``n`` rows runs: chunk length, padding and sharding.

    Args:
        n: rows. batch_size: rows per call (None: all). devices, pad: see
            :func:`resolve_devices` and :func:`chunk_layout`.
    """

    def __init__(self, n: int, batch_size: Any, devices: Any, pad: bool) -> None:
        self.devices = resolve_devices(devices)
        self.n = n
        self.chunk, self.padded = chunk_layout(n, batch_size, len(self.devices), pad)
        self.sharding = batch_sharding(self.devices) if len(self.devices) > 1 else None
        self.mesh = None if self.sharding is None else self.sharding.mesh

    def place(self, tree: Any) -> Any:
        """Host arrays with a leading row axis onto the devices: split over
        them like the rows when they divide evenly, else on the first."""
        if self.sharding is not None and self.n % len(self.devices) == 0:
            return shard(tree, self.sharding)
        return jax.device_put(tree, self.devices[0])

    def run(
        self,
        kernel: Any,
        batched: tuple,
        to_host: tuple[str, ...] = (),
        hook: Any = None,
    ) -> Any:
        """Call ``kernel(*rows)`` chunk by chunk and join the rows.

        Fields named in ``to_host`` are copied to host memory (NumPy) after
        each chunk, so that the device holds one chunk of them at a time.
        ``hook(index, start, stop, compute)``, when given, returns chunk
        ``index``'s output (rows ``start:stop``) in place of ``compute()``
        (a checkpoint, a progress bar).
        """
        parts = []
        for index, start in enumerate(range(0, self.n, self.chunk)):
            stop = min(self.n, start + self.chunk)

            def compute(start: int = start, stop: int = stop) -> Any:
                rows = take(batched, start, stop, self.padded)
                if self.sharding is not None:
                    rows = shard(rows, self.sharding)
                out = kernel(*rows)
                if stop - start != self.padded:
                    out = jax.tree.map(lambda x, m=stop - start: x[:m], out)
                if to_host:
                    out = out._replace(
                        **{f: _to_host(getattr(out, f)) for f in to_host}
                    )
                return out

            parts.append(
                compute() if hook is None else hook(index, start, stop, compute)
            )
        if len(parts) == 1:
            return parts[0]
        return jax.tree.map(_concat, *parts)


def _to_host(x: Any) -> Any:
    return None if x is None else host_array(x)


def host_array(x: Any) -> Any:
    """``x`` as a NumPy array with all its rows. A ``jax.Array`` with shards on
    other processes (a multi-process job) is gathered from them, a collective
    that every process must reach; other leaves pass through unchanged."""
    if not isinstance(x, jax.Array):
        return x
    if x.is_fully_addressable:
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def _concat(*xs: Any) -> Any:
    if isinstance(xs[0], np.ndarray):
        return np.concatenate(xs)
    return jnp.concatenate(xs)
