"""Start-up cost of pytest-lyapax: a 1-test suite, plain pytest vs two backends.

Runs, alternately in this one process's children, ``pytest`` on a suite with
one trivial test (plain) and the same with
``--jax-backend=cpu,cpu2 --jax-backend-platform=cpu2=cpu`` (two backend
workers), and prints wall times side by side: min and median over the
repeats, the ratio of the medians, and the CPU seconds (user + system, the
whole process tree) of each run -- on a shared 2-core machine the CPU time is
the steadier of the two.  Also times:

* the same pair on a suite whose module imports JAX, as real JAX suites do
  (each backend's worker then starts JAX; a suite that never imports it
  does not make the workers start it);
* the bare ``import jax`` that such a worker pays, for scale.

    python benchmarks/plugin_startup.py [--repeats 5] [--json OUT]
        [--baseline-path DIR]   # also time the plugin found in DIR (e.g. an
                                # older checkout's tree), side by side
        [--breakdown]           # also time the phases of the plugin run
                                # (extra runs with a hook-timing conftest)
        [--bytecode-cache]      # let Python cache compiled modules, as a
                                # default install does (a CI image may set
                                # PYTHONDONTWRITEBYTECODE=1: every process
                                # then recompiles every module it imports)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUITE = "def test_one():\n    assert 1 + 1 == 2\n"
JAX_SUITE = "import jax\n\n\n" + SUITE
PLUGIN = ["--jax-backend=cpu,cpu2", "--jax-backend-platform=cpu2=cpu"]

# For --breakdown: every process of a run appends "<time> <who> <event>" to
# $STARTUP_TIMELINE; the controller's events are what the phases are read from.
TIMELINE_CONFTEST = """
import os
import time

import pytest

WHO = os.environ.get("PYTEST_XDIST_WORKER", "controller")


def _log(event):
    with open(os.environ["STARTUP_TIMELINE"], "a") as fh:
        fh.write(f"{time.time():.4f} {WHO} {event}\\n")


_log("conftest")


def pytest_testnodeready(node):
    _log("worker-ready")


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    _log("collected")


def pytest_testnodedown(node, error):
    _log("worker-finished")


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    _log("unconfigured")
"""

# Phase boundaries (event, whose: the last one of them counts), in run order.
PHASES = [
    ("controller loaded (pytest, plugins, conftest)", "conftest", "controller"),
    ("workers started (interpreter, pytest, plugins)", "worker-ready", "controller"),
    ("workers collected (and started JAX if imported)", "collected", "workers"),
    ("last worker reported finished", "worker-finished", "controller"),
    ("controller unconfigured (summary, workers exited)", "unconfigured", "controller"),
]


def _time(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Run one command; return its wall time and the CPU seconds of its tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def _phases(log: Path, start: float, end: float) -> dict[str, float]:
    """Seconds from the run's start to each phase boundary, and to its exit."""
    events: dict[tuple[str, str], float] = {}
    for line in log.read_text().splitlines():
        stamp, who, event = line.split()
        whose = "controller" if who == "controller" else "workers"
        key = (event, whose)
        events[key] = max(events.get(key, 0.0), float(stamp))
    out = {name: events[(event, whose)] - start for name, event, whose in PHASES}
    out["process exited"] = end - start
    return out


def _breakdown(
    pytest_cmd: list[str], suite: Path, env: dict[str, str], repeats: int
) -> dict[str, list[float]]:
    """Run the plugin on a copy of ``suite`` with the timing conftest."""
    timed = suite.parent / "timeline"
    shutil.copytree(suite, timed)
    (timed / "conftest.py").write_text(TIMELINE_CONFTEST)
    log = timed / "timeline.log"
    phases: dict[str, list[float]] = {}
    for _ in range(repeats):
        log.unlink(missing_ok=True)
        start = time.time()
        subprocess.run(
            pytest_cmd + PLUGIN,
            cwd=timed,
            env=dict(env, STARTUP_TIMELINE=str(log)),
            capture_output=True,
            check=True,
        )
        for name, seconds in _phases(log, start, time.time()).items():
            phases.setdefault(name, []).append(seconds)
    return phases


