"""Machines that allow no IP socket (run/sandbox.py, run/turns.py): the plugin
runs there with interleaved rounds, and where the turns' unix socket cannot be
made either, it says so in one line and runs the backends one after another."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.deadlines import timeout_s

from pytest_lyapax.run import sandbox

ROOT = Path(__file__).resolve().parents[2]

# Made to look like the sandbox of the lent TPU machine: every IP socket,
# loopback too, fails with errno 97; unix sockets and pipes work.  With
# NO_UNIX=1 in the environment, unix sockets fail as well.
SITECUSTOMIZE = """
import os
import socket

_FORBIDDEN = {socket.AF_INET, socket.AF_INET6}
if os.environ.get("NO_UNIX") == "1":
    _FORBIDDEN.add(socket.AF_UNIX)


class _Sandboxed(socket.socket):
    def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
        asked = socket.AF_INET if family == -1 and fileno is None else family
        if fileno is None and asked in _FORBIDDEN:
            raise OSError(97, "Address family not supported by protocol")
        super().__init__(family, type, proto, fileno)


socket.socket = _Sandboxed
"""

BENCH = """
import jax
import jax.numpy as jnp
import pytest

@pytest.mark.jax_sizes(64, 128)
def test_work(benchmark, jax_backend, jax_size):
    x = jnp.linspace(0.0, 1.0, jax_size)
    benchmark(jax.jit(lambda x: jnp.sum(jnp.sin(x))), x)
"""

TWO_LABELS = (
    "--jax-backend=cpu,cpu2",
    "--jax-backend-platform=cpu2=cpu",
    "--benchmark-max-time=0.05",
    "--jax-no-peaks",
    "--jax-no-extras",
    "-p",
    "no:cacheprovider",
)


def _sandboxed(env: dict[str, str], folder: Path, *, unix: bool = True):
    """``env`` with the sitecustomize first on PYTHONPATH (every process the
    run starts inherits it)."""
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    paths = [str(folder), str(ROOT), env.get("PYTHONPATH", "")]
    return {
        **env,
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "NO_UNIX": "0" if unix else "1",
    }


def _run(cwd: Path, env: dict[str, str], *args: str):
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s(300),
    )


def test_the_sitecustomize_forbids_ip_sockets_only(tmp_path, clean_environment):
    env = _sandboxed(clean_environment, tmp_path / "site")
    code = (
        "import socket\n"
        "a, b = socket.socketpair()\n"
        "try:\n"
        "    socket.create_server(('127.0.0.1', 0))\n"
        "except OSError as e:\n"
        "    print('refused', e.errno)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert proc.stdout.strip() == "refused 97", proc.stderr


@pytest.mark.needs_ip_socket(
    "asserts that this machine allows one before it refuses it"
)
def test_ip_sockets_allowed_says_why_not(monkeypatch):
    assert sandbox.ip_sockets_allowed() is None

    def refuse(*args, **kwargs):
        raise OSError(97, "Address family not supported by protocol")

    monkeypatch.setattr(sandbox.socket, "socket", refuse)
    assert "Address family not supported" in sandbox.ip_sockets_allowed()


def test_without_ip_sockets_the_rounds_still_interleave(pytester, clean_environment):
    pytester.makepyfile(test_work=BENCH)
    report = pytester.path / "r"
    env = _sandboxed(clean_environment, pytester.path / "site")
    proc = _run(pytester.path, env, *TWO_LABELS, f"--jax-report-dir={report}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "INTERNALERROR" not in out
    assert "rounds not interleaved" not in out
    records = json.loads((report / "benchmark.json").read_text())["benchmarks"]
    turns = {}
    for record in records:
        info = record["extra_info"]
        assert info["rounds_mode"] == "interleaved"
        turns.setdefault(info["backend"], set()).update(info["turns"])
    # Every timed round was run holding a turn the server granted (0: none),
    # and the two labels never held the same turn.
    assert set(turns) == {"cpu", "cpu2"}
    assert 0 not in turns["cpu"] | turns["cpu2"]
    assert not turns["cpu"] & turns["cpu2"]
    if importlib.util.find_spec("pytest_rerunfailures") is not None:
        # It opens a TCP server under xdist: dropped, with one line.
        assert "pytest-lyapax: rerunfailures disabled" in out


def test_without_unix_sockets_either_the_backends_run_one_after_another(
    pytester, clean_environment
):
    pytester.makepyfile(test_work=BENCH)
    report = pytester.path / "r"
    env = _sandboxed(clean_environment, pytester.path / "site", unix=False)
    proc = _run(pytester.path, env, *TWO_LABELS, f"--jax-report-dir={report}")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "INTERNALERROR" not in out
    lines = [line for line in out.splitlines() if "rounds not interleaved" in line]
    assert len(lines) == 1, out
    assert "one after another" in lines[0]
    records = json.loads((report / "benchmark.json").read_text())["benchmarks"]
    assert {r["extra_info"]["rounds_mode"] for r in records} == {"sequential"}


@pytest.mark.slow
def test_the_small_systems_of_the_main_job_run_interleaved_without_ip_sockets(
    tmp_path, clean_environment
):
    report = tmp_path / "r"
    env = _sandboxed(clean_environment, tmp_path / "site")
    proc = _run(
        ROOT,
        env,
        "perf_tests/test_small_systems.py",
        "--jax-backend=cpu,cpu2",
        "--jax-backend-platform",
        "cpu2=cpu",
        f"--jax-report-dir={report}",
        "-p",
        "no:cacheprovider",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "INTERNALERROR" not in out
    records = json.loads((report / "benchmark.json").read_text())["benchmarks"]
    assert records
    assert {r["extra_info"]["rounds_mode"] for r in records} == {"interleaved"}
    assert all(0 not in r["extra_info"].get("turns", [1]) for r in records)
