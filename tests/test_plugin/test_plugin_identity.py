"""A measurement is always the same thing; verdicts need the rounds.

Every run here is a pytest subprocess (``runpytest_subprocess``): a backend's
JAX is fixed per process.  Assertions are structural (rows, ids, labels,
exit codes, JSON fields), never the value of a timing.
"""

import copy
import json
import platform
import subprocess
import sys

import pytest
from support.deadlines import timeout_s

TWO = ["--jax-backend=cpu,cpu2", "--jax-backend-platform=cpu2=cpu"]
QUICK = ["-p", "no:cacheprovider", "--benchmark-max-time=0"]

# The same test names in two modules, as in tests/cpu/ and tests/gpu/.
MODULE_A = """
import jax
import jax.numpy as jnp
import pytest


@pytest.mark.jax_sizes(4, 8)
def test_step(benchmark, jax_backend, jax_size):
    benchmark(jax.jit(lambda a: a @ a), jnp.ones((jax_size, jax_size)))


def test_x(benchmark, jax_backend):
    benchmark(jax.jit(jnp.sin), jnp.ones(4))
"""

MODULE_B = (
    MODULE_A
    + """

class Holder:  # a plain class: JAX cannot see the array inside
    def __init__(self, value):
        self.value = value


def test_holder(benchmark, jax_backend):
    f = jax.jit(jnp.cos)
    benchmark(lambda: Holder(f(jnp.ones(4))))
"""
)


def two_modules(path):
    for name, source in (("ops_a", MODULE_A), ("ops_b", MODULE_B)):
        (path / name).mkdir()
        (path / name / "__init__.py").write_text("")
        (path / name / "test_ops.py").write_text(source)


def report_of(path):
    return json.loads((path / "lyapax-report" / "benchmark.json").read_text())


@pytest.fixture(scope="module")
def few_rounds(tmp_path_factory, clean_environment):
    """Two modules' same-named tests on cpu and cpu2, 2 rounds each: one
    run, several checks."""
    path = tmp_path_factory.mktemp("few_rounds")
    two_modules(path)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *QUICK, *TWO, "--benchmark-min-rounds=2"],
        cwd=path,
        env=clean_environment,
        capture_output=True,
        text=True,
        timeout=timeout_s(300),
    )
    result = pytest.RunResult(
        proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines(), 0.0
    )
    return result, report_of(path)


def test_same_named_tests_of_two_modules_are_two_series(few_rounds):
    result, report = few_rounds
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    out = result.stdout.str()
    # One table per module's sized test, both unsized tests in the table.
    assert "ops_a/test_ops.py::test_step: median wall time per call" in out
    assert "ops_b/test_ops.py::test_step: median wall time per call" in out
    result.stdout.fnmatch_lines_random(
        [
            "ops_a/test_ops.py::test_x  *",
            "ops_b/test_ops.py::test_x  *",
            "test_holder *",
        ]
    )
    crossing = report["pytest_lyapax"]["crossovers"]
    assert sorted(c["benchmark"] for c in crossing) == [
        "ops_a/test_ops.py::test_step",
        "ops_b/test_ops.py::test_step",
    ]


def test_verdicts_with_few_rounds_are_labelled_so(few_rounds):
    result, report = few_rounds
    kinds = {c["kind"] for c in report["pytest_lyapax"]["crossovers"]}
    assert kinds == {"too-few-rounds"}
    result.stdout.fnmatch_lines(["*too few rounds to judge at problem size*4, 8*"])
    assert "faster at" not in result.stdout.str()  # no verdict from 2 rounds
    test = report["pytest_lyapax"]["noise_test"]
    assert test["alpha"] == 0.01 and test["min_rounds"] == 10
    assert "Mann-Whitney" in test["test"]
    for bench in report["benchmarks"]:
        # Every timing keeps its per-call round times.
        assert len(bench["stats"]["data"]) == bench["stats"]["rounds"] >= 2