def _bytecode_mode(env: dict[str, str]) -> str:
    if env.get("PYTHONDONTWRITEBYTECODE"):
        return "not written (PYTHONDONTWRITEBYTECODE is set)"
    return "as this environment caches it"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="write results here")
    parser.add_argument(
        "--baseline-path",
        type=Path,
        default=None,
        help="directory holding another pytest_lyapax to time alongside",
    )
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="also time the phases of the plugin run (extra runs)",
    )
    parser.add_argument(
        "--bytecode-cache",
        action="store_true",
        help="drop PYTHONDONTWRITEBYTECODE and cache bytecode in a temporary "
        "PYTHONPYCACHEPREFIX (warmed before timing)",
    )
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("JAX_PLATFORMS", None)
    cache_dir = None
    if args.bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        cache_dir = tempfile.TemporaryDirectory()
        env["PYTHONPYCACHEPREFIX"] = cache_dir.name
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    envs = {"": env}
    if args.baseline_path is not None:
        path = str(args.baseline_path.resolve())
        envs["baseline "] = dict(
            env, PYTHONPATH=os.pathsep.join([path, env.get("PYTHONPATH", "")])
        )
    runs: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}

    def timed(name: str, cmd: list[str], cwd: Path, run_env: dict[str, str]) -> None:
        wall, seconds = _time(cmd, cwd, run_env)
        runs.setdefault(name, []).append(wall)
        cpu.setdefault(name, []).append(seconds)
        shutil.rmtree(cwd / "lyapax-report", ignore_errors=True)

    with tempfile.TemporaryDirectory() as tmp:
        suites = {"": Path(tmp, "suite"), " (jax suite)": Path(tmp, "jax_suite")}
        for suite, text in zip(suites.values(), (SUITE, JAX_SUITE), strict=True):
            suite.mkdir()
            (suite / "test_one.py").write_text(text)
        if cache_dir is not None:  # fill the bytecode cache, untimed
            for suite in suites.values():
                for run_env in envs.values():
                    _time(pytest_cmd + PLUGIN, suite, run_env)
        for _ in range(args.repeats):  # alternate so that load drifts hit all
            for kind, suite in suites.items():
                timed(f"plain{kind}", pytest_cmd, suite, env)
                for which, run_env in envs.items():
                    timed(f"{which}plugin{kind}", pytest_cmd + PLUGIN, suite, run_env)
            timed("import jax", [sys.executable, "-c", "import jax"], suites[""], env)
        for suite in suites.values():
            assert not (suite / "lyapax-report").exists(), "a run without benchmarks"
        phases = (
            _breakdown(pytest_cmd, suites[""], env, args.repeats)
            if args.breakdown
            else {}
        )

    if cache_dir is not None:
        cache_dir.cleanup()
    bytecode = "cached" if args.bytecode_cache else _bytecode_mode(env)
    print(
        f"1-test suite, {args.repeats} repeat(s), per pytest run; bytecode {bytecode}"
    )
    print(f"{'run':<30} {'min (s)':>8} {'median (s)':>11} {'CPU median (s)':>15}")
    for name, times in runs.items():
        print(
            f"{name:<30} {min(times):8.2f} {statistics.median(times):11.2f} "
            f"{statistics.median(cpu[name]):15.2f}"
        )
    ratio = statistics.median(runs["plugin"]) / statistics.median(runs["plain"])
    print(f"plugin / plain (medians): {ratio:.2f}x")
    if phases:
        print("\nplugin run, seconds from its start (median over the repeats):")
        for name, times in phases.items():
            print(f"  {name:<52} {statistics.median(times):6.2f}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {"runs": runs, "cpu": cpu, "ratio": ratio, "phases": phases}, indent=2
            )
        )


if __name__ == "__main__":
    main()
