"""The machine's state over a benchmark's rounds (measuring/machine.py, gpu.py).

The kernel's files are replaced by files the test writes (``Sources``) and
the clocks by counters, so every number recorded is known exactly; a signal
that cannot be read must say why, never read as zero.
"""

import os
import sys
import types

import pytest

from pytest_lyapax.measuring import gpu
from pytest_lyapax.measuring.gpu import GpuReader, throttle_names
from pytest_lyapax.measuring.machine import (
    MachineObserver,
    Sources,
    cpu_jiffies,
    runnable_others,
)
from pytest_lyapax.measuring.observers import observers_for
from pytest_lyapax.report.busy import busy_reason, busy_reasons

TICK = os.sysconf("SC_CLK_TCK")
CPUS = os.cpu_count() or 1


def stat_line(busy_parts, idle=5000, steal=0):
    """A /proc/stat whose total line has these user, nice, system, irq and
    softirq jiffies (and a per-CPU line after it, as the kernel writes)."""
    user, nice, system, irq, softirq = busy_parts
    total = f"cpu  {user} {nice} {system} {idle} 7 {irq} {softirq} {steal} 11 13\n"
    return total + "cpu0 1 2 3 4 5 6 7 8 9 10\nintr 12345 0 0\n"


def test_busy_and_stolen_jiffies_from_the_total_line():
    # guest (11) and guest_nice (13) are already inside user and nice.
    text = stat_line((100, 20, 30, 4, 6), steal=9).encode()
    assert cpu_jiffies(text) == (160, 9)
    assert cpu_jiffies(b"cpu  1 2 3 4 5 6 7\n") == (1 + 2 + 3 + 6 + 7, None)
    with pytest.raises(ValueError, match="not the 'cpu' total"):
        cpu_jiffies(b"cpu0 1 2 3 4 5 6 7 8\n")


def test_runnable_tasks_exclude_this_one():
    assert runnable_others(b"0.50 0.40 0.30 3/148 1234\n") == 2
    assert runnable_others(b"0.50 0.40 0.30 1/148 1234\n") == 0
    with pytest.raises(ValueError, match="running/total"):
        runnable_others(b"0.50 0.40\n")


class Clocks:
    """Own CPU and wall clocks that advance only when told to."""

    def __init__(self):
        self.own = self.wall = 0.0

    def pair(self):
        return (lambda: self.own, lambda: self.wall)


@pytest.fixture
def kernel(tmp_path):
    """Fake /proc files and an empty /sys cpu tree."""
    sources = Sources(
        stat=tmp_path / "stat", loadavg=tmp_path / "loadavg", cpus=tmp_path / "cpu"
    )
    sources.cpus.mkdir()
    sources.loadavg.write_text("0.75 0.40 0.30 4/148 1234\n")
    return sources


def test_two_stretches_sum_to_the_foreign_cpu_of_their_rounds(kernel):
    clocks = Clocks()
    observer = MachineObserver(kernel, gpu="no GPU here", clocks=clocks.pair())
    busy = [1000, 0, 0, 0, 0]
    for stretch in range(2):
        kernel.stat.write_text(stat_line(busy, steal=10 * stretch))
        observer.start()
        # Each stretch: 0.5 s of wall, 0.25 s of our CPU, and 1.5 * TICK
        # busy jiffies over all CPUs, 0.1 * TICK of them stolen.
        clocks.wall += 0.5
        clocks.own += 0.25
        busy[0] += round(0.75 * TICK)
        kernel.stat.write_text(stat_line(busy, steal=10 * stretch + round(0.05 * TICK)))
        observer.stop()
        clocks.wall += 7.0  # another backend's turn: not counted
        clocks.own += 3.0
    info = {}
    observer.record(info, [1e-3])
    state = info["machine_state"]
    assert state["wall_s"] == pytest.approx(1.0) and state["stretches"] == 2
    foreign = state["foreign_cpu"]
    # (1.5 s busy - 0.5 s ours) over 1 s of rounds.
    assert foreign["cores"] == pytest.approx(1.0, abs=1e-3)
    assert foreign["share"] == pytest.approx(1.0 / CPUS, abs=1e-3)
    assert foreign["own_cores"] == pytest.approx(0.5, abs=1e-3)
    assert state["steal"]["cores"] == pytest.approx(0.1, abs=1e-3)
    assert state["runnable"] == {"max_others": 3, "mean_others": 3.0, "samples": 2}
    assert set(state["load"]) == {"max_1min", "samples"}
    assert busy_reasons(state, "cpu2")[0] == (
        f"other processes used 1.0 of {CPUS} cores during cpu2's rounds"
    )