def test_a_result_without_jax_arrays_is_flagged_once(few_rounds):
    result, report = few_rounds
    flagged = {
        b["fullname"]: b["extra_info"].get("result_type")
        for b in report["benchmarks"]
        if b["extra_info"].get("no_array_leaves")
    }
    assert flagged == {
        "ops_b/test_ops.py::test_holder[cpu]": "Holder",
        "ops_b/test_ops.py::test_holder[cpu2]": "Holder",
    }
    assert sorted(report["pytest_lyapax"]["dispatch_only"]) == sorted(flagged)
    out = result.stdout.str()
    # Once per benchmark (not once per timed call), naming test and fix.
    assert out.count("DispatchOnlyWarning: ops_b/test_ops.py::test_holder") == 2
    assert "register the class as a pytree" in out
    result.stdout.fnmatch_lines(["*pytest-lyapax: timed by dispatch only*"])


@pytest.mark.slow
def test_default_rounds_are_enough_for_the_noise_test(pytester):
    pytester.makepyfile(
        test_one="""
        import jax
        import jax.numpy as jnp

        def test_x(benchmark, jax_backend):
            benchmark(jax.jit(jnp.sin), jnp.ones(4))
        """
    )
    result = pytester.runpytest_subprocess(
        *QUICK, "-p", "no:xdist", "--jax-backend=cpu"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    (bench,) = report_of(pytester.path)["benchmarks"]
    assert bench["stats"]["rounds"] == 10 and len(bench["stats"]["data"]) == 10
    # A number the user chose is kept.
    chosen = pytester.runpytest_subprocess(
        *QUICK, "-p", "no:xdist", "--jax-backend=cpu", "--benchmark-min-rounds=3"
    )
    assert chosen.ret == pytest.ExitCode.OK
    (bench,) = report_of(pytester.path)["benchmarks"]
    assert bench["stats"]["rounds"] == 3


def saved_run(report, **extra):
    saved = copy.deepcopy(report)
    for bench in saved["benchmarks"]:
        bench["extra_info"].update(extra)
    return saved


def test_compare_file_checks_are_the_cli_loaders(few_rounds, pytester):
    _, report = few_rounds
    two_modules(pytester.path)
    newer = copy.deepcopy(report)
    newer["pytest_lyapax"]["schema"] = 99
    pytester.path.joinpath("newer.json").write_text(json.dumps(newer))
    result = pytester.runpytest_subprocess(*QUICK, *TWO, "--jax-compare=newer.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*written by a newer pytest-lyapax (report schema 99)*"]
    )
    pytester.path.joinpath("saved.json").write_text(json.dumps(report))
    bare = pytester.runpytest_subprocess(
        *QUICK, *TWO, "--jax-compare=saved.json", "--jax-compare-fail=median:25"
    )
    assert bare.ret == pytest.ExitCode.USAGE_ERROR
    bare.stderr.fnmatch_lines(
        ["*'median:25' has no unit: write median:25%*median:25ms*"]
    )


def test_a_gate_refuses_another_host_before_running(few_rounds, pytester):
    _, report = few_rounds
    two_modules(pytester.path)
    other = saved_run(report)
    other["machine_info"]["node"] = "gpu-server"
    pytester.path.joinpath("other.json").write_text(json.dumps(other))
    refused = pytester.runpytest_subprocess(
        *QUICK, *TWO, "--jax-compare=other.json", "--jax-compare-fail=median:25%"
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        ["*saved run was measured on host 'gpu-server'*--jax-compare-across-machines*"]
    )
    assert not (pytester.path / "lyapax-report").exists()  # nothing ran


@pytest.mark.slow
def test_compare_reports_and_stores_the_machines(few_rounds, pytester):
    _, report = few_rounds
    two_modules(pytester.path)
    # Same host, another device: known only once the backends ran.
    h200 = saved_run(report, device="NVIDIA H200", jax_version="0.0.1")
    h200["machine_info"]["node"] = platform.node()
    pytester.path.joinpath("h200.json").write_text(json.dumps(h200))
    args = [*QUICK, *TWO, "--benchmark-min-rounds=2", "--jax-compare=h200.json"]
    shown = pytester.runpytest_subprocess(*args)
    assert shown.ret == pytest.ExitCode.OK, shown.stdout.str()
    shown.stdout.fnmatch_lines(
        ["backend*saved run on*this run on*machine", "cpu *device 'NVIDIA H200' vs*"]
    )
    comparison = report_of(pytester.path)["pytest_lyapax"]["comparison"]
    machines = {m["backend"]: m for m in comparison["machines"]}
    assert set(machines) == {"cpu", "cpu2"}
    assert machines["cpu"]["match"] is False
    assert "jax '0.0.1' vs" in " ".join(machines["cpu"]["differences"])
    gated = pytester.runpytest_subprocess(*args, "--jax-compare-fail=median:1e6%")
    assert gated.ret == pytest.ExitCode.USAGE_ERROR, gated.stdout.str()
    gated.stdout.fnmatch_lines(
        ["*--jax-compare-fail=median:1e+06% refused (usage error)*NVIDIA H200*"]
    )
    assert report_of(pytester.path)["pytest_lyapax"]["comparison"]["refused"]
    anyway = pytester.runpytest_subprocess(
        *args, "--jax-compare-fail=median:1e6%", "--jax-compare-across-machines"
    )
    assert anyway.ret == pytest.ExitCode.OK, anyway.stdout.str()


