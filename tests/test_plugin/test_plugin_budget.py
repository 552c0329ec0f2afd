"""The time budget (``--jax-budget``, ``--jax-max-call``) and over-budget points.

The synthetic benchmark sleeps ``UNIT * n**2`` seconds per call (four times
that on ``cpu4``), so its cost grows by construction; the budgets are chosen
with wide margins, and the tests assert which sizes ran and what the points
hold, never a timing's value.
"""

import json
import subprocess
import sys

import pytest
from support.deadlines import timeout_s

from pytest_lyapax.report.schema import ReportError, check_report
from pytest_lyapax.run import budget

UNIT = 2e-3
SIZES = (1, 2, 4, 8, 16)

GROWING_TESTS = f"""
import time

import jax
import jax.numpy as jnp
import pytest

X = jnp.zeros(2)


def test_first(benchmark, jax_backend):
    # The first benchmark of a worker pays one-off set-up; not in the series.
    benchmark(lambda: X + 1)


@pytest.mark.jax_sizes{SIZES}
def test_grows(benchmark, jax_backend, jax_size):
    scale = 4 if jax_backend == "cpu4" else 1

    def call():
        time.sleep({UNIT} * scale * jax_size**2)
        return X

    benchmark(call)
"""

FAST = ["-p", "no:cacheprovider", "--benchmark-max-time=0", "-rs"]


_RUNS = iter(range(1000))


def _run(run_pytest, path, *args):
    # A report directory per run: the module's runs share one project.
    report = path / f"report-{next(_RUNS)}"
    if any(a.startswith("--jax-backend=") for a in args):
        args = (f"--jax-report-dir={report}", *args)
    proc, data = run_pytest(path, report, *FAST, *args)
    return proc, data, report


def _sizes(data, label):
    timed = {
        b["extra_info"]["size"]
        for b in data["benchmarks"]
        if b["extra_info"]["backend"] == label and "test_grows" in b["fullname"]
    }
    points = {
        p["size"]: p for p in data["pytest_lyapax"]["points"] if p["backend"] == label
    }
    return timed, points


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    path = tmp_path_factory.mktemp("budget")
    (path / "test_growing.py").write_text(GROWING_TESTS)
    return path


@pytest.fixture(scope="module")
def budgeted(project, run_pytest):
    # The decisions to skip hold however loaded the machine is: a size
    # costs 12 calls (10 rounds, warm-up, calibration) at the upper end of
    # its prediction, at least 4x the last size's median (the scaled rule's
    # exponent q + 1 is at least 2) -- for cpu's 8 and cpu4's 4 at least
    # 48 * 32 ms = 1.54 s -- while what is left is at most 1.8 s minus the
    # sleeps of the sizes before (0.5 s): 1.3 s.  Load only slows the calls
    # (sleeps overshoot, which flattens the local exponent but never brings
    # the upper end below 4x a median that grew too).  The decisions to run
    # leave the overhead per size (set-up, calibration: not sleep) about
    # 0.4 s: cpu's 4 (predicted up to 8 * 8 ms, 0.77 s) after 0.12 s of
    # sleeps; cpu4's 2 (up to 4 * 8 ms, 0.38 s) after 0.1 s.
    return _run(
        run_pytest,
        project,
        "--jax-backend=cpu,cpu4",
        "--jax-backend-platform=cpu4=cpu",
        "--jax-budget=1.8s",
    )


def test_sizes_that_do_not_fit_are_over_budget_points(budgeted):
    proc, data, _ = budgeted
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert check_report(data, "run") == data["benchmarks"]
    assert data["pytest_lyapax"]["schema"] == 5
    timed, points = _sizes(data, "cpu")
    assert timed == {1, 2, 4}
    assert set(points) == {8, 16}
    for size, point in points.items():
        assert point["status"] == "over_budget" and point["budget_s"] == 1.8
        assert point["rule"] == "scaled"
        lo, hi = point["predicted_interval_s"]
        # The true cost per call lies inside the predicted interval.
        assert lo <= UNIT * size**2 <= hi
        assert lo <= point["predicted_s"] <= hi
        assert point["message"].startswith("predicted ")
        assert "not run: budget 1.8 s per series on backend 'cpu'" in point["message"]
        assert point["message"] in proc.stdout  # the skip reason


