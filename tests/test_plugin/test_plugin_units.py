"""Unit tests of the plugin's parts: scheduler, analysis, probe, figure, adapters."""

import inspect
import math
from types import SimpleNamespace

import pytest

from pytest_lyapax import analysis
from pytest_lyapax.backends import FALLBACK, OK, UNAVAILABLE, Backend
from pytest_lyapax.benchmarks import RecordedBenchmark
from pytest_lyapax.figure import BackendLegend, build_figure, render_png
from pytest_lyapax.options import CompareThreshold
from pytest_lyapax.probe import interpret
from pytest_lyapax.scheduling import BackendScheduling, worker_spec
from pytest_lyapax.session import LABEL_ENV

# ---------------------------------------------------------------- scheduler


class FakeNode:
    """Stands in for xdist's WorkerController: records what it is sent."""

    def __init__(self, label, log, name=None):
        self.label = label
        self.log = log
        self.gateway = SimpleNamespace(
            id=name or f"gw-{label}", spec=SimpleNamespace(env={LABEL_ENV: label})
        )

    def send_runtest_some(self, indices):
        self.log.append((self.gateway.id, "run", list(indices)))

    def shutdown(self):
        self.log.append((self.gateway.id, "shutdown"))

    def __repr__(self):
        return self.gateway.id


COLLECTION = [
    "t.py::test_a[cpu]",
    "t.py::test_a[gpu]",
    "t.py::test_b[cpu-4]",
    "t.py::test_b[gpu-4]",
    "t.py::test_b[tpu-4]",  # an unavailable backend: goes to the first worker
    "t.py::test_unlabelled",
]


def route(nodeid):
    for label in ("cpu", "gpu"):
        if f"[{label}" in nodeid:
            return label
    return "cpu"


def started(order=("cpu", "gpu")):
    log = []
    sched = BackendScheduling(list(order), route)
    nodes = {label: FakeNode(label, log) for label in order}
    for node in nodes.values():
        sched.add_node(node)
    for node in nodes.values():
        assert not sched.collection_is_completed
        sched.add_node_collection(node, COLLECTION)
    assert sched.collection_is_completed
    sched.schedule()
    return sched, nodes, log


def test_worker_spec_sets_platform_and_label():
    spec = worker_spec(Backend("gpu", "cuda"))
    assert spec == f"popen//env:JAX_PLATFORMS=cuda//env:{LABEL_ENV}=gpu"


def test_scheduler_routes_by_label_one_phase_at_a_time():
    sched, nodes, log = started()
    assert log == [("gw-cpu", "run", [0, 2, 4, 5]), ("gw-cpu", "shutdown")]
    for index in (0, 2, 4):
        sched.mark_test_complete(nodes["cpu"], index)
    assert len(log) == 2, "the gpu phase must wait for the last cpu test"
    assert not sched.tests_finished
    sched.mark_test_complete(nodes["cpu"], 5)
    assert len(log) == 2, "the gpu phase must wait until the cpu worker finished"
    assert sched.remove_node(nodes["cpu"]) is None
    assert log[2:] == [("gw-gpu", "run", [1, 3]), ("gw-gpu", "shutdown")]
    sched.mark_test_complete(nodes["gpu"], 1)
    sched.mark_test_complete(nodes["gpu"], 3)
    assert not sched.tests_finished
    assert sched.remove_node(nodes["gpu"]) is None
    assert sched.tests_finished


def test_scheduler_gives_a_crashed_workers_tests_to_its_replacement():
    sched, nodes, log = started()
    sched.mark_test_complete(nodes["cpu"], 0)
    assert sched.remove_node(nodes["cpu"]) == COLLECTION[2]  # it died in test 2
    assert not sched.tests_finished
    replacement = FakeNode("cpu", log, name="gw-cpu-2")
    sched.add_node(replacement)
    sched.add_node_collection(replacement, COLLECTION)
    sched.schedule()
    assert log[-2:] == [("gw-cpu-2", "run", [4, 5]), ("gw-cpu-2", "shutdown")]
    sched.mark_test_complete(replacement, 4)
    sched.mark_test_complete(replacement, 5)
    sched.remove_node(replacement)
    assert log[-2:] == [("gw-gpu", "run", [1, 3]), ("gw-gpu", "shutdown")]


def test_scheduler_moves_on_when_the_crash_was_the_last_test():
    sched, nodes, log = started()
    for index in (0, 2, 4):
        sched.mark_test_complete(nodes["cpu"], index)
    assert sched.remove_node(nodes["cpu"]) == COLLECTION[5]
    assert log[-2:] == [("gw-gpu", "run", [1, 3]), ("gw-gpu", "shutdown")]


