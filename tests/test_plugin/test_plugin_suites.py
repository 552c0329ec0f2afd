"""The plugin pointed at suites as real projects write them.

Every test here runs pytest in a subprocess (``runpytest_subprocess``): a
backend's JAX is fixed per process.  Two backends without a GPU: ``cpu`` and
``cpu2`` (mapped to ``JAX_PLATFORMS=cpu``).  Assertions are structural --
counts, ids, statuses, files, exit codes -- never timings.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from support.deadlines import timeout_s

TWO = ["--jax-backend=cpu,cpu2", "--jax-backend-platform=cpu2=cpu"]
FAST = ["-p", "no:cacheprovider", "--benchmark-min-rounds=1", "--benchmark-max-time=0"]

# The worker's backend label, exported for the suites below to log: the
# plugin sends it in workerinput only, no variable carries it.
LABEL_CONFTEST = """
import json
import os


def pytest_configure(config):
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "pytest_lyapax" in workerinput:
        label = json.loads(workerinput["pytest_lyapax"])["label"]
        os.environ["WORKER_LABEL"] = label
"""


def conftest(pytester, source=""):
    pytester.makeconftest(LABEL_CONFTEST + textwrap.dedent(source))


# Each test appends "<what> <its jax_backend or item label> <worker label>".
EVENTS = """
import os
from pathlib import Path

def log(what, label):
    with open(Path(__file__).parent / "events.log", "a") as fh:
        fh.write(f"{what} {label} {os.environ.get('WORKER_LABEL')}\\n")
"""

MIXED_SUITE = """
import unittest

from absl_like import log


class Optimizer(unittest.TestCase):
    def test_step(self):
        log("unittest", "-")

    def test_broken(self):
        self.assertEqual(1, 2)


class TestPlainClass:
    def test_method(self, jax_backend):
        log("class", jax_backend)


def test_function(jax_backend):
    log("function", jax_backend)


def add(a, b):
    '''
    >>> add(1, 2)
    3
    '''
    return a + b
