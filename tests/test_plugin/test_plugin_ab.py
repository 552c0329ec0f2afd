"""A/B of two versions of the code under test: ``--jax-ab=REV``.

Unit tests of the option, of the code-under-test rule, of the B/A verdict and
its interval; usage errors of real runs (a missing revision, no git, a B that
cannot be imported, no workers); B's worker importing B where pytest puts the
working tree first; and one real A/B (marked slow) of a tiny project in a
temporary git repository whose ``work`` does two matrix products in the old
commit and one in the new: B/A ~ 2 with twice the FLOPs, ~ 1 for an
unchanged function, the rounds of A and B alternating turn by turn.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_lyapax.backends.labels import Backend, HostSpec
from pytest_lyapax.report import ab, stats
from pytest_lyapax.report.schema import ReportError, check_report
from pytest_lyapax.run import ab as ab_side

BACKENDS = (
    Backend("cpu", "cpu", env=(("JAX_ENABLE_X64", "1"),)),
    Backend("gpu", "cuda"),
)


def test_each_label_gets_its_b_twin_right_after_it():
    out = ab_side.add_ab_twins("HEAD~1", BACKENDS)
    assert [b.label for b in out] == ["cpu", "cpu_b", "gpu", "gpu_b"]
    assert out[1] == Backend("cpu_b", "cpu", env=BACKENDS[0].env, ab_of="cpu")
    assert ab_side.add_ab_twins(None, BACKENDS) == BACKENDS


def test_a_twin_that_exists_or_a_remote_label_is_a_usage_error():
    with pytest.raises(pytest.UsageError, match="--jax-ab=v1: the label 'cpu_b'"):
        ab_side.add_ab_twins("v1", (*BACKENDS, Backend("cpu_b", "cpu")))
    remote = Backend("gpu", "cuda", host=HostSpec("ssh=box", "ssh", "box"))
    with pytest.raises(pytest.UsageError, match="--jax-ab=v1: backend 'gpu' runs on"):
        ab_side.add_ab_twins("v1", (remote,))


def test_the_code_under_test_is_the_top_level_packages_and_modules(tmp_path):
    for name in ("pkg", "tests", "_private", "docs"):
        (tmp_path / name).mkdir()
    for name in ("pkg", "tests", "_private"):
        (tmp_path / name / "__init__.py").write_text("")
    for name in ("mod.py", "conftest.py", "setup.py", "test_x.py", "noxfile.py"):
        (tmp_path / name).write_text("")
    assert ab_side.code_names(tmp_path) == ["mod", "pkg"]
    assert ab_side.import_root(Path("/b"), tmp_path) == Path("/b")
    (tmp_path / "src").mkdir()
    assert ab_side.import_root(Path("/b"), tmp_path) == Path("/b/src")


def test_b_is_imported_from_its_root_even_with_the_working_tree_first(tmp_path):
    # pytest's prepend import mode puts the rootdir (A) at sys.path[0] after
    # the worker started: B's finder must still win.
    for side in ("a", "b"):
        (tmp_path / side / "abpkg").mkdir(parents=True)
        (tmp_path / side / "abpkg" / "__init__.py").write_text(f"SIDE = {side!r}\n")
        (tmp_path / side / "abpkg" / "sub.py").write_text(f"SIDE = {side!r}\n")
    code = textwrap.dedent(
        f"""
        import sys
        from pytest_lyapax.run import ab as ab_side
        assert ab_side.enter({str(tmp_path / "b")!r}, ["abpkg"]) == []
        sys.path.insert(0, {str(tmp_path / "a")!r})
        import abpkg, abpkg.sub
        print(abpkg.SIDE, abpkg.sub.SIDE, ab_side.import_problems(
            {str(tmp_path / "b")!r}, ["abpkg"]), ab_side.import_problems(
            {str(tmp_path / "a")!r}, ["abpkg"]) != [])
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.split() == ["b", "b", "[]", "True"], out.stderr


