"""The machine's state while this worker's rounds run: ``extra_info["machine_state"]``.

A timing taken while other processes used the cores, while the hypervisor
held them back (steal) or while the clocks were throttled measures the
machine as much as the code.  :class:`MachineObserver` is told when each
stretch of this worker's rounds starts and stops (``rounds.py``; between two
stretches another backend may hold the turn, and its work is not counted
here) and sums over the stretches:

- wall seconds (``time.perf_counter``);
- the seconds all CPUs spent busy (user, nice, system, irq, softirq) and
  stolen (steal), from the first line of ``/proc/stat`` (jiffies, divided by
  ``SC_CLK_TCK``), read at both ends of each stretch;
- this process's own CPU seconds, all threads (``time.process_time``).

*Foreign CPU* = (busy - own) / wall, in cores (clamped at 0), and as a share
of the online cores (``os.cpu_count()``); *steal* = stolen / wall, in cores.
At the end of each stretch, also the instantaneous signals: the load
average (``os.getloadavg``, max over stretches) and the tasks runnable
besides this one (``/proc/loadavg``'s fourth field, minus one; it counts
threads, so this process's other running threads are among them); and at most
once per :data:`SLOW_EVERY_S` seconds of rounds the slower ones: the mean
CPU frequency over the CPUs and their governors (cpufreq in ``/sys``), and
on a GPU worker the GPU's clocks, utilisation, other processes and throttle
reasons through NVML (``gpu.py``: ``pynvml``, package ``nvidia-ml-py``,
where it is installed).  A signal that cannot be read is ``{"unavailable": reason}``,
never a zero.

Cost: a start/stop pair reads ``/proc/stat`` twice and ``/proc/loadavg``
once through descriptors kept open (one ``pread`` each) and four clocks;
about 30 us on a 2-core VM (``/proc/stat`` is generated whole by the kernel,
so its read grows with the number of CPUs).  Whether the state makes a
verdict unreliable is decided by the report (``report/busy.py``), on saved
files too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pytest_lyapax.measuring.gpu import GpuReader, gpu_reader
from pytest_lyapax.measuring.observer import RoundObserver
from pytest_lyapax.measuring.signals import Signal, unavailable

KEY = "machine_state"
# The slow signals (frequency, governor, GPU) are read at the end of the
# first stretch and then at most once per this many seconds of rounds.
SLOW_EVERY_S = 1.0


def _problem(path: Path, exc: Exception) -> str:
    if isinstance(exc, OSError):
        return f"cannot read {path}: {exc.strerror or type(exc).__name__}"
    return f"cannot parse {path}: {exc}"


@dataclass(frozen=True)
class Sources:
    """Where the kernel's counters are read (tests point them elsewhere)."""

    stat: Path = Path("/proc/stat")
    loadavg: Path = Path("/proc/loadavg")
    cpus: Path = Path("/sys/devices/system/cpu")


# Descriptors of the kernel files, opened once per process: a read is then
# one pread from offset 0 (the kernel regenerates the text on each read).
_OPEN: dict[Path, int] = {}


def _read_start(path: Path, size: int = 512) -> bytes:
    fd = _OPEN.get(path)
    if fd is None:
        fd = _OPEN[path] = os.open(path, os.O_RDONLY)
    return os.pread(fd, size, 0)


def cpu_jiffies(text: bytes) -> tuple[int, int | None]:
    """Busy and stolen jiffies of all CPUs from ``/proc/stat``'s first line
    (steal None on a kernel without the column); raises ValueError."""
    fields = text.split(b"\n", 1)[0].split()
    if len(fields) < 8 or fields[0] != b"cpu":
        raise ValueError(f"first line {fields[:3]!r}... is not the 'cpu' total")
    user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[1:8])
    # guest time is already counted in user and nice.
    steal = int(fields[8]) if len(fields) > 8 else None
    return user + nice + system + irq + softirq, steal


def runnable_others(text: bytes) -> int:
    """Tasks runnable besides this one, from ``/proc/loadavg`` ("0.5 0.4 0.3
    3/148 1234": the fourth field is running/total); raises ValueError."""
    fields = text.split()
    if len(fields) < 4 or b"/" not in fields[3]:
        raise ValueError(f"no running/total field in {text[:60]!r}")
    return max(0, int(fields[3].split(b"/")[0]) - 1)


class _CpuFreq:
    """The mean current frequency over the CPUs, and their governors."""

    def __init__(self, cpus: Path) -> None:
        self.files = sorted(cpus.glob("cpu[0-9]*/cpufreq/scaling_cur_freq"))
        self.problem = (
            ""
            if self.files
            else f"no cpufreq under {cpus} (not exposed: a container or VM)"
        )
        self.mhz = Signal()
        self.governors: set[str] = set()

    def sample(self) -> None:
        if self.problem:
            return
        self.mhz.read(self._mean_mhz)
        for path in self.files:
            try:
                self.governors.add(
                    (path.parent / "scaling_governor").read_text().strip()
                )
            except OSError:
                continue

    def _mean_mhz(self) -> float:
        try:
            khz = [int(path.read_text()) for path in self.files]
        except OSError as exc:
            raise OSError(_problem(self.files[0], exc)) from None
        return sum(khz) / len(khz) / 1000.0

    def frequency(self) -> dict[str, Any]:
        if self.problem:
            return unavailable(self.problem)
        return self.mhz.summary(min_mhz="low", max_mhz="high")

    def governor(self) -> dict[str, Any]:
        if self.problem:
            return unavailable(self.problem)
        if not self.governors:
            return unavailable("no scaling_governor readable beside scaling_cur_freq")
        return {"names": sorted(self.governors)}


