"""--jax-find-crossover and --jax-find-ceiling, end to end (subprocess runs).

The two CPU labels run algorithms of known cost chosen by the label (a busy
wait, so the cost does not depend on JAX): cpu costs 1e-7 n^2 s a call,
cpu2 5e-4 + 5e-6 n s; the two cross at n = 100.  No timing is asserted,
only where the search says the crossing lies: within +-25 % of 100, or,
where the machine was busy, "unreliable (busy)", never elsewhere.
"""

import json

import pytest

CROSSING = """
import time

import jax.numpy as jnp
import pytest


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def work(label, n):
    spin({cpu} if label == "cpu" else {cpu2})
    return jnp.zeros(())


@pytest.mark.jax_sizes(20, 40, search=({lo}, {hi}))
def test_cost(benchmark, jax_backend, jax_size):
    benchmark(work, jax_backend, jax_size)
"""

TWO_LABELS = (
    "--jax-backend=cpu,cpu2",
    "--jax-backend-platform=cpu2=cpu",
    "--benchmark-max-time=0.5",
    "--jax-no-peaks",
    "--jax-find-crossover",
    "-p",
    "no:cacheprovider",
)


KNOWN = CROSSING.format(cpu="1e-7 * n * n", cpu2="5e-4 + 5e-6 * n", lo=4, hi=1000)


def _section(data, name):
    return data["pytest_lyapax"][name]


def _assert_bracketed_at_100(entry):
    assert entry["status"] == "bracketed", (entry["summary"], entry)
    lo, hi = entry["bracket"]
    assert lo <= 100 <= hi and hi <= lo * 1.25**2, entry
    assert entry["summary"] == f"cpu2 faster from problem size in [{lo}, {hi}]"


def _assert_right_or_busy(entry):
    """The known crossing bracketed, or the search ended on a busy machine:
    never a wrong bracket."""
    if entry["status"] == "unreliable" and entry["busy"]:
        assert entry["summary"].startswith("the machine was busy at problem size ")
        return
    _assert_bracketed_at_100(entry)


def _chosen(data, how="crossover"):
    return {
        b["extra_info"]["size"]
        for b in data["benchmarks"]
        if b["extra_info"].get("search") == how
    }


