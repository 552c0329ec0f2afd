"""The scheduler of per-backend workers (pytest_lyapax/run/scheduling.py)."""

import inspect
from types import SimpleNamespace

import pytest

from pytest_lyapax.backends.labels import (
    GPU_MEMORY_ENV,
    Backend,
)
from pytest_lyapax.run.scheduling import BackendScheduling, worker_spec


class FakeNode:
    """Stands in for xdist's WorkerController: records what it is sent."""

    def __init__(self, label, log, name=None):
        self.label = label
        self.log = log
        self.gateway = SimpleNamespace(id=name or f"gw-{label}", spec=object())

    def send_runtest_some(self, indices):
        self.log.append((self.gateway.id, "run", list(indices)))

    def shutdown(self):
        self.log.append((self.gateway.id, "shutdown"))

    def __repr__(self):
        return self.gateway.id


# Each worker collects only its own backend's items (see items.py).
COLLECTIONS = {
    "cpu": ["t.py::test_a[cpu]", "t.py::test_b[cpu-4]", "t.py::test_b[tpu-4]"],
    "gpu": ["t.py::test_a[gpu]", "t.py::test_b[gpu-4]"],
}


def label_of(node):
    return node.label


def started(order=("cpu", "gpu")):
    log = []
    sched = BackendScheduling(list(order), label_of)
    nodes = {label: FakeNode(label, log) for label in order}
    for node in nodes.values():
        sched.add_node(node)
    for label, node in nodes.items():
        assert not sched.collection_is_completed
        sched.add_node_collection(node, COLLECTIONS[label])
    assert sched.collection_is_completed
    sched.schedule()
    return sched, nodes, log


def test_worker_spec_sets_only_jax_platforms():
    # The label travels once, in workerinput; JAX_PLATFORMS is the
    # only environment channel.
    spec = worker_spec(Backend("cpu", "cpu"), {})
    assert spec == "popen//env:JAX_PLATFORMS=cpu"


def test_a_worker_label_comes_from_the_position_of_its_spec():
    from pytest_lyapax.run.scheduling import assign_label

    specs = [object(), object()]  # cpu and cpu2 share JAX_PLATFORMS=cpu
    manager = SimpleNamespace(specs=specs)
    for spec, label in zip(specs, ["cpu", "cpu2"], strict=True):
        node = SimpleNamespace(nodemanager=manager, gateway=SimpleNamespace(spec=spec))
        assert assign_label(node, ["cpu", "cpu2"]) == label
    stranger = SimpleNamespace(
        nodemanager=manager, gateway=SimpleNamespace(spec=object(), id="gw9")
    )
    with pytest.raises(RuntimeError, match="gw9"):
        assign_label(stranger, ["cpu", "cpu2"])


def test_gpu_workers_do_not_preallocate_unless_the_user_chose():
    # Child JAX processes of a GPU correctness run need memory.
    spec = worker_spec(Backend("gpu", "cuda"), {})
    assert spec.endswith("//env:XLA_PYTHON_CLIENT_PREALLOCATE=false")
    chosen = worker_spec(Backend("gpu", "cuda"), {GPU_MEMORY_ENV: "true"})
    assert GPU_MEMORY_ENV not in chosen
    assert GPU_MEMORY_ENV not in worker_spec(Backend("cpu", "cpu"), {})


def test_scheduler_runs_each_workers_collection_one_phase_at_a_time():
    sched, nodes, log = started()
    assert log == [("gw-cpu", "run", [0, 1, 2]), ("gw-cpu", "shutdown")]
    for index in (0, 1):
        sched.mark_test_complete(nodes["cpu"], index)
    assert len(log) == 2, "the gpu phase must wait for the last cpu test"
    assert not sched.tests_finished
    sched.mark_test_complete(nodes["cpu"], 2)
    assert len(log) == 2, "the gpu phase must wait until the cpu worker finished"
    assert sched.remove_node(nodes["cpu"]) is None
    assert log[2:] == [("gw-gpu", "run", [0, 1]), ("gw-gpu", "shutdown")]
    sched.mark_test_complete(nodes["gpu"], 0)
    sched.mark_test_complete(nodes["gpu"], 1)
    assert not sched.tests_finished
    assert sched.remove_node(nodes["gpu"]) is None
    assert sched.tests_finished


def test_scheduler_gives_a_crashed_workers_tests_to_its_replacement():
    sched, nodes, log = started()
    sched.mark_test_complete(nodes["cpu"], 0)
    assert sched.remove_node(nodes["cpu"]) == COLLECTIONS["cpu"][1]  # died in 1
    assert not sched.tests_finished
    replacement = FakeNode("cpu", log, name="gw-cpu-2")
    sched.add_node(replacement)
    sched.add_node_collection(replacement, COLLECTIONS["cpu"])
    sched.schedule()
    assert log[-2:] == [("gw-cpu-2", "run", [2]), ("gw-cpu-2", "shutdown")]
    sched.mark_test_complete(replacement, 2)
    sched.remove_node(replacement)
    assert log[-2:] == [("gw-gpu", "run", [0, 1]), ("gw-gpu", "shutdown")]


