"""Verdicts and gates taken on a busy machine (report/busy.py, --jax-busy).

The rule's thresholds are tested on fabricated machine states; the verdicts
and gates on fabricated reports (crossover, ``compare``, history); and one
real run with a busy-loop process started by the benchmark's fixture during
cpu2's rounds shows the loop in cpu2's recorded foreign CPU and marks the
verdicts that read cpu2's rounds unreliable, in every output.
"""

import dataclasses
import json

import pytest

from pytest_lyapax import cli
from pytest_lyapax.report import busy, history
from pytest_lyapax.report.busy import busy_reason, parse_busy
from pytest_lyapax.report.compare import ComparisonResult, compare_runs
from pytest_lyapax.report.crossover import FEW, crossovers
from pytest_lyapax.report.gates import parse_threshold
from pytest_lyapax.report.schema import Report
from pytest_lyapax.report.series import group_sized
from pytest_lyapax.views.document import view_of
from pytest_lyapax.views.render import summary_markdown


def state(
    foreign=0.0, steal=0.0, runnable=0.0, wall=10.0, stretches=40, own=1.0, **extra
):
    """A machine state of 2 CPUs over ``wall`` seconds of rounds."""
    return {
        "wall_s": wall,
        "stretches": stretches,
        "cpus": 2,
        "foreign_cpu": {"cores": foreign, "own_cores": own, "tick_s": 0.01},
        "steal": {"cores": steal},
        "runnable": {"mean_others": runnable, "samples": stretches},
        **extra,
    }


# What counting clock ticks leaves open over 10 s of rounds in 40 stretches
# on 2 CPUs: sqrt(2 x 40) ticks of 10 ms over 10 s.
MARGIN = 80**0.5 * 0.01 / 10


@pytest.mark.parametrize(
    ("machine", "reason"),
    [
        (state(), None),
        (state(foreign=0.25 + MARGIN - 1e-6, steal=0.1 + MARGIN - 1e-6), None),
        (state(runnable=1.99), None),
        # Two of the three "others" are this worker's own threads (3 cores of
        # its own CPU): 1.0 left for 2 cores.
        (state(runnable=3.0, own=3.0), None),
        (
            state(foreign=1.6),
            "other processes used 1.6 of 2 cores during cpu2's rounds",
        ),
        (
            state(foreign=0.25 + MARGIN + 1e-9),
            "other processes used 0.26 of 2 cores during cpu2's rounds",
        ),
        (
            state(steal=0.1 + MARGIN + 1e-9),
            "the hypervisor withheld 0.11 cores (steal) during cpu2's rounds",
        ),
        (
            state(runnable=2.0),
            "2.0 other tasks were runnable on average for 2 cores during cpu2's rounds",
        ),
        # 30 ms of rounds in one stretch: +-0.47 core, and one glimpse of
        # the runnable tasks, which is not judged.
        (state(foreign=0.7, steal=0.5, runnable=5.0, wall=0.03, stretches=1), None),
        (
            state(foreign=0.75, wall=0.03, stretches=1),
            "other processes used 0.75 of 2 cores during cpu2's rounds",
        ),
        (
            state(gpu={"throttle_reasons": {"names": ["gpu_idle", "sw_power_cap"]}}),
            None,
        ),
        (
            state(gpu={"other_processes": {"max": 2.0, "samples": 3}}),
            "2 other process(es) used the GPU during cpu2's rounds",
        ),
    ],
)
def test_the_busy_rule_and_its_thresholds(machine, reason):
    assert busy_reason(machine, "cpu2") == reason


