"""A run ended by SIGTERM (``timeout``, a scheduler, a CI runner) still
writes the report of what it measured (run/stopsignal.py)."""

import json
import signal
import subprocess
import sys

import pytest
from support.deadlines import timeout_s, wait_until

from pytest_lyapax.run import stopsignal

SUITE = """
import pathlib, time
import jax.numpy as jnp

def test_a(benchmark, jax_backend):
    benchmark(lambda: jnp.ones(3).sum().block_until_ready())

def test_b(jax_backend):
    pathlib.Path("started_b").write_text("")
    time.sleep(600)
"""


@pytest.mark.slow
def test_a_run_ended_by_sigterm_writes_the_report_of_what_finished(
    tmp_path, clean_environment
):
    (tmp_path / "test_stop.py").write_text(SUITE)
    report = tmp_path / "r"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--benchmark-max-time=0",
            "--jax-backend=cpu",
            f"--jax-report-dir={report}",
        ],
        cwd=tmp_path,
        env=clean_environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_until((tmp_path / "started_b").exists, 300, "test_b to start")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=timeout_s(120))
    finally:
        proc.kill()
    assert proc.returncode == 2, out  # interrupted, as after a Ctrl-C
    names = [
        b["name"]
        for b in json.loads((report / "benchmark.json").read_text())["benchmarks"]
    ]
    assert names == ["test_a[cpu]"], out


def test_a_handler_of_the_user_is_left_alone(monkeypatch):
    cleanups = []
    config = type("C", (), {"add_cleanup": staticmethod(cleanups.append)})()
    mine = lambda *_: None  # noqa: E731
    previous = signal.signal(signal.SIGTERM, mine)
    try:
        assert stopsignal.install(config) is False
        assert signal.getsignal(signal.SIGTERM) is mine and not cleanups
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        assert stopsignal.install(config) is True
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            signal.raise_signal(signal.SIGTERM)
        # GNU timeout signals the child and then its process group: the
        # second SIGTERM must not interrupt the handling of the first.
        signal.raise_signal(signal.SIGTERM)
        cleanups.pop()()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_sigterm_while_the_reports_are_written_does_not_interrupt_them(capfd):
    # On the TPU machine a SIGTERM from `timeout` arrived while the figure was
    # drawn and stopped it half written: the run was ending anyway.
    cleanups = []
    config = type("C", (), {"add_cleanup": staticmethod(cleanups.append)})()
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with stopsignal.holding():  # no handler of ours: nothing to hold
            pass
        assert stopsignal.install(config) is True
        with stopsignal.holding():
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGTERM)
        assert "SIGTERM while writing the reports" in capfd.readouterr().err
        cleanups.pop()()
        # Held only within the block: a new run's handler interrupts again.
        assert stopsignal.install(config) is True
        with stopsignal.holding():
            pass
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            signal.raise_signal(signal.SIGTERM)
        cleanups.pop()()
    finally:
        signal.signal(signal.SIGTERM, previous)