def _record(label, times, turns, flops):
    return {
        "fullname": f"t.py::test_f[{label}]",
        "name": f"test_f[{label}]",
        "params": {"jax_backend": label},
        "stats": {"data": list(times), "median": sorted(times)[len(times) // 2]},
        "extra_info": {
            "backend": label,
            "turns": list(turns),
            "counters": {"flops": flops, "compiles": 1},
        },
    }


def test_b_twice_as_slow_is_slower_with_its_ratio_interval_and_counters():
    # 12 turns each, alternating; B's rounds take twice A's, with some spread.
    a_times = [1.0 + 0.01 * (i % 5) for i in range(24)]
    b_times = [2.0 * t for t in reversed(a_times)]
    a_turns = [2 * (i // 2) + 1 for i in range(24)]
    b_turns = [t + 1 for t in a_turns]
    records = [
        _record("cpu", a_times, a_turns, 100),
        _record("cpu_b", b_times, b_turns, 200),
    ]
    (entry,) = ab.compare(records, {"cpu_b": "cpu"})
    assert entry["benchmark"] == "t.py::test_f" and entry["backend"] == "cpu"
    assert entry["verdict"] == stats.SLOWER and entry["pairs"] == 12
    assert entry["ratio"] == pytest.approx(2.0, rel=0.05)
    low, high = entry["interval"]
    assert 1.0 < low <= entry["ratio"] <= high
    assert entry["counters"]["b"]["flops"] == 2 * entry["counters"]["a"]["flops"]
    assert ab.counter_change(entry) == "flops 100 FLOP -> 200 FLOP"
    assert ab.verdict_text(entry) == "slower"
    assert ab.verdict_text({**entry, "unreliable": "busy"}).startswith("unreliable")
    # Turned around, B is the faster one; the interval is the reciprocal's.
    (back,) = ab.compare(
        [
            _record("cpu", b_times, a_turns, 200),
            _record("cpu_b", a_times, b_turns, 100),
        ],
        {"cpu_b": "cpu"},
    )
    assert back["verdict"] == stats.FASTER and back["ratio"] < 0.55


def test_the_ratio_interval_is_dual_to_the_sign_test():
    # n pairs of ratios 1..n: with 8 pairs the widest interval (min, max) is
    # the only one at the level (2 / 2**8 < 0.01 < 18 / 2**8).
    turns = (list(range(0, 16, 2)), list(range(1, 16, 2)))
    before = [1.0] * 8
    after = [float(i) for i in range(1, 9)]
    assert stats.ratio_interval(before, after, turns) == (1.0, 8.0)
    assert (
        stats.ratio_interval(before[:7], after[:7], (turns[0][:7], turns[1][:7]))
        is None
    )
    assert stats.ratio_interval(before, after, ((), ())) is None


def test_a_malformed_ab_section_is_refused_on_reading():
    good = {"benchmarks": [], "pytest_lyapax": {"schema": 1, "ab": {"comparisons": []}}}
    assert check_report(good, "r.json") == []
    bad = json.loads(json.dumps(good))
    bad["pytest_lyapax"]["ab"]["comparisons"] = [{"benchmark": "t", "verdict": "2x"}]
    with pytest.raises(ReportError, match=r"pytest_lyapax.ab.comparisons #0 has no"):
        check_report(bad, "r.json")
    bad["pytest_lyapax"]["ab"] = []
    with pytest.raises(ReportError, match="'pytest_lyapax.ab' is not an object"):
        check_report(bad, "r.json")


def _git(path, *args):
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=path,
        check=True,
        capture_output=True,
        timeout=60,
    )


def _commit(path, files, message):
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(textwrap.dedent(text))
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", message)


def test_a_missing_revision_or_no_repository_is_a_usage_error(pytester):
    pytester.makepyfile(tinypkg="VERSION = 1\n", test_x="def test_x():\n    pass\n")
    # Not in a git repository (pytester's directory is a fresh temporary one).
    result = pytester.runpytest_subprocess("--jax-backend=cpu", "--jax-ab=HEAD~1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--jax-ab=HEAD~1: *not in a git repository*"])
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "-A")
    _git(pytester.path, "commit", "-q", "-m", "one")
    result = pytester.runpytest_subprocess("--jax-backend=cpu", "--jax-ab=nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--jax-ab=nope: no such directory, and no commit*"])
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--jax-backend=cpu", "--jax-ab=HEAD"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--jax-ab=HEAD needs each backend in its own*"])