def test_each_backend_has_its_own_budget(budgeted):
    proc, data, report = budgeted
    timed, points = _sizes(data, "cpu4")
    assert timed == {1, 2}
    assert set(points) == {4, 8, 16}  # size 4 ran on cpu
    # The table's row of size 4 says why cpu4 has no time there.
    summary = (report / "summary.md").read_text()
    for text in (proc.stdout, summary):
        rows = [line for line in text.splitlines() if line.strip("| ").startswith("4 ")]
        assert any("over budget" in row for row in rows), text


def test_reports_list_the_predicted_sizes(budgeted):
    proc, _, report = budgeted
    summary = (report / "summary.md").read_text()
    html = (report / "report.html").read_text()
    assert "sizes not timed" in proc.stdout
    for text in (summary, html):
        assert "over budget" in text
        assert "predicted" in text and "not run: budget 1.8 s" in text


@pytest.mark.slow  # sleeps through every size (about 20 s)
def test_budget_none_runs_every_size(project, run_pytest):
    proc, data, _ = _run(run_pytest, project, "--jax-backend=cpu", "--jax-budget=none")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    timed, points = _sizes(data, "cpu")
    assert timed == set(SIZES) and points == {}


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_a_long_first_call_stops_the_larger_sizes(project, run_pytest):
    # The first call at size 8 sleeps 128 ms > 80 ms: size 8 still runs all
    # its rounds, 16 is not run.  Size 4 sleeps 32 ms: the margin of 48 ms
    # keeps a loaded machine's slower first call below the ceiling.
    proc, data, _ = _run(
        run_pytest,
        project,
        "--jax-backend=cpu",
        "--jax-max-call=80ms",
        "--benchmark-min-rounds=3",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    timed, points = _sizes(data, "cpu")
    assert timed == {1, 2, 4, 8} and set(points) == {16}
    eight = next(b for b in data["benchmarks"] if b["extra_info"].get("size") == 8)
    assert eight["stats"]["rounds"] >= 3  # never cut short
    point = points[16]
    assert point["budget_s"] is None
    assert "first call took" in point["message"] and "at size 8" in point["message"]
    assert "above --jax-max-call 80 ms" in point["message"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--jax-backend=cpu", "--jax-budget=90"], "'90' has no unit"),
        (["--jax-backend=cpu", "--jax-budget=-2min"], "is negative"),
        (["--jax-backend=cpu", "--jax-max-call=3 parsecs"], "is not a duration"),
        (["--jax-budget=2min"], "--jax-budget needs --jax-backend"),
    ],
)
def test_bad_budgets_are_usage_errors(project, run_pytest, args, expected):
    proc, _, _ = _run(run_pytest, project, *args)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert expected in proc.stderr
    if "needs" not in expected:
        assert budget.DURATION_FORMS in proc.stderr


def test_durations_parse_with_units():
    assert budget.parse_duration("90s", "--jax-budget") == 90.0
    assert budget.parse_duration("2min", "--jax-budget") == 120.0
    assert budget.parse_duration("250ms", "--jax-max-call") == 0.25
    assert budget.parse_duration(" None ", "--jax-budget") is None
    assert budget.format_duration(186.0) == "3.1 min"


def test_prediction_rules():
    measured = [budget._Measured(n, 1e-3 * n * n, (), 1e-3 * n * n) for n in (1, 2)]
    one = budget.predict(measured[:1], 4)
    assert one.rule == "scaled" and one.per_call_s == pytest.approx(8e-3)
    assert one.interval_s == pytest.approx((4e-3, 16e-3))  # t r^1 ... t r^2
    two = budget.predict(measured, 4)
    assert two.per_call_s == pytest.approx(16e-3)  # local exponent 2
    assert two.interval_s == pytest.approx((4e-3 * 2**1.5, 32e-3))
    many = [
        budget._Measured(
            n,
            1e-4 + 1e-6 * n**2,
            tuple(1e-4 + 1e-6 * n**2 * (1 + e) for e in (-0.01, 0.0, 0.01)),
            0.0,
        )
        for n in (10, 20, 40, 80, 160)
    ]
    model = budget.predict(many, 320)
    assert model.rule == "cost model"
    lo, hi = model.interval_s
    assert lo <= 1e-4 + 1e-6 * 320**2 <= hi


