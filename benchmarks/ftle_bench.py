"""FTLE field of the double gyre: points per second and accuracy, side by side.

Double gyre A = 0.1, eps = 0.25, omega = 2 pi / 10, t0 = 0, T = 15 on the grid
[0, 2] x [0, 1]. In one run, each timed as the minimum of ``--repeat`` warm
calls (compilation apart, results blocked until ready):

* lyapax ``ftle_field`` (exact tangents) at a few integrators/steps;
* a hand-written ``jax.vmap`` floor: fixed-step RK4 on the point and its two
  tangents (``jax.jvp``), one jitted call on the whole grid;
* numbacs 0.2.0 (``flowmap_grid_2D`` with adaptive DOP853 at rtol = atol =
  1e-8, then ``ftle_grid_2D``: the gradient of the flow map by central
  differences on the grid), when it is installed in this environment.

Accuracy of each field: (1) at the exact check points of the steady gyre
(eps = 0): FTLE = pi^2 A at (1, 0) and (1, 1) (numbacs: the central point of a
3 x 3 grid of the benchmark's spacing around each); (2) against a
high-accuracy reference (lyapax RK6, dt = 0.005, checked against dt = 0.0025)
on a random subset of interior grid points: max and median |error|.

Run: ``python benchmarks/ftle_bench.py`` (about 5 * 10^5 points) or
``--quick`` (CI smoke run, a small grid). ``--devices 2`` (default: the CPU
count, at most 2) deals lyapax's chunks to that many forced host devices (one
core each). Each row also gives CPU / wall time of the process: the cores the
program kept busy (numbacs: numba's thread count is printed).
"""

from __future__ import annotations

import argparse
import os
import time

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--quick", action="store_true", help="small grid (CI)")
parser.add_argument("--nx", type=int, default=1001)
parser.add_argument("--ny", type=int, default=501)
parser.add_argument("--repeat", type=int, default=3)
parser.add_argument("--devices", type=int, default=min(2, os.cpu_count() or 1))
parser.add_argument("--subset", type=int, default=2000, help="reference points")
parser.add_argument("--slow-floor", action="store_true", help="also the dt=0.01 floor")
args = parser.parse_args()
if args.quick:
    args.nx, args.ny, args.repeat, args.subset = 101, 51, 1, 200
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "")
    + f" --xla_force_host_platform_device_count={args.devices}"
)

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lyapax import systems  # noqa: E402
from lyapax.finite_time import ftle_field, grid_points  # noqa: E402

AMP, EPS, OMEGA, T = 0.1, 0.25, 2 * np.pi / 10, 15.0
EXACT = np.pi**2 * AMP
CHECK = np.array([[1.0, 0.0], [1.0, 1.0]])


def gyre(eps):
    return systems.double_gyre(A=AMP, eps=eps, omega=OMEGA)


def best_of(fn, repeat):
    """(wall seconds, CPU seconds of this process, result) of the fastest of
    ``repeat`` warm calls; CPU / wall says how many cores a program kept busy."""
    jax.block_until_ready(fn())  # compile and warm up
    times = []
    for _ in range(repeat):
        cpu, start = time.process_time(), time.perf_counter()
        out = jax.block_until_ready(fn())
        times.append((time.perf_counter() - start, time.process_time() - cpu))
    wall, cpu = min(times)
    return wall, cpu, out


def floor_program(dt):
    """Hand-written floor: RK4 on (x, F) with F's columns pushed by jax.jvp."""
    n = int(np.ceil(T / dt))
    h = T / n

    @jax.jit
    def run(points):
        rhs = gyre(EPS)

        def one(x0):
            def f(t, y):
                x, F = y
                out, dF = jax.vmap(
                    lambda v: jax.jvp(lambda z: rhs(t, z), (x,), (v,)),
                    in_axes=1,
                    out_axes=(None, 1),
                )(F)
                return out, dF

            def step(i, y):
                t = i * h
                k1 = f(t, y)
                k2 = f(t + h / 2, jax.tree.map(lambda a, b: a + h / 2 * b, y, k1))
                k3 = f(t + h / 2, jax.tree.map(lambda a, b: a + h / 2 * b, y, k2))
                k4 = f(t + h, jax.tree.map(lambda a, b: a + h * b, y, k3))
                return jax.tree.map(
                    lambda a, b, c, d, e: a + h / 6 * (b + 2 * c + 2 * d + e),
                    y,
                    k1,
                    k2,
                    k3,
                    k4,
                )

            _, F = jax.lax.fori_loop(0, n, step, (x0, jnp.eye(2)))
            return jnp.log(jnp.linalg.svd(F, compute_uv=False)[0]) / T

        return jax.vmap(one)(points)

    return run


def numbacs_available():
    try:
        import numbacs  # noqa: F401
    except ImportError as err:
        return str(err)
    return None


