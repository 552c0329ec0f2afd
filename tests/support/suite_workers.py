"""How many worker processes a run of this suite gets (``tests/conftest.py``).

Each of the suite's two runs of the whole folder (``python -m pytest`` and
``python -m pytest -m slow``) spreads its test files over pytest-xdist
workers, one per CPU: measured on 2 cores in docs/testing.md, "The two test
runs". Anything narrower runs in one process.
``LYAPAX_TEST_WORKERS=N`` sets the count for any run (0: one process), and a
``-n``/``--dist`` of the run's own always wins, as does ``--jax-backend``
(the plugin's workers, one per backend).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

#: Environment variable that sets the number of worker processes (0: one).
WORKERS_ENV = "LYAPAX_TEST_WORKERS"
#: More workers than this add start-up and memory for no gain: the suite's
#: files are the unit of work and its longest file bounds the wall time.
MAX_WORKERS = 8
TESTS = Path(__file__).parent.parent.resolve()
#: The marker expressions of the suite's two runs (``addopts`` gives the first).
RUNS = ("not slow", "slow")


def _cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def default_workers(config: Any, environ: Any = os.environ) -> int:
    """Workers for the run of ``config``: ``LYAPAX_TEST_WORKERS`` if set, else
    one per CPU (at most :data:`MAX_WORKERS`) for the plain or the slow run
    of the whole folder, else 0. Raises ``pytest.UsageError`` for a bad variable."""
    raw = environ.get(WORKERS_ENV)
    if raw is not None:
        value = int(raw) if raw.strip().isdigit() else -1
        if value < 0:
            raise pytest.UsageError(
                f"{WORKERS_ENV}={raw!r}: expected a whole number of worker "
                "processes >= 0 (0 runs the suite in one process)"
            )
        return value
    opt = config.option
    whole = bool(config.args) and all(Path(a).resolve() == TESTS for a in config.args)
    either_run = opt.markexpr in RUNS
    if not (whole and either_run) or opt.usepdb or opt.collectonly:
        return 0
    cpus = _cpus()
    return min(cpus, MAX_WORKERS) if cpus >= 2 else 0


def apply_default_workers(config: Any, environ: Any = os.environ) -> None:
    """Give ``config`` :func:`default_workers` processes, one test file each
    at a time (``--dist loadfile``: a file's module-scoped compiled programs
    are built once), unless the run is a worker, has no pytest-xdist, chose
    its own ``-n``/``--dist``/``--tx``, or runs per backend
    (``--jax-backend``: pytest_lyapax then starts one worker per backend)."""
    opt = config.option
    if hasattr(config, "workerinput"):
        _quiet_benchmarks_in_worker(opt)
        return
    if (
        not config.pluginmanager.hasplugin("xdist")
        or opt.numprocesses is not None
        or opt.dist != "no"
        or opt.tx
        or getattr(opt, "jax_backend", None)
    ):
        return
    workers = default_workers(config, environ)
    if workers > 0:
        opt.numprocesses = workers
        opt.dist = "loadfile"
        if hasattr(opt, "benchmark_disable"):
            # pytest-benchmark turns itself off under workers anyway; said so
            # here once instead of warned by every process.
            opt.benchmark_disable = True


def _quiet_benchmarks_in_worker(opt: Any) -> None:
    """In a worker of the suite's own run, turn pytest-benchmark off before it
    warns that it does so (a worker parses the run's arguments again, so the
    controller's choice does not reach it). Not in the plugin's per-backend
    workers (``--jax-backend``), which measure."""
    if hasattr(opt, "benchmark_disable") and not getattr(opt, "jax_backend", None):
        opt.benchmark_disable = True