def test_scheduler_waits_for_replacement_of_an_idle_crashed_worker():
    sched, nodes, log = started()
    assert sched.remove_node(nodes["gpu"]) is None  # crashed while waiting
    for index in (0, 2, 4, 5):
        sched.mark_test_complete(nodes["cpu"], index)
    sched.remove_node(nodes["cpu"])
    assert not any(entry[0] == "gw-gpu" for entry in log)
    replacement = FakeNode("gpu", log, name="gw-gpu-2")
    sched.add_node(replacement)
    sched.add_node_collection(replacement, COLLECTION)
    sched.schedule()
    assert log[-2:] == [("gw-gpu-2", "run", [1, 3]), ("gw-gpu-2", "shutdown")]


def test_scheduler_skips_a_backend_without_tests():
    log = []
    sched = BackendScheduling(["cpu", "gpu"], route)
    nodes = {label: FakeNode(label, log) for label in ("cpu", "gpu")}
    collection = ["t.py::test_a[gpu]"]
    for node in nodes.values():
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    assert log == [
        ("gw-cpu", "shutdown"),  # nothing to run: let the worker go at once
        ("gw-gpu", "run", [0]),
        ("gw-gpu", "shutdown"),
    ]


# ----------------------------------------------------------------- analysis


def test_crossover_is_interpolated_in_log_log():
    ref = {10: 1.0, 100: 2.0, 1000: 4.0}
    other = {10: 2.0, 100: 1.0, 1000: 1.0}  # speedups 0.5, 2, 4
    c = analysis.find_crossover("cpu", "gpu", ref, other)
    assert c.kind == "crossover"
    assert c.between == (10, 100)
    assert c.size == pytest.approx(10**1.5)
    assert c.largest == 1000 and c.speedup_at_largest == pytest.approx(4.0)
    assert "gpu faster than cpu from d ~ 31.6 on" in c.describe("d")


def test_crossover_uses_the_last_change_of_winner():
    ref = {1: 2.0, 2: 1.0, 3: 3.0}
    other = {1: 1.0, 2: 2.0, 3: 1.0}  # speedups 2, 0.5, 3
    assert analysis.find_crossover("a", "b", ref, other).between == (2, 3)


def test_crossover_other_cases():
    faster = analysis.find_crossover("a", "b", {1: 2.0, 2: 2.0}, {1: 1.0, 2: 1.0})
    assert faster.kind == "other-faster"
    slower = analysis.find_crossover("a", "b", {1: 1.0, 2: 1.0}, {1: 2.0, 2: 3.0})
    assert slower.kind == "reference-faster"
    assert "no crossover" in slower.describe()
    none = analysis.find_crossover("a", "b", {1: 1.0}, {2: 1.0})
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
    table = analysis.sized_table(bench, ["cpu", "gpu", "tpu"], {"tpu": "unavailable"})
    assert table[0].split() == ["size", "cpu", "gpu", "tpu", "gpu", "speedup"]
    assert table[2].split() == ["10", "100", "ms", "200", "ms", "unavailable", "0.5x"]
    assert table[3].split() == ["100", "1", "s", "500", "ms", "unavailable", "2x"]
    unsized = analysis.unsized_table(records, ["cpu", "gpu"], {})
    assert unsized[2].split() == ["test_lorenz", "3", "ms", "-"]


def test_format_seconds():
    assert analysis.format_seconds(2.5) == "2.5 s"
    assert analysis.format_seconds(0.0125) == "12.5 ms"
    assert analysis.format_seconds(3e-6) == "3 us"
    assert analysis.format_seconds(4e-9) == "4 ns"
    assert analysis.format_seconds(None) == "-"
    assert analysis.format_seconds(math.nan) == "-"


def test_compare_runs():
    saved = {"benchmarks": [record("cpu", 10, 1.0), record("cpu", 20, 1.0)]}
    now = [record("cpu", 10, 1.2), record("cpu", 20, 1.5), record("cpu", 30, 9.0)]
    threshold = CompareThreshold("median", 25.0, relative=True)
    result = analysis.compare_runs(saved, now, threshold)
    assert [(c.size, c.failed) for c in result] == [(10, False), (20, True)]
    assert result[1].change == pytest.approx(50.0)
    table = analysis.comparison_table(result, threshold)
    assert "REGRESSION" in table[-1] and "REGRESSION" not in table[-2]
    absolute = analysis.compare_runs(saved, now, CompareThreshold("median", 0.3, False))
    assert [c.failed for c in absolute] == [False, True]
    assert not any(c.failed for c in analysis.compare_runs(saved, now, None))


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
    (ax,) = fig.axes
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["cpu (cpu): median", "gpu: unavailable"]
    curves = {line.get_label(): len(line.get_xdata()) for line in ax.get_lines()}
    assert curves == {"cpu (cpu): median": 2, "gpu: unavailable": 0}
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert "(s)" in ax.get_ylabel()
    notes = " ".join(t.get_text() for t in ax.texts)
    assert "gpu not measured (unavailable)" in notes
    assert "host (CPU model)" in fig._suptitle.get_text()
    assert render_png(benches, legends, "m").startswith(b"\x89PNG")


def test_figure_without_sized_benchmarks_still_lists_backends():
    fig = build_figure([], [BackendLegend("gpu", UNAVAILABLE, None, "no GPU")], "m")
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["gpu: unavailable"]


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