"""


def events(pytester):
    path = pytester.path / "events.log"
    return sorted(tuple(line.split()) for line in path.read_text().splitlines())


def counts(result):
    return {k: v for k, v in result.parseoutcomes().items() if k != "warnings"}


# ------------------------------------------------------------------ item 1


@pytest.mark.slow
def test_every_item_kind_runs_once_per_backend(pytester):
    conftest(pytester)
    pytester.makepyfile(absl_like=EVENTS, test_mixed=MIXED_SUITE)
    plain = pytester.runpytest_subprocess(*FAST, "--doctest-modules", "-p", "no:xdist")
    assert counts(plain) == {"passed": 4, "failed": 1}
    (pytester.path / "events.log").unlink()

    result = pytester.runpytest_subprocess(*FAST, *TWO, "--doctest-modules", "-v")
    assert counts(result) == {"passed": 8, "failed": 2}
    assert result.ret == plain.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines_random(
        [
            "*PASSED test_mixed.py::Optimizer::test_step[[]cpu[]]*",
            "*PASSED test_mixed.py::Optimizer::test_step[[]cpu2[]]*",
            "*FAILED test_mixed.py::Optimizer::test_broken[[]cpu2[]]*",
            "*PASSED test_mixed.py::test_mixed.add[[]cpu[]]*",
            "*PASSED test_mixed.py::test_mixed.add[[]cpu2[]]*",
            "*PASSED test_mixed.py::TestPlainClass::test_method[[]cpu2[]]*",
        ]
    )
    # Each copy ran in its own backend's worker.
    assert events(pytester) == sorted(
        [("unittest", "-", label) for label in ("cpu", "cpu2")]
        + [
            (kind, label, label)
            for kind in ("class", "function")
            for label in ("cpu", "cpu2")
        ]
    )
    report = pytester.path / "lyapax-report" / "benchmark.json"
    assert not report.exists() and not report.parent.exists()


@pytest.mark.slow
def test_items_made_by_other_plugins_run_once_per_backend(pytester):
    conftest(
        pytester,
        """
        import os

        import pytest

        class CustomItem(pytest.Item):
            def runtest(self):
                with open("custom.log", "a") as fh:
                    fh.write(os.environ["WORKER_LABEL"] + "\\n")

        class CustomFile(pytest.File):
            def collect(self):
                yield CustomItem.from_parent(self, name="check")

        def pytest_collect_file(parent, file_path):
            if file_path.suffix == ".chk":
                return CustomFile.from_parent(parent, path=file_path)
        """,
    )
    pytester.path.joinpath("a.chk").write_text("x")
    result = pytester.runpytest_subprocess(*FAST, *TWO, "-v")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert counts(result) == {"passed": 2}
    result.stdout.fnmatch_lines_random(
        ["*PASSED a.chk::check[[]cpu[]]*", "*PASSED a.chk::check[[]cpu2[]]*"]
    )
    log = pytester.path.joinpath("custom.log").read_text().split()
    assert sorted(log) == ["cpu", "cpu2"]


# ------------------------------------------------------------------ item 2


@pytest.mark.slow
def test_marker_for_a_backend_not_requested_skips_and_a_typo_is_an_error(pytester):
    pytester.makepyfile(
        test_marked="""
        import pytest

        @pytest.mark.jax_backend("gpu")
        def test_gpu_only(jax_backend):
            pass

        @pytest.mark.jax_backend("cpu2")
        def test_cpu2_only(jax_backend):
            assert jax_backend == "cpu2"
        """
    )
    result = pytester.runpytest_subprocess(*FAST, *TWO, "-rs")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert counts(result) == {"passed": 1, "skipped": 3}
    result.stdout.fnmatch_lines(["*marked jax_backend(gpu): not run on backend 'cpu'*"])
    result.stdout.no_fnmatch_line("*INTERNALERROR*")

    pytester.makepyfile(
        test_typo="""
        import pytest

        @pytest.mark.jax_backend("gpuu")
        def test_typo(jax_backend):
            pass
        """
    )
    result = pytester.runpytest_subprocess(*FAST, *TWO, "test_typo.py")
    assert result.ret != pytest.ExitCode.OK  # a collection error
    result.stdout.fnmatch_lines(
        ["*test_typo.py::test_typo: @pytest.mark.jax_backend names 'gpuu'*"]
    )
    result.stdout.no_fnmatch_line("*INTERNALERROR*")


# ------------------------------------------------------------------ item 3


@pytest.mark.slow
def test_a_backend_crashing_at_collection_does_not_stop_the_others(pytester):
    conftest(pytester)
    pytester.makepyfile(
        test_crashy="""
        import os

        if os.environ.get("WORKER_LABEL") == "cpu2":
            os._exit(3)  # this backend's worker dies while collecting


        def test_measured(benchmark, jax_backend):
            benchmark(sum, [1, 2])
        """
    )
    result = pytester.runpytest_subprocess(*FAST, *TWO, "-v")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert counts(result) == {"passed": 1}
    result.stdout.fnmatch_lines(
        ["*PASSED test_crashy.py::test_measured[[]cpu[]]*", "*crashed: cpu2*"]
    )
    assert len([line for line in result.outlines if "replacing crashed" in line]) <= 1
    report = json.loads(
        (pytester.path / "lyapax-report" / "benchmark.json").read_text()
    )
    states = {b["label"]: b for b in report["pytest_lyapax"]["backends"]}
    assert states["cpu"]["status"] == "ok"
    assert states["cpu2"]["status"] == "crashed"
    assert (
        states["cpu2"]["crashes"]
        == [
            "its worker crashed before it finished collecting (Not properly terminated)"
        ]
        or len(states["cpu2"]["crashes"]) == 1
    )
    assert (pytester.path / "lyapax-report" / "crossover.png").exists()


# ------------------------------------------------------------------ item 4

BENCH_SUITE = """
import os
import time

import pytest

from absl_like import log


def test_measured(benchmark, jax_backend):
    benchmark(sum, [1, 2])


def test_fails_on_cpu2(jax_backend):
    assert jax_backend != "cpu2"


def test_slow(jax_backend):
    log("slow", jax_backend)
    if jax_backend == "cpu2":
        time.sleep(float(os.environ.get("SLOW_S", "0")))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--benchmark-disable"],
        ["--jax-backend=gpu"],
        ["-k", "test_fails_on_cpu2 or test_slow"],
        ["test_missing.py"],
    ],
    ids=["benchmark-disable", "gpu-only-without-gpu", "no-benchmarks", "no-such-file"],
)
@pytest.mark.slow
def test_a_run_that_measured_nothing_writes_nothing(pytester, args):
    pytester.makepyfile(absl_like=EVENTS, test_bench=BENCH_SUITE)
    extra = [] if "--jax-backend=gpu" in args else TWO
    result = pytester.runpytest_subprocess(*FAST, *extra, *args)
    assert "INTERNALERROR" not in result.stdout.str()
    assert not (pytester.path / "lyapax-report").exists()


