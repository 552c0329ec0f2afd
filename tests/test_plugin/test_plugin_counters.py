"""Counters that noise cannot move: recorded per benchmark, shown, gated.

Two real CPU runs (one subprocess each, shared by the module): a saved run
where every benchmark does one pass over its data, then a run where
``test_double`` makes a second pass and the rest are unchanged, gated with
``--jax-compare-fail=flops:5%``.  Everything else reads their reports.
"""

import json
import math

import pytest

from pytest_lyapax import cli
from pytest_lyapax.measuring import counters as measuring
from pytest_lyapax.report import counters
from pytest_lyapax.report.compare import compare_runs
from pytest_lyapax.report.gates import CompareThreshold, parse_gates, parse_threshold

SUITE = """
import jax
import jax.numpy as jnp

SECOND_PASS = {second_pass}


@jax.jit
def one_pass(x):
    return jnp.sum(x * x)


@jax.jit
def maybe_two(x):
    out = jnp.sum(x * x)
    if SECOND_PASS:  # a second pass over the same data
        out = out + jnp.sum(jnp.sin(x) * x)
    return out


def eager(x):  # not jitted: three programs, launched one by one
    return jnp.sum(x * x) + 1.0


def test_same(benchmark, jax_backend):
    benchmark(one_pass, jnp.ones(4096))


def test_double(benchmark, jax_backend):
    benchmark(maybe_two, jnp.ones(4096))


def test_eager(benchmark, jax_backend):
    benchmark(eager, jnp.ones(4096))


def test_pedantic(benchmark, jax_backend):
    benchmark.pedantic(one_pass, args=(jnp.ones(4096),), rounds=3)
"""
# In this process (no worker to start): the gate is the controller's either way.
RUN = [
    "-p",
    "no:cacheprovider",
    "-p",
    "no:xdist",
    "--benchmark-max-time=0",
    "--jax-no-peaks",
    "--jax-backend=cpu",
]