def test_schema_3_reports_still_load_and_bad_predictions_are_refused():
    old = {"benchmarks": [], "pytest_lyapax": {"schema": 3, "points": []}}
    assert check_report(old, "old") == []
    point = {
        "fullname": "t.py::test[cpu-8]",
        "backend": "cpu",
        "size": 8,
        "status": "over_budget",
        "message": "predicted ...",
        "predicted_s": 0.1,
        "predicted_interval_s": [0.05],
        "rule": "scaled",
    }
    bad = {"benchmarks": [], "pytest_lyapax": {"schema": 4, "points": [point]}}
    with pytest.raises(ReportError, match="predicted_interval_s"):
        check_report(bad, "bad")


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_sizes_of_a_series_run_in_ascending_order(project, run_pytest):
    proc, data, _ = _run(
        run_pytest,
        project,
        "--jax-backend=cpu",
        "--jax-budget=1min",
        "--jax-sizes=4,1,2",
        "--benchmark-min-rounds=1",
        "-p",
        "no:randomly",
        "-v",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = [
        b["extra_info"]["size"] for b in data["benchmarks"] if "grows" in b["fullname"]
    ]
    assert sorted(ran) == [1, 2, 4]
    order = [
        line.split("test_grows[cpu-")[1].split("]")[0]
        for line in proc.stdout.splitlines()
        if "test_grows[cpu-" in line and "PASSED" in line
    ]
    assert order == ["1", "2", "4"], proc.stdout


def test_progress_lines_are_plain_without_a_terminal(budgeted):
    proc, _, _ = budgeted
    lines = [
        line for line in proc.stdout.splitlines() if "pytest-lyapax progress" in line
    ]
    assert "pytest-lyapax progress: cpu: 6 of 6 tests done" in "\n".join(lines)
    assert "pytest-lyapax progress: cpu4: 6 of 6 tests done" in "\n".join(lines)
    assert "\x1b" not in proc.stdout and "\r" not in proc.stdout


def test_merge_and_plot_carry_predicted_points_apart(budgeted, tmp_path):
    _, data, report = budgeted
    merged = tmp_path / "merged.json"
    for args in (
        ["merge", str(report / "benchmark.json"), "-o", str(merged)],
        ["plot", str(merged), "-o", str(tmp_path / "plot.png")],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest_lyapax", *args],
            capture_output=True,
            text=True,
            timeout=timeout_s(120),
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(merged.read_text())
    assert out["pytest_lyapax"]["points"] == data["pytest_lyapax"]["points"]
    # A predicted size is a point, never a timing: no benchmark entry for it.
    timed = {
        (b["extra_info"]["backend"], b["extra_info"]["size"]) for b in out["benchmarks"]
    }
    assert (
        not {(p["backend"], p["size"]) for p in out["pytest_lyapax"]["points"]} & timed
    )
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"


def _flat(*sizes, median=22e-3, compile_s=0.0):
    return budget.Series(
        measured=[budget._Measured(n, median, (), median, compile_s) for n in sizes]
    )


def test_one_measured_size_is_never_extrapolated():
    # A batched call on an accelerator: 22 ms at batch 1, flat until the
    # device fills.  With one size measured the next size runs, whatever a
    # growth assumption would predict; from two flat sizes on, the scaled
    # rule's upper end (r^2) still lets the larger batches run in 60 s.
    limits = budget.Limits(budget_s=60.0)
    options = {"min_rounds": 10, "max_time": 0.5}
    assert budget.decide(_flat(1), 1024, limits, options, "tpu") is None
    assert budget.decide(_flat(1, 16), 128, limits, options, "tpu") is None
    assert budget.decide(_flat(1, 16, 128), 1024, limits, options, "tpu") is None
    # What a flat series predicts: no growth, an upper end of r^2.
    flat = budget.predict(_flat(1, 16).measured, 128)
    assert flat.per_call_s == pytest.approx(22e-3)
    assert flat.interval_s[1] == pytest.approx(22e-3 * 64)


def test_compile_and_run_time_are_budgeted_apart():
    limits = budget.Limits(budget_s=60.0)
    options = {"min_rounds": 10, "max_time": 0.5}
    # Two sizes of 2 ms calls, each compiled for 50 s: the compiles are not
    # run time, and the next 50 s compile still fits its own account.
    series = _flat(8, 16, median=2e-3, compile_s=50.0)
    series.spent_s, series.compile_spent_s = 1.0, 0.0
    assert budget.decide(series, 32, limits, options, "tpu") is None
    # The compile account spent: the size is not run, and says why.
    series.compile_spent_s = 100.0
    point = budget.decide(series, 32, limits, options, "tpu")
    assert point is not None and point["status"] == "over_budget"
    assert (
        "not run: compile budget 60 s per series on backend 'tpu'" in (point["message"])
    )
    assert "--jax-compile-cache" in point["message"]
    assert point["predicted_s"] == pytest.approx(2e-3)  # the calls stay cheap
    # The run account spent: the run time decides, whatever the compiles did.
    series.compile_spent_s, series.spent_s = 0.0, 59.99
    point = budget.decide(series, 32, limits, options, "tpu")
    assert point is not None
    assert "not run: budget 60 s per series on backend 'tpu'" in point["message"]


def _record(total, warmup):
    return {
        "stats": {"median": 2e-3, "data": [2e-3] * 3},
        "extra_info": {"first_call_s": total, "warmup": warmup},
    }


def test_the_compile_part_of_a_warm_up():
    lowered = {"kind": "compile", "first_call_s": 0.5, "compile_s": 59.0}
    assert budget.compile_part(_record(60.0, lowered)) == pytest.approx(59.5)
    called = {"kind": "first_call", "first_call_s": 3.0, "compile_s": 2.0}
    called["trace_lower_s"] = 0.5
    assert budget.compile_part(_record(3.0, called)) == pytest.approx(2.5)
    assert budget.compile_part({"extra_info": {"first_call_s": 1.0}}) is None


def test_a_long_compile_does_not_trip_the_first_call_ceiling():
    from types import SimpleNamespace

    limits = budget.Limits(budget_s=None, max_call_s=30.0)
    config = SimpleNamespace(stash=pytest.Stash())

    def observed(size, total, warmup):
        item = SimpleNamespace(
            nodeid=f"t.py::test[tpu-{size}]",
            callspec=SimpleNamespace(params={"jax_size": size}),
            stash=pytest.Stash(),
            config=config,
        )
        budget.skip_over_budget(item, "tpu", limits)
        budget.observe(item, "tpu", _record(total, warmup), limits)
        return next(iter(budget.series_state(config).values()))

    # A 60 s compile and a 0.5 s call: the ceiling judges the call.
    series = observed(1, 60.5, {"kind": "compile", "first_call_s": 0.5})
    assert not series.stopped
    assert series.measured[0].compile_s == pytest.approx(60.0)
    assert series.measured[0].first_call_s == pytest.approx(0.5)
    assert series.compile_spent_s == pytest.approx(60.0)
    series = observed(2, 40.0, {"kind": "compile", "first_call_s": 35.0})
    assert "first call took 35 s (its compile of 5 s apart) at size 2" in (
        series.stopped
    )


def test_the_cost_model_fits_a_flat_region_before_growth():
    from pytest_lyapax.report import costmodel
    from pytest_lyapax.report.series import Point

    # Launch-bound (22 ms) until the device fills, then linear in the batch.
    def t(n):
        return 22e-3 + 22e-3 * n / 1024

    points = [
        Point(n, t(n), t(n), t(n), tuple(t(n) * (1 + e) for e in (-0.01, 0, 0.01)))
        for n in (1, 16, 128, 1024, 8192)
    ]
    fit = costmodel.fit_series("tpu", points, "sweep")
    assert fit.fits and fit.p == pytest.approx(1.0, abs=0.05)
    assert fit.a == pytest.approx(22e-3, rel=0.05)
    flat = budget.predict(
        [budget._Measured(p.size, p.median, p.samples, p.median) for p in points[:4]],
        8192,
    )
    assert flat.interval_s[0] <= t(8192) <= flat.interval_s[1]
