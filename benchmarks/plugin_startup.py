"""Start-up cost of pytest-lyapax: a 1-test suite, plain pytest vs two backends.

Runs, alternately in this one process's children, ``pytest`` on a suite with
one trivial test (plain) and the same with
``--jax-backend=cpu,cpu2 --jax-backend-platform=cpu2=cpu`` (two backend
workers, one after the other), and prints wall times side by side: min and
median over the repeats, and the ratio of the medians.  Also times the
bare ``import jax`` that each backend's worker pays, for scale.

    python benchmarks/plugin_startup.py [--repeats 5] [--json OUT]
        [--baseline-path DIR]   # also time the plugin found in DIR (e.g. an
                                # older checkout's tree), side by side
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUITE = "def test_one():\n    assert 1 + 1 == 2\n"
PLUGIN = ["--jax-backend=cpu,cpu2", "--jax-backend-platform=cpu2=cpu"]


def _time(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return elapsed


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
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")

    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("JAX_PLATFORMS", None)
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    runs: dict[str, list[float]] = {"plain": [], "plugin": [], "import jax": []}
    baseline_env = None
    if args.baseline_path is not None:
        runs["baseline plugin"] = []
        path = str(args.baseline_path.resolve())
        baseline_env = dict(
            env, PYTHONPATH=os.pathsep.join([path, env.get("PYTHONPATH", "")])
        )
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp)
        (suite / "test_one.py").write_text(SUITE)
        for _ in range(args.repeats):  # alternate so that load drifts hit both
            runs["plain"].append(_time(pytest_cmd, suite, env))
            runs["plugin"].append(_time(pytest_cmd + PLUGIN, suite, env))
            runs["import jax"].append(
                _time([sys.executable, "-c", "import jax"], suite, env)
            )
            if baseline_env is not None:
                runs["baseline plugin"].append(
                    _time(pytest_cmd + PLUGIN, suite, baseline_env)
                )
                shutil.rmtree(suite / "lyapax-report", ignore_errors=True)
        assert not (suite / "lyapax-report").exists(), "a run without benchmarks wrote"

    print(f"1-test suite, {args.repeats} repeat(s), wall time per pytest run")
    print(f"{'run':<16} {'min (s)':>8} {'median (s)':>11}")
    for name, times in runs.items():
        print(f"{name:<16} {min(times):8.2f} {statistics.median(times):11.2f}")
    ratio = statistics.median(runs["plugin"]) / statistics.median(runs["plain"])
    print(f"plugin / plain (medians): {ratio:.2f}x")
    if args.json is not None:
        args.json.write_text(json.dumps({"runs": runs, "ratio": ratio}, indent=2))


if __name__ == "__main__":
    main()
