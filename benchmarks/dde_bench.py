"""Cost of the delay engine: delayed vs undelayed Kuramoto networks, Mackey-Glass.

Measures, in one process:

* a dense all-to-all Kuramoto network (d = 100 and 500 nodes, k = 5, 2000
  steps, dt = 1e-2, Heun) without delay (``lyapax.network.network_problem`` +
  ``lyapunov_spectrum``), with one delay tau = 0.3 and with per-edge delays
  drawn in [0.1, 0.5] (``lyapax.dde.network_dde_problem`` +
  ``lyapunov_spectrum_dde``); reported as wall time per step and the
  delayed / undelayed ratio (target: within 2x for the uniform delay);
* Mackey-Glass (tau = 17, dt = 1, Heun, 30 000 steps, k = 8).

Compilation is timed apart from the runs; each run is the best of ``--repeat``
warm calls, blocked until ready. ``--quick`` runs tiny sizes (for CI).

Usage: ``python benchmarks/dde_bench.py [--quick] [--repeat N] [--renorm-every N]
[--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import sparse  # noqa: E402
from sparse_bench import ring_lattice  # noqa: E402

from lyapax import lyapunov_spectrum, systems  # noqa: E402
from lyapax.coupling import kuramoto_coupling  # noqa: E402
from lyapax.dde import dde_problem, lyapunov_spectrum_dde, network_dde_problem  # noqa: E402
from lyapax.network import Network, network_problem  # noqa: E402


def _kuramoto(theta, c, p):
    return p["omega"] + c


def timed(run, repeat):
    """(compile-and-first-run seconds, best warm seconds, result)."""
    t0 = time.perf_counter()
    result = run()
    jax.block_until_ready(result.exponents)
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = run()
        jax.block_until_ready(result.exponents)
        best = min(best, time.perf_counter() - t0)
    return first, best, result


def timed_rows(cases, n_steps, run, total_steps, repeat):
    """Time each ``(name, spectrum function, problem)``; ratios to the first."""
    rows = {}
    for name, fn, problem in cases:
        first, best, result = timed(
            lambda f=fn, p=problem: f(p, n_steps, **run), repeat
        )
        rows[name] = {
            "compile_s": first - best,
            "run_s": best,
            "us_per_step": 1e6 * best / total_steps,
            "lambda1": float(result.exponents[0]),
        }
    base = rows[cases[0][0]]["us_per_step"]
    for row in rows.values():
        row["ratio_to_no_delay"] = row["us_per_step"] / base
    return rows


def print_rows(rows):
    for name, r in rows.items():
        print(
            f"  {name:13s} {r['us_per_step']:9.1f} us/step  "
            f"x{r['ratio_to_no_delay']:.2f}  (compile {r['compile_s']:.1f} s, "
            f"run {r['run_s']:.3f} s)"
        )


def kuramoto_case(n, n_steps, repeat, renorm_every, *, tau=0.3, dt=1e-2, k=5):
    rng = np.random.default_rng(0)
    network = Network(jnp.ones((n, n)) - jnp.eye(n), (0,))
    params = {"omega": jnp.asarray(rng.normal(0.0, 1.0, n)), "G": 2.0}
    theta0 = jnp.asarray(rng.uniform(0.0, 2 * np.pi, n))
    coupling = kuramoto_coupling()
    # The same transient everywhere (the DDE needs one history length).
    run = dict(k=k, renorm_every=renorm_every, t_transient=0.4)
    total_steps = n_steps + 40
    plain = network_problem(_kuramoto, network, coupling, params, theta0, dt)
    uniform = network_dde_problem(
        _kuramoto, network, coupling, params, theta0, dt, tau=tau
    )
    taus = rng.uniform(0.1, 0.5, (n, n))
    per_edge = network_dde_problem(
        _kuramoto, network, coupling, params, theta0, dt, tau=np.round(taus / dt) * dt
    )
    cases = (
        ("no delay", lyapunov_spectrum, plain),
        ("uniform tau", lyapunov_spectrum_dde, uniform),
        ("per-edge tau", lyapunov_spectrum_dde, per_edge),
    )
    return timed_rows(cases, n_steps, run, total_steps, repeat)


def sparse_kuramoto_case(n, n_steps, repeat, renorm_every, *, dt=1e-2, k=5):
    """Ring lattice, 20 edges per node (BCOO), per-edge delays of 1..50 steps."""
    rng = np.random.default_rng(1)
    W = ring_lattice(n, 20)
    network = Network(W, (0,))
    params = {"omega": jnp.asarray(rng.normal(0.0, 1.0, n)), "G": 2.0}
    theta0 = jnp.asarray(rng.uniform(0.0, 2 * np.pi, n))
    coupling = kuramoto_coupling()
    steps = rng.integers(1, 51, W.nse)
    tau = sparse.BCOO((jnp.asarray(steps * dt), W.indices), shape=(n, n))
    run = dict(k=k, renorm_every=renorm_every, t_transient=0.5)
    total_steps = n_steps + 50
    plain = network_problem(_kuramoto, network, coupling, params, theta0, dt)
    per_edge = network_dde_problem(
        _kuramoto, network, coupling, params, theta0, dt, tau=tau
    )
    cases = (
        ("no delay", lyapunov_spectrum, plain),
        ("per-edge tau", lyapunov_spectrum_dde, per_edge),
    )
    return timed_rows(cases, n_steps, run, total_steps, repeat)


def mackey_glass_case(n_steps, repeat, k=8):
    problem = dde_problem(systems.mackey_glass(), 1.2, 17.0, 1.0)
    first, best, result = timed(
        lambda: lyapunov_spectrum_dde(
            problem, n_steps, k=k, renorm_every=10, t_transient=3000.0
        ),
        repeat,
    )
    return {
        "compile_s": first - best,
        "run_s": best,
        "exponents": np.asarray(result.exponents).round(5).tolist(),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", "--smoke", action="store_true", help="tiny sizes, for CI"
    )
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--renorm-every", type=int, default=10)
    parser.add_argument("--json", help="also write the numbers to this file")
    parser.add_argument(
        "--sparse-sizes",
        default="10000",
        help="node counts of the sparse ring lattice with per-edge delays",
    )
    parser.add_argument("--sparse-steps", type=int, default=200)
    parser.add_argument(
        "--only-sparse", action="store_true", help="skip the dense and MG cases"
    )
    args = parser.parse_args(argv)
    sizes, n_steps, mg_steps = (
        ((20,), 200, 1000) if args.quick else ((100, 500), 2000, 30_000)
    )
    out = {"backend": jax.default_backend(), "kuramoto": {}, "mackey_glass": None}
    print(f"backend: {out['backend']}, jax {jax.__version__}")
    sparse_sizes = [int(x) for x in args.sparse_sizes.split(",") if x.strip()]
    sparse_steps = args.sparse_steps
    if args.quick:
        sparse_sizes, sparse_steps = [200], 50
    out["sparse_kuramoto"] = {}
    for n in sparse_sizes:
        rows = sparse_kuramoto_case(n, sparse_steps, args.repeat, args.renorm_every)
        out["sparse_kuramoto"][n] = rows
        print(
            f"\nSparse Kuramoto ring lattice, n = {n}, 20 edges/node, per-edge "
            f"delays 1..50 steps, {sparse_steps} steps, k = 5"
        )
        print_rows(rows)
    if args.only_sparse:
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(out, fh, indent=2)
        return
    for n in sizes:
        rows = kuramoto_case(n, n_steps, args.repeat, args.renorm_every)
        out["kuramoto"][n] = rows
        print(
            f"\nKuramoto, d = {n}, {n_steps} steps, k = 5, "
            f"renorm_every = {args.renorm_every}"
        )
        print_rows(rows)
    mg = mackey_glass_case(mg_steps, args.repeat)
    out["mackey_glass"] = mg
    print(
        f"\nMackey-Glass tau=17, {mg_steps} steps, k=8: run {mg['run_s']:.3f} s "
        f"(compile {mg['compile_s']:.1f} s); exponents {mg['exponents']}"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
    return out


if __name__ == "__main__":
    main()
