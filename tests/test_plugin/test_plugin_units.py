"""Unit tests of the plugin's parts: scheduler, analysis, probe, figure, adapters."""

import inspect
import math
from types import SimpleNamespace

import pytest

from pytest_lyapax.backends.labels import (
    FALLBACK,
    GPU_MEMORY_ENV,
    OK,
    UNAVAILABLE,
    Backend,
)
from pytest_lyapax.backends.probe import interpret
from pytest_lyapax.measuring.benchmarks import RecordedBenchmark
from pytest_lyapax.report import analysis, stats
from pytest_lyapax.report.identity import bare_id, is_size, param_text
from pytest_lyapax.run.options import CompareThreshold
from pytest_lyapax.run.scheduling import BackendScheduling, worker_spec
from pytest_lyapax.views import tables
from pytest_lyapax.views.figure import BackendLegend, build_figure, render_png

# ---------------------------------------------------------------- scheduler


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


# ----------------------------------------------------------------- analysis


def samples_around(median, spread, rounds):
    """``rounds`` evenly spread samples in median * [1 - spread, 1 + spread]."""
    if rounds == 1:
        return (median,)
    return tuple(
        median * (1 - spread + 2 * spread * i / (rounds - 1)) for i in range(rounds)
    )


def points(medians, spread=0.0, rounds=stats.MIN_ROUNDS):
    """Points whose round times spread +-spread (relative) around the median."""
    return {
        size: analysis.Point(
            size,
            m,
            m * (1 - spread / 2),
            m * (1 + spread / 2),
            samples_around(m, spread, rounds),
        )
        for size, m in medians.items()
    }


def test_crossover_is_interpolated_in_log_log():
    ref = points({10: 1.0, 100: 2.0, 1000: 4.0})
    other = points({10: 2.0, 100: 1.0, 1000: 1.0})  # speedups 0.5, 2, 4
    c = analysis.find_crossover("cpu", "gpu", ref, other)
    assert c.kind == "crossover"
    (crossing,) = c.crossings
    assert crossing.between == (10, 100) and crossing.winner == "gpu"
    assert crossing.size == pytest.approx(10**1.5)
    assert c.largest == 1000 and c.speedup_at_largest == pytest.approx(4.0)
    text = c.describe("d")
    assert "gpu faster at d 100, 1000" in text and "cpu faster at d 10" in text
    assert "medians cross at d ~31.6 (between 10 and 100, gpu faster after)" in text


def test_every_crossing_is_reported():
    # Lines that visibly cross twice are not "no crossover".
    ref = points({1: 2.0, 2: 1.0, 3: 1.0})
    other = points({1: 1.0, 2: 2.0, 3: 3.0})  # speedups 2, 0.5, 1/3
    c = analysis.find_crossover("a", "b", ref, other)
    assert [x.between for x in c.crossings] == [(1, 2)]
    ref = points({1: 2.0, 2: 1.0, 3: 3.0})
    other = points({1: 1.0, 2: 2.0, 3: 1.0})  # speedups 2, 0.5, 3
    c = analysis.find_crossover("a", "b", ref, other)
    assert [(x.between, x.winner) for x in c.crossings] == [
        ((1, 2), "a"),
        ((2, 3), "b"),
    ]
    assert c.kind == "mixed"
    assert "no crossover" not in c.describe() and "cross at" in c.describe()


def test_identical_backends_are_within_noise():
    # Cpu vs an identical cpu2 is not "cpu2 faster; 1.01x".
    ref = points({10: 1.00, 100: 2.0}, spread=0.05)
    other = points({10: 0.99, 100: 1.98}, spread=0.05)
    c = analysis.find_crossover("cpu", "cpu2", ref, other)
    assert c.verdicts == ("noise", "noise") and c.kind == "within-noise"
    text = c.describe()
    assert "within noise at size 10, 100" in text and "faster" not in text


def test_a_crossing_of_medians_within_noise_calls_no_backend_faster():
    # Two identical backends whose medians cross by chance (A/A under load): the
    # crossing is reported, but no side is called faster.
    ref = points({20: 1.00, 50: 2.00}, spread=0.05)
    other = points({20: 1.01, 50: 1.98}, spread=0.05)
    c = analysis.find_crossover("cpu", "cpu2", ref, other)
    assert c.verdicts == ("noise", "noise") and len(c.crossings) == 1
    text = c.describe("n")
    assert "faster" not in text
    assert "(between 20 and 50, cpu2's median lower after, no difference" in text