def test_scheduler_moves_on_when_the_crash_was_the_last_test():
    sched, nodes, log = started()
    for index in (0, 1):
        sched.mark_test_complete(nodes["cpu"], index)
    assert sched.remove_node(nodes["cpu"]) == COLLECTIONS["cpu"][2]
    assert log[-2:] == [("gw-gpu", "run", [0, 1]), ("gw-gpu", "shutdown")]


def test_scheduler_waits_for_replacement_of_an_idle_crashed_worker():
    sched, nodes, log = started()
    assert sched.remove_node(nodes["gpu"]) is None  # crashed while waiting
    for index in (0, 1, 2):
        sched.mark_test_complete(nodes["cpu"], index)
    sched.remove_node(nodes["cpu"])
    assert not any(entry[0] == "gw-gpu" for entry in log)
    replacement = FakeNode("gpu", log, name="gw-gpu-2")
    sched.add_node(replacement)
    sched.add_node_collection(replacement, COLLECTIONS["gpu"])
    sched.schedule()
    assert log[-2:] == [("gw-gpu-2", "run", [0, 1]), ("gw-gpu-2", "shutdown")]


def test_scheduler_gives_up_a_backend_whose_worker_dies_while_collecting():
    # The other backends still run, and no replacement is
    # awaited for a worker that cannot even collect.
    log = []
    sched = BackendScheduling(["cpu", "gpu"], label_of)
    nodes = {label: FakeNode(label, log) for label in ("cpu", "gpu")}
    for node in nodes.values():
        sched.add_node(node)
    assert sched.remove_node(nodes["cpu"]) is None  # died before collecting
    assert sched.dead == {"cpu"}
    assert not sched.collection_is_completed
    sched.add_node_collection(nodes["gpu"], COLLECTIONS["gpu"])
    assert sched.collection_is_completed
    sched.schedule()
    assert log == [("gw-gpu", "run", [0, 1]), ("gw-gpu", "shutdown")]
    sched.mark_test_complete(nodes["gpu"], 0)
    sched.mark_test_complete(nodes["gpu"], 1)
    sched.remove_node(nodes["gpu"])
    assert sched.tests_finished


def test_scheduler_skips_a_backend_without_tests():
    log = []
    sched = BackendScheduling(["cpu", "gpu"], label_of)
    nodes = {label: FakeNode(label, log) for label in ("cpu", "gpu")}
    for node in nodes.values():
        sched.add_node(node)
    sched.add_node_collection(nodes["cpu"], [])
    sched.add_node_collection(nodes["gpu"], ["t.py::test_a[gpu]"])
    sched.schedule()
    assert log == [
        ("gw-cpu", "shutdown"),  # nothing to run: let the worker go at once
        ("gw-gpu", "run", [0]),
        ("gw-gpu", "shutdown"),
    ]


def test_scheduler_implements_xdists_scheduling_protocol():
    from xdist.scheduler.protocol import Scheduling

    def members(cls):
        return {n for n in dir(cls) if not n.startswith("_")}

    assert members(Scheduling) <= members(BackendScheduling)
    for name in members(Scheduling):
        if callable(getattr(Scheduling, name)):
            expected = list(inspect.signature(getattr(Scheduling, name)).parameters)
            actual = list(
                inspect.signature(getattr(BackendScheduling, name)).parameters
            )
            assert actual == expected, name


def test_xdist_session_internals_the_plugin_relies_on():
    """The crash handling replaces DSession._clone_node, and the shutdown
    NodeManager.teardown_nodes of DSession.nodemanager (see scheduling.py)."""
    from xdist.dsession import DSession

    source = inspect.getsource(DSession.worker_errordown)
    assert "self._clone_node(node)" in source
    finish = inspect.getsource(DSession.pytest_sessionfinish)
    assert 'getattr(self, "nodemanager"' in finish
    assert ".teardown_nodes()" in finish
    assert "_active_nodes" in inspect.getsource(DSession)
    assert callable(DSession.triggershutdown)
    # The end of a run (workerend.py): a worker's channel, closed when its
    # pytest_cmdline_main returns, and execnet's wait on it.
    from execnet.gateway_base import Channel
    from xdist.workermanage import WorkerController

    assert "self.channel = " in inspect.getsource(WorkerController.setup)
    assert list(inspect.signature(Channel.waitclose).parameters) == ["self", "timeout"]
    assert issubclass(Channel.TimeoutError, OSError)


def test_scheduler_runs_nothing_after_a_collection_error():
    # As pytest without xdist, a collection error runs nothing.
    log = []
    sched = BackendScheduling(["cpu", "gpu"], label_of)
    sched.halted = True
    nodes = {label: FakeNode(label, log) for label in ("cpu", "gpu")}
    for label, node in nodes.items():
        sched.add_node(node)
        sched.add_node_collection(node, COLLECTIONS[label])
    sched.schedule()
    assert log == [("gw-cpu", "shutdown"), ("gw-gpu", "shutdown")]
    assert sched.tests_finished