def test_unavailable_or_missing_signals_say_nothing():
    gone = {"unavailable": "cannot read /proc/stat: No such file or directory"}
    machine = {
        "wall_s": 1.0,
        "cpus": 2,
        "foreign_cpu": gone,
        "steal": gone,
        "runnable": gone,
        "gpu": {"unavailable": "pynvml is not installed"},
    }
    assert busy_reason(machine) is None
    assert busy_reason({}) is None and busy_reason({"foreign_cpu": "junk"}) is None
    # Without the tick or the span, the margin is infinite: nothing is judged.
    assert busy.tick_uncertainty({"foreign_cpu": {"cores": 2.0}}) == float("inf")
    assert busy_reason(state(foreign=1.0, steal=0.5)) == (
        "other processes used 1.0 of 2 cores during the rounds; the hypervisor "
        "withheld 0.50 cores (steal) during the rounds"
    )


def test_the_mode_is_checked_with_the_accepted_forms():
    assert parse_busy(" WARN", "--jax-busy") == "warn"
    assert parse_busy("fail", "--busy") == "fail"
    with pytest.raises(ValueError) as info:
        parse_busy("maybe", "--jax-busy")
    assert str(info.value) == (
        "--jax-busy: 'maybe' is not one of warn, fail, ignore; write e.g. "
        "--jax-busy=fail to gate timings taken on a busy machine anyway"
    )


def test_jax_busy_is_a_usage_error_before_anything_runs(pytester):
    result = pytester.runpytest_inprocess("--jax-backend=cpu", "--jax-busy=maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--jax-busy: 'maybe' is not one of warn, fail, ignore*"]
    )
    with pytest.raises(pytest.UsageError, match="--jax-busy needs --jax-backend"):
        pytester.parseconfigure("--jax-busy=fail")
    config = pytester.parseconfigure("--jax-backend=cpu", "--jax-busy=Ignore")
    from pytest_lyapax.run.options import read_settings

    assert read_settings(config, check_paths=False).busy == "ignore"


# ------------------------------------------------------------ fabricated reports


def record(label, size, median, machine=None, test="test_busy.py::test_sum"):
    """A record with 12 rounds spread +-1% around ``median``."""
    data = [median * (0.99 + 0.02 * i / 11) for i in range(12)]
    info = {"backend": label, "size": size}
    if machine is not None:
        info["machine_state"] = machine
    return {
        "name": f"test_sum[{label}-{size}]",
        "fullname": f"{test}[{label}-{size}]",
        "params": {"jax_backend": label, "jax_size": size},
        "stats": {
            "min": data[0],
            "max": data[-1],
            "mean": median,
            "stddev": 0.006 * median,
            "median": median,
            "iqr": 0.01 * median,
            "q1": 0.995 * median,
            "q3": 1.005 * median,
            "rounds": 12,
            "iterations": 1,
            "data": data,
        },
        "extra_info": info,
    }


def document(records, mode="warn"):
    return {
        "machine_info": {"node": "here"},
        "benchmarks": records,
        "pytest_lyapax": {"schema": 5, "busy": busy.describe_rule(mode)},
    }


# cpu2 is busy at size 20 only; cpu is 2x faster everywhere.
CROSSOVER = [
    record("cpu", 10, 1e-3, state()),
    record("cpu", 20, 2e-3, state()),
    record("cpu2", 10, 2e-3, state()),
    record("cpu2", 20, 4e-3, state(foreign=1.6)),
]


def test_a_crossover_verdict_that_read_busy_rounds_is_unreliable():
    (bench,) = group_sized(CROSSOVER, ["cpu", "cpu2"])
    reasons = busy.index(CROSSOVER)
    (c,) = crossovers(bench)
    assert c.verdicts == ("cpu", "cpu")
    assert busy.crossover_marks(bench, c, reasons) == {
        20: "other processes used 1.6 of 2 cores during cpu2's rounds"
    }
    assert busy.crossover_notes(bench, reasons) == [
        "cpu2 vs cpu: UNRELIABLE at problem size (jax_size) 20, the machine was "
        "busy (at 20: other processes used 1.6 of 2 cores during cpu2's rounds)"
    ]
    text = summary_markdown(view_of(document(CROSSOVER))).decode()
    assert "cpu2 vs cpu: UNRELIABLE at problem size (jax\\_size) 20, the" in text
    # --jax-busy=ignore: the report says nothing.
    quiet = summary_markdown(view_of(document(CROSSOVER, mode="ignore"))).decode()
    assert "UNRELIABLE" not in quiet


