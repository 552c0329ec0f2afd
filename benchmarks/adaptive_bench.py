"""Adaptive Lorenz: lyapax.adaptive against published lyapax 0.3.0, same tolerances.

For each tolerance pair (``rtol``, ``atol = rtol * 1e-2``) the Lorenz system
(sigma 10, rho 28, beta 8/3; dt = 0.1 between renormalisations, Dopri5,
transient 50 time units) is run by

* ``ours``: this checkout's ``diffrax_adaptive_step("dopri5", rtol, atol)``
  (sub-steps sized by the error of state and tangents, the default);
* ``ours-state``: the same with ``tangent_control=False`` (sub-steps sized by
  the state alone, what 0.3.0 does);
* ``published``: ``lyapax==0.3.0``'s ``diffrax_adaptive_step(Dopri5(scan_kind=
  "lax"), rtol, atol)``, run by another interpreter that has it installed
  (``--published-python``, default ``$LYAPAX_PUBLISHED_PYTHON`` or
  ``/tmp/venv-pub/bin/python``). When none is available the row says so.

Each variant runs in its own subprocess (the two packages cannot share one),
the variants alternate, and each reports its compile-and-first-run time and the
best of ``--repeat`` warm runs. Accuracy: ``|lambda_1 - 0.9056|`` and the error
of the exponent sum against the exact divergence ``-(sigma + 1 + beta)``.

Usage: ``python benchmarks/adaptive_bench.py [--quick] [--steps N] [--repeat N]
[--published-python PATH] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

LORENZ_L1 = 0.9056
DIVERGENCE = -(10.0 + 1.0 + 8.0 / 3.0)
ROOT = pathlib.Path(__file__).resolve().parents[1]


def worker(variant: str, rtol: float, n_steps: int, repeat: int) -> dict:
    """Time one variant in this process (its lyapax is whichever imports)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import diffrax
    import jax.numpy as jnp

    import lyapax
    from lyapax import systems
    from lyapax.adaptive import diffrax_adaptive_step

    atol = rtol * 1e-2
    if variant == "published":
        integrator = diffrax_adaptive_step(
            diffrax.Dopri5(scan_kind="lax"), rtol=rtol, atol=atol, max_steps=4096
        )
    else:
        integrator = diffrax_adaptive_step(
            "dopri5", rtol, atol, tangent_control=variant == "ours"
        )
    rhs = systems.lorenz(10.0, 28.0, 8.0 / 3.0)
    problem = lyapax.ode_problem(
        rhs, jnp.array([1.0, 1.0, 1.0]), 0.1, integrator=integrator
    )

    def run():
        result = lyapax.lyapunov_spectrum(problem, n_steps=n_steps, t_transient=50.0)
        return jax.block_until_ready(result.exponents)

    t0 = time.perf_counter()
    run()
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        exps = run()
        best = min(best, time.perf_counter() - t0)
    return {
        "variant": variant,
        "lyapax": lyapax.__version__,
        "rtol": rtol,
        "first_s": first,
        "best_s": best,
        "l1": float(exps[0]),
        "l1_err": abs(float(exps[0]) - LORENZ_L1),
        "sum_err": abs(float(sum(exps)) - DIVERGENCE),
    }


def _published_python(explicit: str | None) -> str | None:
    for candidate in (
        explicit,
        os.environ.get("LYAPAX_PUBLISHED_PYTHON"),
        "/tmp/venv-pub/bin/python",
    ):
        if candidate and pathlib.Path(candidate).exists():
            return candidate
    return None


def _run_worker(python: str, variant: str, rtol: float, args, env: dict) -> dict:
    cmd = [python, __file__, "--worker", variant, "--rtol", repr(rtol)]
    cmd += ["--steps", str(args.steps), "--repeat", str(args.repeat)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/")
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"variant": variant, "rtol": rtol, "unavailable": tail[0]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _probe_published(python: str, env: dict) -> str | None:
    """None when ``python`` imports lyapax 0.3.0 with lyapax.adaptive, else why not."""
    code = "import lyapax, lyapax.adaptive; print(lyapax.__version__)"
    done = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, env=env, cwd="/"
    )
    if done.returncode != 0:
        return f"{python} cannot import lyapax.adaptive"
    version = done.stdout.strip()
    return None if version == "0.3.0" else f"{python} has lyapax {version}, not 0.3.0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run for CI")
    parser.add_argument("--steps", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--published-python", default=None)
    parser.add_argument("--json", default=None, help="write the rows here")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rtol", type=float, default=1e-6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.rtol, args.steps, args.repeat)))
        return
    if args.quick:
        args.steps, args.repeat = 200, 1
    tolerances = (1e-6,) if args.quick else (1e-5, 1e-8, 1e-10)

    ours_env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    pub_env = {k: v for k, v in ours_env.items() if k != "PYTHONPATH"}
    published = _published_python(args.published_python)
    why_not = "no interpreter with lyapax 0.3.0 found" if published is None else None
    if published is not None:
        why_not = _probe_published(published, pub_env)

    rows = []
    print(
        f"Lorenz, dt 0.1, Dopri5, {args.steps} steps, best of {args.repeat} warm runs"
    )
    print(
        f"{'variant':<11}{'rtol':>8}{'compile+1st s':>15}{'warm s':>9}"
        f"{'|l1-0.9056|':>13}{'|sum-div|':>11}"
    )
    for rtol in tolerances:
        for variant in ("ours", "ours-state", "published"):
            if variant == "published" and why_not:
                row = {"variant": variant, "rtol": rtol, "unavailable": why_not}
            else:
                python = published if variant == "published" else sys.executable
                env = pub_env if variant == "published" else ours_env
                row = _run_worker(python, variant, rtol, args, env)
            rows.append(row)
            if "unavailable" in row:
                print(f"{variant:<11}{rtol:>8.0e}  unavailable: {row['unavailable']}")
                continue
            print(
                f"{variant:<11}{rtol:>8.0e}{row['first_s']:>15.2f}{row['best_s']:>9.3f}"
                f"{row['l1_err']:>13.2e}{row['sum_err']:>11.2e}"
            )
    ours = [r for r in rows if r["variant"] == "ours" and "unavailable" not in r]
    assert ours, "our adaptive integrator did not run"
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
