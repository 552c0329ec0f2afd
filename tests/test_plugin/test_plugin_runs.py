"""End-to-end runs of the plugin in separate pytest processes.

Each backend's JAX is fixed per process, so these runs go through real
subprocesses.  They assert structure (routing, ordering, files, statuses),
never the value of a timing.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.deadlines import timeout_s

FAST = ["-p", "no:cacheprovider", "--benchmark-min-rounds=2", "--benchmark-max-time=0"]

SCALING_TESTS = """
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

EVENTS = Path(__file__).parent / "events.log"


@pytest.mark.jax_sizes(3, 5, 7, label="n (matrix side)")
def test_scaling(benchmark, jax_backend, jax_size):
    start = time.time()
    x = jnp.ones((jax_size, jax_size))
    out = benchmark(jax.jit(lambda a: a @ a), x)
    assert out.shape == (jax_size, jax_size)
    fields = [
        jax_backend,
        os.environ["WORKER_LABEL"],
        os.environ["JAX_PLATFORMS"],
        os.environ["PYTEST_XDIST_WORKER"],
        jax.default_backend(),
        repr(start),
        repr(time.time()),
        str("PYTEST_LYAPAX_LABEL" in os.environ),
    ]
    with open(EVENTS, "a") as fh:
        fh.write(" ".join(fields) + "\\n")


def test_unsized(benchmark, jax_backend):
    benchmark(jax.jit(jnp.sin), jnp.ones(4))
"""

# Records, in the controller, whether anything imported JAX there.
CONTROLLER_PROBE = """
import json
import os
import sys
from pathlib import Path


def pytest_configure(config):
    # The worker's label arrives once, in workerinput (no environment channel).
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        label = json.loads(workerinput["pytest_lyapax"])["label"]
        os.environ["WORKER_LABEL"] = label


def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        Path(session.config.rootpath, "controller.txt").write_text(
            str("jax" in sys.modules)
        )
"""


def run_pytest(
    path: Path, env: dict[str, str], *args: str, timeout: float = 300
) -> pytest.RunResult:
    """Run pytest in ``path`` in a fresh process, like pytester's subprocess mode."""
    start = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s(timeout),
    )
    return pytest.RunResult(
        proc.returncode,
        proc.stdout.splitlines(),
        proc.stderr.splitlines(),
        time.time() - start,
    )


def backends_of(report: dict) -> dict[str, dict]:
    return {b["label"]: b for b in report["pytest_lyapax"]["backends"]}


@pytest.fixture(scope="module")
def two_backends(tmp_path_factory, clean_environment):
    """One run with two backends on the CPU (cpu, and cpu2 mapped to
    JAX_PLATFORMS=cpu) plus the real gpu; its results feed several tests."""
    path = tmp_path_factory.mktemp("two_backends")
    (path / "test_scaling.py").write_text(SCALING_TESTS)
    (path / "conftest.py").write_text(CONTROLLER_PROBE)
    result = run_pytest(
        path,
        clean_environment,
        *FAST,
        "-v",
        "-rs",
        "--jax-backend=cpu,cpu2,gpu",
        "--jax-backend-platform=cpu2=cpu",
        "--jax-sizes=4,8",
        "--benchmark-json=bench-json.json",
        "--benchmark-save=saved",
    )
    report = json.loads((path / "lyapax-report" / "benchmark.json").read_text())
    return path, result, report


def test_each_test_ran_in_its_own_backends_worker(two_backends):
    path, result, report = two_backends
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    events = [line.split() for line in (path / "events.log").read_text().splitlines()]
    assert sorted((e[0], e[1]) for e in events) == sorted(
        [("cpu", "cpu")] * 2 + [("cpu2", "cpu2")] * 2
    )
    assert {e[2] for e in events} == {"cpu"}  # JAX_PLATFORMS of both backends
    assert {e[4] for e in events} == {"cpu"}  # jax.default_backend()
    # The label is not sent through the environment (workerinput).
    assert {e[7] for e in events} == {"False"}
    workers = {
        label: {e[3] for e in events if e[0] == label} for label in ("cpu", "cpu2")
    }
    assert len(workers["cpu"]) == len(workers["cpu2"]) == 1
    assert workers["cpu"] != workers["cpu2"]
    assert (path / "controller.txt").read_text() == "False", "controller imported jax"


