"""Precision check on whatever device JAX picks (made for the lent TPU; runs on CPU).

In one process (a TPU admits one process at a time), for each precision:

- the README's first example: Lorenz, RK4, dt = 0.01, 100 000 steps, QR every
  10, 50 time units of transient (``--lorenz-steps`` to shorten);
- the seed page's dense Kuramoto call (examples/14_gpu_acceleration.py:
  all-to-all, omega = linspace(-1, 1, d), K = 1, k = 5, 200 Heun steps of
  dt = 1e-2, QR every 10, no transient) for each ``--sizes`` d.

The float32 and mixed problems are built from float32 arrays (state,
weights, omega), so that nothing in the float32 run is promoted to float64
and nothing is cast at each call; x64 stays on, so every run starts from the
same frame (the float64 frame, rounded). ``"mixed"`` is
``lyapunov_spectrum(..., precision="mixed")``; where that argument does not
exist the script says so and skips those rows.

Printed per run: exponents, their standard errors, the first call's time
(compilation included) and a warm call's time (best of ``--repeats``), plus
JAX's backend, device and default matmul precision. ``--json PATH`` also
writes the rows as JSON. Run:

    python benchmarks/tpu_precision_check.py [--sizes 50,2000] [--json out.json]
    python benchmarks/tpu_precision_check.py --quick
"""

from __future__ import annotations

import argparse
import inspect
import json
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lyapax  # noqa: E402
from lyapax.systems import kuramoto_network, lorenz  # noqa: E402

K, N_STEPS, RENORM, DT = 5, 200, 10, 1e-2
HAS_PRECISION = "precision" in inspect.signature(lyapax.lyapunov_spectrum).parameters


def lorenz_call(dtype, n_steps, precision=None):
    problem = lyapax.ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0], dtype), dt=0.01)
    extra = {} if precision is None else {"precision": precision}

    def run():
        return lyapax.lyapunov_spectrum(
            problem, n_steps=n_steps, renorm_every=10, t_transient=50.0, **extra
        )

    return run


def kuramoto_call(d, dtype, precision=None):
    weights = jnp.asarray(np.ones((d, d)) - np.eye(d), dtype)
    omega = jnp.linspace(-1.0, 1.0, d, dtype=dtype)
    theta0 = jnp.asarray(2 * np.pi * np.arange(d) / d, dtype)
    problem = kuramoto_network(weights, omega=omega, K=1.0, dt=DT, theta0=theta0)
    extra = {} if precision is None else {"precision": precision}

    def run():
        return lyapax.lyapunov_spectrum(
            problem, n_steps=N_STEPS, k=K, renorm_every=RENORM, t_transient=0.0, **extra
        )

    return run


def measure(name, run, repeats):
    """First call (compiles) and the best warm call, and the result."""
    start = time.perf_counter()
    result = run()
    jax.block_until_ready(result.exponents)
    first = time.perf_counter() - start
    warm = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(run().exponents)
        warm.append(time.perf_counter() - start)
    row = {
        "run": name,
        "dtype": str(result.exponents.dtype),
        "exponents": np.asarray(result.exponents, np.float64).tolist(),
        "stderr": np.asarray(result.stderr, np.float64).tolist(),
        "first_call_s": first,
        "warm_s": min(warm),
    }
    print(
        f"{name:<28} {row['dtype']:<8} first {first:8.3f} s  warm {min(warm):9.5f} s\n"
        f"    exponents {np.array2string(np.asarray(row['exponents']), precision=8)}\n"
        f"    stderr    {np.array2string(np.asarray(row['stderr']), precision=2)}",
        flush=True,
    )
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50,2000", help="Kuramoto d, commas")
    parser.add_argument(
        "--lorenz-steps", type=int, default=100_000, help="0: no Lorenz run"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--precisions",
        default="float64,float32,mixed",
        help="any of float64, float32, mixed (commas)",
    )
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: d = 20, 2000 Lorenz steps"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.lorenz_steps, args.repeats = "20", 2000, 1
    sizes = [int(s) for s in args.sizes.split(",") if s]
    precisions = [p for p in args.precisions.split(",") if p]

    device = jax.devices()[0]
    header = {
        "backend": jax.default_backend(),
        "device": f"{device.platform}:{device.device_kind}",
        "jax": jax.__version__,
        "x64": bool(jax.config.jax_enable_x64),
        "default_matmul_precision": str(jax.config.jax_default_matmul_precision),
        "lyapax_precision_argument": HAS_PRECISION,
    }
    print(json.dumps(header), flush=True)
    rows = []
    for precision in precisions:
        if precision == "mixed" and not HAS_PRECISION:
            print("mixed: skipped (lyapunov_spectrum has no precision= here)")
            continue
        # Runs take their dtype from the arrays: float32 problems for float32
        # and "mixed" (precision= would cast float64 ones at every call).
        dtype = jnp.float64 if precision == "float64" else jnp.float32
        mode = "mixed" if precision == "mixed" else None
        calls = []
        if args.lorenz_steps > 0:
            calls.append(("lorenz", lorenz_call(dtype, args.lorenz_steps, mode)))
        calls += [(f"kuramoto d={d}", kuramoto_call(d, dtype, mode)) for d in sizes]
        for name, run in calls:
            try:
                row = measure(f"{name} [{precision}]", run, args.repeats)
            except Exception as exc:  # report and go on: one process, many runs
                row = {"run": f"{name} [{precision}]", "error": repr(exc)[:2000]}
                print(f"{row['run']}: FAILED {row['error']}", flush=True)
            row["precision"] = precision
            rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": header, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
