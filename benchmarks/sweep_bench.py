"""Batched sweep vs a loop of warm single runs: a Lorenz rho sweep.

Lorenz (sigma=10, beta=8/3) for ``--n`` values of rho in [0.5, 350], RK4,
dt=1e-2, ``--steps`` steps, renorm_every=10, full spectrum (k=3), no transient.

* sweep: one ``sweep_lyapunov_spectrum`` call for all rows (compiled once
  before timing, then timed ``--repeats`` times; the median is reported);
* loop: ``lyapunov_spectrum`` called once per rho, warm (compiled once, and the
  compiled program is reused since rho is a traced pytree leaf). Timing all
  ``--n`` calls takes long on a small CPU, so ``--loop-sample`` of them are
  timed and the per-system rate is extrapolated to ``--n`` (stated in the
  output).

Both report systems per second; the speedup is their ratio. Every timing ends
in ``jax.block_until_ready``. Checks: every row keeps the Lorenz sum rule
(exponents sum to -(sigma + 1 + beta)), and the sampled loop rows are compared
with the sweep's. Non-chaotic rows agree to ~1e-12; on chaotic rows the two
programs' last-bit rounding differences (batched vs scalar code) grow like
exp(lambda1 t), so over 100 time units they agree only within the statistical
error of the estimate; the report gives both numbers.

    python benchmarks/sweep_bench.py                # 1024 x 10_000 steps
    python benchmarks/sweep_bench.py --quick        # small smoke run
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lyapax.core import lyapunov_spectrum  # noqa: E402
from lyapax.integrators import rk4_step  # noqa: E402
from lyapax.sweep import sweep_lyapunov_spectrum  # noqa: E402
from lyapax.systems import lorenz  # noqa: E402

DT, RENORM = 1e-2, 10
X0 = jnp.array([1.0, 1.0, 20.0])


def lorenz_step(x, rho):
    """RK4 step of Lorenz with rho as the row parameter."""
    return rk4_step(lorenz(rho=rho), DT)(x)


def _timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return time.perf_counter() - t0, out


def run(n: int, steps: int, loop_sample: int, repeats: int) -> dict:
    rhos = jnp.linspace(0.5, 350.0, n)

    def sweep():
        return sweep_lyapunov_spectrum(
            lorenz_step, X0, rhos, DT, steps, renorm_every=RENORM
        ).exponents

    compile_sweep, _ = _timed(sweep)
    sweep_times, sweep_exps = [], None
    for _ in range(repeats):
        elapsed, sweep_exps = _timed(sweep)
        sweep_times.append(elapsed)
    sweep_s = statistics.median(sweep_times)

    def single(rho):
        step = rk4_step(lorenz(rho=rho), DT)
        return lyapunov_spectrum(step, X0, DT, steps, renorm_every=RENORM).exponents

    sample = np.linspace(0, n - 1, loop_sample).round().astype(int)
    compile_single, _ = _timed(lambda: single(float(rhos[0])))
    loop_s, loop_exps = _timed(lambda: [single(float(rhos[i])) for i in sample])
    diff = np.max(np.abs(np.asarray(loop_exps) - np.asarray(sweep_exps)[sample]), 1)
    sum_rule = np.abs(np.asarray(sweep_exps).sum(axis=1) + (10.0 + 1.0 + 8.0 / 3.0))

    sweep_rate = n / sweep_s
    loop_rate = loop_sample / loop_s
    return {
        "systems": n,
        "steps": steps,
        "renorm_every": RENORM,
        "backend": jax.default_backend(),
        "devices": len(jax.devices()),
        "sweep_s": sweep_s,
        "sweep_compile_s": compile_sweep,
        "sweep_systems_per_s": sweep_rate,
        "loop_timed_calls": int(loop_sample),
        "loop_s_for_timed_calls": loop_s,
        "loop_s_extrapolated": n / loop_rate,
        "loop_compile_s": compile_single,
        "loop_systems_per_s": loop_rate,
        "speedup": sweep_rate / loop_rate,
        "loop_rows_equal_to_1e-8": int(np.sum(diff < 1e-8)),
        "max_abs_diff_sweep_vs_loop": float(diff.max()),
        "max_sum_rule_error": float(sum_rule.max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1024, help="rho values (rows)")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--loop-sample", type=int, default=64, help="timed loop calls")
    parser.add_argument("--repeats", type=int, default=3, help="timed sweep calls")
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args()
    if args.quick:
        args.n, args.steps, args.loop_sample, args.repeats = 32, 500, 8, 1
    out = run(args.n, args.steps, min(args.loop_sample, args.n), args.repeats)
    # RK4 at dt=1e-2 keeps the sum rule to ~1e-2 up to rho=350 (fast orbits).
    assert out["max_sum_rule_error"] < 5e-2, out
    print(json.dumps(out, indent=2))
    print(
        f"sweep: {out['sweep_systems_per_s']:.1f} systems/s "
        f"({args.n} systems in {out['sweep_s']:.2f} s); "
        f"loop: {out['loop_systems_per_s']:.1f} systems/s "
        f"({out['loop_timed_calls']} warm calls timed, extrapolated to {args.n}: "
        f"{out['loop_s_extrapolated']:.1f} s); speedup {out['speedup']:.1f}x"
    )


if __name__ == "__main__":
    main()