def test_a_b_that_cannot_be_imported_is_an_error_before_anything_runs(pytester):
    _git(pytester.path, "init", "-q")
    _commit(pytester.path, {"tinypkg/__init__.py": "import not_a_module_ab52\n"}, "b")
    _commit(pytester.path, {"tinypkg/__init__.py": "VERSION = 2\n"}, "a")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--jax-backend=cpu", "--jax-ab=HEAD~1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--jax-ab=HEAD~1: the other version's code cannot be used from *"]
    )
    assert "No module named 'not_a_module_ab52'" in result.stderr.str()
    assert "passed" not in result.stdout.str()
    # The temporary worktree is gone again.
    listed = subprocess.run(
        ["git", "worktree", "list"], cwd=pytester.path, capture_output=True, text=True
    )
    assert len(listed.stdout.strip().splitlines()) == 1, listed.stdout


@pytest.mark.parametrize(
    ("given", "named"),
    [("tinypkg/tests/test_x.py", "*test_x.py"), ("tinypkg", "*tinypkg")],
)
def test_tests_inside_the_compared_package_are_a_usage_error(pytester, given, named):
    # einops keeps its tests in einops/tests, tree-math its *_test.py files
    # beside the code (run as `pytest tree_math`): B's worker would import
    # B's copy of them.
    _git(pytester.path, "init", "-q")
    _commit(
        pytester.path,
        {
            "tinypkg/__init__.py": "VERSION = 1\n",
            "tinypkg/tests/__init__.py": "",
            "tinypkg/tests/test_x.py": "def test_x():\n    pass\n",
        },
        "a",
    )
    result = pytester.runpytest_subprocess(given, "--jax-backend=cpu", "--jax-ab=HEAD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*--jax-ab=HEAD: the tests {named} live inside the package under test*"]
    )
    listed = subprocess.run(
        ["git", "worktree", "list"], cwd=pytester.path, capture_output=True, text=True
    )
    assert len(listed.stdout.strip().splitlines()) == 1, listed.stdout


def test_the_project_is_found_above_a_rootdir_without_code(tmp_path):
    # perf_tests/pytest.ini makes perf_tests the rootdir; the code is above it.
    from pytest_lyapax.run.ab import _project

    _git(tmp_path, "init", "-q")
    _commit(tmp_path, {"pkg/__init__.py": "", "perf/pytest.ini": "[pytest]\n"}, "a")
    assert _project((tmp_path / "perf").resolve()) == tmp_path.resolve()
    assert _project(tmp_path.resolve()) == tmp_path.resolve()
    alone = tmp_path / "outside"  # no code, and the search stops at the repo
    alone.mkdir()
    assert _project(alone.resolve()) == tmp_path.resolve()


def test_a_suite_in_a_subfolder_compares_the_code_above_it(pytester):
    _git(pytester.path, "init", "-q")
    _commit(pytester.path, {"tinypkg/__init__.py": "import not_a_module_ab52\n"}, "b")
    _commit(
        pytester.path,
        {
            "tinypkg/__init__.py": "VERSION = 2\n",
            "perf/pytest.ini": "[pytest]\n",
            "perf/test_x.py": "def test_x():\n    pass\n",
        },
        "a",
    )
    result = pytester.runpytest_subprocess(
        "perf", "--jax-backend=cpu", "--jax-ab=HEAD~1"
    )
    # B's tinypkg (the folder above the rootdir perf/) is the one checked.
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "No module named 'not_a_module_ab52'" in result.stderr.str()


