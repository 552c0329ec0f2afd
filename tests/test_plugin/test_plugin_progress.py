"""The controller's progress lines and the workers' estimate of the time left.

The display class is driven directly with a fake terminal file (a TTY or
not) under pytest's own ``TerminalWriter``; one run on a pseudo-terminal
checks the live bars end to end.  The time left is checked against a cost
model known exactly (sleep-free: the measured sizes are made up).
"""

import io
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from _pytest.terminal import TerminalWriter
from support.deadlines import timeout_s

from pytest_lyapax.run import budget, progress, timeleft
from pytest_lyapax.run.items import LABEL_ATTR

KEY = ("t.py::test_grows", "", "cpu")
OPTIONS = {"min_rounds": 10, "max_time": 0.0}


def _series(*sizes, spent=0.0, per=1e-3):
    """A series whose sizes took ``per * n**2`` s per call, and as long
    again to compile."""
    measured = [
        budget._Measured(n, per * n * n, (), per * n * n, per * n * n) for n in sizes
    ]
    return budget.Series(measured=measured, spent_s=spent)


def test_time_left_from_the_cost_model_and_the_budget():
    series = {KEY: _series(1, 2, spent=0.1)}
    # The scaled rule from sizes 1 and 2 (local exponent 2): 16 ms per call
    # at 4, 64 ms at 8; each size costs the series' largest compile (4 ms,
    # from size 2) and 12 calls.
    four, eight = 4e-3 + 12 * 16e-3, 4e-3 + 12 * 64e-3
    memo = {}
    unbounded = timeleft.estimate([(KEY, 4), (KEY, 8)], 0, series, [], None, OPTIONS)
    assert unbounded == pytest.approx(four + eight)
    again = timeleft.estimate([(KEY, 4), (KEY, 8)], 0, series, [], None, OPTIONS, memo)
    assert again == unbounded and memo[(KEY, 8)] == (2, pytest.approx(eight - 4e-3))
    # A budget of 0.5 s (0.4 s of run time left): size 4 fits, 8 runs for
    # what is left; the compiles have their own account (0.5 s unspent).
    left = timeleft.estimate([(KEY, 4), (KEY, 8)], 0, series, [], 0.5, OPTIONS)
    assert left == pytest.approx(four + (0.4 - 12 * 16e-3) + 4e-3)
    # Three other tests at the mean of the walls done without a prediction
    # (the median, 0.2 s, would under-state a sum of skewed walls); a series
    # not started yet counts as one of them.
    other = ("t.py::test_other", "", "cpu")
    mixed = timeleft.estimate(
        [(KEY, 4), (other, 1)], 2, series, [0.1, 0.2, 0.9], None, OPTIONS
    )
    assert mixed == pytest.approx(four + 3 * 0.4)
    assert timeleft.estimate([], 1, series, [], None, OPTIONS) is None
    # A series stopped by --jax-max-call costs nothing more.
    series[KEY].stopped, series[KEY].stopped_at = "first call took ...", 2
    assert timeleft.estimate([(KEY, 4)], 0, series, [], None, OPTIONS) == 0.0


def test_time_left_follows_the_fitted_model_with_enough_sizes():
    series = {KEY: _series(10, 20, 40, 80, per=1e-6)}
    for m in series[KEY].measured:  # rounds, so that the model has a spread
        m.samples = tuple(m.median * (1 + e) for e in (-0.01, 0.0, 0.01))
    left = timeleft.estimate([(KEY, 160)], 0, series, [], None, OPTIONS)
    predicted = budget.predict(series[KEY].measured, 160, KEY[0])
    assert predicted.rule == budget.COST_MODEL
    compile_s = 1e-6 * 80**2  # the largest compile, at 80
    assert left == pytest.approx(compile_s + 12 * predicted.per_call_s)
    assert predicted.per_call_s == pytest.approx(1e-6 * 160**2, rel=0.05)