def by_name(report):
    return {b["name"]: b for b in report["benchmarks"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, run_pytest):
    """(saved report, gated run's process, its report, folder)."""
    path = tmp_path_factory.mktemp("counters")
    (path / "test_work.py").write_text(SUITE.format(second_pass=False))
    first, saved = run_pytest(path, path / "lyapax-report", *RUN)
    assert first.returncode == 0, first.stdout + first.stderr
    (path / "saved.json").write_text(json.dumps(saved))
    (path / "first.txt").write_text(first.stdout)
    (path / "test_work.py").write_text(SUITE.format(second_pass=True))
    gated, now = run_pytest(
        path,
        path / "lyapax-report",
        *RUN,
        "--jax-compare=saved.json",
        "--jax-compare-fail=flops:5%",
    )
    (path / "now.json").write_text(json.dumps(now))
    return saved, gated, now, path


def test_every_benchmark_records_its_counters(runs):
    saved, *_ = runs
    benches = by_name(saved)
    for name, bench in benches.items():
        entry = bench["extra_info"]["counters"]
        assert set(measuring.COUNTER_FIELDS) <= set(entry), name
        assert isinstance(entry["flops"], float) and entry["flops"] > 0, name
        assert isinstance(entry["bytes"], float) and entry["bytes"] > 0, name
        assert isinstance(entry["compiles"], int) and entry["compiles"] >= 0, name
    same = benches["test_same[cpu]"]["extra_info"]["counters"]
    # sum(x * x) over 4096 elements: 4096 products and 4095 additions.
    assert same["flops"] == 2 * 4096 - 1
    assert isinstance(same["temp_bytes"], int) and same["temp_bytes"] >= 0
    assert same["argument_bytes"] == 4096 * 4  # float32: x64 is off in that run
    assert same["compiles"] == 1  # its first benchmark compiles it
    assert same["executions"] == 1
    eager = benches["test_eager[cpu]"]["extra_info"]["counters"]
    assert eager["executions"] == 3  # multiply, reduce_sum, add
    assert "not jitted" in eager["temp_bytes"]["unavailable"]
    pedantic = benches["test_pedantic[cpu]"]["extra_info"]["counters"]
    assert "pedantic" in pedantic["executions"]["unavailable"]
    # The compiled program was shared with test_same: nothing new to compile.
    assert pedantic["compiles"] == 0
    assert pedantic["flops"] == same["flops"]


def test_a_second_pass_fails_the_flops_gate_and_the_rest_pass(runs):
    saved, gated, now, _ = runs
    assert gated.returncode == pytest.ExitCode.TESTS_FAILED, gated.stdout
    out = gated.stdout
    assert "test_work.py::test_double[cpu] regressed (flops:5%)" in out
    for name in ("test_same", "test_eager", "test_pedantic"):
        assert f"{name}[cpu] regressed" not in out
    before = by_name(saved)["test_double[cpu]"]["extra_info"]["counters"]["flops"]
    after = by_name(now)["test_double[cpu]"]["extra_info"]["counters"]["flops"]
    assert after / before == pytest.approx(2.0, rel=1e-3)
    comparison = now["pytest_lyapax"]["comparison"]
    assert comparison["regressions"] == ["test_work.py::test_double[cpu]"]
    assert comparison["gates"] == ["flops:5%"]


def test_the_tables_show_the_counters(runs):
    *_, path = runs
    first = (path / "first.txt").read_text()
    assert "counters per call (exact)" in first
    assert "FLOP / call" in first and "launches / call" in first
    summary = (path / "lyapax-report" / "summary.md").read_text()
    assert "Counters per call (exact)" in summary
    assert "8.19 kFLOP" in summary and "16.4 kFLOP" in summary
    html = (path / "lyapax-report" / "report.html").read_text()
    assert "Counters per call (exact)" in html


def _cli(capsys, *args):
    code = cli.main(["compare", *map(str, args)])
    return code, capsys.readouterr().out


def test_compare_gates_the_counters_alike(runs, capsys):
    *_, path = runs
    code, out = _cli(capsys, path / "saved.json", path / "now.json", "--fail=flops:5%")
    assert code == 1
    assert "FAIL: test_work.py::test_double[cpu] regressed (flops:5%)" in out
    assert "flops +100.0%" in out  # the counters column
    assert out.count("FAIL:") == 1


def test_compare_passes_unchanged_benchmarks(runs, tmp_path, capsys):
    saved, _, now, _ = runs
    for report, name in ((saved, "saved.json"), (now, "now.json")):
        kept = dict(report)
        kept["benchmarks"] = [
            b for b in report["benchmarks"] if b["name"] != "test_double[cpu]"
        ]
        (tmp_path / name).write_text(json.dumps(kept))
    code, out = _cli(
        capsys, tmp_path / "saved.json", tmp_path / "now.json", "--fail=flops:5%"
    )
    assert code == 0, out
    assert "gate flops:5%: passed" in out


def test_an_unavailable_counter_is_not_comparable(runs, tmp_path, capsys):
    saved, _, now, _ = runs
    # The eager benchmark has no temporary bytes (no program of its own).
    one = {**now, "benchmarks": [by_name(now)["test_eager[cpu]"]]}
    (tmp_path / "now.json").write_text(json.dumps(one))
    (tmp_path / "saved.json").write_text(json.dumps(saved))
    code, out = _cli(
        capsys,
        tmp_path / "saved.json",
        tmp_path / "now.json",
        "--fail=temp:5%",
        "--allow-missing",
    )
    assert code == 0
    assert "not comparable: test_work.py::test_eager[cpu]: temp not comparable" in out
    code, out = _cli(
        capsys, tmp_path / "saved.json", tmp_path / "now.json", "--fail=temp:5%"
    )
    assert code == 1
    assert "FAIL: test_work.py::test_eager[cpu]: temp not comparable (both runs:" in out


# ------------------------------------------------------------ units


def record(**entry):
    return {
        "fullname": "t.py::test_x[cpu]",
        "name": "test_x[cpu]",
        "stats": {"median": 1.0, "q1": 1.0, "q3": 1.0},
        "extra_info": {"backend": "cpu", **({"counters": entry} if entry else {})},
    }


@pytest.mark.parametrize(
    ("text", "gate"),
    [
        ("flops:5%", CompareThreshold("flops", 5.0, relative=True)),
        ("bytes:0.5%", CompareThreshold("bytes", 0.5, relative=True)),
        ("temp:10%", CompareThreshold("temp", 10.0, relative=True)),
        ("compiles:0%", CompareThreshold("compiles", 0.0, relative=True)),
        ("compiles:1", CompareThreshold("compiles", 1.0, relative=False)),
    ],
)
def test_counter_gates_parse(text, gate):
    assert parse_threshold(text) == gate
    assert str(gate) == text and gate.counter


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("flops:5", r"the counter flops takes a percent \(flops:5%\)"),
        ("temp:5ms", r"the counter temp takes a percent \(temp:5%\)"),
        ("compiles:1.5", r"\(compiles:1.5% or a whole count, compiles:1\)"),
        ("executions:5%", r"COUNTER one of flops, bytes, temp, compiles"),
    ],
)
def test_bad_counter_gates_name_the_option_value_and_forms(text, message):
    with pytest.raises(ValueError, match=rf"^--fail: cannot read '{text}'.*{message}"):
        parse_gates([text], "--fail")