@pytest.mark.slow
def test_collection_error_writes_nothing(pytester):
    pytester.makepyfile(
        test_bench="def test_x(benchmark, jax_backend):\n  benchmark(sum, [1])\n"
    )
    pytester.makepyfile(test_broken="import nonexistent_module_xyz\n")
    result = pytester.runpytest_subprocess(*FAST, *TWO)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # as without xdist
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting test_broken.py*",
            "*Interrupted: 1 error(s) during collection*",
        ]
    )
    assert not (pytester.path / "lyapax-report").exists()


@pytest.mark.slow
def test_partial_runs_are_marked_and_every_run_is_kept(pytester, monkeypatch):
    pytester.makepyfile(absl_like=EVENTS, test_bench=BENCH_SUITE)
    report_dir = pytester.path / "lyapax-report"
    complete = pytester.runpytest_subprocess(*FAST, *TWO, "-k", "not fails")
    assert complete.ret == pytest.ExitCode.OK
    first = json.loads((report_dir / "benchmark.json").read_text())
    assert first["pytest_lyapax"]["complete"] is True
    assert sorted(p.name for p in (report_dir / "runs").iterdir()) == ["0001.json"]
    assert (report_dir / "runs" / "0001.json").read_text() == (
        report_dir / "benchmark.json"
    ).read_text()

    monkeypatch.setenv("SLOW_S", "20")  # cpu2's copy is still to run after -x
    partial = pytester.runpytest_subprocess(*FAST, *TWO, "-x")
    assert partial.ret != pytest.ExitCode.OK
    latest = json.loads((report_dir / "benchmark.json").read_text())
    states = {b["label"]: b for b in latest["pytest_lyapax"]["backends"]}
    assert states["cpu"]["status"] == "ok"
    assert states["cpu2"]["status"] == "partial", states["cpu2"]
    assert "of its 3 tests finished" in states["cpu2"]["reason"]
    assert latest["pytest_lyapax"]["complete"] is False
    runs = sorted(p.name for p in (report_dir / "runs").iterdir())
    assert runs == ["0001.json", "0002.json"]
    # The complete run is still there, unchanged.
    assert json.loads((report_dir / "runs" / "0001.json").read_text()) == first


@pytest.mark.slow
def test_sigint_marks_the_running_backend_interrupted(pytester):
    # Backends one after another: cpu has finished when cpu2's phase runs.
    # (Interleaved, both are running when Ctrl-C comes.)
    pytester.makepyfile(absl_like=EVENTS, test_bench=BENCH_SUITE)
    env = dict(os.environ, SLOW_S="60")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            # As in a terminal, where Ctrl-C is never ignored: a shell without
            # job control starts `cmd &` with SIGINT ignored, and a Python
            # started so keeps it ignored, its workers too.
            "import runpy, signal; signal.signal(signal.SIGINT, "
            "signal.default_int_handler); runpy.run_module('pytest', "
            "run_name='__main__')",
            *FAST,
            *TWO,
            "--jax-sequential",
            "-k",
            "not fails",
        ],
        cwd=pytester.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    log = pytester.path / "events.log"
    deadline = time.monotonic() + timeout_s(240)
    while time.monotonic() < deadline:
        if log.exists() and "slow cpu2" in log.read_text():
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("cpu2's slow test never started")
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole group
    out, _ = proc.communicate(timeout=timeout_s(120))
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    report = json.loads(
        (pytester.path / "lyapax-report" / "benchmark.json").read_text()
    )
    states = {b["label"]: b for b in report["pytest_lyapax"]["backends"]}
    assert states["cpu"]["status"] == "ok"
    assert states["cpu2"]["status"] == "interrupted", states["cpu2"]
    assert "interrupted (Ctrl-C or SIGTERM)" in states["cpu2"]["reason"]
    assert {b["extra_info"]["backend"] for b in report["benchmarks"]} == {"cpu", "cpu2"}


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_json_is_written_even_when_the_figure_fails(pytester):
    pytester.makeconftest(
        """
        import pytest_lyapax.run.output

        def broken(*args, **kwargs):
            raise RuntimeError("figure backend exploded")

        pytest_lyapax.run.output.render_png = broken
        """
    )
    pytester.makepyfile(
        test_bench="def test_x(benchmark, jax_backend):\n  benchmark(sum, [1])\n"
    )
    result = pytester.runpytest_subprocess(*FAST, "--jax-backend=cpu", "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["*no crossover.png: RuntimeError: figure backend exploded*"]
    )
    report_dir = pytester.path / "lyapax-report"
    assert json.loads((report_dir / "benchmark.json").read_text())["benchmarks"]
    assert not (report_dir / "crossover.png").exists()


