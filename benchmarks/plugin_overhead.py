"""Cost of pytest-lyapax's untimed extras on the main job: with vs ``--jax-no-extras``.

Runs the main job, ``pytest perf_tests --jax-backend=cpu``, alternately with
the extra measurements (warm-up split, memory, dispatch/device split,
counters, argument location, the roofline's work per call and the machine's
peaks, the machine state and stability judgement of the rounds: the
default) and without them (``--jax-no-extras``), each run in a fresh process
with its own report directory, and prints the wall time and the CPU seconds
(user + system, whole process tree) of each run and the ratio of the
medians.  It also checks that the extras are in every benchmark of the
default run and in none of the other, so the comparison is what it says.
The extras make no extra call: the dispatch/device split is read inside the
timed calls (three clock reads each).

    python benchmarks/plugin_overhead.py [--repeats 1] [--quick] [--sizes 20,200]
        [--json OUT]

``--sizes`` runs every sized benchmark of the main job at these sizes only
(``--jax-sizes``; the full job takes most of an hour on a 2-core CPU).

``--quick`` (CI): smoke sizes, one round per benchmark -- a check that the
comparison runs, not a measurement (the extras' cost is then a larger share
of a much shorter run).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAIN_JOB = ["perf_tests", "--jax-backend=cpu", "-q", "-p", "no:cacheprovider"]
QUICK = ["--jax-sizes=20,50", "--benchmark-min-rounds=1", "--benchmark-max-time=0"]
EXTRAS = (
    "warmup",
    "memory",
    "time_split",
    "args_on",
    "roofline",
    "counters",
    "machine_state",
    "stability",
)


def _run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run one pytest; return its wall time and the CPU seconds of its tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"pytest {' '.join(args)} failed:\n{proc.stdout[-4000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _check_report(path: Path, extras: bool) -> int:
    """How many benchmarks the report holds (each with or without extras)."""
    benches = json.loads((path / "benchmark.json").read_text())["benchmarks"]
    if not benches:
        raise SystemExit(f"{path}: no benchmark measured")
    for bench in benches:
        info = bench["extra_info"]
        present = [key for key in EXTRAS if key in info]
        if extras and len(present) != len(EXTRAS):
            raise SystemExit(f"{bench['fullname']}: extras missing ({present})")
        if not extras and present:
            raise SystemExit(f"{bench['fullname']}: --jax-no-extras kept {present}")
    return len(benches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="smoke sizes (CI)")
    parser.add_argument("--sizes", default=None, help="--jax-sizes for the job")
    parser.add_argument("--json", type=Path, default=None, help="write results here")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("JAX_PLATFORMS", None)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(ROOT), env.get("PYTHONPATH")])
    )
    base = MAIN_JOB + (QUICK if args.quick else [])
    if args.sizes:
        base = [a for a in base if not a.startswith("--jax-sizes=")]
        base.append(f"--jax-sizes={args.sizes}")
    kinds = {"extras": [], "no extras": ["--jax-no-extras"]}
    wall: dict[str, list[float]] = {k: [] for k in kinds}
    cpu: dict[str, list[float]] = {k: [] for k in kinds}
    count = 0
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            # Alternate the order so that a drift in load hits both.
            order = list(kinds) if repeat % 2 == 0 else list(kinds)[::-1]
            for kind in order:
                report = Path(tmp, f"{kind.replace(' ', '_')}-{repeat}")
                seconds, cpu_s = _run(
                    [*base, *kinds[kind], f"--jax-report-dir={report}"], env
                )
                wall[kind].append(seconds)
                cpu[kind].append(cpu_s)
                count = _check_report(report, kind == "extras")
    ratio = statistics.median(wall["extras"]) / statistics.median(wall["no extras"])
    cpu_ratio = statistics.median(cpu["extras"]) / statistics.median(cpu["no extras"])
    mode = "quick (smoke sizes, 1 round)" if args.quick else "default rounds"
    print(
        f"pytest {' '.join(base)}: {count} benchmarks, {mode}, "
        f"{args.repeats} repeat(s) each"
    )
    print(f"{'run':<12} {'wall median (s)':>16} {'CPU median (s)':>15}")
    for kind in kinds:
        print(
            f"{kind:<12} {statistics.median(wall[kind]):16.1f} "
            f"{statistics.median(cpu[kind]):15.1f}"
        )
    print(
        f"extras / no extras: wall {ratio:.3f}x ({(ratio - 1) * 100:+.1f}%), "
        f"CPU {cpu_ratio:.3f}x ({(cpu_ratio - 1) * 100:+.1f}%)"
    )
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "command": base,
                    "benchmarks": count,
                    "wall": wall,
                    "cpu": cpu,
                    "ratio": ratio,
                    "cpu_ratio": cpu_ratio,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