@pytest.mark.slow
def test_the_known_crossing_is_bracketed_within_25_percent(pytester, run_pytest):
    pytester.makepyfile(test_cost=KNOWN)
    report = pytester.path / "r"
    proc, data = run_pytest(
        pytester.path, report, *TWO_LABELS, f"--jax-report-dir={report}"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(data, "crossover_search")
    assert entry["backends"] == ["cpu", "cpu2"]
    _assert_right_or_busy(entry)
    if entry["status"] == "unreliable":  # other processes on this machine
        pytest.skip(f"the machine was busy: {entry['summary']}")
    lo, hi = entry["bracket"]
    chosen = _chosen(data)
    assert chosen == set(entry["added"]) | set(entry["remeasured"])
    assert set(entry["added"]).isdisjoint({20, 40})
    summary = (report / "summary.md").read_text().replace("\\", "")
    assert f"cpu2 faster from problem size in [{lo}, {hi}]" in summary
    assert "* size chosen by --jax-find-crossover" in summary


@pytest.mark.slow
def test_on_a_loaded_machine_the_crossing_is_bracketed_or_busy_never_wrong(
    pytester, run_pytest, busy_cpus
):
    pytester.makepyfile(test_cost=KNOWN)
    report = pytester.path / "r"
    proc, data = run_pytest(
        pytester.path, report, *TWO_LABELS, f"--jax-report-dir={report}"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(data, "crossover_search")
    _assert_right_or_busy(entry)
    if entry["busy"]:
        # A busy size was measured once more before the search gave up.
        assert entry["remeasured"], entry
        assert "unreliable (busy): the machine was busy" in proc.stdout


@pytest.mark.slow
def test_a_later_run_starts_from_the_saved_bracket(pytester, run_pytest):
    pytester.makepyfile(test_cost=KNOWN)
    report = pytester.path / "r"
    # The verdicts of a busy machine count here: this is about where the
    # search starts, not about the load.
    args = (*TWO_LABELS, "--jax-busy=ignore", f"--jax-report-dir={report}")
    # A saved report that does not load is not a start (a note says so).
    report.mkdir()
    bad = {"benchmarks": [], "pytest_lyapax": {"crossover_search": [{"test": 3}]}}
    (report / "benchmark.json").write_text(json.dumps(bad))
    proc, first = run_pytest(pytester.path, report, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(first, "crossover_search")
    assert entry["started_from"] is None
    assert entry["start_note"].startswith("not started from the saved run: ")
    assert "crossover_search" in entry["start_note"]
    assert entry["start_note"] in proc.stdout
    _assert_bracketed_at_100(entry)
    proc, second = run_pytest(pytester.path, report, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (again,) = _section(second, "crossover_search")
    assert again["started_from"] == entry["bracket"]
    _assert_bracketed_at_100(again)
    # The saved bracket's ends, measured in one follow-up run, still disagree.
    assert again["added"] == entry["bracket"]
    assert len(again["added"]) < len(entry["added"])
    assert _chosen(second) == set(again["added"])
    assert f"started from the saved bracket [{entry['bracket'][0]}, " in proc.stdout


@pytest.mark.slow
def test_one_label_faster_everywhere_reports_no_crossing(pytester, run_pytest):
    source = CROSSING.format(cpu="3e-4", cpu2="1.2e-3", lo=10, hi=80)
    pytester.makepyfile(test_cost=source)
    report = pytester.path / "r"
    proc, data = run_pytest(
        pytester.path, report, *TWO_LABELS, f"--jax-report-dir={report}"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(data, "crossover_search")
    if entry["status"] == "unreliable":
        pytest.skip(f"the noise test could not decide: {entry['summary']}")
    assert entry["status"] == "absent", entry
    assert entry["bracket"] is None
    assert "no crossing down to 10 or up to 80" in entry["summary"]
    assert sorted(entry["added"]) == [10, 80]


CEILING = """
import jax
import jax.numpy as jnp
import pytest


@jax.jit
def double(x):
    return x * 2.0


@pytest.mark.jax_sizes(1000, 2000)
def test_fill(benchmark, jax_backend, jax_size):
    if jax_size > {oom_above}:
        raise MemoryError("simulated: out of memory")
    # A float32 argument and output: 8 bytes per element, no temporaries.
    benchmark(double, jnp.ones(jax_size, dtype=jnp.float32))
"""

ONE_LABEL = (
    "--jax-backend=cpu",
    "--benchmark-max-time=0.05",
    "--jax-no-peaks",
    "--jax-find-ceiling",
    "-p",
    "no:cacheprovider",
)


@pytest.mark.slow
def test_the_ceiling_under_a_memory_limit_is_found(pytester, run_pytest):
    pytester.makepyfile(test_fill=CEILING.format(oom_above=10**9))
    report = pytester.path / "r"
    # 100000 bytes at 8 bytes per element: 12500 elements fit.
    proc, data = run_pytest(
        pytester.path,
        report,
        *ONE_LABEL,
        "--jax-backend-env=cpu:PYTEST_LYAPAX_MEMORY_LIMIT=100000",
        f"--jax-report-dir={report}",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(data, "ceilings")
    assert entry["backend"] == "cpu"
    assert entry["largest_fitting"] <= 12500 < entry["first_not_fitting"]
    assert entry["first_not_fitting"] <= entry["largest_fitting"] * 1.1
    assert entry["reason"].startswith("does not fit (")
    assert "GiB asked" in entry["reason"] and "GiB free)" in entry["reason"]
    text = (report / "summary.md").read_text()
    assert "largest fitting" in text


@pytest.mark.slow
def test_a_simulated_out_of_memory_ends_the_ceiling_search_not_the_worker(
    pytester, run_pytest
):
    pytester.makepyfile(test_fill=CEILING.format(oom_above=5000))
    report = pytester.path / "r"
    proc, data = run_pytest(
        pytester.path, report, *ONE_LABEL, f"--jax-report-dir={report}"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(data, "ceilings")
    assert entry["largest_fitting"] <= 5000 < entry["first_not_fitting"]
    assert "simulated: out of memory" in entry["reason"]


LIMIT = "--jax-backend-env=cpu:PYTEST_LYAPAX_MEMORY_LIMIT={}"


@pytest.mark.slow
def test_a_later_ceiling_search_starts_from_the_saved_ceiling(pytester, run_pytest):
    from pytest_lyapax.report.identity import series_id

    pytester.makepyfile(test_fill=CEILING.format(oom_above=10**9))
    report = pytester.path / "r"
    where = f"--jax-report-dir={report}"
    # A saved run measured under another memory limit, with a ceiling: not
    # a start for this run's, and a note says why.
    no_search = [a for a in ONE_LABEL if a != "--jax-find-ceiling"]
    proc, saved = run_pytest(
        pytester.path, report, *no_search, LIMIT.format(50000), where
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    key = series_id(saved["benchmarks"][0]).benchmark
    saved["pytest_lyapax"]["ceilings"] = [
        {
            "test": key,
            "backend": "cpu",
            "largest_fitting": 6000,
            "first_not_fitting": 6500,
            "reason": "does not fit",
        }
    ]
    (report / "benchmark.json").write_text(json.dumps(saved))
    args = (*ONE_LABEL, LIMIT.format(100000), where)
    proc, first = run_pytest(pytester.path, report, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(first, "ceilings")
    assert entry["started_from"] == []
    note = entry["start_note"]
    assert note.startswith("not started from the saved ceiling [6000, 6500]: ")
    assert "PYTEST_LYAPAX_MEMORY_LIMIT=50000, now with " in note
    assert note in proc.stdout
    assert entry["largest_fitting"] <= 12500 < entry["first_not_fitting"]
    # The same conditions: the saved ceiling's two sizes, confirmed in one
    # follow-up run, are the whole search.
    proc, second = run_pytest(pytester.path, report, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (again,) = _section(second, "ceilings")
    ends = [entry["largest_fitting"], entry["first_not_fitting"]]
    assert again["started_from"] == again["added"] == ends
    assert len(again["added"]) < len(entry["added"])
    assert [again["largest_fitting"], again["first_not_fitting"]] == ends
    assert again["start_note"] == ""
    assert f"started from the saved ceiling [{ends[0]}, {ends[1]}]" in proc.stdout
    assert proc.stdout.count("pytest-lyapax search: ") == 2  # one step, one end


@pytest.mark.slow
def test_a_saved_report_that_does_not_load_is_not_a_start_for_the_ceiling(
    pytester, run_pytest
):
    # 1000 fits and 1050 runs out of memory: the marked sizes are the ceiling.
    pytester.makepyfile(test_fill=CEILING.format(oom_above=1000))
    report = pytester.path / "r"
    report.mkdir()
    bad = {"benchmarks": [], "pytest_lyapax": {"ceilings": [{"test": "x"}]}}
    (report / "benchmark.json").write_text(json.dumps(bad))
    proc, data = run_pytest(
        pytester.path,
        report,
        *ONE_LABEL,
        "--jax-sizes=1000,1050",
        f"--jax-report-dir={report}",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(data, "ceilings")
    assert (entry["largest_fitting"], entry["first_not_fitting"]) == (1000, 1050)
    assert entry["started_from"] == entry["added"] == []
    assert entry["start_note"].startswith("not started from the saved run: ")
    assert "ceilings" in entry["start_note"]
    assert entry["start_note"] in proc.stdout


@pytest.mark.parametrize(
    ("marker", "signature", "named"),
    [
        ("@pytest.mark.jax_sizes(4, 8, search=(10, 5))", "jax_size", "(10, 5)"),
        ("@pytest.mark.jax_sizes(4, 8, search=(0, 5))", "jax_size", "(0, 5)"),
        ("@pytest.mark.jax_sizes(4, 8, search=10)", "jax_size", "10"),
        ("@pytest.mark.jax_sizes(4, 8, search=(5, 5))", "jax_size", "(5, 5)"),
        ("@pytest.mark.jax_sizes(4, 8, search=(-4, 5))", "jax_size", "(-4, 5)"),
        ("@pytest.mark.jax_sizes(4, 8, search=(1.5, 8))", "jax_size", "(1.5, 8)"),
        ("@pytest.mark.jax_sizes(4, 8, search=(True, 8))", "jax_size", "(True, 8)"),
        ("@pytest.mark.jax_sizes(4, 8, search=('2', 8))", "jax_size", "('2', 8)"),
        ("@pytest.mark.jax_sizes(4, 8, search=(1, 2, 3))", "jax_size", "(1, 2, 3)"),
        ("@pytest.mark.jax_sizes(search=(1, 5))", "", "search=(1, 5) needs a size"),
    ],
)
def test_bad_search_bounds_are_a_usage_error(
    pytester, run_pytest, marker, signature, named
):
    args = ", ".join(filter(None, ["jax_backend", signature]))
    pytester.makepyfile(
        test_bad=f"import pytest\n\n{marker}\ndef test_x({args}):\n    pass\n"
    )
    report = pytester.path / "r"
    proc, _ = run_pytest(
        pytester.path,
        report,
        "--jax-backend=cpu",
        "-p",
        "no:cacheprovider",
        f"--jax-report-dir={report}",
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "test_bad.py::test_x" in proc.stdout
    assert named in proc.stdout
    assert not (report / "benchmark.json").exists()


@pytest.mark.slow
def test_a_search_past_its_budget_stops_and_says_how_far_it_got(pytester, run_pytest):
    source = CROSSING.format(cpu="1e-7 * n * n", cpu2="5e-4 + 5e-6 * n", lo=4, hi=1000)
    pytester.makepyfile(test_cost=source)
    report = pytester.path / "r"
    # 3 s per series and backend: 6 s for the search, less than one follow-up
    # run (a pytest and JAX start-up per backend), so it stops after one.
    # Busy verdicts count here, so that no step measures a size again.
    proc, data = run_pytest(
        pytester.path,
        report,
        *TWO_LABELS,
        "--jax-budget=3s",
        "--jax-busy=ignore",
        f"--jax-report-dir={report}",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(data, "crossover_search")
    if entry["status"] == "unreliable":
        pytest.skip(f"the noise test could not decide: {entry['summary']}")
    assert entry["status"] == "budget", entry
    (added,) = entry["added"]
    assert entry["summary"].endswith("; stopped after 1 added sizes")
    # How far it got: cpu faster at 20 and 40, and at the one size added (the
    # search goes on up) or not (then the crossing lies below it).
    if entry["bracket"] is None:
        assert entry["summary"].startswith("cpu faster at every decided problem size")
    else:
        lo, hi = entry["bracket"]
        assert entry["summary"].startswith(
            f"cpu2 faster from problem size in [{lo}, {hi}]"
        )
        assert lo <= 100 <= hi == added
    assert "stopped by the budget: " in proc.stdout


STOPPED = """
import os
import signal
import time

import jax.numpy as jnp
import pytest


@pytest.mark.jax_sizes(1000, 2000)
def test_fill(benchmark, jax_backend, jax_size):
    if os.environ.get("PYTEST_LYAPAX_SEARCH_STEP"):
        # A follow-up run: the outer run gets the SIGTERM a timeout sends.
        os.kill(int(os.environ["OUTER_PID"]), signal.SIGTERM)
        time.sleep(60)
    benchmark(jnp.sin, jnp.ones(jax_size))
"""

OUTER_PID = """
import os

if "PYTEST_XDIST_WORKER" not in os.environ:
    os.environ.setdefault("OUTER_PID", str(os.getpid()))
"""


@pytest.mark.slow
def test_a_sigterm_during_a_search_keeps_the_report_and_says_where_it_stopped(
    pytester, run_pytest
):
    pytester.makepyfile(test_fill=STOPPED)
    pytester.makeconftest(OUTER_PID)
    report = pytester.path / "r"
    proc, data = run_pytest(
        pytester.path, report, *ONE_LABEL, f"--jax-report-dir={report}"
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "pytest-lyapax search: " in proc.stdout  # its progress
    (entry,) = _section(data, "ceilings")
    assert entry["largest_fitting"] == 2000  # the marked sizes are kept
    assert "interrupted (signal SIGTERM) during a follow-up run" in entry["reason"]
    sizes = sorted(b["extra_info"]["size"] for b in data["benchmarks"])
    assert sizes == [1000, 2000]


def test_a_search_pairs_the_first_two_backends_that_measured_the_series():
    from pytest_lyapax.run.search import search_pair

    # perf_tests' device-count twins come second in the run's order and
    # measure other series: the dense Kuramoto search is cpu against tpu.
    order = ["cpu", "cpu_1dev", "cpu_2dev", "tpu"]
    assert search_pair(order, {"tpu": [], "cpu": []}) == ("cpu", "tpu")
    assert search_pair(order, ["cpu_2dev", "cpu_1dev"]) == ("cpu_1dev", "cpu_2dev")
    assert search_pair(order, ["tpu"]) is None
    assert search_pair(order, ["gpu", "tpu"]) is None  # gpu is not in the run


SKIPPED_ON_CPU3 = """
import pytest

from test_cost import work


@pytest.mark.jax_sizes(20, 40, search=(4, 1000))
def test_cost(benchmark, jax_backend, jax_size):
    if jax_backend == "cpu3":
        pytest.skip("measured on cpu and cpu2 only")
    benchmark(work, jax_backend, jax_size)
"""


@pytest.mark.slow
def test_a_series_the_second_label_did_not_measure_is_still_searched(
    pytester, run_pytest
):
    source = CROSSING.format(cpu="1e-7 * n * n", cpu2="5e-4 + 5e-6 * n", lo=4, hi=1000)
    pytester.makepyfile(test_cost=source)
    pytester.makepyfile(test_skip=SKIPPED_ON_CPU3)
    report = pytester.path / "r"
    args = [a for a in TWO_LABELS if not a.startswith("--jax-backend")]
    proc, data = run_pytest(
        pytester.path,
        report,
        "--jax-backend=cpu,cpu3,cpu2",
        "--jax-backend-platform=cpu2=cpu",
        "--jax-backend-platform=cpu3=cpu",
        *args,
        "test_skip.py",
        f"--jax-report-dir={report}",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Searched at all: before, the pair was the run's first two labels (cpu,
    # cpu3), and a series cpu3 did not measure had no entry.
    (entry,) = _section(data, "crossover_search")
    assert entry["backends"] == ["cpu", "cpu2"]
    if entry["status"] == "unreliable":  # busy rounds decide nothing
        pytest.skip(f"the noise test could not decide: {entry['summary']}")
    assert entry["added"], entry  # it measured sizes of its own


def test_why_a_follow_up_run_measured_nothing_is_one_line():
    from pytest_lyapax.run.followup import why_nothing

    out = "x\n=== summary ===\nFAILED t.py::test_a[cpu-160] - ValueError: no\n"
    assert why_nothing(1, out, "") == (
        "exit code 1: FAILED t.py::test_a[cpu-160] - ValueError: no"
    )
    assert why_nothing(4, "", "ERROR: usage\n\n") == "exit code 4: ERROR: usage"
    assert why_nothing(5, "no tests ran in 0.01s\n", "") == (
        "exit code 5: no tests ran in 0.01s"
    )
    assert why_nothing(-9, "", "") == "exit code -9: no output"
    assert len(why_nothing(1, "FAILED " + "y" * 500, "")) == len("exit code 1: ") + 300


FAILS_BEYOND = CROSSING.replace(
    "def test_cost(benchmark, jax_backend, jax_size):\n",
    "def test_cost(benchmark, jax_backend, jax_size):\n"
    "    if jax_size not in (20, 40):\n"
    "        raise ValueError('not defined at ' + str(jax_size))\n",
)


@pytest.mark.slow
def test_a_follow_up_run_that_measures_nothing_says_why(pytester, run_pytest):
    source = FAILS_BEYOND.format(
        cpu="1e-7 * n * n", cpu2="5e-4 + 5e-6 * n", lo=4, hi=1000
    )
    pytester.makepyfile(test_cost=source)
    report = pytester.path / "r"
    proc, data = run_pytest(
        pytester.path,
        report,
        *TWO_LABELS,
        "--jax-busy=ignore",
        f"--jax-report-dir={report}",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(data, "crossover_search")
    if entry["added"] == [] and "measured nothing" not in entry["summary"]:
        pytest.skip(f"no follow-up run was asked for: {entry['summary']}")
    assert entry["status"] == "unreliable", entry
    assert "measured nothing (exit code 1: FAILED " in entry["summary"], entry
    assert "ValueError: not defined at " in entry["summary"], entry
