"""The large-scale payoffs, timed on whatever device JAX picks.

Three jobs of the size accelerators are for, each through the public API:

- ``ftle``: the FTLE field of the double gyre (A = 0.1, eps = 0.25,
  omega = 2 pi / 10) on a ``1024 x 1024`` grid over [0, 2] x [0, 1],
  t0 = 0, T = 15, RK4 with steps of at most 0.25 (``ftle_grid``);
- ``megno``: a MEGNO map of Henon-Heiles at E = 1/8 on the plane q1 = 0,
  about ``10^5`` orbits of ``--megno-steps`` Yoshida-4 steps of dt = 0.05 in
  one vmapped call (``megno(..., state0_batch=...)``);
- ``sparse``: the dense-Kuramoto seed call on a sparse ring lattice of
  ``10^5`` nodes (10 neighbours each, a ``BCOO`` weight matrix), k = 5,
  200 Heun steps of dt = 1e-2, QR every 10 (``lyapunov_spectrum``).

Per job: the first call (compilation included), the best of ``--repeats``
warm calls (results blocked until ready) and a summary of the result, so
that a device that computes something else is seen. ``--dtype float32``
builds every input in float32 (x64 stays on: the frames are the float64
ones rounded), ``float64`` in float64. ``--scale s`` multiplies each job's
point, orbit or node count by ``s`` (``--quick``: ``--scale 0.01
--repeats 1``, a smoke run).
``--json PATH`` writes the rows. A chip against its host's CPU:

    python benchmarks/large_scale.py --dtype float32 --json chip.json
    JAX_PLATFORMS=cpu python benchmarks/large_scale.py --dtype float64 --json cpu.json
"""

from __future__ import annotations

import argparse
import json
import math
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from sparse_bench import ring_lattice  # noqa: E402

from lyapax import systems  # noqa: E402
from lyapax.core import lyapunov_spectrum  # noqa: E402
from lyapax.finite_time import ftle_grid  # noqa: E402
from lyapax.indicators import megno  # noqa: E402

JOBS = ("ftle", "megno", "sparse")


def ftle_job(scale: float, dtype):
    side = max(8, round(1024 * math.sqrt(scale)))
    x = np.linspace(0.0, 2.0, side, dtype=dtype)
    y = np.linspace(0.0, 1.0, side, dtype=dtype)
    rhs = systems.double_gyre(A=0.1, eps=0.25, omega=2 * np.pi / 10)

    def run():
        return ftle_grid(rhs, x, y, 0.0, 15.0, 0.25, time_dependent=True)

    def summary(field):
        f = np.asarray(field.ftle_max, np.float64)
        return {
            "points": side * side,
            "ftle_max_max": float(f.max()),
            "mean": float(f.mean()),
        }

    return run, lambda field: field.ftle_max, summary


def megno_job(scale: float, dtype, n_steps: int):
    # A square grid whose points on the energy surface number ~1e5 * scale
    # (about 74 % of the grid lies on it).
    side = max(8, round(math.sqrt(1e5 * scale / 0.74)))
    energy = 0.125
    q2, p2 = np.meshgrid(np.linspace(-0.45, 0.65, side), np.linspace(-0.5, 0.5, side))
    kinetic = 2 * (energy - (0.5 * q2**2 - q2**3 / 3)) - p2**2
    allowed = kinetic > 0
    p1 = np.sqrt(np.where(allowed, kinetic, 0.0))
    rows = np.stack([np.zeros_like(q2), q2, p1, p2], axis=-1)[allowed].astype(dtype)
    problem = systems.henon_heiles().problem(rows[0, :2], rows[0, 2:], 0.05, "yoshida4")

    def run():
        return megno(problem, n_steps, state0_batch=rows, save_every=n_steps)

    def summary(res):
        return {
            "orbits": int(rows.shape[0]),
            "chaotic_fraction": float(np.mean(res.chaotic)),
        }

    return run, lambda res: res.mean_megno, summary


def sparse_job(scale: float, dtype, neighbours: int = 10):
    n = max(100, round(1e5 * scale))
    weights = ring_lattice(n, neighbours, dtype)
    omega = jnp.linspace(-1.0, 1.0, n, dtype=dtype)
    theta0 = jnp.asarray(2 * np.pi * np.arange(n) / n, dtype)
    problem = systems.kuramoto_network(
        weights, omega=omega, K=1.0, dt=1e-2, theta0=theta0
    )

    def run():
        return lyapunov_spectrum(
            problem, n_steps=200, k=5, renorm_every=10, t_transient=0.0
        )

    def summary(res):
        return {"nodes": n, "exponents": np.asarray(res.exponents, np.float64).tolist()}

    return run, lambda res: res.exponents, summary


def measure(name: str, job, repeats: int) -> dict:
    run, output, summary = job
    start = time.perf_counter()
    result = run()
    jax.block_until_ready(output(result))
    first = time.perf_counter() - start
    warm = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(output(run()))
        warm.append(time.perf_counter() - start)
    row = {"job": name, "first_call_s": first, "warm_s": min(warm), **summary(result)}
    print(json.dumps(row), flush=True)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs", default=",".join(JOBS), help="any of " + ", ".join(JOBS)
    )
    parser.add_argument("--dtype", default="float64", choices=("float32", "float64"))
    parser.add_argument("--scale", type=float, default=1.0, help="size factor (0, 1]")
    parser.add_argument("--megno-steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument("--quick", action="store_true", help="--scale 0.01 --repeats 1")
    args = parser.parse_args(argv)
    if args.quick:
        args.scale, args.repeats = 0.01, 1
    jobs = [j for j in args.jobs.split(",") if j]
    unknown = sorted(set(jobs) - set(JOBS))
    if unknown:
        parser.error(f"--jobs: unknown {unknown}; allowed: {', '.join(JOBS)}")
    if not 0 < args.scale <= 1:
        parser.error(f"--scale must be in (0, 1], got {args.scale}")
    dtype = np.dtype(args.dtype)
    device = jax.devices()[0]
    header = {
        "backend": jax.default_backend(),
        "device": f"{device.platform}:{device.device_kind}",
        "devices": jax.device_count(),
        "jax": jax.__version__,
        "dtype": args.dtype,
        "scale": args.scale,
    }
    print(json.dumps(header), flush=True)
    build = {
        "ftle": lambda: ftle_job(args.scale, dtype),
        "megno": lambda: megno_job(args.scale, dtype, args.megno_steps),
        "sparse": lambda: sparse_job(args.scale, dtype),
    }
    rows = []
    for name in jobs:
        try:
            rows.append(measure(name, build[name](), args.repeats))
        except Exception as exc:  # one job's failure does not cost the others
            rows.append({"job": name, "error": repr(exc)[:2000]})
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": header, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
