"""Every per-backend copy is named by its backend.

Each test runs pytest in a subprocess (``runpytest_subprocess``) with two
backends, ``cpu`` and ``cpu2`` (mapped to ``JAX_PLATFORMS=cpu``), and checks
the copies' ids where pytest and its plugins show them: ``-rA``, ``--co -q``,
junit XML, the warnings summary, ``--lf``, ``-k`` and pytest-rerunfailures;
and the counts: subtests apart from tests, single-process "collected /
selected" lines with the copies.  Several cases share one run (each costs
seconds).  Assertions are structural -- ids, counts, exit codes.
"""

import dataclasses
import importlib.util
import re
import xml.etree.ElementTree as ET

import pytest

from pytest_lyapax.run import items

TWO = ["--jax-backend=cpu,cpu2", "--jax-backend-platform=cpu2=cpu"]
FAST = ["--benchmark-min-rounds=1", "--benchmark-max-time=0"]
LABELS = ("cpu", "cpu2")

# One item of every kind pytest collects here, and one that fails on cpu2 only.
SUITE = '''
import unittest
import warnings

import pytest


class TestAdam(unittest.TestCase):
    def test_step(self):
        pass


def test_fn():
    pass


@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    pass


def test_flaky(jax_backend):
    warnings.warn(f"careful on {jax_backend}", UserWarning)
    assert jax_backend != "cpu2"


def func():
    """
    >>> 1 + 1
    2
    """
'''

# An item of a third-party collector (the way pytest-mypy or yaml plugins
# make theirs): neither a function nor a doctest.
CUSTOM_CONFTEST = """
import pytest


class CheckItem(pytest.Item):
    def runtest(self):
        pass


class CheckFile(pytest.File):
    def collect(self):
        yield CheckItem.from_parent(self, name="check")


def pytest_collect_file(parent, file_path):
    if file_path.suffix == ".chk":
        return CheckFile.from_parent(parent, path=file_path)
"""

# The copies' ids: [LABEL] added, and functions' parameters after the label
# (the backend is their first parametrization, test_x[cpu-20]).
BASES = [
    "test_u.py::TestAdam::test_step[{}]",
    "test_u.py::test_fn[{}]",
    "test_u.py::test_param[{}-1]",
    "test_u.py::test_param[{}-2]",
    "test_u.py::test_flaky[{}]",
    "test_u.py::test_u.func[{}]",
    "a.chk::check[{}]",
]
ALL_IDS = [base.format(label) for label in LABELS for base in BASES]


def _make_suite(pytester):
    pytester.makeconftest(CUSTOM_CONFTEST)
    pytester.makepyfile(test_u=SUITE)
    pytester.path.joinpath("a.chk").write_text("x")


def _outcome(result, word):
    """The ``N word`` count of pytest's last summary line (0 if absent)."""
    line = result.stdout.lines[-1]
    found = re.search(rf"(\d+) {word}\b", line)
    return int(found.group(1)) if found else 0


def _backend_row(result, label):
    """The tests column of the backends table for ``label``."""
    for line in result.stdout.lines:
        if line.startswith(f"{label} ") and "JAX_PLATFORMS=" in line:
            # backend, environment, status, precision, tests, ...
            return re.split(r"\s{2,}", line.strip())[4]
    raise AssertionError(f"no backends row for {label}:\n{result.stdout.str()}")


def test_pytest_internals_the_copies_rely_on():
    # pytest has no public constructor of a callspec nor a public count of
    # collected items; these are the private names the plugin uses.
    names = {f.name for f in dataclasses.fields(items._CallSpec)}
    assert {"params", "indices", "_arg2scope", "_idlist", "marks"} <= names
    from _pytest.terminal import TerminalReporter

    assert "_numcollected" in TerminalReporter.__init__.__code__.co_names