def test_our_own_cpu_time_is_not_foreign(kernel):
    clocks = Clocks()
    observer = MachineObserver(kernel, gpu="no GPU here", clocks=clocks.pair())
    kernel.stat.write_text(stat_line((1000, 0, 0, 0, 0)))
    observer.start()
    clocks.wall += 1.0
    clocks.own += 2.0  # two threads of ours, busy all along
    kernel.stat.write_text(stat_line((1000 + 2 * TICK - 1, 0, 0, 0, 0)))
    observer.stop()
    state = observer.state()
    assert state["foreign_cpu"]["cores"] == 0.0  # clamped, not negative
    assert state["foreign_cpu"]["own_cores"] == 2.0


def test_unreadable_signals_are_unavailable_with_their_reason(tmp_path):
    missing = Sources(
        stat=tmp_path / "no_stat", loadavg=tmp_path / "no_loadavg", cpus=tmp_path
    )
    observer = MachineObserver(missing, gpu="pynvml is not installed")
    observer.start()
    observer.stop()
    state = observer.state()
    assert state["foreign_cpu"] == {
        "unavailable": f"cannot read {missing.stat}: No such file or directory"
    }
    assert state["steal"] == state["foreign_cpu"]
    assert state["runnable"] == {
        "unavailable": f"cannot read {missing.loadavg}: No such file or directory"
    }
    no_freq = {
        "unavailable": f"no cpufreq under {tmp_path} (not exposed: a container or VM)"
    }
    assert state["frequency"] == no_freq and state["governor"] == no_freq
    assert state["gpu"] == {"unavailable": "pynvml is not installed"}
    # Nothing readable, nothing busy: an unavailable signal is not a zero.
    assert busy_reason(state, "cpu") is None


def test_a_malformed_stat_and_a_kernel_without_steal(kernel):
    kernel.stat.write_text("garbage\n")
    observer = MachineObserver(kernel, gpu="-")
    observer.start()
    observer.stop()
    assert observer.state()["foreign_cpu"]["unavailable"].startswith(
        f"cannot parse {kernel.stat}: first line"
    )
    kernel.stat.write_text("cpu  1 2 3 4 5 6 7\n")
    observer = MachineObserver(kernel, gpu="-")
    observer.start()
    observer.stop()
    state = observer.state()
    assert "cores" in state["foreign_cpu"]
    assert state["steal"] == {"unavailable": f"{kernel.stat} has no steal column"}


def test_cpu_frequency_and_governor_from_cpufreq(kernel):
    for n, (khz, governor) in enumerate(
        [(2_000_000, "performance"), (3_000_000, "powersave")]
    ):
        freq = kernel.cpus / f"cpu{n}" / "cpufreq"
        freq.mkdir(parents=True)
        (freq / "scaling_cur_freq").write_text(f"{khz}\n")
        (freq / "scaling_governor").write_text(f"{governor}\n")
    kernel.stat.write_text(stat_line((1, 0, 0, 0, 0)))
    observer = MachineObserver(kernel, gpu="-")
    observer.start()
    observer.stop()
    state = observer.state()
    assert state["frequency"] == {"min_mhz": 2500.0, "max_mhz": 2500.0, "samples": 1}
    assert state["governor"] == {"names": ["performance", "powersave"]}