# ------------------------------------------------------------------ item 6


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["2", "0"])
def test_projects_that_use_xdist_and_turn_warnings_into_errors(pytester, workers):
    pytester.makeini(
        f"""
        [pytest]
        addopts = -n {workers}
        filterwarnings = error
        """
    )
    pytester.makepyfile(test_w="def test_a(jax_backend):\n    pass\n")
    result = pytester.runpytest_subprocess(*FAST, *TWO)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert counts(result) == {"passed": 2}
    result.stdout.fnmatch_lines(
        ["*pytest-lyapax: -n/--dist/--tx from addopts/PYTEST_ADDOPTS replaced*"]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert "warning" not in result.stdout.lines[-1]


# ------------------------------------------------------------------ item 7


@pytest.mark.slow
def test_compare_gate_rejects_bad_files_and_fails_when_nothing_matched(pytester):
    pytester.makepyfile(
        test_bench="def test_x(benchmark, jax_backend):\n  benchmark(sum, [1])\n"
    )
    other = {
        "benchmarks": [{"fullname": "elsewhere.py::test_y", "stats": {"median": 1.0}}]
    }
    pytester.path.joinpath("other.json").write_text(json.dumps(other))
    result = pytester.runpytest_subprocess(
        *FAST, *TWO, "--jax-compare=other.json", "--jax-compare-fail=median:50%"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*nothing was compared*"])
    allowed = pytester.runpytest_subprocess(
        *FAST,
        *TWO,
        "--jax-compare=other.json",
        "--jax-compare-fail=median:50%",
        "--jax-compare-allow-missing",
    )
    assert allowed.ret == pytest.ExitCode.OK

    bad = {"benchmarks": [{"fullname": "t.py::x", "stats": {"median": "fast"}}]}
    pytester.path.joinpath("bad.json").write_text(json.dumps(bad))
    result = pytester.runpytest_subprocess(
        *FAST, *TWO, "--jax-compare=bad.json", "--jax-compare-fail=median:50%"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*non-numeric or negative stats.median ('fast')*"])


# ------------------------------------------------------------------ item 8


@pytest.mark.slow
def test_routing_does_not_depend_on_the_shape_of_test_ids(pytester):
    conftest(
        pytester,
        """
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_generate_tests(metafunc):
            if "flavour" in metafunc.fixturenames:
                metafunc.parametrize("flavour", ["a::b", "cpu2"], ids=["a::b", "cpu2"])
        """,
    )
    pytester.makepyfile(
        test_ids="""
        import os

        def test_where(jax_backend, flavour):
            assert os.environ["WORKER_LABEL"] == jax_backend
        """
    )
    result = pytester.runpytest_subprocess(*FAST, *TWO, "-v")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert counts(result) == {"passed": 4}
    result.stdout.no_fnmatch_line("*please report this*")


# ------------------------------------------------------------------ items 11, 12

CALLS = """
import pytest

CALLS = []

def work():
    CALLS.append(1)
    return 1

def test_fixture_type(benchmark):
    print("FIXTURE", type(benchmark).__name__)

def test_cold(benchmark):
    CALLS.clear()
    benchmark.pedantic(work, rounds=1, iterations=1)
    assert len(CALLS) == 1

def test_warmup(benchmark):
    CALLS.clear()
    benchmark.pedantic(work, rounds=2, iterations=1, warmup_rounds=1)
    assert len(CALLS) == 3
"""


@pytest.mark.slow
@pytest.mark.parametrize("active", [False, True], ids=["plain", "with-backend"])
def test_pedantic_calls_exactly_what_was_asked(pytester, active):
    pytester.makepyfile(test_calls=CALLS)
    extra = ["--jax-backend=cpu"] if active else []
    result = pytester.runpytest_subprocess(*FAST, "-p", "no:xdist", "-s", *extra)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert counts(result) == {"passed": 3}
    name = "JaxBenchmarkFixture" if active else "BenchmarkFixture"
    result.stdout.fnmatch_lines([f"*FIXTURE {name}*"])


def test_without_backends_jax_tests_get_pytest_benchmarks_own_fixture(pytester):
    pytester.makepyfile(
        test_inert="""
        import pytest

        @pytest.mark.jax_sizes(3)
        def test_sized(benchmark, jax_size, jax_backend):
            benchmark(sum, [1])
            assert type(benchmark).__name__ == "BenchmarkFixture"
            assert "backend" not in benchmark.extra_info
        """
    )
    result = pytester.runpytest_subprocess(*FAST, "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


# ------------------------------------------------------------------ item 13


def test_require_a_backend_and_consistent_option_errors(pytester):
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--jax-backend=cpu,gpu", "--jax-require=gpu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--jax-require: backend 'gpu' (JAX_PLATFORMS=cuda) is unavailable: *"]
    )
    for args, message in [
        (
            ["--jax-backend=cpu", "--jax-report-dir="],
            "*--jax-report-dir: got an empty path*",
        ),
        (
            ["--jax-backend=cpu", "--jax-require=tpu"],
            "*--jax-require: 'tpu' must name*",
        ),
        (["--jax-report-dir=x"], "*--jax-report-dir needs --jax-backend=LIST*"),
        (["--jax-require=gpu"], "*--jax-require needs --jax-backend=LIST*"),
    ]:
        result = pytester.runpytest_subprocess(*args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, args
        result.stderr.fnmatch_lines([message])
    assert not (pytester.path / "lyapax-report").exists()
    assert not (pytester.path / "x").exists()


# ------------------------------------------------------------------ item 14


def test_plain_cpu_is_not_probed_in_a_subprocess(monkeypatch):
    from pytest_lyapax.backends import probe
    from pytest_lyapax.backends.labels import OK, Backend

    def no_subprocess(*args, **kwargs):
        raise AssertionError("probed JAX_PLATFORMS=cpu in a subprocess")

    monkeypatch.setattr(probe.subprocess, "Popen", no_subprocess)
    results = probe.probe_backends([Backend("cpu", "cpu"), Backend("cpu2", "cpu")])
    assert {label: r.status for label, r in results.items()} == {"cpu": OK, "cpu2": OK}


# Each worker records, from its pytest_unconfigure and after a pause, whether
# it imported JAX and whether it froze the garbage collector's view.
WORKER_EXIT_CONFTEST = """
import gc
import json
import os
import sys
import time
from pathlib import Path


def pytest_unconfigure(config):
    label = os.environ.get("WORKER_LABEL")
    if label is None or not hasattr(config, "workerinput"):
        return  # the controller
    time.sleep(1.0)  # the controller must still be waiting for this worker
    state = {"jax": "jax" in sys.modules, "frozen": gc.get_freeze_count() > 0}
    (Path(__file__).parent / f"exit-{label}.json").write_text(json.dumps(state))
"""


@pytest.mark.slow
def test_workers_start_jax_only_for_suites_that_import_it_and_are_awaited(pytester):
    conftest(pytester, WORKER_EXIT_CONFTEST)
    pytester.makepyfile(
        test_nojax="""
        def test_one(jax_backend):
            assert jax_backend in ("cpu", "cpu2")
        """
    )
    result = pytester.runpytest_subprocess(*FAST, *TWO)
    assert result.ret == pytest.ExitCode.OK
    assert counts(result) == {"passed": 2}
    # Written by each worker at its very end: pytest returned only after both.
    for label in ("cpu", "cpu2"):
        state = json.loads((pytester.path / f"exit-{label}.json").read_text())
        assert state == {"jax": False, "frozen": True}, label


@pytest.mark.slow
def test_workers_of_a_benchmark_suite_start_jax_while_collecting(pytester):
    conftest(
        pytester,
        """
        import os
        import sys
        from pathlib import Path

        import pytest


        @pytest.hookimpl(trylast=True)
        def pytest_collection_finish(session):
            label = os.environ.get("WORKER_LABEL")
            if label is not None:
                started = str("jax" in sys.modules)
                (Path(__file__).parent / f"collected-{label}").write_text(started)
        """,
    )
    pytester.makepyfile(
        test_bench="""
        def test_measured(benchmark, jax_backend):
            benchmark(sum, [1, 2])
        """
    )
    result = pytester.runpytest_subprocess(*FAST, *TWO)
    assert result.ret == pytest.ExitCode.OK
    assert counts(result) == {"passed": 2}
    for label in ("cpu", "cpu2"):
        assert (pytester.path / f"collected-{label}").read_text() == "True", label


@pytest.mark.slow
def test_a_test_importing_jax_itself_is_checked_for_a_silent_fallback(pytester):
    pytester.makepyfile(
        test_inside="""
        def test_uses_jax(jax_backend):
            import jax.numpy as jnp

            assert float(jnp.ones(3).sum()) == 3.0
        """
    )
    result = pytester.runpytest_subprocess(
        *FAST, "-rA", "--jax-backend=cpu,fb", "--jax-backend-platform=fb=cuda,cpu"
    )
    if not any("fallback" in line for line in result.outlines if "fb " in line):
        pytest.skip("JAX_PLATFORMS=cuda,cpu really runs on a GPU here")
    # No module imports JAX at collection: checked after the test instead.
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_uses_jax[[]fb[]]*",
            "silent JAX fallback: backend 'fb' runs with JAX_PLATFORMS='cuda,cpu' "
            "and must be on 'gpu', but jax.default_backend() is 'cpu'*",
        ]
    )
    assert counts(result) == {"passed": 2, "errors": 1}
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_run_without_backends_imports_only_what_it_needs(pytester):
    # pytest imports the plugin at every start, also in projects not using it.
    pytester.makeconftest(
        """
        import json
        import sys
        from pathlib import Path


        def pytest_unconfigure(config):
            loaded = sorted(m for m in sys.modules if m.startswith("pytest_lyapax"))
            (Path(__file__).parent / "modules.json").write_text(json.dumps(loaded))
        """
    )
    pytester.makepyfile(test_plain="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.OK
    loaded = set(json.loads((pytester.path / "modules.json").read_text()))
    assert "pytest_lyapax.plugin" in loaded
    heavy = {
        "run.runplan",
        "run.scheduling",
        "run.collector",
        "run.output",
        "run.remote",
        "views",
        "measuring.benchmarks",
        "measuring.fixture",
        "measuring.points",
        "backends.remoteprobe",
        # the analysis of a report: read only once a run has results
        "report.series",
        "report.crossover",
        "report.compare",
    }
    assert not loaded & {f"pytest_lyapax.{name}" for name in heavy}


def test_the_workers_end_replaces_xdists_teardown():
    """xdist's teardown (exit now, kill 10 s later) becomes a no-op; the
    plugin's own, at its last pytest_unconfigure, raises what it met."""
    from types import SimpleNamespace

    from pytest_lyapax.run.scheduling import XdistHooks

    class Group(list):
        def terminate(self, timeout):
            raise OSError("gateway went away")

    def hooks_with(dsession):
        plugins = SimpleNamespace(getplugin=lambda name: dsession)
        config = SimpleNamespace(pluginmanager=plugins)
        session = SimpleNamespace(
            worker_labels={}, settings=SimpleNamespace(exclusive=frozenset())
        )
        return XdistHooks(config, session, [])

    nodemanager = SimpleNamespace(teardown_nodes=lambda: 1 / 0, group=Group())
    hooks = hooks_with(SimpleNamespace(nodemanager=nodemanager))
    hooks.pytest_sessionfinish()
    assert nodemanager.teardown_nodes() is None  # xdist's own call: now a no-op
    with pytest.raises(OSError, match="gateway went away"):
        hooks.pytest_unconfigure()
    hooks_with(None).pytest_unconfigure()  # xdist never started: nothing to do


# ------------------------------------------------------------------ hygiene


def test_analysis_is_pure():
    code = (
        "import sys, pytest_lyapax.report.series, pytest_lyapax.report.crossover,"
        " pytest_lyapax.report.compare, pytest_lyapax.report.gates;"
        "bad = {'pytest', 'pytest_lyapax.run.options', 'jax'} & set(sys.modules);"
        "print(sorted(bad)); sys.exit(bool(bad))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
