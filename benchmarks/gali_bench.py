"""A batched GALI map vs ChaosTools-style sequential runs in NumPy, side by side.

The standard map at K = 1 on a uniform grid of ``--orbits`` initial
conditions over [0, 2 pi)^2, GALI_2 with threshold 1e-12 and at most
``--steps`` iterations per orbit (an orbit stops once it is classified), in
one process:

* lyapax: ``gali(standard_map, None, 1.0, steps, state0_batch=grid)``, one
  vmapped program over every orbit (``jax.jvp`` tangents); warm calls timed
  (the result is copied to the host, so the work is done), compilation
  reported apart, best of ``--repeat`` calls alternating with the vectorised
  NumPy run below;
* "ChaosTools-style" loop: what ``gali(ds, T, 2)`` does per orbit, written
  in NumPy: a Python loop over the orbits and, inside, over the steps
  (state, the analytic 2 x 2 Jacobian applied to both deviation vectors,
  normalisation, GALI_2, stop below the threshold). It is timed on a random
  subset of ``--subset`` orbits of the same grid and extrapolated per orbit
  to the whole grid (the line says so); Julia's ChaosTools itself is not run
  here;
* for reference, the same algorithm vectorised over all orbits in NumPy
  (arrays of shape (n, 2), every orbit stepped until all have stopped),
  timed on the whole grid.

The verdicts of the loop and of lyapax are compared on the subset.

Run: ``python benchmarks/gali_bench.py`` (10^5 orbits, up to 1000 iterations)
or ``--quick`` (CI smoke run).
"""

from __future__ import annotations

import argparse
import time

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--quick", action="store_true", help="small sizes (CI)")
parser.add_argument("--orbits", type=int, default=100_000)
parser.add_argument("--steps", type=int, default=1000)
parser.add_argument("--subset", type=int, default=300, help="orbits of the loop")
parser.add_argument("--repeat", type=int, default=3)
args = parser.parse_args()
if args.quick:
    args.orbits, args.steps, args.subset, args.repeat = 2_500, 200, 30, 1

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lyapax.indicators import gali  # noqa: E402

K, THRESHOLD, TWO_PI = 1.0, 1e-12, 2 * np.pi


def standard_map(x):
    p = x[1] + K * jnp.sin(x[0])
    return jnp.mod(jnp.stack([x[0] + p, p]), 2 * jnp.pi)


def grid(n: int) -> np.ndarray:
    side = int(round(np.sqrt(n)))
    theta, p = np.meshgrid(
        np.linspace(0, TWO_PI, side, endpoint=False),
        np.linspace(0, TWO_PI, side, endpoint=False),
    )
    return np.stack([theta.ravel(), p.ravel()], axis=1)


def unit_frame(seed: int) -> np.ndarray:
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((2, 2)))
    return q


def gali_loop_one(x0: np.ndarray, W: np.ndarray, steps: int) -> int:
    """One orbit as ChaosTools' ``gali`` runs it; the step it crossed (-1)."""
    theta, p = float(x0[0]), float(x0[1])
    w = W.copy()
    for i in range(1, steps + 1):
        c = K * np.cos(theta)
        jac = np.array([[1.0 + c, 1.0], [c, 1.0]])  # d(theta', p')/d(theta, p)
        p = (p + K * np.sin(theta)) % TWO_PI
        theta = (theta + p) % TWO_PI
        w = jac @ w
        w /= np.linalg.norm(w, axis=0)
        value = np.linalg.norm(w[:, 0] - w[:, 1]) * np.linalg.norm(w[:, 0] + w[:, 1])
        if value / 2 < THRESHOLD:
            return i
    return -1


def gali_vectorised(x0: np.ndarray, W: np.ndarray, steps: int) -> np.ndarray:
    """All orbits at once in NumPy; the step each crossed (-1)."""
    theta, p = x0[:, 0].copy(), x0[:, 1].copy()
    w1 = np.broadcast_to(W[:, 0], x0.shape).copy()
    w2 = np.broadcast_to(W[:, 1], x0.shape).copy()
    crossed = np.full(len(x0), -1)
    for i in range(1, steps + 1):
        c = K * np.cos(theta)
        p = (p + K * np.sin(theta)) % TWO_PI
        theta = (theta + p) % TWO_PI
        for w in (w1, w2):
            a = (1.0 + c) * w[:, 0] + w[:, 1]
            b = c * w[:, 0] + w[:, 1]
            norm = np.hypot(a, b)
            w[:, 0], w[:, 1] = a / norm, b / norm
        value = np.hypot(*(w1 - w2).T) * np.hypot(*(w1 + w2).T) / 2
        crossed = np.where((crossed < 0) & (value < THRESHOLD), i, crossed)
        if (crossed >= 0).all():
            break
    return crossed


def best_of(fn, repeat):
    best, out = np.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


points = grid(args.orbits)
n = len(points)
print(
    f"standard map K={K}, {n} orbits, GALI_2 < {THRESHOLD:g} within "
    f"{args.steps} iterations; jax {jax.__version__}, {jax.devices()[0].platform}"
)

# --- lyapax (one vmapped program) and vectorised NumPy, interleaved ---------
W0 = unit_frame(0)


def ours_call():
    return gali(standard_map, None, 1.0, args.steps, state0_batch=points)


def vectorised_call():
    return gali_vectorised(points, W0, args.steps)


start = time.perf_counter()
first = ours_call()
cold = time.perf_counter() - start
ours = vec_time = np.inf
for _ in range(args.repeat):  # alternating, so a drift of the load hits both
    t, res = best_of(ours_call, 1)
    ours = min(ours, t)
    t, vec_steps = best_of(vectorised_call, 1)
    vec_time = min(vec_time, t)
assert np.array_equal(first.steps_to_threshold, res.steps_to_threshold)
print(
    f"lyapax gali, one program:        {ours:8.3f} s  ({ours / n * 1e6:8.2f} us/orbit; "
    f"first call {cold:.2f} s with compilation); chaotic fraction "
    f"{res.chaotic.mean():.3f}"
)

# --- the per-orbit NumPy loop on a subset, extrapolated -----------------------
rng = np.random.default_rng(0)
subset = rng.choice(n, size=min(args.subset, n), replace=False)


def loop():
    return np.array([gali_loop_one(points[i], W0, args.steps) for i in subset])


loop_time, loop_steps = best_of(loop, 1)
per_orbit = loop_time / len(subset)
extrapolated = per_orbit * n
agree = np.mean((loop_steps >= 0) == res.chaotic[subset])
print(
    f"NumPy per-orbit loop (ChaosTools-style): {per_orbit * 1e6:8.1f} us/orbit, "
    f"measured on {len(subset)} random orbits of the grid ({loop_time:.2f} s) and "
    f"extrapolated to {n}: {extrapolated:8.1f} s -> lyapax {extrapolated / ours:.0f}x "
    f"faster; verdicts agree on {agree:.1%} of the subset"
)
agree_vec = np.mean((vec_steps >= 0) == res.chaotic)
print(
    f"NumPy vectorised over all orbits:  {vec_time:8.3f} s ({vec_time / ours:.2f}x "
    f"lyapax's time; best of {args.repeat}, alternating with lyapax's calls); "
    f"verdicts agree on {agree_vec:.2%} of the grid"
)