class MachineObserver(RoundObserver):
    """Sums the machine's state over the stretches of one benchmark's rounds
    (see the module docstring); ``gpu`` is the GPU reader or why there is
    none (default: :func:`gpu_reader`, looked up at the first slow sample);
    ``clocks`` the process's CPU clock and the wall clock, in seconds."""

    key: ClassVar[str] = KEY

    def __init__(
        self,
        sources: Sources | None = None,
        gpu: GpuReader | str | None = None,
        clocks: tuple[Callable[[], float], Callable[[], float]] = (
            time.process_time,
            time.perf_counter,
        ),
    ) -> None:
        self.sources = sources or Sources()
        self.gpu = gpu
        self._own_clock, self._wall_clock = clocks
        self.stretches = 0
        self.wall_s = self.own_s = 0.0
        self.busy = self.steal = 0  # jiffies
        self.cpu_problem = self.steal_problem = ""
        self.load = Signal()
        self.runnable = Signal()
        self._freq: _CpuFreq | None = None
        self._slow_at: float | None = None
        self._start = (0.0, 0.0)
        self._jiffies: tuple[int, int | None] | None = None

    def _read_jiffies(self) -> tuple[int, int | None] | None:
        if self.cpu_problem:
            return None
        try:
            return cpu_jiffies(_read_start(self.sources.stat))
        except (OSError, ValueError) as exc:
            self.cpu_problem = _problem(self.sources.stat, exc)
            return None

    def start(self) -> None:
        self._jiffies = self._read_jiffies()
        self._start = (self._own_clock(), self._wall_clock())

    def stop(self) -> None:
        now = self._wall_clock()
        own = self._own_clock()
        jiffies = self._read_jiffies()
        self.stretches += 1
        self.wall_s += now - self._start[1]
        self.own_s += own - self._start[0]
        if jiffies is not None and self._jiffies is not None:
            self.busy += jiffies[0] - self._jiffies[0]
            if jiffies[1] is None or self._jiffies[1] is None:
                self.steal_problem = f"{self.sources.stat} has no steal column"
            else:
                self.steal += jiffies[1] - self._jiffies[1]
        self.load.read(lambda: os.getloadavg()[0])
        self.runnable.read(self._runnable)
        if self._slow_at is None or now - self._slow_at >= SLOW_EVERY_S:
            self._slow_at = now
            self._sample_slow()

    def _runnable(self) -> int:
        path = self.sources.loadavg
        try:
            return runnable_others(_read_start(path, 128))
        except (OSError, ValueError) as exc:
            raise OSError(_problem(path, exc)) from None

    def _sample_slow(self) -> None:
        if self._freq is None:
            self._freq = _CpuFreq(self.sources.cpus)
        self._freq.sample()
        if self.gpu is None:
            self.gpu = gpu_reader()
        if isinstance(self.gpu, GpuReader):
            self.gpu.sample()

    def state(self) -> dict[str, Any]:
        """The entry (see the module docstring for each signal)."""
        cpus = os.cpu_count() or 1
        wall = max(self.wall_s, 1e-9)
        tick = float(os.sysconf("SC_CLK_TCK"))
        out: dict[str, Any] = {
            "wall_s": round(self.wall_s, 6),
            "stretches": self.stretches,
            "cpus": cpus,
        }
        if self.cpu_problem:
            out["foreign_cpu"] = unavailable(self.cpu_problem)
            out["steal"] = unavailable(self.cpu_problem)
        else:
            foreign = max(0.0, self.busy / tick - self.own_s) / wall
            out["foreign_cpu"] = {
                "cores": round(foreign, 3),
                "share": round(foreign / cpus, 3),
                "own_cores": round(self.own_s / wall, 3),
                "tick_s": 1.0 / tick,
            }
            out["steal"] = (
                unavailable(self.steal_problem)
                if self.steal_problem
                else {"cores": round(self.steal / tick / wall, 3)}
            )
        out["load"] = self.load.summary(max_1min="high")
        out["runnable"] = self.runnable.summary(max_others="high", mean_others="mean")
        freq = self._freq or _CpuFreq(self.sources.cpus)
        out["frequency"] = freq.frequency()
        out["governor"] = freq.governor()
        gpu = self.gpu if self.gpu is not None else gpu_reader()
        out["gpu"] = gpu.summary() if isinstance(gpu, GpuReader) else unavailable(gpu)
        return out

    def record(self, extra_info: dict[str, Any], data: Sequence[float]) -> None:
        if self.stretches:
            extra_info[KEY] = self.state()