def test_verdicts_with_few_rounds_say_so():
    # 3 rounds cannot carry a verdict, however far apart.
    few = analysis.find_crossover(
        "cpu", "gpu", points({1: 2.0, 2: 2.0}, rounds=3), points({1: 1.0, 2: 1.0})
    )
    assert few.verdicts == (analysis.FEW, analysis.FEW)
    assert few.kind == "too-few-rounds"
    text = few.describe()
    assert "too few rounds to judge at size 1, 2" in text and "faster" not in text
    assert few.to_json()["kind"] == "too-few-rounds"


def test_verdict_does_not_depend_on_the_timer_calibration():
    # The old rule compared IQRs; a narrow IQR (many iterations per
    # round) against a wide one decided "faster" from 3 numbers.  The noise
    # test reads the samples: heavily overlapping samples are noise however
    # narrow one side is.
    narrow = {1: analysis.Point(1, 1.0, 0.999, 1.001, samples_around(1.0, 0.001, 12))}
    wide = {1: analysis.Point(1, 0.98, 0.6, 1.4, samples_around(0.98, 0.5, 12))}
    assert analysis.find_crossover("a", "b", narrow, wide).verdicts == ("noise",)


def test_mann_whitney_against_known_values():
    # Fully separated 10 vs 10: U = 0; normal approximation with continuity
    # correction: z = (50 - 0.5) / sqrt(100 * 21 / 12).
    low, high = list(range(10)), list(range(10, 20))
    p, shift = stats.mann_whitney_p(low, high)
    z = 49.5 / math.sqrt(100 * 21 / 12)
    assert p == pytest.approx(math.erfc(z / math.sqrt(2))) and shift == 1.0
    assert stats.judge(low, high).kind == stats.SLOWER
    assert stats.judge(high, low).kind == stats.FASTER
    assert stats.mann_whitney_p([1.0] * 12, [1.0] * 12) == (1.0, 0.5)
    interleaved = stats.judge(list(range(0, 24, 2)), list(range(1, 25, 2)))
    assert interleaved.kind == stats.NOISE and interleaved.p > 0.5
    assert stats.judge(low[:9], high).kind == stats.FEW


def test_crossover_other_cases():
    faster = analysis.find_crossover(
        "a", "b", points({1: 2.0, 2: 2.0}), points({1: 1.0, 2: 1.0})
    )
    assert faster.kind == "other-faster"
    slower = analysis.find_crossover(
        "a", "b", points({1: 1.0, 2: 1.0}), points({1: 2.0, 2: 3.0})
    )
    assert slower.kind == "reference-faster"
    assert "medians do not cross" in slower.describe()
    none = analysis.find_crossover("a", "b", points({1: 1.0}), points({2: 1.0}))
    assert none.kind == "no-common-sizes"


def record(label, size, median, name="test_x", **extra):
    param = label if size is None else f"{label}-{size}"
    stats = {k: median for k in ("min", "max", "mean", "median", "q1", "q3")}
    stats.update(stddev=0.0, iqr=0.0, rounds=3, data=[median] * 3, iterations=1)
    for key in (
        "iqr_outliers",
        "stddev_outliers",
        "ld15iqr",
        "hd15iqr",
        "ops",
        "total",
    ):
        stats[key] = 0
    stats["outliers"] = "0;0"
    return {
        "group": None,
        "name": f"{name}[{param}]",
        "fullname": f"t.py::{name}[{param}]",
        "params": {"jax_backend": label, "jax_size": size},
        "param": param,
        "extra_info": {"backend": label, "size": size, **extra},
        "options": {},
        "stats": stats,
    }