def numbacs_field(x, y, eps):
    from numbacs.diagnostics import ftle_grid_2D
    from numbacs.flows import get_predefined_flow
    from numbacs.integration import flowmap_grid_2D

    funcptr, params, _ = get_predefined_flow("double_gyre", int_direction=1.0)
    params = params.copy()
    params[2] = eps
    params[4] = OMEGA
    fm = flowmap_grid_2D(funcptr, 0.0, T, x, y, params, rtol=1e-8, atol=1e-8)
    return ftle_grid_2D(fm, T, x[1] - x[0], y[1] - y[0]).T  # (ny, nx)


def main():
    x = np.linspace(0.0, 2.0, args.nx)
    y = np.linspace(0.0, 1.0, args.ny)
    points = grid_points(x, y)
    n = points.shape[0]
    rng = np.random.default_rng(0)
    iy = rng.integers(1, args.ny - 1, args.subset)
    ix = rng.integers(1, args.nx - 1, args.subset)
    subset = iy * args.nx + ix
    print(
        f"double gyre, T={T}, {args.ny} x {args.nx} = {n} points, min of "
        f"{args.repeat}, {len(jax.devices())} CPU device(s) for lyapax, "
        f"{os.cpu_count()} CPUs, load average (1 min) {os.getloadavg()[0]:.1f}"
    )

    ref = ftle_field(gyre(EPS), points[subset], 0.0, T, 0.005, True, "rk6")
    ref2 = ftle_field(gyre(EPS), points[subset], 0.0, T, 0.0025, True, "rk6")
    ref_err = float(np.max(np.abs(np.asarray(ref.ftle_max) - ref2.ftle_max)))
    print(f"reference (RK6 dt=0.005) vs dt=0.0025: max diff {ref_err:.1e}")
    ref = np.asarray(ref.ftle_max)

    rows = []

    def report(name, timing, field_sub, check_vals):
        seconds, cpu = timing
        err = np.abs(np.asarray(field_sub) - ref)
        check = np.max(np.abs(np.asarray(check_vals) - EXACT))
        rows.append(
            (
                name,
                n / seconds,
                seconds,
                cpu / seconds,
                check,
                err.max(),
                np.median(err),
            )
        )
        print(f"  {name}: {n / seconds:,.0f} points/s", flush=True)

    # One rhs object for every call: the compiled program is cached by the
    # field's structure, and a new closure is a new structure.
    rhs, steady = gyre(EPS), gyre(0.0)
    configs = [("rk4", 0.05, None), ("rk6", 0.25, None), ("rk6", 0.25, 1)]
    for integ, dt, devs in configs:
        if devs == 1 and len(jax.devices()) == 1:
            continue

        def run(integ=integ, dt=dt, devs=devs):
            field = ftle_field(rhs, points, 0.0, T, dt, True, integ, devices=devs)
            return field.ftle_max

        seconds, cpu, field = best_of(run, args.repeat)
        check = ftle_field(steady, CHECK, 0.0, T, dt, True, integ).ftle_max
        where = "1 device" if devs == 1 else f"{len(jax.devices())} device(s)"
        label = f"lyapax ftle_field {integ} dt={dt}, {where}"
        report(label, (seconds, cpu), np.asarray(field)[subset], check)

    # The dt = 0.01 floor takes ~5x longer: on the full grid only with --slow-floor.
    for dt in (0.05, 0.01) if (args.quick or args.slow_floor) else (0.05,):
        run = floor_program(dt)
        pts = jnp.asarray(points)
        seconds, cpu, field = best_of(lambda run=run, pts=pts: run(pts), args.repeat)
        check = ftle_field(gyre(0.0), CHECK, 0.0, T, dt, True, "rk4").ftle_max
        report(
            f"hand-written jax.vmap RK4 dt={dt}",
            (seconds, cpu),
            np.asarray(field)[subset],
            check,
        )

    missing = numbacs_available()
    if missing is None:
        import numba

        print(f"numbacs: numba {numba.__version__}, {numba.get_num_threads()} threads")
        seconds, cpu, field = best_of(lambda: numbacs_field(x, y, EPS), args.repeat)
        dx, dy = x[1] - x[0], y[1] - y[0]
        check = []
        for px, py in CHECK:
            sub = numbacs_field(
                px + dx * np.arange(-1, 2), py + dy * np.arange(-1, 2), 0.0
            )
            check.append(sub[1, 1])
        report(
            "numbacs 0.2.0 DOP853 rtol=atol=1e-8 + grid differences",
            (seconds, cpu),
            field.reshape(-1)[subset],
            check,
        )
        print(
            f"  numbacs max of field {field.max():.3f}; lyapax reference max on "
            f"the subset {ref.max():.3f}"
        )
    else:
        print(f"numbacs not measured: {missing}")

    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}")
    print(
        "\n| program | points/s | seconds | cores busy (CPU/wall) | check-point error"
        " | field error max | field error median |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, rate, seconds, cores, check, emax, emed in rows:
        print(
            f"| {name} | {rate:,.0f} | {seconds:.2f} | {cores:.2f} | {check:.1e}"
            f" | {emax:.1e} | {emed:.1e} |"
        )


if __name__ == "__main__":
    main()
