"""Devices as an axis: one worker per device count (``--jax-devices``).

XLA splits the host platform into ``p`` CPU devices only when JAX starts, and
xdist starts every worker before any test is collected, so the counts a run
gives are known from the command line (or the ``jax_devices`` ini key), not
from the markers: each local CPU or GPU label ``L`` gets one worker label
``L_<p>dev`` per count.  A CPU one runs with ``XLA_FLAGS`` carrying
:data:`~pytest_lyapax.backends.labels.DEVICE_COUNT_FLAG` (after the user's
own flags); a GPU one uses the first ``p`` GPUs of its worker.

A test marked ``@pytest.mark.jax_devices(1, 2, 4)`` runs only on the
device-count labels of those counts; every other test only on the plain
labels (the other copies are deselected, so nothing is multiplied).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from pytest_lyapax.backends.labels import DEVICE_COUNT_FLAG, Backend
from pytest_lyapax.report.devices import STRONG, WEAK
from pytest_lyapax.report.identity import is_size

DEVICES_OPTION = "--jax-devices"
MARKER = "jax_devices"
SCALINGS = (STRONG, WEAK)
# Beyond a few devices per core a split CPU measures the threads' switching
# rather than the sharding; XLA itself sets no bound.
CPU_DEVICES_PER_CORE = 4
MESH_AXIS = "devices"


def device_label(label: str, count: int) -> str:
    """The worker label of ``label`` split into ``count`` devices."""
    return f"{label}_{count}dev"


def cpu_device_limit() -> int:
    """The largest count a CPU label is split into (per logical core)."""
    return CPU_DEVICES_PER_CORE * (os.cpu_count() or 1)


def add_device_labels(
    counts: Sequence[int],
    backends: Sequence[Backend],
    environ: Mapping[str, str] | None = None,
) -> tuple[Backend, ...]:
    """After each local CPU or GPU backend, one backend per device count.

    Raises ``pytest.UsageError`` for a CPU count above
    :func:`cpu_device_limit` or a label the new one would collide with.
    (A GPU label asking more GPUs than present is unavailable once probed,
    see :func:`missing_devices`.)
    """
    environ = os.environ if environ is None else environ
    limit = cpu_device_limit()
    labels = {b.label for b in backends}
    out: list[Backend] = []
    for b in backends:
        out.append(b)
        if b.host is not None or b.expected not in ("cpu", "gpu"):
            continue
        for p in counts:
            if b.expected == "cpu" and p > limit:
                raise pytest.UsageError(
                    f"{DEVICES_OPTION}: {p} devices is more than the CPU platform "
                    f"gives here: at most {limit} ({CPU_DEVICES_PER_CORE} per "
                    f"logical core, {os.cpu_count()} cores)"
                )
            label = device_label(b.label, p)
            if label in labels:
                raise pytest.UsageError(
                    f"{DEVICES_OPTION}={p}: the label {label!r} it would add is "
                    "already requested; rename that backend"
                )
            env = dict(b.env)
            if b.expected == "cpu":
                flags = env.get("XLA_FLAGS", environ.get("XLA_FLAGS", ""))
                env["XLA_FLAGS"] = f"{flags} {DEVICE_COUNT_FLAG}={p}".strip()
            out.append(
                replace(
                    b,
                    label=label,
                    env=tuple(env.items()),
                    devices_of=b.label,
                    devices=p,
                )
            )
    return tuple(out)


def missing_devices(backend: Backend, info: Mapping[str, Any]) -> str | None:
    """Why a device-count label cannot run: its probe found fewer devices
    (a GPU machine with fewer GPUs; None: it can)."""
    found = info.get("device_count")
    if backend.devices and is_size(found) and found < backend.devices:
        return (
            f"{DEVICES_OPTION}: {backend.devices} devices asked, and the "
            f"{backend.devices_of!r} platform has {found} here"
        )
    return None


def marker_of(item: pytest.Item) -> tuple[tuple[int, ...], str] | None:
    """The counts and scaling (``strong``/``weak``) of the item's
    ``jax_devices`` marker (None: unmarked).

    Raises ValueError naming the marker and the bad value.
    """
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    where = f"@pytest.mark.{MARKER}"
    counts = []
    for arg in marker.args:
        if not is_size(arg) or arg < 1:
            raise ValueError(
                f"{where}: {arg!r} is not a positive integer device count; "
                f"write it like {where}(1, 2, 4)"
            )
        counts.append(arg)
    if not counts:
        raise ValueError(f"{where} names no device count; write {where}(1, 2, 4)")
    scaling = marker.kwargs.get("scaling", STRONG)
    if scaling not in SCALINGS:
        raise ValueError(
            f"{where}: scaling={scaling!r} is not one of {', '.join(SCALINGS)}"
        )
    return tuple(dict.fromkeys(counts)), scaling


def runs_on(item: pytest.Item, backend: Backend, split: bool) -> bool:
    """Whether the item's copy for ``backend`` is kept: marked tests on the
    device-count labels of their counts (on a plain label only when the run
    does not ``split`` it, to be skipped there), the others on plain labels."""
    marked = marker_of(item)
    if marked is None:
        return not backend.devices
    if backend.devices:
        return backend.devices in marked[0]
    return not split


def unrun_reason(item: pytest.Item, backend: Backend) -> str | None:
    """Why a marked test is skipped on a plain label of a run that has no
    device-count labels for it (None: it runs, or it is deselected)."""
    marked = marker_of(item)
    if marked is None or backend.devices:
        return None
    counts = ",".join(str(p) for p in marked[0])
    return (
        f"marked {MARKER}({counts.replace(',', ', ')}): runs on one worker per "
        f"device count; add {DEVICES_OPTION}={counts} (or the jax_devices ini key)"
    )


def record(item: pytest.Item, backend: Backend) -> None:
    """Put the worker's device count and the marker's scaling into the
    item's benchmark record (``extra_info["devices"]``, ``["scaling"]``)."""
    fixture = (getattr(item, "funcargs", None) or {}).get("benchmark")
    marked = marker_of(item)
    if fixture is None or marked is None:
        return
    fixture.extra_info.setdefault("devices", backend.devices)
    fixture.extra_info.setdefault("scaling", marked[1])


