"""Cost of the run's self-checks (non-finite rows), side by side in one process.

1. Non-finite detection on the warm path. Every ``lyapunov_spectrum`` call now
   reads its per-block rows and final state for nan/inf (no kernel change).
   ``without`` replaces that reader by a no-op (what the engine did before);
   calls alternate between the two and the medians are compared:
   Lorenz RK4 50 000 steps k=3, and the seed case (dense Kuramoto d=200,
   k=5, 200 Heun steps, QR every 10). The reader's own time is also timed on
   the run's arrays.
2. ``check_invariants`` (diagnostics): off costs nothing (it is a separate
   call; the run's program is unchanged). On: the time of the check next to
   the time of the run it checks, warm (both compiled beforehand), for
   Lorenz (d=3), Lorenz-96 (d=40, full spectrum) and the Kuramoto seed case
   at d=200 and d=1000 (k=5).
3. ``master_stability_function``: 64 alphas in one program vs a Python loop
   of 64 single-alpha calls (warm), Roessler x-coupling.

Run: ``python benchmarks/self_checks.py [--quick] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from _timing import timed  # noqa: E402

from lyapax import lyapunov_spectrum, ode_problem  # noqa: E402
from lyapax._engine import finite, run  # noqa: E402
from lyapax.checks import check_invariants  # noqa: E402
from lyapax.network import master_stability_function  # noqa: E402
from lyapax.systems import kuramoto_network, lorenz, lorenz96, rossler  # noqa: E402


def _block(result):
    jax.block_until_ready(result.exponents)
    return result


def cases(quick: bool):
    lorenz_steps = 5_000 if quick else 50_000
    lorenz_p = ode_problem(lorenz(), jnp.ones(3), 0.01)
    kur = kuramoto_network(200, omega=jnp.linspace(-1, 1, 200), K=1.0, dt=1e-2)
    return {
        f"Lorenz RK4 {lorenz_steps} steps k=3": lambda: _block(
            lyapunov_spectrum(lorenz_p, lorenz_steps, renorm_every=10)
        ),
        "Kuramoto d=200 k=5 200 Heun steps": lambda: _block(
            lyapunov_spectrum(kur, 200, k=5, renorm_every=10)
        ),
    }


def nonfinite_cost(quick: bool, repeats: int) -> None:
    print("1. non-finite detection, warm calls (medians, alternating)")
    real = finite.nonfinite_report
    for name, call in cases(quick).items():
        call()  # compile
        with_t, without_t = [], []
        for _ in range(repeats):
            with_t.append(timed(call))
            run.finite.nonfinite_report = lambda *a, **k: None
            try:
                without_t.append(timed(call))
            finally:
                run.finite.nonfinite_report = real
        result = call()
        view_state = result.checkpoint.state
        t_reader = []
        for _ in range(repeats):
            t = time.perf_counter()
            real(
                result.history,
                result.times,
                view_state,
                renorm_every=10,
                n_transient_blocks=0,
                dt=0.01,
            )
            t_reader.append(time.perf_counter() - t)
        a, b = statistics.median(with_t), statistics.median(without_t)
        print(
            f"  {name:40s} with {a * 1e3:8.3f} ms  without {b * 1e3:8.3f} ms  "
            f"ratio {a / b:.3f}  reader alone "
            f"{statistics.median(t_reader) * 1e6:.1f} us"
        )


def check_cost(quick: bool, repeats: int) -> None:
    print("2. check_invariants (default window: 1/16 of the run, 10 to 1000 steps)")
    n_l = 5_000 if quick else 50_000
    problems = [
        ("Lorenz d=3 k=3", ode_problem(lorenz(), jnp.ones(3), 0.01), n_l, None),
        (
            "Lorenz-96 d=40 k=40",
            ode_problem(lorenz96(), 8 + jnp.sin(jnp.arange(40.0)), 0.01),
            1_000 if quick else 5_000,
            None,
        ),
    ]
    sizes = (200,) if quick else (200, 1000)
    for d in sizes:
        kur = kuramoto_network(d, omega=jnp.linspace(-1, 1, d), K=1.0, dt=1e-2)
        problems.append((f"Kuramoto d={d} k=5 200 steps", kur, 200, 5))
    for name, problem, n_steps, k in problems:

        def one_run(problem=problem, n_steps=n_steps, k=k):
            return _block(lyapunov_spectrum(problem, n_steps, k=k, renorm_every=10))

        result = one_run()
        check_invariants(problem, result, warn=False)  # compile
        runs, checks = [], []
        for _ in range(repeats):
            runs.append(timed(one_run))
            checks.append(
                timed(lambda r=result, p=problem: check_invariants(p, r, warn=False))
            )
        report = check_invariants(problem, result, warn=False)
        a, b = statistics.median(runs), statistics.median(checks)
        print(
            f"  {name:32s} run {a * 1e3:9.2f} ms  check ({report.window_steps} "
            f"steps) {b * 1e3:9.2f} ms  run+check / run {(a + b) / a:5.2f}x  "
            f"per step {b / report.window_steps / (a / n_steps):5.2f}x"
        )


def msf_cost(quick: bool, repeats: int) -> None:
    print("3. master stability function: one program vs a loop of single alphas")
    n_alpha = 16 if quick else 64
    n_steps = 2_000 if quick else 20_000
    alphas = np.linspace(0.0, 5.0, n_alpha)
    H = np.diag([1.0, 0.0, 0.0])
    x0 = jnp.array([1.0, 1.0, 0.0])

    def batched():
        msf = master_stability_function(rossler(), H, alphas, x0, 0.02, n_steps)
        return msf.exponent

    def loop():
        return [
            master_stability_function(rossler(), H, [a], x0, 0.02, n_steps).exponent
            for a in alphas
        ]

    batched(), loop()
    tb = statistics.median(timed(batched) for _ in range(repeats))
    tl = statistics.median(timed(loop) for _ in range(max(1, repeats // 2)))
    print(
        f"  {n_alpha} alphas x {n_steps} RK4 steps: one program {tb * 1e3:.1f} ms, "
        f"loop {tl * 1e3:.1f} ms, {tl / tb:.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke sizes, 3 calls")
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 51)
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, repeats {repeats}")
    nonfinite_cost(args.quick, repeats)
    check_cost(args.quick, max(3, repeats // 5))
    msf_cost(args.quick, max(3, repeats // 10))


if __name__ == "__main__":
    main()