def test_backends_take_turns_and_never_overlap(two_backends):
    # Rounds interleaved (the default): the two backends' tests alternate,
    # and each round runs in a turn of its own backend's (turns.py).
    path, _, report = two_backends
    events = [line.split() for line in (path / "events.log").read_text().splitlines()]
    cpu = [(float(e[5]), float(e[6])) for e in events if e[0] == "cpu"]
    cpu2 = [(float(e[5]), float(e[6])) for e in events if e[0] == "cpu2"]
    assert min(start for start, _ in cpu2) < max(end for _, end in cpu)
    turns = {"cpu": set(), "cpu2": set()}
    for bench in report["benchmarks"]:
        info = bench["extra_info"]
        if info["backend"] in turns:
            assert info["rounds_mode"] == "interleaved"
            turns[info["backend"]] |= set(info["turns"])
    assert turns["cpu"] and turns["cpu2"] and not turns["cpu"] & turns["cpu2"]


def test_merged_json_holds_both_backends_and_all_sizes(two_backends):
    _, _, report = two_backends
    measured = {
        (b["extra_info"]["backend"], b["extra_info"]["size"])
        for b in report["benchmarks"]
    }
    labels = ["cpu", "cpu2"]
    if backends_of(report)["gpu"]["status"] == "ok":  # a machine with a GPU
        labels.append("gpu")
    assert measured == {(label, size) for label in labels for size in (4, 8, None)}
    for bench in report["benchmarks"]:
        info = bench["extra_info"]
        assert info["device"] and info["jax_version"] and info["jax_backend"]
        assert info["first_call_s"] > 0 and "compile_s" not in info
        assert info["warmup"]["kind"] == "compile"  # jax.jit objects
        assert bench["stats"]["rounds"] >= 2 and len(bench["stats"]["data"]) >= 2
    sized = [b for b in report["benchmarks"] if b["extra_info"]["size"]]
    assert {b["extra_info"]["size_label"] for b in sized} == {"n (matrix side)"}
    states = backends_of(report)
    assert states["cpu"]["status"] == states["cpu2"]["status"] == "ok"
    assert report["pytest_lyapax"]["run_order"] == ["cpu", "cpu2", "gpu"]


def test_unavailable_gpu_is_skipped_with_reason_and_never_timed(two_backends):
    path, result, report = two_backends
    if backends_of(report)["gpu"]["status"] == "ok":
        pytest.skip("the gpu backend works on this machine")
    result.assert_outcomes(passed=6, skipped=3)
    result.stdout.fnmatch_lines(
        [
            "*SKIPPED*test_scaling*gpu-4*",
            "*jax backend 'gpu' unavailable: JAX could not*",
        ]
    )
    gpu = backends_of(report)["gpu"]
    assert gpu["status"] == "unavailable"
    assert "'cuda'" in gpu["reason"] and "/dev/nvidia" in gpu["reason"]
    assert gpu["n_benchmarks"] == 0 and gpu["outcomes"] == {"skipped": 3}
    assert not [b for b in report["benchmarks"] if b["extra_info"]["backend"] == "gpu"]
    # The figure's legend is drawn from these states (see test_views_figure).
    assert (path / "lyapax-report" / "crossover.png").exists()
    result.stdout.fnmatch_lines(["*gpu*JAX_PLATFORMS=cuda*unavailable*0*"])


def test_figure_and_terminal_summary(two_backends):
    path, result, report = two_backends
    png = (path / "lyapax-report" / "crossover.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert {c["other"] for c in report["pytest_lyapax"]["crossovers"]} >= {"cpu2"}
    result.stdout.fnmatch_lines(
        [
            "*pytest-lyapax: backends*",
            "*test_scaling: median wall time per call*",
            "size*cpu*cpu2*gpu*cpu2 speedup*",
            "4 *",
            "8 *",
            "*benchmarks without a size axis*",
            "*wrote*benchmark.json*",
        ]
    )


def test_pytest_benchmark_files_and_compare_command(two_backends, clean_environment):
    path, _, report = two_backends
    own = json.loads((path / "bench-json.json").read_text())
    names = sorted(b["fullname"] for b in report["benchmarks"])
    assert sorted(b["fullname"] for b in own["benchmarks"]) == names
    assert "pytest_lyapax" in own
    (saved,) = (path / ".benchmarks").glob("*/0001_saved.json")
    assert (
        sorted(b["fullname"] for b in json.loads(saved.read_text())["benchmarks"])
        == names
    )
    compare = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchmark",
            "compare",
            "lyapax-report/benchmark.json",
        ],
        cwd=path,
        capture_output=True,
        text=True,
        env=clean_environment,
        timeout=timeout_s(120),
    )
    assert compare.returncode == 0, compare.stderr
    for name in ("test_scaling[cpu-4]", "test_scaling[cpu2-8]", "test_unsized[cpu2]"):
        assert name in compare.stdout