def test_the_machine_table_shows_unread_signals_once_with_their_reason():
    gone = {"unavailable": "no cpufreq under /sys (not exposed: a container or VM)"}
    gpu = {
        "sm_clock_mhz": {"min": 1410, "max": 1980, "samples": 3},
        "utilisation_percent": {"max": 97, "mean": 80.0, "samples": 3},
        "throttle_reasons": {"names": ["sw_power_cap"]},
    }
    records = [
        record("cpu", 10, 1e-3, state(frequency=gone, gpu={"unavailable": "no GPU"})),
        record("gpu", 10, 1e-3, state(foreign=1.25, frequency=gone, gpu=gpu)),
    ]
    rows, unread = busy.machine_rows(records, {})
    assert rows == [
        ("test_busy.py::test_sum", "cpu", "10", "0", "0", "0", "-", "n/a", "n/a")
        + ("quiet",),
        ("test_busy.py::test_sum", "gpu", "10", "1.25", "0", "0", "-", "n/a")
        + ("SM >= 1410 MHz, <= 97% busy, sw_power_cap", "BUSY"),
    ]
    assert unread == [f"n/a: {gone['unavailable']}", "n/a: no GPU"]


def two_runs(tmp_path, now_machine, saved_machine=None):
    """A saved run and a 10x slower one, as files."""
    saved = document([record("cpu", 10, 1e-3, saved_machine)])
    now = document([record("cpu", 10, 1e-2, now_machine)])
    paths = tmp_path / "saved.json", tmp_path / "now.json"
    for path, data in zip(paths, (saved, now), strict=True):
        path.write_text(json.dumps(data))
    return [str(p) for p in paths]


@pytest.mark.parametrize(
    ("mode", "code", "shown"),
    [
        ("warn", 0, "gate median:10% not applied (--busy=fail applies it)"),
        ("fail", 1, "UNRELIABLE (busy)  REGRESSION median:10%"),
        ("ignore", 1, "REGRESSION median:10%"),
    ],
)
def test_compare_gates_a_busy_run_as_the_mode_says(tmp_path, capsys, mode, code, shown):
    files = two_runs(tmp_path, state(foreign=1.2))
    assert cli.main(["compare", *files, "--fail=median:10%", f"--busy={mode}"]) == code
    out = capsys.readouterr().out
    assert shown in out
    busy_line = (
        "unreliable: busy: test_busy.py::test_sum[cpu-10]: this run: other "
        "processes used 1.2 of 2 cores during cpu's rounds"
    )
    assert (busy_line in out) is (mode != "ignore")
    assert ("gate median:10%: passed" in out) is (mode == "warn")


def test_compare_marks_a_busy_saved_run_and_refuses_a_bad_mode(tmp_path, capsys):
    files = two_runs(tmp_path, state(), saved_machine=state(steal=0.3))
    assert cli.main(["compare", *files, "--fail=median:10%"]) == 0
    assert (
        "saved run: the hypervisor withheld 0.30 cores (steal) during cpu's rounds"
        in capsys.readouterr().out
    )
    assert cli.main(["compare", *files, "--busy=sometimes"]) == 2
    assert "--busy: 'sometimes' is not one of warn, fail, ignore" in (
        capsys.readouterr().err
    )


def test_a_quiet_pair_is_gated_as_before(tmp_path, capsys):
    files = two_runs(tmp_path, state(foreign=0.1))
    assert cli.main(["compare", *files, "--fail=median:10%"]) == 1
    out = capsys.readouterr().out
    assert "unreliable" not in out and "gate median:10%: FAILED" in out