def test_a_bad_counter_gate_is_a_usage_error_of_the_plugin(pytester):
    with pytest.raises(pytest.UsageError, match="^--jax-compare-fail: cannot read"):
        pytester.parseconfigure("--jax-backend=cpu", "--jax-compare-fail=flops:5")


def test_counter_gates_compare_exact_growth():
    gate = parse_threshold("flops:5%")
    assert not gate.exceeded(100.0, 105.0) and gate.exceeded(100.0, 105.1)
    temp = parse_threshold("temp:5%")
    assert temp.excess(0.0, 0.0) == 0.0 and math.isinf(temp.excess(0.0, 8.0))
    compiles = parse_threshold("compiles:1")
    assert not compiles.exceeded(2, 3) and compiles.exceeded(2, 4)
    assert compiles.format_change(compiles.excess(2, 4)) == "+2"


def test_compare_runs_gates_counters_not_times():
    # The times differ wildly (noise), the counters are the same: passes.
    saved = {"benchmarks": [record(flops=10.0, compiles=1)]}
    now = record(flops=10.0, compiles=2)
    now["stats"] = {"median": 9.0, "q1": 9.0, "q3": 9.0}
    result = compare_runs(saved, [now], [parse_threshold("flops:5%")])
    assert result.gate_failures(allow_missing=False) == []
    (c,) = result.comparisons
    assert c.counter_changes == "compiles 1 -> 2" and c.counter_failed == ()
    result = compare_runs(saved, [now], [parse_threshold("compiles:0")])
    assert result.gate_failures(False) == ["t.py::test_x[cpu] regressed (compiles:0)"]
    assert result.comparisons[0].counter_failed == ("compiles:0",)


def test_a_counter_missing_on_either_side_is_not_comparable():
    gate = [parse_threshold("flops:5%")]
    reason = "the cost analysis gave flops=-1"
    for saved, now, side in (
        (record(), record(flops=1.0), "saved run: not recorded"),
        (record(flops=1.0), record(flops={"unavailable": reason}), reason),
        (record(flops=1.0), record(flops="many"), "malformed"),
    ):
        result = compare_runs({"benchmarks": [saved]}, [now], gate)
        (failure,) = result.gate_failures(allow_missing=False)
        assert failure.startswith("t.py::test_x[cpu]: flops not comparable (")
        assert side in failure
        assert result.gate_failures(allow_missing=True) == []
        assert result.to_json()["not_comparable"] == {
            "t.py::test_x[cpu]": [failure.split(": ", 1)[1]]
        }


def test_counter_readers_and_formats():
    entry = record(flops=2048.0, temp_bytes={"unavailable": "no .lower"})
    assert counters.counter(entry, "flops") == (2048.0, "")
    assert counters.counter(entry, "temp_bytes") == (None, "no .lower")
    assert counters.counter(record(), "flops") == (None, counters.NOT_RECORDED)
    assert counters.cell(entry, "flops") == "2.05 kFLOP"
    assert counters.cell(entry, "temp_bytes") == "n/a"
    assert counters.format_counter("bytes", 2048.0) == "2 KiB"
    assert counters.format_counter("compiles", 3.0) == "3"