def test_group_sized_and_tables():
    records = [
        record("gpu", 100, 0.5),
        record("cpu", 10, 0.1, size_label="d (nodes)"),
        record("cpu", 100, 1.0),
        record("gpu", 10, 0.2),
        record("cpu", None, 0.003, name="test_lorenz"),
    ]
    (bench,) = analysis.group_sized(records, ["cpu", "gpu"])
    assert list(bench.series) == ["cpu", "gpu"]
    assert bench.sizes == [10, 100]
    assert bench.size_label == "d (nodes)"
    table = tables.sized_table(bench, ["cpu", "gpu", "tpu"], {"tpu": "unavailable"})
    assert table[0].split() == ["size", "cpu", "gpu", "tpu", "gpu", "speedup"]
    assert table[2].split() == ["10", "100", "ms", "200", "ms", "unavailable", "0.5x"]
    assert table[3].split() == ["100", "1", "s", "500", "ms", "unavailable", "2x"]
    unsized = tables.unsized_table(
        analysis.unsized_medians(records), ["cpu", "gpu"], {}
    )
    assert unsized[2].split() == ["test_lorenz", "3", "ms", "-"]


def test_format_seconds():
    assert tables.format_seconds(2.5) == "2.5 s"
    assert tables.format_seconds(0.0125) == "12.5 ms"
    assert tables.format_seconds(3e-6) == "3 us"
    assert tables.format_seconds(4e-9) == "4 ns"
    assert tables.format_seconds(None) == "-"
    assert tables.format_seconds(math.nan) == "-"


def test_compare_runs():
    saved = {"benchmarks": [record("cpu", 10, 1.0), record("cpu", 20, 1.0)]}
    now = [record("cpu", 10, 1.2), record("cpu", 20, 1.5), record("cpu", 30, 9.0)]
    threshold = CompareThreshold("median", 25.0, relative=True)
    result = analysis.compare_runs(saved, now, [threshold]).comparisons
    assert [(c.size, bool(c.failed)) for c in result] == [(10, False), (20, True)]
    assert result[1].failed == ("median:25%",)
    table = tables.comparison_table(result, [threshold])
    assert "REGRESSION" in table[-1] and "REGRESSION" not in table[-2]
    assert "+50.0%" in table[-1]
    # 3 rounds each: the noise test does not pretend to know.
    assert "too few rounds" in table[-1]
    rule = CompareThreshold("median", 0.3, False)
    absolute = analysis.compare_runs(saved, now, [rule])
    assert [bool(c.failed) for c in absolute.comparisons] == [False, True]
    plain = analysis.compare_runs(saved, now)
    assert not any(c.failed for c in plain.comparisons)


def test_several_gates_each_judge_their_own_field():
    saved = {"benchmarks": [record("cpu", 10, 1.0)]}
    slow_max = record("cpu", 10, 1.05)
    slow_max["stats"]["max"] = 3.0
    gates = [
        CompareThreshold("median", 10.0, relative=True),
        CompareThreshold("max", 50.0, relative=True),
    ]
    (c,) = analysis.compare_runs(saved, [slow_max], gates).comparisons
    assert c.failed == ("max:50%",)
    table = tables.comparison_table([c], gates)
    assert table[0].split()[:7] == [
        "benchmark",
        "saved",
        "median",
        "now",
        "median",
        "change",
        "saved",
    ]
    assert "+200.0%" in table[-1] and "REGRESSION max:50%" in table[-1]


def on_machine(rec, host, device="cpu", jax="0.10.2"):
    rec = dict(rec, extra_info=dict(rec["extra_info"]))
    rec["extra_info"].update(host=host, cpu="Some CPU", device=device, jax_version=jax)
    return rec


def test_compare_reports_machines_and_refuses_across_hosts_and_devices():
    # A comparison knows what it compares.
    saved = {"benchmarks": [on_machine(record("gpu", 10, 1.0), "a", "NVIDIA A100")]}
    same = analysis.compare_runs(
        saved, [on_machine(record("gpu", 10, 1.0), "a", "NVIDIA A100", "0.11.2")]
    )
    (match,) = same.machines
    assert match.differences == ["jax '0.10.2' vs '0.11.2'"]
    assert same.refusal() is None  # a jax upgrade is what a gate is for
    device = analysis.compare_runs(
        saved, [on_machine(record("gpu", 10, 1.0), "a", "NVIDIA H200")]
    )
    assert device.refusal() == "backend 'gpu': device 'NVIDIA A100' vs 'NVIDIA H200'"
    host = analysis.compare_runs(saved, [on_machine(record("gpu", 10, 1.0), "b")])
    assert "host 'a' vs 'b'" in host.refusal()
    assert host.to_json()["machines"][0]["match"] is False
    lines = tables.machine_lines(host.machines)
    assert lines[0].split() == [
        "backend",
        "saved",
        "run",
        "on",
        "this",
        "run",
        "on",
        "machine",
    ]
    assert "host 'a' vs 'b'" in lines[-1]