def test_only_timing_gates_are_excused():
    saved = document([record("cpu", 10, 1e-3)])
    result = compare_runs(
        saved,
        [record("cpu", 10, 1e-2, state(foreign=1.0))],
        [parse_threshold("median:10%")],
    )
    (c,) = result.comparisons
    # A gate on another field (a counter) stays; a time field is excused.
    c = dataclasses.replace(c, failed=("median:10%", "flops:5%"))
    judged = busy.judge_comparisons(ComparisonResult(result.thresholds, [c]), busy.WARN)
    assert judged.comparisons[0].failed == ("flops:5%",)
    assert judged.comparisons[0].excused == ("median:10%",)
    assert judged.to_json()["excused"] == {c.fullname: ["median:10%"]}


def test_history_marks_a_step_read_from_a_busy_run(tmp_path, capsys):
    runs = []
    for n, (median, machine) in enumerate([(1e-3, state()), (2e-3, state(foreign=1))]):
        data = document([record("cpu", 10, median, machine)])
        data["datetime"] = f"2026-01-0{n + 1}T12:00:00+00:00"
        runs.append(Report(tmp_path / f"{n:04d}.json", data, data["benchmarks"]))
        runs[-1].path.write_text(json.dumps(data))
    series = history.history_series(runs)
    (step,), _ = history.find_steps(runs, series)
    assert step.kind == "slower"
    assert step.unreliable == (
        "0001.json: other processes used 1.0 of 2 cores during cpu's rounds"
    )
    assert cli.main(["history", str(tmp_path), "-o", str(tmp_path / "h.png")]) == 0
    assert (
        "unreliable: busy: SLOWER test_sum [cpu] 0000.json -> 0001.json: 0001.json: "
        "other processes used 1.0 of 2 cores during cpu's rounds"
    ) in capsys.readouterr().out


# ------------------------------------------------------------ a real busy run

BUSY_SUITE = """
import subprocess
import sys
import time

import jax.numpy as jnp
import pytest

# A bounded busy loop: it ends by itself after 20 s at the latest, and the
# fixture kills it as soon as the benchmark is done.
LOOP = (
    "import time\\n"
    "print('spinning', flush=True)\\n"
    "end = time.monotonic() + 20\\n"
    "while time.monotonic() < end: pass\\n"
)


@pytest.fixture
def load(jax_backend):
    if jax_backend != "cpu2":
        yield
        return
    proc = subprocess.Popen(
        [sys.executable, "-c", LOOP], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline() == "spinning\\n"
        yield
    finally:
        proc.kill()
        proc.wait()


def spin(x):
    # 2 ms of this process's CPU per call: about 0.2 s of rounds in all,
    # several stretches, whatever pytest-benchmark's calibration finds.
    start = time.perf_counter()
    while time.perf_counter() - start < 2e-3:
        pass
    return x + 1


@pytest.mark.jax_sizes(8)
def test_sum(benchmark, jax_backend, jax_size, load):
    benchmark.pedantic(spin, args=(jnp.ones(jax_size),), rounds=100, iterations=1)
"""


def saved_cpu2(median):
    """A saved run of cpu2's benchmark, quiet and far faster than any real call."""
    saved = record("cpu2", 8, median, state(), test="test_load.py::test_sum")
    return {"benchmarks": [saved]}


# Both labels on the CPU, cpu2 gated against the saved run.
GATED = (
    "-p",
    "no:cacheprovider",
    "--jax-backend=cpu,cpu2",
    "--jax-backend-platform=cpu2=cpu",
    "--jax-compare=saved.json",
    "--jax-compare-fail=median:10%",
)


@pytest.fixture(scope="module")
def busy_run(tmp_path_factory, run_pytest):
    """cpu and cpu2 (both the CPU), with a busy loop during cpu2's rounds,
    gated against a saved cpu2 run 1000x faster."""
    path = tmp_path_factory.mktemp("busy_run")
    (path / "test_load.py").write_text(BUSY_SUITE)
    (path / "saved.json").write_text(json.dumps(saved_cpu2(1e-9)))
    proc, report = run_pytest(path, path / "lyapax-report", *GATED)
    return path, proc, report