FAULTY_TESTS = """
import os

import jax.numpy as jnp


def test_before(benchmark, jax_backend):
    benchmark(jnp.sin, jnp.ones(3))


def test_crash(jax_backend):
    if jax_backend == "cpu2":
        os._exit(3)


def test_after(benchmark, jax_backend):
    benchmark(jnp.cos, jnp.ones(3))
"""


@pytest.fixture(scope="module")
def faulty_backends(tmp_path_factory, clean_environment):
    """One run with a crashing worker (cpu2) and a silent-fallback mapping
    (fb = JAX_PLATFORMS=cuda,cpu, which runs on the CPU when there is no GPU)."""
    path = tmp_path_factory.mktemp("faulty_backends")
    (path / "test_faulty.py").write_text(FAULTY_TESTS)
    result = run_pytest(
        path,
        clean_environment,
        *FAST,
        "-rA",
        "--jax-backend=cpu,cpu2,fb",
        "--jax-backend-platform=cpu2=cpu",
        "--jax-backend-platform=fb=cuda,cpu",
    )
    report = json.loads((path / "lyapax-report" / "benchmark.json").read_text())
    return result, report


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_silent_fallback_is_an_error(faulty_backends):
    result, report = faulty_backends
    if backends_of(report)["fb"]["status"] == "ok":
        pytest.skip("JAX_PLATFORMS=cuda,cpu really runs on a GPU here")
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_before[[]fb[]]*",
            "silent JAX fallback: backend 'fb' runs with JAX_PLATFORMS='cuda,cpu' "
            "and must be on 'gpu', but jax.default_backend() is 'cpu'*",
        ]
    )
    fallback = backends_of(report)["fb"]
    assert fallback["status"] == "fallback" and "silent fallback" in fallback["reason"]
    assert fallback["outcomes"] == {"error": 3} and fallback["n_benchmarks"] == 0


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_worker_crash_is_reported_and_other_results_are_kept(faulty_backends):
    result, report = faulty_backends
    result.stdout.fnmatch_lines(["*crashed while running*test_crash[[]cpu2[]]*"])
    states = backends_of(report)
    assert states["cpu"]["status"] == "ok"
    assert states["cpu"]["outcomes"] == {"passed": 3}
    assert states["cpu2"]["status"] == "crashed" and states["cpu2"]["crashes"]
    assert states["cpu2"]["outcomes"] == {"passed": 2, "failed": 1}
    names = {b["name"] for b in report["benchmarks"]}
    # test_before[cpu2] ran in the worker that crashed afterwards; test_after
    # [cpu2] ran in its replacement.
    assert names >= {"test_before[cpu]", "test_after[cpu]"}
    assert names >= {"test_before[cpu2]", "test_after[cpu2]"}


INPROCESS_TESTS = """
import jax.numpy as jnp


def test_fast(benchmark, jax_backend):
    benchmark(jnp.sin, jnp.ones(3))


def test_slow(benchmark, jax_backend):
    benchmark(jnp.cos, jnp.ones(3))
"""


