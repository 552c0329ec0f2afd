"""One process vs two on the same sweep (jax.distributed, CPU, 127.0.0.1).

A Lorenz rho sweep (sigma=10, beta=8/3, ``--n`` values of rho in [10, 350],
RK4, dt=1e-2, ``--steps`` steps, renorm_every=10, k=3) is run by

* one process with one CPU device (what a plain script gets);
* one process with two forced host devices
  (``XLA_FLAGS=--xla_force_host_platform_device_count=2``), the one-process
  way to use two cores;
* a job of two processes joined by :func:`lyapax.distributed.initialize`
  (one CPU device each, gloo collectives), launched here with
  ``torchrun``-style variables on a free loopback port.

Each process compiles with a first call (reported apart), then the sweep is
timed ``--repeats`` times, every call started together in all processes
(``multihost_utils.sync_global_devices``) and ended by
``jax.block_until_ready``; a job's time is its slowest process's, the median
over repeats is reported. ``gather`` (the result to NumPy on every process)
is timed apart (after one untimed call). Efficiency = speed-up / devices,
speed-up = T(1 process) / T. The gathered exponents are compared with the
one-process run: calm rows agree to rounding, chaotic rows within their
stderr (not bitwise): the last column is the largest ``|diff|`` in units of
the two runs' combined standard error.

    python benchmarks/distributed_bench.py            # 256 rows x 20 000 steps
    python benchmarks/distributed_bench.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DT, RENORM = 1e-2, 10


def worker(n: int, steps: int, repeats: int, out: str) -> None:
    """One process of a layout: time the sweep, save the gathered result."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np
    from jax.experimental import multihost_utils

    from lyapax.distributed import gather, initialize
    from lyapax.integrators import rk4_step
    from lyapax.sweep import sweep_lyapunov_spectrum
    from lyapax.systems import lorenz

    if "WORLD_SIZE" in os.environ:
        initialize(timeout=120.0)
    rhos = np.linspace(10.0, 350.0, n)

    def step(x, p):
        return rk4_step(lorenz(rho=p["rho"]), DT)(x)

    def sweep():
        return sweep_lyapunov_spectrum(
            step, np.array([1.0, 1.0, 20.0]), {"rho": rhos}, DT, steps,
            renorm_every=RENORM,
        )  # fmt: skip

    def timed(fn):
        if jax.process_count() > 1:
            multihost_utils.sync_global_devices("lyapax-bench")
        t0 = time.perf_counter()
        result = jax.block_until_ready(fn())
        return time.perf_counter() - t0, result

    first, _ = timed(sweep)
    warm = []
    for _ in range(repeats):
        seconds, result = timed(sweep)
        warm.append(seconds)
    gather(result)  # compiles the collective
    gather_s, got = timed(lambda: gather(result))
    np.savez(out, exponents=got.exponents, stderr=got.stderr)
    print(json.dumps({
        "process": jax.process_index(), "devices": len(jax.devices()),
        "first": first, "warm": warm, "gather": gather_s,
    }), flush=True)  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(layout: str, args, tmp: Path) -> dict:
    """Run one layout's processes; their timings and the gathered result."""
    n_proc = 2 if layout == "2 processes" else 1
    base = dict(os.environ, JAX_PLATFORMS="cpu")
    base.pop("XLA_FLAGS", None)
    if layout == "1 process, 2 devices":
        base["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    port = str(_free_port())
    procs = []
    for rank in range(n_proc):
        env = dict(base)
        if n_proc > 1:
            env.update(
                MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                WORLD_SIZE=str(n_proc), RANK=str(rank),
            )  # fmt: skip
        cmd = [sys.executable, __file__, "--worker", str(tmp / f"{rank}.npz")]
        cmd += ["--n", str(args.n), "--steps", str(args.steps)]
        cmd += ["--repeats", str(args.repeats)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=args.timeout)
        if proc.returncode:
            raise SystemExit(f"{layout}: a worker failed (exit {proc.returncode})")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    import numpy as np

    warm = [max(r["warm"][i] for r in reports) for i in range(args.repeats)]
    return {
        "layout": layout,
        "processes": n_proc,
        "devices": reports[0]["devices"],
        "first_s": max(r["first"] for r in reports),
        "warm_s": statistics.median(warm),
        "gather_s": max(r["gather"] for r in reports),
        "result": dict(np.load(tmp / "0.npz")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=256, help="sweep rows")
    parser.add_argument("--steps", type=int, default=20_000, help="steps per row")
    parser.add_argument("--repeats", type=int, default=3, help="timed warm calls")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per layout")
    parser.add_argument("--quick", action="store_true", help="smoke sizes")
    parser.add_argument("--json", help="write the table here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.n, args.steps, args.repeats = 16, 500, 1
    if args.worker:
        worker(args.n, args.steps, args.repeats, args.worker)
        return
    import numpy as np

    layouts = ("1 process", "1 process, 2 devices", "2 processes")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [launch(layout, args, Path(tmp)) for layout in layouts]
    ref = rows[0]
    print(
        f"Lorenz sweep, {args.n} rows x {args.steps} RK4 steps (k=3), "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        "| layout | devices | first call (s) | warm sweep (s) | speed-up | "
        "efficiency | gather (s) | max abs diff to 1 process | max diff / stderr |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        diff = np.abs(row["result"]["exponents"] - ref["result"]["exponents"])
        bar = np.hypot(row["result"]["stderr"], ref["result"]["stderr"])
        sigmas = float(np.max(diff / np.maximum(bar, 1e-300)))
        speedup = ref["warm_s"] / row["warm_s"]
        row["speedup"], row["efficiency"] = speedup, speedup / row["devices"]
        row["max_diff"], row["max_sigmas"] = float(diff.max()), sigmas
        print(
            f"| {row['layout']} | {row['devices']} | {row['first_s']:.2f} | "
            f"{row['warm_s']:.3f} | {speedup:.2f}x | {row['efficiency']:.0%} | "
            f"{row['gather_s']:.3f} | {row['max_diff']:.1e} | {sigmas:.2f} |"
        )
        assert np.isfinite(row["result"]["exponents"]).all(), row["layout"]
    if args.json:
        for row in rows:
            row.pop("result")
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
