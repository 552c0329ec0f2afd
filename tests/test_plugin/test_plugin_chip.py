"""Devices that admit one process at a time (run/chip.py, backends/chiplock.py):
a label and its twins take the chip one after another, each worker ended
before the next opens it; the probes likewise; JAX's lock error in words.

No TPU is needed: the tests declare the CPU exclusive (--jax-exclusive=cpu),
which the plugin then treats as it treats a TPU chip.
"""

import fcntl
import json
import subprocess
import sys

import pytest
from support.deadlines import timeout_s

from pytest_lyapax.backends import chiplock, probe
from pytest_lyapax.backends.labels import Backend
from pytest_lyapax.run import chip
from pytest_lyapax.run.scheduling import BackendScheduling

LOCK_ERROR = (
    "Unable to initialize backend 'tpu': ABORTED: Internal error when accessing "
    'libtpu multi-process lockfile. Run "$ sudo rm /tmp/libtpu_lockfile".'
)

# Each test appends what it saw: its label, its worker's pid, and which other
# workers' processes were still running when it started.
LOGGING = """
import json
import os

import pytest

LOG = os.environ["CHIP_LOG"]


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("i", range(3))
def test_step(jax_backend, i):
    others = set()
    if os.path.exists(LOG):
        with open(LOG) as fh:
            others = {json.loads(line)["pid"] for line in fh} - {os.getpid()}
    entry = {
        "label": jax_backend,
        "pid": os.getpid(),
        "running": sorted(p for p in others if _running(p)),
    }
    with open(LOG, "a") as fh:
        fh.write(json.dumps(entry) + "\\n")
"""


def test_a_label_and_its_rerun_take_an_exclusive_device_one_after_another(
    pytester, clean_environment
):
    pytester.makepyfile(test_steps=LOGGING)
    log = pytester.path / "log.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--jax-backend=cpu",
            "--jax-rerun=cpu",
            "--jax-exclusive=cpu",
            f"--jax-report-dir={pytester.path / 'r'}",
            "-p",
            "no:cacheprovider",
        ],
        cwd=pytester.path,
        env={**clean_environment, "CHIP_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=timeout_s(300),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    labels = [e["label"] for e in entries]
    assert sorted(set(labels)) == ["cpu", "cpu_rerun"]
    # One label's tests, then the other's: never interleaved.
    switches = sum(a != b for a, b in zip(labels, labels[1:], strict=False))
    assert switches == 1, labels
    # And when the second began, the first one's process had ended.
    assert all(not e["running"] for e in entries), entries


def test_without_exclusive_devices_the_rerun_interleaves(pytester, clean_environment):
    # The control: the same run, the CPU not declared exclusive.
    pytester.makepyfile(test_steps=LOGGING)
    log = pytester.path / "log.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--jax-backend=cpu",
            "--jax-rerun=cpu",
            f"--jax-report-dir={pytester.path / 'r'}",
            "-p",
            "no:cacheprovider",
        ],
        cwd=pytester.path,
        env={**clean_environment, "CHIP_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=timeout_s(300),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(e["running"] for e in entries)  # both workers alive at once


class _Node:
    def __init__(self, label, log):
        self.label, self.log = label, log

    def send_runtest_some(self, indices):
        self.log.append((self.label, "run"))

    def shutdown(self):
        pass


def test_the_scheduler_never_runs_two_phases_of_one_chip_at_once():
    log = []
    chips = {"tpu": "|tpu", "tpu_rerun": "|tpu"}
    order = ["cpu", "tpu", "tpu_rerun"]
    sched = BackendScheduling(order, lambda n: n.label, concurrent=True, chips=chips)
    nodes = {label: _Node(label, log) for label in order}
    for node in nodes.values():
        sched.add_node(node)
        sched.add_node_collection(node, ["t.py::a"])
    sched.schedule()
    assert log == [("cpu", "run"), ("tpu", "run")]
    assert sched.running == {"cpu", "tpu"}
    sched.mark_test_complete(nodes["tpu"], 0)
    sched.remove_node(nodes["tpu"])  # its worker has finished
    assert log[-1] == ("tpu_rerun", "run")
    assert sched.running == {"cpu", "tpu_rerun"}


def test_exclusive_labels_and_their_usage_errors():
    backends = (Backend("cpu", "cpu"), Backend("gpu", "cuda"), Backend("tpu", "tpu"))
    assert chip.parse_exclusive("gpu", backends) == {"cuda"}
    assert chip.parse_exclusive("none", backends) == frozenset()
    with pytest.raises(pytest.UsageError, match=r"--jax-exclusive: 'rocm' is not"):
        chip.parse_exclusive("gpu,rocm", backends)
    chips = chip.chips_of(
        [*backends, Backend("tpu_rerun", "tpu", rerun_of="tpu")],
        chip.DEFAULT_EXCLUSIVE,
    )
    assert chips == {"tpu": "|tpu", "tpu_rerun": "|tpu"}


def test_an_unknown_exclusive_label_is_a_usage_error(pytester):
    pytester.makepyfile("def test_a(): pass")
    result = pytester.runpytest_subprocess("--jax-backend=cpu", "--jax-exclusive=tpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--jax-exclusive: 'tpu' is not a requested label*"])