@pytest.fixture(scope="module")
def without_xdist(tmp_path_factory, clean_environment):
    """One run with -p no:xdist, compared with a saved run in which test_slow
    took 1 ps and test_fast 1000 s: this run is certainly slower for one of
    them and faster for the other."""
    path = tmp_path_factory.mktemp("without_xdist")
    (path / "test_speed.py").write_text(INPROCESS_TESTS)
    cpu = {"backend": "cpu", "size": None}
    saved = {
        "benchmarks": [
            {
                "fullname": "test_speed.py::test_fast[cpu]",
                "extra_info": cpu,
                "stats": {"median": 1e3},
            },
            {
                "fullname": "test_speed.py::test_slow[cpu]",
                "extra_info": cpu,
                "stats": {"median": 1e-12},
            },
        ]
    }
    (path / "saved.json").write_text(json.dumps(saved))
    result = run_pytest(
        path,
        clean_environment,
        *FAST,
        "-rs",
        "-p",
        "no:xdist",
        "--jax-backend=cpu,gpu",
        "--jax-compare=saved.json",
        "--jax-compare-fail=median:25%",
        "--jax-busy=fail",  # gate even if a loaded machine made the rounds busy
    )
    report = json.loads((path / "lyapax-report" / "benchmark.json").read_text())
    return result, report


def test_without_xdist_runs_this_process_backend_and_skips_others(without_xdist):
    result, report = without_xdist
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines(
        ["*jax backend 'gpu' not run: pytest-xdist is not active*"]
    )
    states = backends_of(report)
    assert states["cpu"]["status"] == "ok" and states["cpu"]["n_benchmarks"] == 2
    assert states["gpu"]["status"] == "not-run"
    assert "pytest-xdist is not active" in states["gpu"]["reason"]
    for bench in report["benchmarks"]:
        assert bench["extra_info"]["backend"] == "cpu"
        assert bench["extra_info"]["first_call_s"] > 0


def test_regression_beyond_threshold_fails_the_session(without_xdist):
    result, _ = without_xdist
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*comparison with*saved.json (fail above median:25%)*",
            "test_fast[[]cpu[]] *1e+03 s*-100.0%*too few rounds*",
            "test_slow[[]cpu[]] *ns*REGRESSION median:25%",
            "*--jax-compare-fail=median:25% failed: 1 problem(s)*",
            "*test_slow[[]cpu[]] regressed (median:25%)",
        ]
    )


def test_ids_put_the_backend_first_and_marker_restricts(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("n", [1, -1])
        @pytest.mark.jax_sizes(10)
        def test_a(jax_backend, jax_size, n):
            pass

        @pytest.mark.jax_backend("cpu")
        def test_cpu_only(jax_backend):
            pass

        def test_plain():
            pass
        """
    )
    result = pytester.runpytest_inprocess("--co", "-q", "--jax-backend=cpu,gpu")
    result.stdout.fnmatch_lines(
        [
            "*test_a[[]cpu-10-1[]]",
            "*test_a[[]cpu-10--1[]]",
            "*test_a[[]gpu-10-1[]]",
            "*test_a[[]gpu-10--1[]]",
            "*test_cpu_only[[]cpu[]]",
            "*test_cpu_only[[]gpu[]]",  # collected; skipped when run
            "*test_plain[[]cpu[]]",
            "*test_plain[[]gpu[]]",
            "8 tests collected*",
        ]
    )


def test_plugin_stays_out_of_the_way_without_backends(pytester):
    pytester.makepyfile(
        """
        import jax
        import pytest

        def test_backend(jax_backend):
            assert jax_backend == jax.default_backend()

        @pytest.mark.jax_sizes(2, 3)
        def test_sizes(jax_size):
            assert jax_size in (2, 3)
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*test_backend PASSED*", "*test_sizes[[]2[]] PASSED*"])
    result.stdout.no_fnmatch_line("*pytest-lyapax*")
    assert not pytester.path.joinpath("lyapax-report").exists()


def test_a_default_backend_that_cannot_start_is_a_usage_error(pytester, monkeypatch):
    """Without workers this process runs the tests; where JAX's default
    backend cannot start (a TPU held by another process), the run stops
    with what to do instead of an internal error."""
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    pytester.makeconftest(
        """
import jax


def _refuse():
    raise RuntimeError(
        "Unable to initialize backend 'tpu': ABORTED: Internal error when "
        "accessing libtpu multi-process lockfile."
    )


jax.default_backend = _refuse
"""
    )
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--jax-backend=cpu", "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*JAX's default backend could not start here: RuntimeError: Unable to "
            "initialize backend 'tpu'*Name the platform to run in this process "
            "(JAX_PLATFORMS=cpu for 'cpu')*"
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
