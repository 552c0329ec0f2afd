"""Cost of progress bars and checkpoint files on long runs, measured side by side.

Warm calls alternate between ``progress=False`` and ``progress=<a text file
on os.devnull>`` (tqdm formats and writes every update, as on a terminal);
the medians are compared:

1. ``lyapunov_spectrum``: Lorenz RK4 50 000 steps (QR every 10) and the seed
   case, dense Kuramoto d = 200, k = 5, 200 Heun steps (QR every 10): runs
   shorter than half a second, which (timed once) go in one piece; and (1b)
   Lorenz 2 000 000 steps, which a bar runs in pieces of about half a
   second, each continuing the last.
2. ``sweep_lyapunov_spectrum``: 64 Lorenz rows, 5 000 steps, chunks of 16.
3. ``run_until_converged``: Lorenz, 20 chunks of 2 500 steps, with a bar, and
   with ``checkpoint=`` a file (one atomic write per chunk).

Run: ``python benchmarks/progress_overhead.py [--quick] [--repeats N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

from _timing import timed  # noqa: E402

from lyapax import lyapunov_spectrum, ode_problem, rk4_step  # noqa: E402
from lyapax._engine import run  # noqa: E402
from lyapax.converge import run_until_converged  # noqa: E402
from lyapax.sweep import sweep_lyapunov_spectrum  # noqa: E402
from lyapax.systems import kuramoto_network, lorenz  # noqa: E402


def side_by_side(name: str, plain, other, repeats: int, label: str) -> None:
    plain(), other()  # compile both
    a, b = [], []
    for _ in range(repeats):
        a.append(timed(plain))
        b.append(timed(other))
    ma, mb = statistics.median(a), statistics.median(b)
    print(
        f"  {name:44s} off {ma * 1e3:9.3f} ms  {label} {mb * 1e3:9.3f} ms  "
        f"cost {100 * (mb / ma - 1):+6.2f}%"
    )


def lorenz_rows(x, p):
    return rk4_step(lorenz(rho=p["rho"]), 0.01)(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke sizes")
    parser.add_argument("--repeats", type=int, default=31)
    opts = parser.parse_args()
    repeats = 3 if opts.quick else opts.repeats
    sink = open(os.devnull, "w")  # noqa: SIM115 - the bar's file for the whole run
    n_lorenz = 5_000 if opts.quick else 50_000
    lorenz_p = ode_problem(lorenz(), jnp.ones(3), 0.01)
    d = 50 if opts.quick else 200
    kur = kuramoto_network(d, omega=jnp.linspace(-1, 1, d), K=1.0, dt=1e-2)
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, {repeats} repeats")

    print("1. lyapunov_spectrum, progress bar on vs off (medians, alternating)")
    for name, problem, n, k in (
        (f"Lorenz RK4 {n_lorenz} steps k=3", lorenz_p, n_lorenz, None),
        (f"Kuramoto d={d} k=5 200 Heun steps", kur, 200, 5),
    ):

        def call(progress, problem=problem, n=n, k=k):
            return lambda: (
                lyapunov_spectrum(
                    problem, n, k=k, renorm_every=10, progress=progress
                ).exponents
            )

        side_by_side(name, call(False), call(sink), repeats, "bar")

    n_long = 50_000 if opts.quick else 2_000_000
    print(f"1b. a long run in pieces of ~{run.PIECE_SECONDS} s (Lorenz {n_long} steps)")

    def long(progress):
        return lambda: (
            lyapunov_spectrum(
                lorenz_p, n_long, renorm_every=10, progress=progress
            ).exponents
        )

    side_by_side(
        f"Lorenz RK4 {n_long} steps k=3",
        long(False),
        long(sink),
        min(repeats, 7),
        "bar",
    )

    print("2. sweep_lyapunov_spectrum, bar by chunks")
    rows = 16 if opts.quick else 64
    rho = {"rho": jnp.linspace(10.0, 40.0, rows)}

    def sweep(progress):
        return lambda: (
            sweep_lyapunov_spectrum(
                lorenz_rows,
                jnp.ones(3),
                rho,
                0.01,
                n_lorenz // 10,
                renorm_every=10,
                batch_size=rows // 4,
                progress=progress,
            ).exponents
        )

    side_by_side(
        f"{rows} Lorenz rows, {n_lorenz // 10} steps",
        sweep(False),
        sweep(sink),
        repeats,
        "bar",
    )

    print("3. run_until_converged, 20 chunks: bar, checkpoint file")
    chunk = n_lorenz // 20
    folder = tempfile.mkdtemp()

    def converge(**kw):
        def go():
            path = kw.get("checkpoint")
            if path is not None and os.path.exists(path):
                os.remove(path)  # each call runs in full
            out = run_until_converged(
                lorenz_p,
                tol=1e-12,
                max_steps=n_lorenz,
                chunk_steps=chunk,
                renorm_every=10,
                **kw,
            )
            return out.result.exponents

        return go

    side_by_side("Lorenz, bar", converge(), converge(progress=sink), repeats, "bar")
    path = os.path.join(folder, "run.npz")
    side_by_side(
        "Lorenz, checkpoint file",
        converge(),
        converge(checkpoint=path),
        repeats,
        "file",
    )


if __name__ == "__main__":
    main()