def mesh(backend: Backend | None) -> Any:
    """A 1-D ``jax.sharding.Mesh`` (axis :data:`MESH_AXIS`) of the worker's
    devices: ``backend.devices`` of them, or all without a device count.

    Fails the test when the CPU split did not happen (JAX started before the
    worker's ``XLA_FLAGS``, or they were overridden) or GPUs are missing.
    """
    import jax
    import numpy as np
    from jax.sharding import Mesh

    devices = jax.devices()
    p = backend.devices if backend is not None and backend.devices else len(devices)
    wrong = len(devices) != p if jax.default_backend() == "cpu" else len(devices) < p
    if wrong:
        pytest.fail(
            f"jax_mesh: backend {backend.label if backend else '?'!r} asks for {p} "
            f"devices and JAX has {len(devices)} {jax.default_backend()} devices",
            pytrace=False,
        )
    return Mesh(np.array(devices[:p]), (MESH_AXIS,))


def physical_cores() -> int | None:
    """The machine's physical CPU cores (distinct core/package pairs of
    ``/proc/cpuinfo``; None where unreadable)."""
    pairs = set()
    core = package = None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "physical id":
                    package = value.strip()
                elif key == "core id":
                    core = value.strip()
                elif not key and core is not None:
                    pairs.add((package, core))
                    core = package = None
    except OSError:
        return None
    if core is not None:
        pairs.add((package, core))
    return len(pairs) or None


def hardware(backend: Backend, info: Mapping[str, Any]) -> dict[str, Any]:
    """What stands behind a device-count label's devices, for the report:
    ``physical_cores`` and ``logical_cores`` (CPU) or ``gpus`` (GPU)."""
    if backend.expected == "gpu":
        return {"gpus": backend.devices, "gpus_present": info.get("device_count")}
    return {"physical_cores": physical_cores(), "logical_cores": os.cpu_count()}