@pytest.mark.slow
def test_a_directory_is_b_and_each_worker_imports_its_side(pytester):
    # The conftest imports the package (before any test), and the test module
    # sits in the rootdir, which pytest puts first on sys.path.
    other = pytester.path / "other"
    (other / "tinypkg").mkdir(parents=True)
    (other / "tinypkg" / "__init__.py").write_text("VERSION = 'b'\n")
    pytester.path.joinpath("work").mkdir()
    work = pytester.path / "work"
    (work / "tinypkg").mkdir()
    (work / "tinypkg" / "__init__.py").write_text("VERSION = 'a'\n")
    (work / "conftest.py").write_text("import tinypkg\n")
    (work / "test_v.py").write_text(
        textwrap.dedent(
            f"""
            import tinypkg

            def test_version(jax_backend):
                b = jax_backend.endswith("_b")
                assert tinypkg.VERSION == ("b" if b else "a")
                side = {str(other)!r} if b else {str(pytester.path / "work")!r}
                assert tinypkg.__file__.startswith(side)
            """
        )
    )
    (work / "pytest.ini").write_text("[pytest]\n")
    result = pytester.runpytest_subprocess(
        str(work), f"--rootdir={work}", "--jax-backend=cpu", f"--jax-ab={other}"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*B: directory at *other (--jax-ab=*other)*"])


@pytest.mark.slow
def test_a_side_whose_code_does_not_import_fails_its_tests_in_set_up(pytester):
    # B (a directory) imports; the working tree's package does not: A's tests
    # fail before anything runs, with the import's error, and B's pass.
    other = pytester.path / "other"
    (other / "tinypkg").mkdir(parents=True)
    (other / "tinypkg" / "__init__.py").write_text("VERSION = 'b'\n")
    pytester.makepyfile(
        **{
            "tinypkg/__init__.py": "raise ImportError('half-written ab52')\n",
            "test_v": "def test_v(jax_backend):\n    import tinypkg\n",
        }
    )
    result = pytester.runpytest_subprocess("--jax-backend=cpu", f"--jax-ab={other}")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_v?cpu?*",
            "*--jax-ab: this worker does not run its side's code: import tinypkg "
            "failed: ImportError: half-written ab52*",
        ]
    )


SLOW_VERSION = """\
import jax

VERSION = "slow"


@jax.jit
def work(x):
    return (x @ x) @ x


@jax.jit
def same(x):
    return x @ x
"""

PERF_TESTS = """\
import jax.numpy as jnp
import pytest
import tinypkg


def test_work(benchmark):
    x = jnp.ones((512, 512), jnp.float32) / 512
    benchmark(tinypkg.work, x)


@pytest.mark.jax_sizes(256, 512)
def test_same(benchmark, jax_size):
    x = jnp.ones((jax_size, jax_size), jnp.float32) / jax_size
    benchmark(tinypkg.same, x)


def test_version(jax_backend):
    assert tinypkg.VERSION == ("slow" if jax_backend == "cpu_b" else "fast")
"""


@pytest.fixture(scope="module")
def ab_run(run_pytest, tmp_path_factory):
    path = tmp_path_factory.mktemp("ab")
    _git(path, "init", "-q")
    _commit(
        path, {"tinypkg/__init__.py": SLOW_VERSION, "test_perf.py": PERF_TESTS}, "1"
    )
    fast = SLOW_VERSION.replace('"slow"', '"fast"').replace("(x @ x) @ x", "x @ x")
    _commit(path, {"tinypkg/__init__.py": fast}, "one product fewer")
    report = path / "report"
    proc, data = run_pytest(
        path,
        report,
        "-p",
        "no:cacheprovider",
        "--benchmark-max-time=0",
        # Enough rounds for many 20 ms turns a side on a fast machine (60
        # rounds of ~2 ms fitted in 6 turns: too few pairs for a verdict).
        "--benchmark-min-rounds=400",
        "--jax-backend=cpu",
        "--jax-ab=HEAD~1",
        f"--jax-report-dir={report}",
    )
    return proc, data, report