def test_launches_are_read_from_the_pjrt_trace_names():
    names = [
        "CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice",
        "CommonPjRtLoadedExecutable::ExecutePrepare",
        "CommonPjRtLoadedExecutable::Execute (jit_f)",  # multi-device: once
        "[0] CommonPjRtLoadedExecutable::Execute (jit_f)",  # its per-device copies
        "[1] CommonPjRtLoadedExecutable::Execute (jit_f)",
        "ThunkExecutor::Execute (wait for completion)",
    ]
    assert measuring.launches_in(names) == 2
    assert "no executable launch" in measuring.launches_in([])["unavailable"]
    # A plugin backend's C API wrapper: seen, not counted as launches.
    wrapped = measuring.launches_in(["PjRtCApiLoadedExecutable::ExecuteSharded"])
    assert "1 PJRT C API execute event(s)" in wrapped["unavailable"]


def test_unavailable_inputs_stay_unavailable():
    work = {"source": "not available", "reason": "pedantic with setup"}
    entry = measuring.counters(
        work, {"temp_bytes": None}, 2, measuring.unavailable("x"), lowered=False
    )
    assert entry["flops"] == {"unavailable": "pedantic with setup"}
    assert entry["bytes"] == {"unavailable": "pedantic with setup"}
    assert "not jitted" in entry["temp_bytes"]["unavailable"]
    assert entry["compiles"] == 2 and entry["executions"] == {"unavailable": "x"}


def test_launches_of_calls_traced_in_this_process(tmp_path):
    import jax
    import jax.numpy as jnp

    x = jnp.ones(64)
    jitted = jax.jit(lambda x: jnp.sum(x * x))
    for function, expected in ((jitted, 1), (lambda x: jnp.sum(x * x) + 1.0, 3)):
        jax.block_until_ready(function(x))  # compiled before: launches only
        launches = measuring.LaunchCount()
        with launches.tracing():
            jax.block_until_ready(function(x))
        assert launches.value == expected
    # A trace of the user's is left alone; the count says why it has none.
    with jax.profiler.trace(str(tmp_path)):
        launches = measuring.LaunchCount()
        with launches.tracing():
            jax.block_until_ready(jitted(x))
    assert "profiler did not trace" in launches.value["unavailable"]
    assert any(tmp_path.rglob("*.xplane.pb"))


LOOP_SUITE = """
import jax
import jax.numpy as jnp
from jax import lax

PASSES = {passes}


@jax.jit
def relax(x):
    return lax.fori_loop(0, 40 * PASSES, lambda i, y: jnp.tanh(y) * 0.5 + 0.25 * y, x)


def test_relax(benchmark, jax_backend):
    benchmark(relax, jnp.ones(20000))
"""


@pytest.mark.slow
def test_twice_the_loop_fails_the_gate_on_a_busy_machine(
    tmp_path, run_pytest, busy_cpus
):
    # Both runs beside two busy loops, through the backend's worker: the
    # counters do not move, the doubled trip count does.
    run = [*RUN[:2], *RUN[4:]]  # RUN without -p no:xdist
    (tmp_path / "test_loop.py").write_text(LOOP_SUITE.format(passes=1))
    first, saved = run_pytest(tmp_path, tmp_path / "lyapax-report", *run)
    assert first.returncode == 0, first.stdout + first.stderr
    (tmp_path / "saved.json").write_text(json.dumps(saved))
    gate = ["--jax-compare=saved.json", "--jax-compare-fail=flops:5%"]
    same, _ = run_pytest(tmp_path, tmp_path / "lyapax-report", *run, *gate)
    assert same.returncode == 0, same.stdout
    assert "regressed" not in same.stdout
    (tmp_path / "test_loop.py").write_text(LOOP_SUITE.format(passes=2))
    twice, now = run_pytest(tmp_path, tmp_path / "lyapax-report", *run, *gate)
    assert twice.returncode == pytest.ExitCode.TESTS_FAILED, twice.stdout
    assert "test_loop.py::test_relax[cpu] regressed (flops:5%)" in twice.stdout
    before = saved["benchmarks"][0]["extra_info"]["counters"]["flops"]
    after = now["benchmarks"][0]["extra_info"]["counters"]["flops"]
    assert after / before == pytest.approx(2.0, rel=0.01)