def test_compare_gate_fails_on_nothing_compared_and_on_missing_backends():
    saved = {
        "benchmarks": [
            record("cpu", 10, 1.0),
            record("gpu", 10, 1.0),
            record("gpu", 20, 1.0),
        ]
    }
    threshold = CompareThreshold("median", 25.0, relative=True)
    result = analysis.compare_runs(saved, [record("cpu", 10, 1.0)], [threshold])
    assert result.missing == ["t.py::test_x[gpu-10]", "t.py::test_x[gpu-20]"]
    failures = result.gate_failures(allow_missing=False)
    assert failures == [
        "t.py::test_x[gpu-10] is missing from this run",
        "t.py::test_x[gpu-20] is missing from this run",
    ]
    assert result.gate_failures(allow_missing=True) == []
    other_ids = {"benchmarks": [dict(record("cpu", 10, 1.0), fullname="x.py::y")]}
    nothing = analysis.compare_runs(other_ids, [record("cpu", 10, 1.0)], [threshold])
    assert not nothing.comparisons
    assert any("nothing was compared" in f for f in nothing.gate_failures(False))


def test_absolute_thresholds_print_readable_units():
    # Not "-4.74e-06 s".
    rule = CompareThreshold("median", 1e-5, relative=False)
    assert rule.format_change(-4.74e-6) == "-4.74 us"
    assert rule.format_change(0.0125) == "+12.5 ms"
    assert str(rule) == "median:10us"
    saved = {"benchmarks": [record("cpu", None, 1e-5)]}
    result = analysis.compare_runs(saved, [record("cpu", None, 5.26e-6)], [rule])
    assert "-4.74 us" in tables.comparison_table(result.comparisons, [rule])[-1]


def test_same_named_tests_of_two_modules_are_two_series():
    # Unsized_medians keyed by name merged a.py::test_x and
    # b.py::test_x into one row (one of them lost).
    a = record("cpu", None, 0.0108)
    b = dict(record("cpu", None, 12.5e-6), fullname="sub/b.py::test_x[cpu]")
    medians = analysis.unsized_medians([a, b])
    assert {name: v["cpu"].median for name, v in medians.items()} == {
        "t.py::test_x": 0.0108,
        "sub/b.py::test_x": 12.5e-6,
    }
    rows = tables.unsized_table(medians, ["cpu"], {})[2:]
    assert [r.split()[0] for r in rows] == ["t.py::test_x", "sub/b.py::test_x"]
    sized = [record("cpu", 10, 1.0), record("cpu", 20, 2.0)]
    sized += [
        dict(r, fullname=r["fullname"].replace("t.py", "u.py"))
        for r in (record("cpu", 10, 5.0), record("cpu", 20, 6.0))
    ]
    benches = analysis.group_sized(sized, ["cpu"])
    assert [(b.name, b.medians("cpu")) for b in benches] == [
        ("t.py::test_x", {10: 1.0, 20: 2.0}),
        ("u.py::test_x", {10: 5.0, 20: 6.0}),
    ]
    # A name used once keeps its short form.
    assert list(analysis.unsized_medians([a])) == ["test_x"]


def test_series_per_other_parameter():
    # Dtype x size gives one series per dtype, not a mixture.
    records = []
    for dtype, scale in (("float32", 1.0), ("float64", 10.0)):
        for label in ("cpu", "gpu"):
            for size in (10, 100):
                r = record(label, size, scale * size / (100 if label == "gpu" else 1))
                r["params"]["dtype"] = dtype
                r["fullname"] = f"t.py::test_x[{label}-{dtype}-{size}]"
                r["name"] = f"test_x[{label}-{dtype}-{size}]"
                records.append(r)
    benches = analysis.group_sized(records, ["cpu", "gpu"])
    assert [b.name for b in benches] == [
        "test_x[dtype=float32]",
        "test_x[dtype=float64]",
    ]
    assert benches[0].medians("cpu") == {10: 10.0, 100: 100.0}
    assert benches[1].medians("cpu") == {10: 100.0, 100: 1000.0}