def test_a_busy_loop_shows_in_cpu2s_foreign_cpu_and_its_verdicts(busy_run):
    path, proc, report = busy_run
    by_label = {b["extra_info"]["backend"]: b for b in report["benchmarks"]}
    machine = by_label["cpu2"]["extra_info"]["machine_state"]
    # The loop is a whole busy process for the whole of cpu2's rounds, on a
    # 2-core machine: at least a third of a core, whatever else runs.
    assert machine["foreign_cpu"]["cores"] > 0.3, machine
    assert busy.tick_uncertainty(machine) < 0.3, machine
    assert "unavailable" in machine["gpu"]
    reason = busy.record_reason(by_label["cpu2"])
    assert reason is not None and "during cpu2's rounds" in reason
    (crossover,) = report["pytest_lyapax"]["crossovers"]
    assert crossover["verdicts"][0] != FEW
    assert "during cpu2's rounds" in crossover["unreliable"]["8"]
    assert report["pytest_lyapax"]["busy"]["mode"] == "warn"
    note = "cpu2 vs cpu: UNRELIABLE at problem size (jax_size) 8, the machine was busy"
    assert note in proc.stdout
    for name in ("summary.md", "report.html"):  # jax_size: escaped in markdown
        text = (path / "lyapax-report" / name).read_text()
        assert "cpu2 vs cpu: UNRELIABLE at problem size (jax" in text
        assert "Machine state during the rounds" in text and "BUSY" in text
    assert "pytest-lyapax: busy machine" in proc.stdout
    assert "test_sum[cpu2-8]: other processes used" in proc.stdout


def test_a_timing_gate_on_busy_rounds_is_not_failed_under_warn(busy_run):
    _, proc, report = busy_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "unreliable: busy: test_load.py::test_sum[cpu2-8]: this run:" in proc.stdout
    assert "not applied (--jax-busy=fail applies it)" in proc.stdout
    comparison = report["pytest_lyapax"]["comparison"]
    assert comparison["regressions"] == []
    assert comparison["excused"] == {"test_load.py::test_sum[cpu2-8]": ["median:10%"]}


@pytest.mark.slow
def test_the_same_gate_fails_under_fail(busy_run, run_pytest):
    path, _, _ = busy_run
    proc, report = run_pytest(path, path / "lyapax-report", *GATED, "--jax-busy=fail")
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, proc.stdout
    assert "UNRELIABLE (busy)  REGRESSION median:10%" in proc.stdout
    assert "test_load.py::test_sum[cpu2-8] regressed (median:10%)" in proc.stdout
    assert report["pytest_lyapax"]["comparison"]["regressions"]


# Four sizes a side, so that the cost model fits; cpu2 busy at 40 only.
MODELLED = [
    record(
        label,
        n,
        scale * (1e-4 + 1e-6 * n),
        state(foreign=1.6) if busy_at == n else state(),
    )
    for label, scale, busy_at in (("cpu", 1.0, None), ("cpu2", 2.0, 40))
    for n in (10, 20, 40, 80)
]


def test_a_cost_model_fitted_to_busy_rounds_is_marked_on_its_lines():
    from pytest_lyapax.report import costmodel

    (bench,) = group_sized(MODELLED, ["cpu", "cpu2"])
    model = costmodel.benchmark_model(bench)
    lines = busy.model_lines(model, bench, busy.index(MODELLED))
    assert len(lines) == len(model.lines()) == 3
    assert not lines[0].startswith(busy.MARK)  # cpu's fit read quiet rounds
    assert lines[1] == busy.MARK + model.lines()[1]  # cpu2's fit
    assert lines[2] == busy.MARK + model.lines()[2]  # the predicted crossover
    text = summary_markdown(view_of(document(MODELLED))).decode()
    marked = [line for line in text.splitlines() if "cost model" in line]
    assert marked and all(
        line.startswith("- UNRELIABLE (busy machine): cost model")
        for line in marked
        if "cpu2" in line
    ), marked
    quiet = summary_markdown(view_of(document(MODELLED, mode="ignore"))).decode()
    assert "UNRELIABLE" not in quiet