@pytest.mark.slow
def test_every_copy_is_named_by_its_backend(pytester):
    _make_suite(pytester)
    xml = pytester.path / "j.xml"
    result = pytester.runpytest_subprocess(
        *FAST, *TWO, "-rA", "--doctest-modules", f"--junitxml={xml}"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    for nodeid in ALL_IDS:
        word = "FAILED" if nodeid == "test_u.py::test_flaky[cpu2]" else "PASSED"
        assert f"{word} {nodeid}" in out, nodeid
    assert _outcome(result, "passed") == 13 and _outcome(result, "failed") == 1
    # The warnings summary names each backend's copy.
    assert "test_u.py::test_flaky[cpu]\n" in out
    assert "test_u.py::test_flaky[cpu2]\n" in out
    # junit: one testcase per copy, each name distinct.
    cases = ET.parse(xml).getroot().iter("testcase")
    names = [(c.get("classname"), c.get("name")) for c in cases]
    assert len(names) == len(set(names)) == 14
    assert ("test_u.TestAdam", "test_step[cpu]") in names
    assert ("test_u.TestAdam", "test_step[cpu2]") in names
    assert ("test_u", "test_param[cpu2-2]") in names
    assert _backend_row(result, "cpu") == "7 passed"
    assert _backend_row(result, "cpu2") == "1 failed, 6 passed"

    # --lf reruns only the copy that failed, on its backend; -k LABEL selects
    # every kind's copies of one backend.
    last = pytester.runpytest_subprocess(*FAST, *TWO, "-rA", "--lf")
    assert "FAILED test_u.py::test_flaky[cpu2]" in last.stdout.str()
    assert _outcome(last, "failed") == 1 and _outcome(last, "passed") == 0
    assert _backend_row(last, "cpu") == "-"

    listed = pytester.runpytest_subprocess(
        *TWO, "--co", "-q", "--doctest-modules", "-k", "cpu2", "-p", "no:xdist"
    )
    ids = [line for line in listed.stdout.lines if "::" in line]
    assert sorted(ids) == sorted(base.format("cpu2") for base in BASES)
    listed.stdout.fnmatch_lines(["7/14 tests collected (7 deselected)*"])


@pytest.mark.parametrize(
    "where",
    [["-p", "no:xdist"], pytest.param(["-n", "0"], marks=pytest.mark.slow)],
    ids=["no-xdist", "n0"],
)
def test_single_process_counts_include_the_copies(pytester, where):
    _make_suite(pytester)
    result = pytester.runpytest_subprocess(
        *FAST, *TWO, *where, "--doctest-modules", "-k", "not param"
    )
    # 14 copies collected, 4 of test_param deselected: the other 10 either
    # run (cpu, this process) or skip with a reason (cpu2).
    result.stdout.fnmatch_lines(["collected 14 items / 4 deselected / 10 selected"])
    assert _outcome(result, "passed") == 5 and _outcome(result, "skipped") == 5
    assert _backend_row(result, "cpu") == "5 passed"
    assert _backend_row(result, "cpu2") == "5 skipped"


@pytest.mark.skipif(
    importlib.util.find_spec("absl") is None, reason="absl-py is not installed"
)
@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_absltest_parameterized_copies(pytester):
    pytester.makepyfile(
        test_absl="""
        from absl.testing import absltest, parameterized


        class LinearTest(parameterized.TestCase):
            @parameterized.parameters(1, 2)
            def test_precision(self, n):
                self.assertGreater(n, 0)

            @parameterized.named_parameters(("small", 1), ("big", 9))
            def test_named(self, n):
                self.assertLess(n, 5)


        if __name__ == "__main__":
            absltest.main()
        """
    )
    xml = pytester.path / "j.xml"
    result = pytester.runpytest_subprocess(
        *FAST, *TWO, "-rA", "-p", "no:cacheprovider", f"--junitxml={xml}"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    for label in LABELS:
        for name in ("test_precision0", "test_precision1", "test_named_small"):
            assert f"PASSED test_absl.py::LinearTest::{name}[{label}]" in out
        assert f"FAILED test_absl.py::LinearTest::test_named_big[{label}]" in out
    names = [c.get("name") for c in ET.parse(xml).getroot().iter("testcase")]
    assert sorted(names) == sorted(
        f"{n}[{label}]"
        for n in ("test_precision0", "test_precision1", "test_named_small")
        + ("test_named_big",)
        for label in LABELS
    )


_SUBTESTS = int(pytest.__version__.split(".")[0]) >= 9 or (
    importlib.util.find_spec("pytest_subtests") is not None
)


@pytest.mark.skipif(
    not _SUBTESTS, reason="subtests need pytest >= 9 or the pytest-subtests plugin"
)
@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_subtests_are_counted_apart_from_tests(pytester):
    pytester.makepyfile(
        test_sub="""
        import unittest


        class TestSub(unittest.TestCase):
            def test_loop(self):
                for i in range(3):
                    with self.subTest(i=i):
                        self.assertGreaterEqual(i, 0)


        def test_with_fixture(subtests):
            for i in range(2):
                with subtests.test(i=i):
                    pass


        def test_measured(benchmark):
            benchmark(sum, [1, 2])
        """
    )
    report = pytester.path / "report"
    result = pytester.runpytest_subprocess(
        *FAST, *TWO, "-q", "-p", "no:cacheprovider", f"--jax-report-dir={report}"
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    passed, subtests = _outcome(result, "passed"), _outcome(result, "subtests passed")
    # -q: pytest >= 9 leaves passed subtests out of its count at verbosity 0
    # (and then so does the table, which counts what pytest counts).
    assert (passed, subtests) == (6, 10)
    each = f"{passed // 2} passed, {subtests // 2} subtests passed"
    assert _backend_row(result, "cpu") == _backend_row(result, "cpu2") == each
    assert each in (report / "summary.md").read_text()


@pytest.mark.skipif(
    importlib.util.find_spec("pytest_rerunfailures") is None,
    reason="pytest-rerunfailures is not installed",
)
@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_rerunfailures_retries_name_the_backend(pytester):
    pytester.makepyfile(
        test_r="""
        import unittest


        class TestU(unittest.TestCase):
            def test_bad(self):
                self.fail("always")


        def test_flaky(jax_backend):
            assert jax_backend != "cpu2"


        def test_ok():
            pass
        """
    )
    result = pytester.runpytest_subprocess(
        *FAST, *TWO, "-rAR", "-p", "no:cacheprovider", "--reruns=1"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "RERUN test_r.py::test_flaky[cpu2]" in out
    assert "FAILED test_r.py::test_flaky[cpu2]" in out
    assert "RERUN test_r.py::test_flaky[cpu]" not in out
    for label in LABELS:
        assert f"RERUN test_r.py::TestU::test_bad[{label}]" in out
    assert _outcome(result, "rerun") == 3
    assert _backend_row(result, "cpu") == "1 failed, 2 passed, 1 rerun"
    assert _backend_row(result, "cpu2") == "2 failed, 1 passed, 2 rerun"