@pytest.mark.slow
def test_ab_finds_b_twice_as_slow_and_the_unchanged_function_alike(ab_run):
    proc, data, report = ab_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "8 passed" in proc.stdout  # test_version: B's worker ran B's code
    section = data["pytest_lyapax"]["ab"]
    assert section["b"]["what"] == "revision HEAD~1"
    assert section["a"]["commit"] != section["b"]["commit"]
    assert section["code"] == ["tinypkg"]
    found = {
        (e["benchmark"].split("::")[1], e["size"]): e for e in section["comparisons"]
    }
    assert set(found) == {("test_work", None), ("test_same", 256), ("test_same", 512)}
    work = found["test_work", None]
    # Exact: the compiled programs.
    assert work["counters"]["b"]["flops"] == 2 * work["counters"]["a"]["flops"]
    # Timed: the sign and a generous band, never a wall-clock bound.
    assert work["verdict"] == "slower", work
    assert 1.3 < work["ratio"] < 3.0 and work["interval"][0] > 1.0, work
    for size in (256, 512):
        same = found["test_same", size]
        assert same["counters"]["b"]["flops"] == same["counters"]["a"]["flops"]
        # Unchanged: not called different, unless on a busy machine.
        assert same["verdict"] not in ("slower", "faster") or same["unreliable"], same
    out = proc.stdout
    assert "A/B" in out and "verdict (B vs A)" in out
    for name in ("summary.md", "report.html"):
        assert "A/B: the other version against this one" in (report / name).read_text()
    # The ratio per size of the sized benchmark, drawn.
    assert (report / "ab.png").read_bytes().startswith(b"\x89PNG")
    assert 'id="ab-figure"' in (report / "report.html").read_text()
    # The temporary worktree is removed at the end.
    assert not Path(section["b"]["path"]).exists()


@pytest.mark.slow
def test_ab_rounds_alternate_turn_by_turn(ab_run):
    _, data, _ = ab_run
    turns = {
        b["extra_info"]["backend"]: b["extra_info"]["turns"]
        for b in data["benchmarks"]
        if "test_work" in b["fullname"]
    }
    a, b = set(turns["cpu"]), set(turns["cpu_b"])
    assert not a & b
    # While both time, the turns go A, B, A, B, ... (run/turns.py).
    shared = [
        t for t in sorted(a | b) if max(min(a), min(b)) <= t <= min(max(a), max(b))
    ]
    sides = ["a" if t in a else "b" for t in shared]
    repeats = sum(x == y for x, y in zip(sides, sides[1:], strict=False))
    assert len(shared) >= 2 * stats.MIN_PAIRS and repeats <= len(shared) // 4, sides


def test_the_figure_draws_the_ratio_per_size_of_sized_benchmarks():
    pytest.importorskip("matplotlib")
    from pytest_lyapax.views.ab import ratio_series, render_ab_png

    entries = [
        {"benchmark": "t.py::test_f", "backend": "cpu", "size": 64, "ratio": 2.0,
         "interval": [1.8, 2.3]},
        {"benchmark": "t.py::test_f", "backend": "cpu", "size": 8, "ratio": 1.5,
         "interval": None},
        {"benchmark": "t.py::test_g", "backend": "cpu", "size": None, "ratio": 1.0},
    ]  # fmt: skip
    series = ratio_series(entries)
    assert series == {"test_f [cpu]": [(8, 1.5, 1.5, 1.5), (64, 2.0, 1.8, 2.3)]}
    assert render_ab_png(series).startswith(b"\x89PNG")
    assert ratio_series(entries[2:]) == {}
