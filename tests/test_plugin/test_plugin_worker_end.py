"""The end of a run: every worker finishes its own end, then exits, before
the controlling pytest returns (``pytest_lyapax/run/workerend.py``).

The runs assert on what the workers wrote and in which order, and on their
processes being gone, never on timings.
"""

import os
import re
import textwrap

import pytest

from pytest_lyapax.run import workerend

FAST = ["-p", "no:cacheprovider", "--benchmark-min-rounds=1", "--benchmark-max-time=0"]

# Each worker appends "<what> <pid>" to end-<label>.log: "begun" and "done"
# around its pytest_unconfigure's work, "exited" from its interpreter's exit.
WORKER_END = """
import atexit
import json
import os
import time
from pathlib import Path


def label_of(config):
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or "pytest_lyapax" not in workerinput:
        return None  # the controller
    return json.loads(workerinput["pytest_lyapax"])["label"]


def log(label, what):
    with open(Path(__file__).parent / f"end-{label}.log", "a") as fh:
        fh.write(f"{what} {os.getpid()}\\n")


def pytest_configure(config):
    label = label_of(config)
    if label is not None:
        atexit.register(log, label, "exited")


def pytest_unconfigure(config):
    label = label_of(config)
    if label is None:
        return
    log(label, "begun")
    work()
    log(label, "done")
"""


def project(pytester, work):
    pytester.makeconftest(WORKER_END + textwrap.dedent(work))
    pytester.makepyfile(test_one="def test_one(jax_backend):\n    pass\n")


def ended(pytester, label):
    lines = (pytester.path / f"end-{label}.log").read_text().split()
    return lines[0::2], {int(pid) for pid in lines[1::2]}


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_a_worker_whose_end_takes_5_s_under_load_ends_before_pytest_returns(
    pytester, busy_cpus
):
    # More than execnet's 5 s of grace and xdist's 10 s before a kill: both
    # cut such a worker short before. Two busy loops run meanwhile.
    project(
        pytester,
        """
        def work():
            end = time.monotonic() + 5.0
            while time.monotonic() < end:
                pass
        """,
    )
    result = pytester.runpytest_subprocess(
        *FAST, "--jax-backend=cpu,cpu2", "--jax-backend-platform=cpu2=cpu"
    )
    assert result.ret == pytest.ExitCode.OK, result.outlines
    assert "killed" not in result.stdout.str()
    for label in ("cpu", "cpu2"):
        steps, pids = ended(pytester, label)
        assert steps == ["begun", "done", "exited"], label
        (pid,) = pids
        assert gone(pid), f"worker {label} (pid {pid}) outlived the run"


@pytest.mark.slow
def test_a_worker_hanging_in_its_end_is_killed_and_named(pytester):
    project(
        pytester,
        """
        import pytest_lyapax.run.workerend

        # The controller's limit, shortened for the test (default 300 s).
        pytest_lyapax.run.workerend.WORKER_EXIT_LIMIT_S = 2.0


        def work():
            time.sleep(600)
        """,
    )
    result = pytester.runpytest_subprocess(*FAST, "--jax-backend=cpu")
    steps, (pid,) = ended(pytester, "cpu")
    assert steps == ["begun"]
    assert gone(pid), f"the hung worker (pid {pid}) outlived the run"
    result.stdout.re_match_lines(
        [
            re.escape(
                f"pytest-lyapax: worker gw0 (backend cpu, pid {pid}) was still in "
                f"{workerend.END_HOOKS} "
            )
            + r"\d+ s after the controller began waiting for it: killed .*"
        ]
    )
    # Its tests' results stand: the run says what was lost, it does not fail.
    assert result.ret == pytest.ExitCode.OK


# -- await_workers on stand-ins for execnet's objects -------------------------


class Gateway:
    """A local worker's gateway (its process is ``popen``) or, ``remote``,
    one through a host."""

    def __init__(self, log, gid, remote=False):
        self.id, self.spec, self.log = gid, "popen", log
        self._io = self
        if not remote:
            self.popen = self
            self.pid = 4242

    def kill(self):
        self.log.append(f"kill {self.id}")


class Channel:
    TimeoutError = TimeoutError

    def __init__(self, log, gid, hangs=False):
        self.log, self.id, self.hangs = log, gid, hangs

    def waitclose(self, timeout):
        self.log.append(f"waitclose {self.id}")
        if self.hangs:
            raise self.TimeoutError(f"Timeout after {timeout!r} seconds")


class Group:
    """``terminate`` kills, as execnet does past its timeout, ``slow`` ones."""

    def __init__(self, log, gateways, slow=()):
        self.log, self.gateways, self.slow = log, gateways, slow

    def terminate(self, timeout):
        self.log.append("terminate")
        for gateway in self.gateways:
            if gateway.id in self.slow:
                gateway._io.kill()


def ending(log, gid, hangs=False, remote=False, **kwargs):
    gateway = Gateway(log, gid, remote)
    channel = Channel(log, gid, hangs)
    return workerend.EndingWorker(gateway, f"worker {gid}", channel, **kwargs)


def test_workers_get_their_exit_only_after_their_own_end():
    assert workerend.describe(Gateway([], "gw1"), "cpu2") == (
        "worker gw1 (backend cpu2, pid 4242)"
    )
    log, said = [], []
    workers = [ending(log, "gw0", finished=True), ending(log, "gw1", finished=True)]
    group = Group(log, [w.gateway for w in workers])
    assert workerend.await_workers(group, workers, said.append) == []
    assert log == ["waitclose gw0", "waitclose gw1", "terminate"]
    assert said == []


def test_a_worker_past_the_limit_is_killed_and_every_kill_is_named():
    log, said = [], []
    workers = [
        ending(log, "gw0", hangs=True, finished=True),  # hangs in its end
        ending(log, "gw1", finished=True),  # slow to exit its interpreter
        ending(log, "gw2"),  # never finished its session (an interrupted run)
        ending(log, "gw3", gone=True),  # crashed: reported as such already
        # Hangs on a host: no kill through the host, its exit interrupts it.
        ending(log, "gw4", hangs=True, remote=True, finished=True),
    ]
    slow = ("gw1", "gw2", "gw3")
    group = Group(log, [w.gateway for w in workers], slow=slow)
    lines = workerend.await_workers(group, workers, said.append, limit=0.0)
    assert log == [
        "waitclose gw0",
        "kill gw0",
        "waitclose gw1",
        "waitclose gw4",
        "terminate",
        "kill gw1",
        "kill gw2",
        "kill gw3",
    ]
    assert said == lines
    doing = [re.sub(r"\d+ s after.*", "", line) for line in lines]
    assert doing == [
        f"pytest-lyapax: worker gw0 was still in {workerend.END_HOOKS} ",
        f"pytest-lyapax: worker gw4 was still in {workerend.END_HOOKS} ",
        "pytest-lyapax: worker gw1 was still exiting its interpreter after its "
        "run (atexit handlers) ",
        "pytest-lyapax: worker gw2 was still in its session: the run ended "
        "before it finished ",
    ]
    assert all(
        line.endswith("killed (what it had left to do is lost)") for line in lines
    )