# -------------------------------------------------------------------- probe


def probe_line(**payload):
    import json

    return "PYTEST_LYAPAX_PROBE " + json.dumps(payload)


def test_probe_translates_the_empty_cuda_assertion():
    out = probe_line(ok=False, error_type="AssertionError", error="", jax_version="0")
    result = interpret(Backend("gpu", "cuda"), 0, out, "")
    assert result.status == UNAVAILABLE
    assert (
        "'cuda'" in result.reason and "AssertionError with no message" in result.reason
    )
    assert "jax" in result.reason and "/dev/nvidia" in result.reason


def test_probe_detects_a_silent_fallback():
    out = probe_line(
        ok=True, backend="cpu", device="cpu", device_count=1, jax_version="0"
    )
    result = interpret(Backend("gpu", "cuda,cpu"), 0, out, "")
    assert result.status == FALLBACK
    assert "silent fallback" in result.reason
    assert "--jax-backend-platform=gpu=cuda" in result.reason


def test_probe_ok_and_crashed():
    out = probe_line(
        ok=True, backend="cpu", device="cpu", device_count=1, jax_version="0"
    )
    assert interpret(Backend("cpu", "cpu"), 0, out, "").status == OK
    crashed = interpret(Backend("cpu", "cpu"), -11, "", "Segmentation fault\n")
    assert crashed.status == UNAVAILABLE
    assert "exited with code -11" in crashed.reason and "Segmentation" in crashed.reason


# ------------------------------------------------------------------- figure


def test_figure_marks_unavailable_backend_without_a_curve():
    records = [record("cpu", 10, 0.1), record("cpu", 100, 1.0)]
    benches = analysis.group_sized(records, ["cpu", "gpu"])
    legends = [
        BackendLegend("cpu", OK, "cpu"),
        BackendLegend("gpu", UNAVAILABLE, None, "JAX could not start platform 'cuda'"),
    ]
    fig = build_figure(benches, legends, "host (CPU model)")
    (ax,) = [a for a in fig.axes if a.get_visible()]
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == ["cpu (cpu)", "gpu [unavailable]"]
    drawn = [c for c in ax.containers]
    assert len(drawn) == 1 and len(drawn[0].lines[0].get_xdata()) == 2
    assert ax.get_xscale() == ax.get_yscale() == "log"
    header = " ".join(fig.texts[0].get_text().split())
    assert "host (CPU model)" in header
    assert "gpu unavailable: JAX could not start" in header
    assert "INCOMPLETE" not in header  # unavailable is reported, not a partial run
    # The legend sits below the header text, never on top of it.
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    text_box = fig.texts[0].get_window_extent(renderer)
    legend_box = fig.legends[0].get_window_extent(renderer)
    assert legend_box.y1 <= text_box.y0 + 1
    assert render_png(benches, legends, "m").startswith(b"\x89PNG")


def test_figure_marks_a_crashed_backend_as_an_incomplete_run():
    records = [record("cpu", 10, 0.1), record("cpu", 100, 1.0)]
    benches = analysis.group_sized(records, ["cpu", "cpu2"])
    legends = [
        BackendLegend("cpu", OK, "cpu"),
        BackendLegend("cpu2", "crashed", None, "worker died"),
    ]
    header = build_figure(benches, legends, "m").texts[0].get_text()
    assert "INCOMPLETE RUN: cpu2 crashed: worker died" in " ".join(header.split())


def test_figure_without_sized_benchmarks_draws_bars():
    # Only unsized benchmarks -> a per-backend bar chart.
    records = [
        record("cpu", None, 0.1, name="t1"),
        record("gpu", None, 0.01, name="t1"),
    ]
    legends = [BackendLegend("cpu", OK), BackendLegend("gpu", OK)]
    fig = build_figure([], legends, "m", analysis.unsized_medians(records))
    (ax,) = [a for a in fig.axes if a.get_visible()]
    bars = [p.get_height() for p in ax.patches]
    assert bars == [pytest.approx(0.1), pytest.approx(0.01)]
    assert "without a size axis" in ax.get_title()