def test_the_lock_error_names_a_holder_or_a_file_left_behind(tmp_path):
    lockfile = tmp_path / "libtpu_lockfile"
    assert chiplock.lockfile_state(str(lockfile)) == "absent"
    lockfile.touch()
    stale = chiplock.describe_lock_error(LOCK_ERROR, str(lockfile))
    assert "was left behind by a process that ended" in stale
    assert f"rm {lockfile}" in stale
    with open(lockfile, "rb") as holder:
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
        held = chiplock.describe_lock_error(LOCK_ERROR, str(lockfile))
    assert held.startswith("another process holds the chip: Unable to initialize")


def test_the_device_is_opened_again_while_another_process_holds_it():
    attempts, slept = [], []

    def start():
        attempts.append(1)
        if len(attempts) < 3:
            raise RuntimeError(LOCK_ERROR)

    assert chip.open_device(10.0, start, slept.append) == ""
    assert len(attempts) == 3 and sum(slept) == 2.0

    def held():
        raise RuntimeError(LOCK_ERROR)

    why = chip.open_device(3.0, held, slept.append)
    assert "multi-process lockfile" in why


def test_a_worker_waits_for_the_chip_lock_of_the_previous_one(tmp_path):
    path = str(tmp_path / "chip.lock")
    first = chip.take(path)
    assert first is not None
    assert chip.take(path, wait_s=0.4, sleep=lambda s: None) is None
    first.close()  # the holder ended
    assert chip.take(path, wait_s=0.0) is not None


def test_probes_of_an_exclusive_platform_run_one_after_another(monkeypatch):
    events = []

    class FakePopen:
        def __init__(self, args, env, **kwargs):
            self.name = env.get("WHO", env["JAX_PLATFORMS"])
            self.returncode = 1
            events.append(("start", self.name))

        def communicate(self, timeout=None):
            events.append(("end", self.name))
            return "", "no output"

    monkeypatch.setattr(probe.subprocess, "Popen", FakePopen)
    backends = [
        Backend("tpu", "tpu", env=(("WHO", "tpu"),)),
        Backend("tpu32", "tpu", env=(("WHO", "tpu32"),)),
        Backend("gpu", "cuda"),
    ]
    results = probe.probe_backends(backends)
    assert set(results) == {"tpu", "tpu32", "gpu"}
    tpu_events = [e for e in events if e[1] != "cuda"]
    assert tpu_events == [
        ("start", "tpu"),
        ("end", "tpu"),
        ("start", "tpu32"),
        ("end", "tpu32"),
    ]
    assert events[0] == ("start", "cuda")  # the others start at once


def test_a_probe_that_finds_the_chip_held_says_so():
    backend = Backend("tpu", "tpu")
    reason = probe.explain_failure(backend, "RuntimeError", LOCK_ERROR)
    assert "multi-process lockfile" in reason
    assert reason.startswith("JAX could not start platform 'tpu': ")
