"""The user's GPU page, run as written: does its timed call time the run?

The page (``examples/14``'s published ancestor) warms up with
``lyapunov_spectrum(problem, n_steps=10, k=5, renorm_every=5, t_transient=0.0)``
and then times ``n_steps=200, renorm_every=10``, trusting the warm-up to have
paid for compilation. For each network size ``d`` this script runs exactly
that worker body in a fresh process (as the page does), then repeats the timed
call with the same arguments, now certainly compiled, and reports

- ``page_s``: the page's timed call (what the page prints);
- ``warm_s``: the best of ``--repeats`` further calls with the timed arguments;
- ``ratio = page_s / warm_s``: 1.0 when the page times the run only, much more
  when its timed call compiles again;
- ``cpu_ratio``: the same with the process's CPU time, which a busy machine
  disturbs far less than wall time (a preempted millisecond call can take ten).

With ``--trials N`` each size runs in N fresh processes and the medians are
reported (single millisecond timings on a shared machine are noisy).
``--control`` adds, in alternating fresh processes, the same sequence with
the warm-up made with the timed call's own lengths (``ctrl_ratio``): what a
process's second call costs whatever its lengths, so ``ratio`` above
``ctrl_ratio`` is what new run lengths add.

Only the public API is used, exactly as the page imports it. The machine and
its load decide the absolute numbers; compare ratios. Run::

    python benchmarks/page_bench.py [--sizes 20,200,2000] [--repeats 3]
                                    [--trials 1] [--control] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SIZES = (20, 50, 100, 200, 500, 1000, 2000)
MARK = "PAGE_BENCH "


def worker(n_nodes: int, n_steps: int, repeats: int, control: bool = False) -> None:
    """The page's worker body (CPU), then ``repeats`` warm timed calls;
    ``control``: the warm-up made with the timed call's lengths."""
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)

    from lyapax.core import lyapunov_spectrum
    from lyapax.coupling import kuramoto_coupling
    from lyapax.network import Network, network_problem
    from lyapax.simulator import ModelSpec, Parameter, StateVar, build_jax_dfun

    weights = jnp.ones((n_nodes, n_nodes)) - jnp.eye(n_nodes)
    model = ModelSpec(
        name="kuramoto",
        state_variables=(StateVar("theta", default_init=0.0),),
        parameters=(Parameter("omega", 0.0),),
        cvar=("theta",),
        dfun_str={"theta": "omega + c"},
    )
    dfun = build_jax_dfun(model)
    params = {"omega": jnp.linspace(-1.0, 1.0, n_nodes), "G": 1.0}
    dt = 1e-2
    network = Network(weights=weights, cvar_indices=model.cvar_indices)
    state0 = jnp.linspace(0.0, 2 * jnp.pi, n_nodes, endpoint=False)
    problem = network_problem(
        dfun,
        network,
        kuramoto_coupling(alpha=0.0),
        params=params,
        state0=state0,
        dt=dt,
    )

    warm_steps, warm_every = (n_steps, 10) if control else (10, 5)
    warm = lyapunov_spectrum(
        problem, n_steps=warm_steps, k=5, renorm_every=warm_every, t_transient=0.0
    )
    jax.block_until_ready(warm.exponents)

    def timed() -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        result = lyapunov_spectrum(
            problem, n_steps=n_steps, k=5, renorm_every=10, t_transient=0.0
        )
        jax.block_until_ready(result.exponents)
        return time.perf_counter() - t0, time.process_time() - c0

    page = timed()
    warm = [timed() for _ in range(repeats)]
    payload = {
        "d": n_nodes,
        "page_s": page[0],
        "warm_s": min(w[0] for w in warm),
        "page_cpu_s": page[1],
        "warm_cpu_s": min(w[1] for w in warm),
    }
    print(MARK + json.dumps(payload), flush=True)


def run_size(n_nodes: int, n_steps: int, repeats: int, control: bool = False) -> dict:
    """One size in a fresh process (JAX compiles nothing across processes)."""
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            str(n_nodes),
            str(n_steps),
            str(repeats),
            str(int(control)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    raise RuntimeError(
        f"worker for d={n_nodes} failed (exit {proc.returncode}):\n{proc.stderr}"
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*map(int, sys.argv[2:5]), control=sys.argv[5] == "1")
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=1, help="processes per size")
    parser.add_argument(
        "--control", action="store_true", help="also warm up with the timed lengths"
    )
    parser.add_argument("--quick", action="store_true", help="smoke run (CI)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.quick:
        sizes, args.repeats, args.trials = [20], 2, 1
    rows = []
    head = f"{'d':>6} {'page_s':>9} {'warm_s':>9} {'ratio':>7} {'cpu_ratio':>9}"
    print(head + (f" {'ctrl_ratio':>10}" if args.control else ""))
    for n_nodes in sizes:
        trials, controls = [], []
        for _ in range(args.trials):  # page and control alternate
            trials.append(run_size(n_nodes, args.steps, args.repeats))
            if args.control:
                controls.append(run_size(n_nodes, args.steps, args.repeats, True))
        row = {"d": n_nodes, "trials": len(trials)}
        for key in ("page_s", "warm_s", "page_cpu_s", "warm_cpu_s"):
            row[key] = statistics.median(t[key] for t in trials)
        row["ratio"] = row["page_s"] / row["warm_s"]
        row["cpu_ratio"] = row["page_cpu_s"] / row["warm_cpu_s"]
        line = (
            f"{row['d']:>6} {row['page_s']:>9.4f} {row['warm_s']:>9.4f} "
            f"{row['ratio']:>7.2f} {row['cpu_ratio']:>9.2f}"
        )
        if controls:
            row["ctrl_ratio"] = statistics.median(c["page_s"] for c in controls) / (
                statistics.median(c["warm_s"] for c in controls)
            )
            line += f" {row['ctrl_ratio']:>10.2f}"
        rows.append(row)
        print(line, flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