def test_figure_single_size_draws_points_with_error_bars():
    r = record("cpu", 10, 0.5)
    r["stats"].update(q1=0.4, q3=0.7)
    benches = analysis.group_sized([r], ["cpu"])
    fig = build_figure(benches, [BackendLegend("cpu", OK)], "m")
    (ax,) = [a for a in fig.axes if a.get_visible()]
    (container,) = ax.containers
    line, caps, (bars,) = container.lines
    assert list(line.get_xdata()) == [10] and line.get_linestyle() == "None"
    (segment,) = bars.get_segments()
    assert [y for _, y in segment] == [pytest.approx(0.4), pytest.approx(0.7)]


def test_figure_size_is_bounded():
    # 150 sized benchmarks used to give an 825 x 75,900 px PNG.
    records = [
        record(label, size, 0.1 * size, name=f"test_{i}")
        for i in range(150)
        for label in ("cpu", "gpu")
        for size in (10, 100)
    ]
    benches = analysis.group_sized(records, ["cpu", "gpu"])
    assert len(benches) == 150
    fig = build_figure(
        benches, [BackendLegend("cpu", OK), BackendLegend("gpu", OK)], "m"
    )
    width, height = fig.get_size_inches() * fig.dpi
    assert width <= 1500 and height <= 3400
    assert "24 of 150 sized benchmarks drawn" in fig.texts[0].get_text()


# -------------------------------------------- pytest-benchmark internals used


def test_recorded_benchmark_matches_pytest_benchmark_metadata():
    """RecordedBenchmark must stay interchangeable with pytest-benchmark's
    Metadata: if this fails, pytest-benchmark changed its internals."""
    from pytest_benchmark.stats import Metadata

    fixture = SimpleNamespace(
        name="test_x[cpu-4]",
        fullname="t.py::test_x[cpu-4]",
        group=None,
        param="cpu-4",
        params={"jax_backend": "cpu", "jax_size": 4},
        extra_info={"backend": "cpu", "size": 4},
        cprofile_stats=None,
    )
    meta = Metadata(fixture, iterations=1, options={"min_rounds": 3})
    for value in (0.3, 0.1, 0.2, 0.25):
        meta.update(value)
    copy = RecordedBenchmark(meta.as_dict(include_data=True))
    for kwargs in (
        {"include_data": True},
        {"include_data": False},
        {"include_data": False, "flat": True},
        {"include_data": False, "stats": False},
    ):
        assert copy.as_dict(**kwargs) == meta.as_dict(**kwargs)
    assert copy["median"] == meta["median"] and copy.get("name") == meta.get("name")
    assert bool(copy) and copy.fullname == meta.fullname and not copy.has_error


def test_pytest_benchmark_attributes_the_plugin_relies_on(pytester):
    from pytest_benchmark.fixture import BenchmarkFixture

    assert list(inspect.signature(BenchmarkFixture.pedantic).parameters)[:6] == [
        "self",
        "target",
        "args",
        "kwargs",
        "setup",
        "teardown",
    ]
    source = inspect.getsource(BenchmarkFixture.__init__)
    for attribute in ("self.stats", "self.extra_info", "self.has_error", "self._mode"):
        assert attribute in source
    assert isinstance(BenchmarkFixture.enabled, property)
    bs = pytester.parseconfigure("-p", "no:xdist")._benchmarksession
    for attribute in (
        "disabled",
        "only",
        "json",
        "save",
        "autosave",
        "compare",
        "compare_fail",
        "compared_mapping",
        "histogram",
        "benchmarks",
    ):
        assert hasattr(bs, attribute), attribute


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


def test_a_size_is_an_int_and_never_a_bool():
    assert is_size(3) and is_size(0)
    assert not any(is_size(v) for v in (True, False, 3.0, "3", None))


def test_the_series_key_leaves_out_the_plugins_parameters():
    params = {"qr": "lapack", "jax_backend": "cpu", "jax_size": 20, "b": 1}
    assert param_text(params) == "b=1,qr=lapack"
    assert bare_id("t.py::test_x[cpu-20]") == "t.py::test_x"
