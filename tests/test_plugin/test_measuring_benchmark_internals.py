"""The pytest-benchmark internals that the benchmark session and fixture
rely on (pytest_lyapax/measuring/benchmarks.py, fixture.py), and the series
key (points.py, report/identity.py)."""

import inspect
from types import SimpleNamespace

from pytest_lyapax.measuring.benchmarks import RecordedBenchmark
from pytest_lyapax.measuring.points import series_of
from pytest_lyapax.report.identity import bare_id, is_size, param_text, series_key


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
    # The rounds planned after calibration (fixture.py's _planned_rounds
    # repeats pytest-benchmark's rule, so the turns spread them).
    for attribute in ("self._max_time", "self._min_rounds", "self._warmup"):
        assert attribute in source
    assert list(inspect.signature(BenchmarkFixture._calibrate_timer).parameters) == [
        "self",
        "runner",
    ]
    raw = inspect.getsource(BenchmarkFixture._raw)
    assert "self._calibrate_timer(runner)" in raw
    assert "ceil(self._max_time / duration)" in raw
    assert "int(self._warmup / iterations)" in raw
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


def test_a_size_is_an_int_and_never_a_bool():
    assert is_size(3) and is_size(0)
    assert not any(is_size(v) for v in (True, False, 3.0, "3", None))


def test_the_series_key_leaves_out_the_plugins_parameters():
    params = {"qr": "lapack", "jax_backend": "cpu", "jax_size": 20, "b": 1}
    assert param_text(params) == "b=1,qr=lapack"
    assert bare_id("t.py::test_x[cpu-20]") == "t.py::test_x"
    assert series_key("t.py::test_x[cpu-20]", params, "cpu") == (
        "t.py::test_x",
        "b=1,qr=lapack",
        "cpu",
    )
    item = SimpleNamespace(
        nodeid="t.py::test_x[cpu-20]", callspec=SimpleNamespace(params=params)
    )
    assert series_of(item, "cpu") == (("t.py::test_x", "b=1,qr=lapack", "cpu"), 20)
