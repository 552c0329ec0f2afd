"""Cost of a shadowing sensitivity against the plain spectrum run of the same length.

Lorenz-63 (rho = 28; d<z>/d(rho, sigma, beta), one unstable direction) and
Lorenz-96 (N = 40, F = 8; d<mean x^2>/dF, ``n_unstable`` given as 13 positive
exponents) over ``K`` segments of 100 steps of RK4. Each shadowing run
(``shadowing_sensitivity`` with ``n_unstable`` given: no spectrum run inside)
is timed against ``lyapunov_spectrum`` over the same steps, renormalising at
the same boundaries, once with as many tangents as the shadowing run carries
(``n_unstable`` + one per parameter, at most ``d``) and once with the full
``k = d``. Warm
calls only (compilation reported apart), best of ``--repeat`` rounds, the
calls of a round interleaved so that load from other processes hits them
alike; the load average is printed beside every figure.

Run: ``python benchmarks/shadowing_bench.py`` or ``--quick`` (CI smoke run).
"""

from __future__ import annotations

import argparse
import os
import time

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--quick", action="store_true", help="short runs (CI)")
parser.add_argument("--segments", type=int, default=500)
parser.add_argument("--repeat", type=int, default=5)
args = parser.parse_args()
if args.quick:
    args.segments, args.repeat = 50, 2

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from _timing import best_interleaved, timed  # noqa: E402

from lyapax import lyapunov_spectrum, ode_problem, shadowing_sensitivity  # noqa: E402

DT, STEPS = 0.01, 100


def lorenz63(u, p):
    x, y, z = u
    return jnp.stack(
        [p["sigma"] * (y - x), x * (p["rho"] - z) - y, x * y - p["beta"] * z]
    )


def lorenz96(x, F):
    return (jnp.roll(x, -1) - jnp.roll(x, 2)) * jnp.roll(x, 1) - x + F


def z_of(u, p):
    return u[2]


def energy(x, F):
    return jnp.mean(x * x)


def l96_start(n: int) -> jax.Array:
    return jnp.full(n, 8.0).at[0].add(0.01)


CASES = {
    "Lorenz-63": (
        lorenz63,
        jnp.array([1.0, 1.0, 20.0]),
        {"rho": 28.0, "sigma": 10.0, "beta": 8.0 / 3.0},
        z_of,
        1,
    ),
    "Lorenz-96 N=40": (lorenz96, l96_start(40), 8.0, energy, 13),
}


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


print(
    f"{args.segments} segments x {STEPS} steps of dt={DT} (RK4); jax "
    f"{jax.__version__}, {jax.devices()[0].platform}, {os.cpu_count()} CPUs; {load()}"
)
for name, (rhs, x0, params, objective, m) in CASES.items():
    n_params = len(jax.tree.leaves(params))
    d = x0.shape[0]
    problem = ode_problem(lambda x, r=rhs, p=params: r(x, p), x0, DT)
    n_steps = args.segments * STEPS

    def shadow(rhs=rhs, x0=x0, params=params, objective=objective, m=m):
        res = shadowing_sensitivity(
            rhs,
            x0,
            params,
            objective,
            DT,
            args.segments,
            STEPS,
            n_unstable=m,
            t_transient=10.0,
        )
        return res.gradient

    def spectrum(k, problem=problem, n_steps=n_steps):
        res = lyapunov_spectrum(
            problem, n_steps=n_steps, k=k, renorm_every=STEPS, t_transient=10.0
        )
        return res.exponents

    calls = {"shadowing": shadow}
    for k in sorted({min(m + n_params, d), d}):
        calls[f"spectrum k={k}"] = lambda k=k: spectrum(k)
    for label, fn in calls.items():
        t0 = time.perf_counter()
        timed(fn)
        print(
            f"  {name}: {label} first call {time.perf_counter() - t0:.2f} s ({load()})"
        )
    best = best_interleaved(calls, args.repeat)
    grad = shadow()
    print(f"{name}: gradient {jax.tree.map(lambda g: round(float(g), 4), grad)}")
    for label, t in best.items():
        ratio = best["shadowing"] / t
        print(f"  {label:>16}: {t:8.4f} s  (shadowing / this = {ratio:.2f}x)  {load()}")
