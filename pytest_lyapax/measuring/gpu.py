"""One GPU's state through NVML, for ``machine.py``'s record.

Read only on a GPU worker (``jax.default_backend() == "gpu"``) through the
maintained binding ``pynvml`` (package ``nvidia-ml-py``) where it is
installed: the SM and memory clocks (min/max), the utilisation (max, mean;
the whole device, this process's work included), the compute processes of
others, and the clock event ("throttle") reasons seen.  Each read is one
NVML call of tens of microseconds, made at most once per second of rounds.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from pytest_lyapax.measuring.signals import UNAVAILABLE, Signal, unavailable

# NVML's clock event ("throttle") reason bits (nvml.h), by name.
THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
_NVML_CLOCK_SM, _NVML_CLOCK_MEM = 1, 2


class GpuReader:
    """One GPU's state through NVML (``nvml``: the ``pynvml`` module)."""

    def __init__(self, nvml: Any, handle: Any, device: str) -> None:
        self.nvml = nvml
        self.handle = handle
        self.device = device  # how the device was found, for the record
        self.sm = Signal()
        self.memory = Signal()
        self.utilisation = Signal()
        self.others = Signal()
        self.pids_seen = True
        self.reasons: set[str] = set()
        self.reasons_problem = ""

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self.nvml, name)(self.handle, *args)
        except Exception as exc:  # noqa: BLE001 - NVMLError and friends
            raise OSError(f"{name}: {exc}") from None

    def _other_processes(self) -> float:
        pids = {p.pid for p in self._call("nvmlDeviceGetComputeRunningProcesses")}
        if pids and os.getpid() not in pids:
            # A pid namespace (container): NVML shows the host's ids, ours
            # among them under another number; "others" counts it then.
            self.pids_seen = False
        return float(len(pids - {os.getpid()}))

    def sample(self) -> None:
        self.sm.read(lambda: self._call("nvmlDeviceGetClockInfo", _NVML_CLOCK_SM))
        self.memory.read(lambda: self._call("nvmlDeviceGetClockInfo", _NVML_CLOCK_MEM))
        self.utilisation.read(lambda: self._call("nvmlDeviceGetUtilizationRates").gpu)
        self.others.read(self._other_processes)
        if self.reasons_problem:
            return
        # Renamed "clocks event reasons" in newer NVML; older bindings have
        # only the throttle spelling.
        name = next(
            (
                n
                for n in (
                    "nvmlDeviceGetCurrentClocksEventReasons",
                    "nvmlDeviceGetCurrentClocksThrottleReasons",
                )
                if hasattr(self.nvml, n)
            ),
            None,
        )
        try:
            if name is None:
                raise OSError("this pynvml has no clock event reasons")
            mask = int(self._call(name))
        except OSError as exc:
            self.reasons_problem = str(exc)
            return
        self.reasons.update(throttle_names(mask))

    def summary(self) -> dict[str, Any]:
        others = self.others.summary(max="high")
        if UNAVAILABLE not in others and not self.pids_seen:
            others["note"] = (
                "this process's id is not among NVML's (a pid namespace): "
                "the count includes this process"
            )
        return {
            "device": self.device,
            "sm_clock_mhz": self.sm.summary(min="low", max="high"),
            "memory_clock_mhz": self.memory.summary(min="low", max="high"),
            "utilisation_percent": self.utilisation.summary(max="high", mean="mean"),
            "other_processes": others,
            "throttle_reasons": unavailable(self.reasons_problem)
            if self.reasons_problem
            else {"names": sorted(self.reasons)},
        }


def throttle_names(mask: int) -> list[str]:
    """NVML's reason bits by name (an unknown bit by its hex value)."""
    names = [name for bit, name in THROTTLE_BITS.items() if mask & bit]
    rest = mask & ~sum(THROTTLE_BITS)
    return names + ([hex(rest)] if rest else [])


def _nvml_device(nvml: Any, device: Any) -> tuple[Any, str]:
    """The NVML handle of a JAX GPU device: its CUDA ordinal mapped through
    ``CUDA_VISIBLE_DEVICES`` (an index or a UUID) when that is set."""
    ordinal = getattr(device, "local_hardware_id", None)
    ordinal = device.id if ordinal is None else ordinal
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    if visible[0] and ordinal < len(visible):
        entry = visible[ordinal]
        if not entry.isdigit():
            return nvml.nvmlDeviceGetHandleByUUID(entry), f"NVML uuid {entry}"
        ordinal = int(entry)
    return nvml.nvmlDeviceGetHandleByIndex(ordinal), f"NVML index {ordinal}"


@functools.cache
def gpu_reader() -> GpuReader | str:
    """NVML for this worker's first JAX device, or why there is none
    (checked once per process)."""
    try:
        import jax

        backend = jax.default_backend()
    except Exception as exc:  # noqa: BLE001 - a worker without a usable JAX
        return f"no JAX backend ({type(exc).__name__}: {exc})"
    if backend != "gpu":
        return f"not a GPU worker (JAX backend {backend!r})"
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return "pynvml is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
        handle, found = _nvml_device(pynvml, jax.devices()[0])
    except Exception as exc:  # noqa: BLE001 - NVMLError: no driver, no such GPU
        return f"NVML: {type(exc).__name__}: {exc}"
    return GpuReader(pynvml, handle, found)