def test_the_slow_signals_are_read_once_per_second_of_rounds(kernel):
    kernel.stat.write_text(stat_line((1, 0, 0, 0, 0)))
    clocks = Clocks()
    gpu = GpuReader(FakeNvml(), "handle", "NVML index 0")
    observer = MachineObserver(kernel, gpu=gpu, clocks=clocks.pair())
    for _ in range(30):  # 30 stretches of 0.1 s: the first stop, then each 1 s
        observer.start()
        clocks.wall += 0.1
        observer.stop()
    assert observer.runnable.values.count == 30
    assert gpu.sm.values.count == 3


class FakeNvml:
    """The few pynvml calls the reader makes, with fixed answers."""

    def __init__(self, pids=(), mask=0x44):
        self.pids = pids
        self.mask = mask

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return {1: 1980, 2: 2619}[clock]

    def nvmlDeviceGetUtilizationRates(self, handle):
        return types.SimpleNamespace(gpu=87)

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return [types.SimpleNamespace(pid=p) for p in self.pids]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.mask


def test_the_gpu_state_through_nvml():
    reader = GpuReader(FakeNvml(pids=(os.getpid(), 4242)), "handle", "NVML index 0")
    reader.sample()
    reader.sample()
    state = reader.summary()
    assert state == {
        "device": "NVML index 0",
        "sm_clock_mhz": {"min": 1980, "max": 1980, "samples": 2},
        "memory_clock_mhz": {"min": 2619, "max": 2619, "samples": 2},
        "utilisation_percent": {"max": 87, "mean": 87.0, "samples": 2},
        "other_processes": {"max": 1.0, "samples": 2},
        "throttle_reasons": {"names": ["hw_thermal_slowdown", "sw_power_cap"]},
    }
    reason = busy_reason({"gpu": state}, "gpu")
    assert reason == (
        "1 other process(es) used the GPU during gpu's rounds; GPU clocks held "
        "down (hw_thermal_slowdown) during gpu's rounds"
    )


def test_a_quiet_gpu_and_one_whose_calls_fail():
    quiet = GpuReader(FakeNvml(pids=(os.getpid(),), mask=0x4), "handle", "x")
    quiet.sample()
    assert busy_reason({"gpu": quiet.summary()}, "gpu") is None  # a power cap is normal

    class Broken(FakeNvml):
        def nvmlDeviceGetClockInfo(self, handle, clock):
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    broken = GpuReader(Broken(), "handle", "x")
    broken.sample()
    assert broken.summary()["sm_clock_mhz"] == {
        "unavailable": "nvmlDeviceGetClockInfo: NVML_ERROR_NOT_SUPPORTED"
    }


def test_throttle_bits_by_name():
    assert throttle_names(0) == []
    assert throttle_names(0x1 | 0x8) == ["gpu_idle", "hw_slowdown"]
    assert throttle_names(0x10000) == ["0x10000"]


def test_no_gpu_reader_on_a_cpu_worker_or_without_pynvml(monkeypatch):
    import jax

    assert gpu.gpu_reader.__wrapped__() == (
        f"not a GPU worker (JAX backend {jax.default_backend()!r})"
    )
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    assert gpu.gpu_reader.__wrapped__() == (
        "pynvml is not installed (pip install nvidia-ml-py)"
    )


def test_no_entry_without_rounds_and_the_observer_is_listed():
    info = {}
    MachineObserver(gpu="-").record(info, [])
    assert info == {}
    assert MachineObserver in [type(o) for o in observers_for(object())]


def test_a_foreign_figure_beyond_the_machine_is_said_as_the_machine():
    # 4 ms of rounds in 10 stretches: a few clock ticks read as 16.7 cores,
    # beyond the tick uncertainty (11.2 cores) and beyond the 2 cores there are.
    state = {
        "wall_s": 0.004,
        "stretches": 10,
        "cpus": 2,
        "foreign_cpu": {"cores": 16.7, "own_cores": 0.9, "tick_s": 0.01},
    }
    assert busy_reasons(state, "cpu") == [
        "other processes used 2.0 of 2 cores during cpu's rounds"
    ]
