"""Impact oscillator: a hybrid run against an event-free run of the same length.

The impact oscillator ``x'' = -x`` with a wall at ``x = 0`` and restitution
``r = 0.95`` (``lyapax.hybrid_problem``: one impact every pi model times,
located to rounding, saltation-corrected tangents) against the same field
without the wall (``lyapax.ode_problem``), both RK4 with ``dt = 0.01`` and the
same number of steps; target: the hybrid run costs at most 1.5x the
event-free one. Rounds are interleaved (each round times both), the best of
``--repeats`` is kept, and the load average is printed beside every figure:
on a shared machine the ratio is the figure to read.

Usage: ``python benchmarks/hybrid_bench.py [--quick] [--steps N,...]
[--repeats N]``.
"""

from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
from _timing import best_interleaved, parse_sizes, sizes_parser

import lyapax

jax.config.update("jax_enable_x64", True)


def oscillator(x):
    return jnp.stack([x[1], -x[0]])


def wall(x):
    return x[0]


def bounce(x):
    return jnp.stack([x[0], -0.95 * x[1]])


def main() -> None:
    parser = sizes_parser(
        __doc__.splitlines()[0],
        (20_000, 100_000),
        "step counts",
        repeats=5,
        quick="one short length, two rounds (CI smoke run)",
    )
    args = parser.parse_args()
    steps = [2_000] if args.quick else parse_sizes(args.sizes)
    repeats = 2 if args.quick else args.repeats
    x0 = jnp.array([1.0, 0.0])
    hybrid = lyapax.hybrid_problem(oscillator, wall, bounce, x0, 0.01)
    free = lyapax.ode_problem(oscillator, x0, 0.01)
    print(f"impact oscillator, r = 0.95, RK4, dt = 0.01; best of {repeats} rounds")
    print(
        f"{'steps':>8} {'hybrid s':>10} {'event-free s':>13} {'ratio':>6}  load (1 min)"
    )
    for n in steps:
        calls = {
            "hybrid": lambda n=n: lyapax.lyapunov_spectrum(hybrid, n).exponents,
            "free": lambda n=n: lyapax.lyapunov_spectrum(free, n).exponents,
        }
        t0 = time.perf_counter()
        for fn in calls.values():
            jax.block_until_ready(fn())  # compile outside the timed rounds
        first = time.perf_counter() - t0
        best = best_interleaved(calls, repeats)
        ratio = best["hybrid"] / best["free"]
        print(
            f"{n:>8} {best['hybrid']:>10.4f} {best['free']:>13.4f} {ratio:>6.2f}  "
            f"{os.getloadavg()[0]:.1f}  (compile+first run of both: {first:.1f} s)"
        )
    exps = lyapax.lyapunov_spectrum(hybrid, steps[-1]).exponents
    exact = float(jnp.log(0.95) / jnp.pi)
    print(f"exponents {jnp.asarray(exps)} (ln r / pi = {exact:.6f})")


if __name__ == "__main__":
    main()
