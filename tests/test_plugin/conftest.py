"""Fixtures for the pytest_lyapax plugin tests."""

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.deadlines import timeout_s

pytest_plugins = ["pytester"]

# Variables that an enclosing run (for instance ``pytest tests --jax-backend=cpu``,
# which runs these tests inside a backend worker) would leak into the pytest
# runs these tests start.
LEAKY_VARIABLES = (
    "JAX_PLATFORMS",
    "PYTEST_LYAPAX_LABEL",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
    "PYTEST_ADDOPTS",
    "PYTEST_LYAPAX_AB_ROOT",
    "PYTEST_LYAPAX_AB_NAMES",
)


@pytest.fixture(scope="session")
def clean_environment() -> dict[str, str]:
    """The current environment without the variables of an enclosing run."""
    return {k: v for k, v in os.environ.items() if k not in LEAKY_VARIABLES}


RunPytest = Callable[..., tuple[subprocess.CompletedProcess[str], Any]]


@pytest.fixture(scope="session")
def run_pytest(clean_environment: dict[str, str]) -> RunPytest:
    """``run(path, report, *args)``: ``python -m pytest *args`` in a fresh
    process in ``path`` with the clean environment (``timeout_s(300)`` s at
    most); returns the finished process and ``report/benchmark.json`` as
    read (None when the run wrote none). A fresh process because a JAX
    backend is fixed per process."""

    def run(path: Path, report: Path, *args: str):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *args],
            cwd=path,
            env=clean_environment,
            capture_output=True,
            text=True,
            timeout=timeout_s(300),
        )
        data = report / "benchmark.json"
        return proc, json.loads(data.read_text()) if data.exists() else None

    return run


@pytest.fixture(autouse=True)
def _isolated_from_enclosing_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LEAKY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def busy_cpus() -> Any:
    """Two busy-loop processes for the test's duration, as on a busy machine
    (each ends by itself after 10 minutes at the latest)."""
    loop = (
        "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end: pass"
    )
    procs = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(2)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
