"""--jax-find-crossover and --jax-find-ceiling, end to end (subprocess runs).

The two CPU labels run algorithms of known cost chosen by the label (a busy
wait, so the cost does not depend on JAX): cpu costs 1e-7 n^2 s a call,
cpu2 5e-4 + 5e-6 n s; the two cross at n = 100.  No timing is asserted,
only where the search says the crossing lies.
"""

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


def _section(data, name):
    return data["pytest_lyapax"][name]


@pytest.mark.slow
def test_the_known_crossing_is_bracketed_within_25_percent(pytester, run_pytest):
    source = CROSSING.format(cpu="1e-7 * n * n", cpu2="5e-4 + 5e-6 * n", lo=4, hi=1000)
    pytester.makepyfile(test_cost=source)
    report = pytester.path / "r"
    proc, data = run_pytest(
        pytester.path, report, *TWO_LABELS, f"--jax-report-dir={report}"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(data, "crossover_search")
    assert entry["backends"] == ["cpu", "cpu2"]
    if entry["status"] == "unreliable":  # a machine too busy to judge a size
        pytest.skip(f"the noise test could not decide: {entry['summary']}")
    assert entry["status"] == "bracketed", entry
    lo, hi = entry["bracket"]
    assert lo <= 100 <= hi and hi <= lo * 1.25**2, entry
    assert entry["summary"] == f"cpu2 faster from problem size in [{lo}, {hi}]"
    chosen = {
        b["extra_info"]["size"]
        for b in data["benchmarks"]
        if b["extra_info"].get("search") == "crossover"
    }
    assert chosen == set(entry["added"]) and chosen.isdisjoint({20, 40})
    summary = (report / "summary.md").read_text().replace("\\", "")
    assert f"cpu2 faster from problem size in [{lo}, {hi}]" in summary
    assert "* size chosen by --jax-find-crossover" in summary


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


@pytest.mark.parametrize(
    ("marker", "signature", "named"),
    [
        ("@pytest.mark.jax_sizes(4, 8, search=(10, 5))", "jax_size", "(10, 5)"),
        ("@pytest.mark.jax_sizes(4, 8, search=(0, 5))", "jax_size", "(0, 5)"),
        ("@pytest.mark.jax_sizes(4, 8, search=10)", "jax_size", "10"),
        ("@pytest.mark.jax_sizes(search=(1, 5))", "", "needs a size axis"),
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


@pytest.mark.slow
def test_a_search_past_its_budget_stops_and_says_how_far_it_got(pytester, run_pytest):
    source = CROSSING.format(cpu="1e-7 * n * n", cpu2="5e-4 + 5e-6 * n", lo=4, hi=1000)
    pytester.makepyfile(test_cost=source)
    report = pytester.path / "r"
    # 3 s per series and backend: 6 s for the search, less than one follow-up
    # run (a pytest and JAX start-up per backend), so it stops after one.
    proc, data = run_pytest(
        pytester.path,
        report,
        *TWO_LABELS,
        "--jax-budget=3s",
        f"--jax-report-dir={report}",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (entry,) = _section(data, "crossover_search")
    if entry["status"] == "unreliable":
        pytest.skip(f"the noise test could not decide: {entry['summary']}")
    assert entry["status"] == "budget", entry
    assert len(entry["added"]) == 1
    assert entry["summary"].endswith("stopped after 1 added sizes")


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
    (entry,) = _section(data, "crossover_search")
    assert entry["backends"] == ["cpu", "cpu2"]
    assert entry["added"], entry  # it measured sizes of its own
