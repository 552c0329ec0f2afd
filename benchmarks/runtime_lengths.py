"""Run lengths as data vs compiled in: this tree against the static-length engine.

The engine compiles one program per problem structure, with ``n_steps``,
``renorm_every``, ``t_transient`` and ``decimate`` as data. This script
measures what that costs a warm call, side by side in one process, against
the last engine that compiled the lengths in (commit a7ca869 by default,
exported from this clone's git history into a temporary package
``lyapax_static``). Calls alternate between the two so that the machine's
load drifts into both columns alike; wall-time medians, JAX timings end in
``jax.block_until_ready`` after an untimed compiling call.

Cases: Lorenz RK4, 50 000 steps, renorm_every=10, transient 100 (also with
``static_renorm_every=True``); the seed benchmark's dense Kuramoto network
(k=5, 200 Heun steps, renorm_every=10) at d = 20, 200, 2000; and the first
call of a new closure (a fresh ``lambda`` around Lorenz, trace + compile).

    python benchmarks/runtime_lengths.py [--repeats 101] [--before a7ca869] [--quick]
"""

from __future__ import annotations

import argparse
import importlib
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from _timing import timed  # noqa: E402

BEFORE = "a7ca869"  # the last commit whose engine compiled the run lengths in
LORENZ = dict(n_steps=50_000, renorm_every=10, t_transient=100.0)
SEED = dict(n_steps=200, k=5, renorm_every=10, t_transient=0.0)
X0 = (1.0, 1.0, 1.0)


def static_engine(rev: str, into: Path):
    """The package at ``rev`` of this clone, importable as ``lyapax_static``."""
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", rev, "lyapax"],
        capture_output=True,
        check=False,
    )
    if archive.returncode:
        sys.exit(
            f"runtime_lengths: revision {rev!r} is not in this clone's history "
            f"({archive.stderr.decode().strip()}); pass --before REV"
        )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    package = into / "lyapax_static"
    (into / "lyapax").rename(package)
    name = re.compile(r"\blyapax(?=[.\s])")
    for path in package.rglob("*.py"):
        text = path.read_text()
        path.write_text(name.sub("lyapax_static", text))
    sys.path.insert(0, str(into))
    return engine("lyapax_static")


def engine(package: str):
    """``(core, systems)`` modules of a lyapax package."""
    return tuple(importlib.import_module(f"{package}.{m}") for m in ("core", "systems"))


def side_by_side(calls: dict, repeats: int) -> dict[str, float]:
    """Median wall time of each call, alternating their order every round."""
    for fn in calls.values():
        timed(fn)  # compiles
    times: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for r in range(repeats):
        for name in names if r % 2 else names[::-1]:
            times[name].append(timed(calls[name]))
    return {name: statistics.median(v) for name, v in times.items()}


def pair(problems: dict, kw: dict) -> dict:
    """Warm calls of each engine's problem, keyed like ``problems``."""
    return {
        name: (lambda core=core, p=p: core.lyapunov_spectrum(p, **kw).exponents)
        for name, (core, p) in problems.items()
    }


def warm_cases(engines, sizes, repeats, lorenz_steps):
    """Rows ``(case, before, after, after with static_renorm_every)``."""
    rows = []
    lorenz = dict(LORENZ, n_steps=lorenz_steps)
    x0 = jnp.array(X0)
    problems = {
        name: (core, core.ode_problem(systems.lorenz(), x0, 1e-2, "rk4"))
        for name, (core, systems) in engines.items()
    }
    calls = pair(problems, lorenz)
    core, new = problems["after"]
    calls["static"] = lambda: (
        core.lyapunov_spectrum(new, **lorenz, static_renorm_every=True).exponents
    )
    med = side_by_side(calls, repeats)
    rows.append((f"Lorenz RK4 {lorenz_steps} steps, warm", *med.values()))
    for n in sizes:
        omega = jnp.linspace(-1.0, 1.0, n)
        problems = {
            name: (core, systems.kuramoto_network(n, omega=omega, K=1.0, dt=1e-2))
            for name, (core, systems) in engines.items()
        }
        med = side_by_side(
            pair(problems, SEED), repeats if n < 1000 else max(3, repeats // 20)
        )
        rows.append((f"Kuramoto d={n}, warm", *med.values(), None))
    return rows


def first_calls(engines, rounds: int) -> tuple[float, float]:
    """Median first call of a new closure (trace + compile + run), before/after."""
    kw = dict(LORENZ, n_steps=1000)
    x0 = jnp.array(X0)
    times: dict[str, list[float]] = {"before": [], "after": []}
    for r in range(2 * rounds):
        rho = 28.0 + 0.01 * r  # a new closure each time, as in a parameter loop
        name = "before" if r % 2 else "after"
        core, systems = engines[name]
        base = systems.lorenz()

        def step(s, rho=rho, base=base):
            return base.fn(s, {"sigma": 10.0, "rho": rho, "beta": 8.0 / 3.0})

        problem = core.ode_problem(step, x0, 1e-2, "rk4")
        times[name].append(timed(pair({name: (core, problem)}, kw)[name]))
    return statistics.median(times["before"]), statistics.median(times["after"])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=101)
    ap.add_argument("--before", default=BEFORE, help="git revision to compare with")
    ap.add_argument("--quick", action="store_true", help="a smoke run, seconds")
    args = ap.parse_args(argv)
    sizes, steps, repeats = (20, 200, 2000), LORENZ["n_steps"], args.repeats
    if args.quick:
        sizes, steps, repeats = (20,), 2000, 3
    with tempfile.TemporaryDirectory() as tmp:
        engines = {"before": static_engine(args.before, Path(tmp))}
        engines["after"] = engine("lyapax")
        rows = warm_cases(engines, sizes, repeats, steps)
        first = first_calls(engines, 2 if args.quick else 4)
    print(f"wall-time medians of {repeats} alternating calls, {jax.devices()[0]}")
    print(f"| case | static lengths ({args.before}) | runtime lengths | ratio |")
    print("|---|---|---|---|")
    for case, old, new, static in rows:
        print(
            f"| {case} | {old * 1e3:.3f} ms | {new * 1e3:.3f} ms | {new / old:.3f}x |"
        )
        if static is not None:
            print(
                f"| ... with static_renorm_every=True | | {static * 1e3:.3f} ms "
                f"| {static / old:.3f}x |"
            )
    print(
        f"| first call of a new closure (Lorenz RK4) | {first[0]:.3f} s "
        f"| {first[1]:.3f} s | {first[1] / first[0]:.2f}x |"
    )


if __name__ == "__main__":
    main()
