"""Device scaling: each device-count series against its one-device run.

A test marked ``jax_devices`` runs on the workers ``LABEL_<p>dev``
(``--jax-devices``); each of its benchmark records holds its count
(``extra_info["devices"]``) and its ``scaling``:

``strong``  the same problem on every count: speedup ``S = t1 / tp`` and
            efficiency ``E = t1 / (p * tp)``, at equal size;
``weak``    the test scales its problem with ``p`` (``jax_size`` is the size
            per device): ``E = t1 / tp`` and the scaled speedup ``S = p * E``.

``t`` is the median time per call.  What stands behind the devices is stated
on every row, from the report's ``backends`` entry of the label: ``p`` CPU
devices share the machine's physical cores (8 CPU devices on 2 cores are
not 8 processors), a GPU label's devices are ``p`` GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_lyapax.report.identity import (
    extra_info,
    is_size,
    record_label,
    record_size,
    series_id,
    unique_names,
)

STRONG, WEAK = "strong", "weak"


def _count(value: object) -> int | None:
    return value if is_size(value) else None


def behind(entry: Mapping[str, Any], p: int) -> str:
    """What ``p`` devices of a backends entry run on, as words."""
    gpus = _count(entry.get("gpus"))
    if gpus is not None:
        return f"{gpus} GPU{'s' if gpus != 1 else ''}"
    cores = _count(entry.get("physical_cores"))
    logical = _count(entry.get("logical_cores"))
    if cores is None:
        return f"{p} CPU devices on an unknown number of cores"
    text = f"{p} CPU device{'s' if p != 1 else ''} on {cores} physical core"
    text += "s" if cores != 1 else ""
    if logical is not None and logical != cores:
        text += f" ({logical} logical)"
    return text + (" - oversubscribed" if p > cores else "")


def scaling_rows(
    records: Iterable[Mapping[str, Any]],
    backends: Sequence[Mapping[str, Any]],
    machine_info: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One row per test, split label, size and device count, in that order.

    Each row: ``test``, ``backend`` (the label split), ``scaling``,
    ``devices``, ``size`` (per device for weak scaling, else the problem's;
    None unsized), ``median_s``, ``speedup`` and ``efficiency`` (None without
    the one-device time at that size), ``on`` (what the devices run on).
    """
    split = {
        str(b["label"]): b
        for b in backends
        if _count(b.get("devices")) and isinstance(b.get("devices_of"), str)
    }
    chosen = []
    for record in records:
        label = record_label(record)
        p = _count(extra_info(record).get("devices"))
        stats = record.get("stats")
        median = stats.get("median") if isinstance(stats, Mapping) else None
        if label in split and p and isinstance(median, int | float):
            chosen.append((series_id(record, machine_info), record, p, float(median)))
    names = unique_names(sid for sid, *_ in chosen)
    groups: dict[tuple[str, str, str], dict[Any, dict[int, tuple[float, str]]]] = {}
    for sid, record, p, median in chosen:
        assert sid.label is not None
        base = str(split[sid.label]["devices_of"])
        mode = WEAK if extra_info(record).get("scaling") == WEAK else STRONG
        sizes = groups.setdefault((names[sid.benchmark], base, mode), {})
        sizes.setdefault(record_size(record), {})[p] = (median, sid.label)
    rows = []
    for (name, base, mode), sizes in groups.items():
        for size in sorted(sizes, key=lambda s: -1 if s is None else s):
            times = sizes[size]
            one = times.get(1)
            for p in sorted(times):
                tp, label = times[p]
                efficiency = speedup = None
                if one is not None and tp > 0:
                    efficiency = one[0] / tp if mode == WEAK else one[0] / (p * tp)
                    speedup = p * efficiency
                rows.append(
                    {
                        "test": name,
                        "backend": base,
                        "scaling": mode,
                        "devices": p,
                        "size": size,
                        "median_s": tp,
                        "speedup": speedup,
                        "efficiency": efficiency,
                        "on": behind(split[label], p),
                    }
                )
    return rows


def oversubscribed(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """A sentence per split label whose CPU devices outnumber its cores."""
    out = {}
    for row in rows:
        if str(row.get("on", "")).endswith("oversubscribed"):
            out[row.get("backend")] = (
                f"{row.get('backend')}: {row.get('on')}: the devices share the "
                "cores, so an efficiency there measures the split, not more "
                "processors"
            )
    return list(out.values())
