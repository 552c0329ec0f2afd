"""The OpenBLAS policy on batched entry points: with it and without it, side by side.

Every public entry point that runs XLA programs on CPU holds each loaded
OpenBLAS to one thread while its programs run
(``lyapax._engine.blas_threads.holds_one_blas_thread``). This script times
three batched calls with the policy as shipped and with it replaced by a
no-op (OpenBLAS keeps its threads, as before the policy covered these entry
points), in interleaved rounds in one process:

* a Lorenz rho sweep (``sweep_lyapunov_spectrum``, ``--rows`` rows, k = 3);
* a sweep of dense Kuramoto networks (d = ``--d``, k = 10, 4 rows), whose QRs
  are LAPACK calls big enough for OpenBLAS to thread;
* an FTLE field of the double gyre (``ftle_field``, ``--grid`` points a side).

Both variants give the same numbers (checked exactly). Prints best and median
of each, and their ratio (without / with: above 1 means the policy helps).

    python benchmarks/blas_policy_bench.py            # default sizes
    python benchmarks/blas_policy_bench.py --quick    # CI smoke
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _timing import timed  # noqa: E402

from lyapax import systems  # noqa: E402
from lyapax._engine import blas_threads  # noqa: E402
from lyapax.finite_time import ftle_field, grid_points  # noqa: E402
from lyapax.integrators import rk4_step  # noqa: E402
from lyapax.sweep import problem_family, sweep_lyapunov_spectrum  # noqa: E402

SHIPPED = blas_threads.one_blas_thread


@contextlib.contextmanager
def _no_policy(enabled: bool = True):
    yield


def calls(rows: int, d: int, grid: int, steps: int) -> dict:
    rhos = jnp.linspace(0.5, 350.0, rows)
    x0 = jnp.array([1.0, 1.0, 20.0])

    def lorenz_step(x, rho):
        return rk4_step(systems.lorenz(rho=rho), 0.01)(x)

    def lorenz_sweep():
        return sweep_lyapunov_spectrum(
            lorenz_step, x0, rhos, 0.01, steps, renorm_every=10
        ).exponents

    omega = jnp.linspace(-1.0, 1.0, d)
    family = problem_family(
        lambda k: systems.kuramoto_network(d, omega=omega, K=k, dt=0.01)
    )
    couplings = jnp.linspace(0.5, 2.0, 4)

    def network_sweep():
        return sweep_lyapunov_spectrum(
            family, None, couplings, None, steps // 10, k=10, renorm_every=10
        ).exponents

    points = grid_points(np.linspace(0.0, 2.0, grid), np.linspace(0.0, 1.0, grid // 2))
    gyre = systems.double_gyre(eps=0.1)

    def field():
        return ftle_field(gyre, points, 0.0, 10.0, 0.05, True, "rk4").ftle_max

    return {
        "lorenz sweep": lorenz_sweep,
        "network sweep": network_sweep,
        "ftle field": field,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--d", type=int, default=300)
    parser.add_argument("--grid", type=int, default=201)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="small sizes (CI)")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.d, args.grid, args.steps, args.repeats = 16, 40, 21, 200, 2
    work = calls(args.rows, args.d, args.grid, args.steps)
    variants = {"with policy": SHIPPED, "without": _no_policy}
    times: dict[tuple[str, str], list[float]] = {}
    results: dict[tuple[str, str], np.ndarray] = {}
    for round_ in range(args.repeats + 1):  # the first round compiles: not counted
        for name, fn in work.items():
            # Which variant goes first alternates, so an order effect cancels.
            order = list(variants.items())[:: 1 if round_ % 2 else -1]
            for variant, policy in order:
                blas_threads.one_blas_thread = policy
                out: list = []
                try:
                    elapsed = timed(lambda fn=fn, out=out: out.append(fn()) or out[0])
                finally:
                    blas_threads.one_blas_thread = SHIPPED
                results[(name, variant)] = np.asarray(out[0])
                times.setdefault((name, variant), []).append(elapsed)
    load = os.getloadavg()
    print(
        f"rows={args.rows} d={args.d} grid={args.grid} steps={args.steps}, "
        f"best and median of {args.repeats} interleaved rounds, "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    for name in work:
        same = np.array_equal(
            results[(name, "with policy")], results[(name, "without")]
        )
        (w, wo) = (times[(name, v)][1:] for v in variants)
        print(
            f"{name:14s} with {min(w):.4f} s (median {statistics.median(w):.4f}), "
            f"without {min(wo):.4f} s (median {statistics.median(wo):.4f}): "
            f"without/with {min(wo) / min(w):.2f}x best, "
            f"{statistics.median(wo) / statistics.median(w):.2f}x median; "
            f"same numbers: {same}"
        )


if __name__ == "__main__":
    main()