class _FakeFile(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def _display(tty, monkeypatch, **fields):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("LINES", "30")
    file = _FakeFile(tty)
    tw = TerminalWriter(file)
    lines = []

    def write_line(text):
        tw.line(text)
        lines.append(text)

    reporter = SimpleNamespace(_tw=tw, isatty=tty, write_line=write_line)
    config = SimpleNamespace(
        pluginmanager=SimpleNamespace(get_plugin=lambda name: reporter),
        get_verbosity=lambda: 0,
    )
    session = SimpleNamespace(
        labels=("cpu", "gpu"),
        order=("cpu", "gpu"),
        expected={"cpu": 2, "gpu": 1},
        worker_labels={},
        test_labels={},
    )
    for name, value in fields.items():
        setattr(session, name, value)
    now = [0.0]
    shown = progress.BackendProgress(config, session, clock=lambda: now[0])
    return shown, tw, file, now


def _report(label, left):
    report = SimpleNamespace(when="teardown")
    setattr(report, LABEL_ATTR, label)
    setattr(report, timeleft.LEFT_ATTR, left)
    return report


def _drive(shown, tw, now):
    tw.write("t.py ")  # pytest's own line, before the bars
    shown.pytest_runtest_logstart("t.py::test_a[cpu-8]", None)
    tw.write(".")
    now[0] = 5.0
    shown.pytest_runtest_logreport(_report("cpu", 65.0))
    now[0] = 20.0
    shown.pytest_runtest_logstart("t.py::test_a[cpu-16]", None)


def test_live_bars_on_a_terminal_stay_below_pytests_line(monkeypatch):
    shown, tw, file, now = _display(True, monkeypatch)
    _drive(shown, tw, now)
    out = file.getvalue()
    line = "cpu: test 2 of 2, test_a [cpu-16], 20 s elapsed, ~50 s left"
    assert line in out  # counted down from the worker's 65 s, 15 s ago
    assert "|######      | " + line in out  # a tqdm bar (1 of 2), ASCII here
    assert "pytest-lyapax progress" not in out  # no plain lines
    # After each drawing pytest's line is written again (the cursor is put
    # back after its last dot); the next write of pytest clears the bars.
    assert out.endswith("\r" + "t.py .")
    tw.write(".")
    assert file.getvalue().endswith(" " * len(line) + "\r\x1b[A\rt.py ..")
    shown.pytest_runtest_logreport(_report("cpu", 0.0))
    shown.pytest_runtest_logstart("t.py::test_b[gpu]", None)
    assert "gpu: test 1 of 1, test_b [gpu]" in file.getvalue()
    assert len(shown.bars) == 2
    shown.pytest_sessionfinish()
    assert tw._file is file and not shown.bars  # pytest's own file again
    assert file.getvalue().endswith("\rt.py ..")


def test_plain_lines_without_a_terminal(monkeypatch):
    shown, tw, file, now = _display(False, monkeypatch)
    _drive(shown, tw, now)
    shown.pytest_runtest_logreport(_report("cpu", 0.0))
    out = file.getvalue()
    assert "\x1b" not in out and "\r" not in out
    assert out.splitlines() == [
        "t.py ",
        "pytest-lyapax progress: cpu: test 1 of 2, test_a [cpu-8], 0 s elapsed",
        ".",
        "pytest-lyapax progress: cpu: 2 of 2 tests done, 20 s elapsed",
    ]
    # Every PLAIN_EVERY_S seconds a backend's line again, with the time left.
    now[0] = 100.0
    shown.pytest_runtest_logstart("t.py::test_b[gpu]", None)
    shown.pytest_runtest_logreport(_report("gpu", 40.0))
    assert shown.line("gpu", 130.0) == "gpu: 1 of 1 tests done, 30 s elapsed"
    shown.backends["gpu"].ended = False
    assert shown.line("gpu", 130.0).endswith(", 30 s elapsed, ~10 s left")


def test_each_line_names_the_worker_that_runs_the_test(monkeypatch):
    # Device-count labels in front, one of them with no test of its own, and
    # the backends' tests interleaved: each test is shown under the label
    # whose worker was handed it.
    labels = ("cpu_1dev", "cpu", "tpu")
    shown, tw, file, now = _display(
        False,
        monkeypatch,
        labels=labels,
        order=labels,
        expected={"cpu_1dev": 0, "cpu": 1, "tpu": 1},
        test_labels={
            "t.py::test_kuramoto_dense[cpu-20]": "cpu",
            "t.py::test_kuramoto_dense[tpu-20]": "tpu",
        },
    )
    shown.pytest_runtest_logstart("t.py::test_kuramoto_dense[cpu-20]", None)
    shown.pytest_runtest_logstart("t.py::test_kuramoto_dense[tpu-20]", None)
    lines = [line for line in file.getvalue().splitlines() if line]
    assert lines == [
        "pytest-lyapax progress: cpu: test 1 of 1, test_kuramoto_dense [cpu-20], "
        "0 s elapsed",
        "pytest-lyapax progress: tpu: test 1 of 1, test_kuramoto_dense [tpu-20], "
        "0 s elapsed",
    ]
    assert shown.backends["cpu_1dev"].started is None


def test_a_run_in_one_process_skips_labels_without_tests(monkeypatch):
    labels = ("cpu_1dev", "cpu")
    shown, tw, file, now = _display(
        False, monkeypatch, labels=labels, order=labels, expected={"cpu": 1}
    )
    shown.pytest_runtest_logstart("t.py::test_a[cpu]", None)
    assert "cpu: test 1 of 1, test_a [cpu]" in file.getvalue()
    assert "cpu_1dev" not in file.getvalue()


def test_quiet_and_ci_get_plain_lines(monkeypatch):
    config = SimpleNamespace(get_verbosity=lambda: -1)
    assert not progress.live_wanted(config, True)
    config = SimpleNamespace(get_verbosity=lambda: 0)
    monkeypatch.setenv("CI", "1")
    assert not progress.live_wanted(config, True)
    monkeypatch.delenv("CI")
    assert progress.live_wanted(config, True)
    assert not progress.live_wanted(config, False)


GROWING = """
import time

import pytest


@pytest.mark.jax_sizes(1, 2, 4)
def test_grows(benchmark, jax_backend, jax_size):
    benchmark(lambda: time.sleep(1e-3 * jax_size))


def test_plain():
    pass
"""


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_progress_is_live_on_a_terminal(tmp_path, clean_environment):
    import pty

    (tmp_path / "test_growing.py").write_text(GROWING)
    env = {k: v for k, v in clean_environment.items() if k != "CI"}
    env.update(COLUMNS="120", LINES="30")
    leader, follower = pty.openpty()
    args = ["-p", "no:cacheprovider", "--benchmark-max-time=0", "--jax-backend=cpu"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args, f"--jax-report-dir={tmp_path}/r"],
        cwd=tmp_path,
        env=env,
        stdout=follower,
        stderr=follower,
        close_fds=True,
    )
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    assert proc.wait(timeout=timeout_s(300)) == 0, out.decode(errors="replace")
    os.close(leader)
    text = out.decode(errors="replace")
    assert "| cpu: test 1 of 4, test_grows [cpu-1]" in text, text
    # After size 1 and 2: a prediction for 4, the plain test at the mean.
    assert "cpu: test 3 of 4, test_grows [cpu-4]" in text, text
    assert ", ~" in text and " s left" in text
    assert "pytest-lyapax progress:" not in text  # no plain lines
    assert "4 passed" in text


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_a_run_without_the_terminal_plugin(tmp_path, clean_environment):
    # No terminal reporter: no progress lines, and the outcomes are still
    # counted (pytest's own categories, which the terminal plugin gives).
    (tmp_path / "test_growing.py").write_text(GROWING)
    args = ["-p", "no:terminal", "-p", "no:cacheprovider", "--jax-backend=cpu"]
    args += ["--benchmark-max-time=0", "--benchmark-min-rounds=1"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--jax-sizes=1", "--jax-report-dir=r"],
        cwd=tmp_path,
        env=clean_environment,
        capture_output=True,
        text=True,
        timeout=timeout_s(300),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "progress" not in proc.stdout + proc.stderr
    data = json.loads((tmp_path / "r" / "benchmark.json").read_text())
    assert data["pytest_lyapax"]["backends"][0]["outcomes"] == {"passed": 2}