@pytest.mark.slow
def test_plugin_state_lives_on_the_stash_only(pytester):
    # Benchmarks.py kept flags as attributes of pytest's Config.
    pytester.makeconftest(
        """
        import json
        import os
        from pathlib import Path


        import pytest


        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(session):
            # Before a worker reports that it finished (the controller does
            # not wait for a worker's pytest_unconfigure).
            config = session.config
            worker = os.environ.get("PYTEST_XDIST_WORKER", "controller")
            names = [n for n in vars(config) if "lyapax" in n.lower()]
            Path(__file__).parent.joinpath(f"attrs-{worker}.json").write_text(
                json.dumps(names)
            )
        """
    )
    pytester.makepyfile(
        test_one="""
        def test_x(benchmark, jax_backend):
            benchmark(sum, [1, 2])
        """
    )
    result = pytester.runpytest_subprocess(
        *QUICK, *TWO, "--benchmark-only", "--benchmark-disable"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    found = sorted(pytester.path.glob("attrs-*.json"))
    assert [p.name for p in found] == [
        "attrs-controller.json",
        "attrs-gw0.json",
        "attrs-gw1.json",
    ]
    assert all(json.loads(p.read_text()) == [] for p in found)


@pytest.mark.slow
def test_processes_repeat_each_phase_in_fresh_workers_and_pool_rounds(pytester):
    pytester.makepyfile(
        test_proc="""
        import os
        import time

        import jax
        import jax.numpy as jnp


        def test_x(benchmark, jax_backend):
            start = time.time()
            benchmark(jax.jit(jnp.sin), jnp.ones(4))
            with open("events.log", "a") as fh:
                worker = os.environ["PYTEST_XDIST_WORKER"]
                fh.write(f"{jax_backend} {worker} {os.getpid()} {start}\\n")
        """
    )
    result = pytester.runpytest_subprocess(
        *QUICK,
        *TWO,
        "--benchmark-min-rounds=3",
        "--jax-processes=2",
        "--benchmark-json=own.json",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=4)  # each backend's test, in 2 processes
    lines = (pytester.path / "events.log").read_text().split("\n")
    events = sorted((float(x[3]), x[0], x[2]) for x in map(str.split, lines) if x)
    # The backends take turns, each time in a fresh process.
    assert [label for _, label, _ in events] == ["cpu", "cpu2", "cpu", "cpu2"]
    assert len({pid for _, _, pid in events}) == 4
    report = report_of(pytester.path)
    assert sorted(b["fullname"] for b in report["benchmarks"]) == [
        "test_proc.py::test_x[cpu2]",
        "test_proc.py::test_x[cpu]",
    ]
    for bench in report["benchmarks"]:
        info, stats = bench["extra_info"], bench["stats"]
        assert info["processes"] == 2 and len(info["process_medians"]) == 2
        assert stats["rounds"] == sum(info["process_rounds"]) == len(stats["data"])
        assert stats["rounds"] >= 6
        assert min(stats["data"]) == stats["min"]
    states = {b["label"]: b for b in report["pytest_lyapax"]["backends"]}
    assert states["cpu"]["status"] == "ok" and states["cpu"]["outcomes"] == {
        "passed": 2
    }
    # pytest-benchmark's own file holds the pooled timings too.
    own = json.loads((pytester.path / "own.json").read_text())
    assert sorted(b["stats"]["rounds"] for b in own["benchmarks"]) == sorted(
        b["stats"]["rounds"] for b in report["benchmarks"]
    )


def test_processes_option_is_checked(pytester):
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess(*QUICK, *TWO, "--jax-processes=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--jax-processes: '0' is not a positive integer*"])
