"""
Matrix-free tangents: why k exponents never need the d x d Jacobian
===================================================================

The Benettin method pushes a frame ``Y (d, k)`` of tangent vectors through each
step. Two ways to do it:

- **dense**: form the step's Jacobian with ``jax.jacfwd`` (``d`` forward passes,
  a ``d x d`` matrix) and multiply ``J @ Y``;
- **matrix-free**: push only the ``k`` columns with ``jax.jvp`` batched by
  ``jax.vmap`` (what :func:`lyapax.core.lyapunov_spectrum` does for any step),
  or with the network step's fused ``tangent_step``, which evaluates the
  coupling for the state and all ``k`` tangents in one product per stage.

The system is the all-to-all Kuramoto network of 14_gpu_acceleration.py
(d = n_nodes, one phase per node, dense weights), at k = 5. Each tangent step
is timed (jitted, warm, best of several) for growing d and the curves are
plotted log-log: the
dense Jacobian grows like d^3 (d forward passes each costing a d^2 product),
the matrix-free forms like d^2 (k passes of one d^2 product), so the gap widens
linearly with d.

Run ``python examples/10_matrix_free_scaling.py`` (``--quick`` for a small
smoke run, ``--out FILE`` for the figure's path).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")  # write a file; no display needed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

jax.config.update("jax_enable_x64", True)

from lyapax.systems import kuramoto_network  # noqa: E402

K = 5
STEPS_PER_CALL = 10  # several steps per timed call, so dispatch does not dominate


def dense_tangent(step):
    """``J @ Y`` with ``J = jacfwd(step)``: ``d`` forward passes per step."""

    def advance(x, Y):
        return step(x), jax.jacfwd(step)(x) @ Y

    return advance


def jvp_vmap_tangent(step):
    """``k`` forward passes batched by ``vmap``: the engine's generic path."""

    def advance(x, Y):
        def one(v):
            return jax.jvp(step, (x,), (v,))

        return jax.vmap(one, in_axes=1, out_axes=(None, 1))(Y)

    return advance


def fused_tangent(step):
    """The network step's own ``tangent_step``: one product per RK stage."""
    return step.tangent_step


METHODS = {
    "dense jacfwd": dense_tangent,
    "jvp + vmap": jvp_vmap_tangent,
    "fused tangent_step": fused_tangent,
}


def time_method(make, n_nodes: int, repeats: int) -> float:
    """Seconds per tangent step (best of ``repeats``), compiled beforehand."""
    problem = kuramoto_network(n_nodes, omega=jnp.linspace(-1.0, 1.0, n_nodes))
    advance = make(problem.step_fn)

    @jax.jit
    def run(x, Y):
        return jax.lax.fori_loop(0, STEPS_PER_CALL, lambda _, c: advance(*c), (x, Y))

    x0 = problem.state0
    Y0 = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(0), (n_nodes, K)))[0]
    jax.block_until_ready(run(x0, Y0))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(run(x0, Y0))
        best = min(best, time.perf_counter() - t0)
    return best / STEPS_PER_CALL


def main(argv: list[str] | None = None) -> None:
    # A literal, not __doc__: sphinx-gallery runs the script with __doc__ empty.
    parser = argparse.ArgumentParser(description="matrix-free tangent scaling")
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke)")
    parser.add_argument("--sizes", help="comma-separated d values (overrides)")
    parser.add_argument(
        "--out",
        default=str(
            Path(tempfile.gettempdir()) / "lyapax-examples" / "10_matrix_free.png"
        ),
        help="figure path (PNG)",
    )
    args, _ = parser.parse_known_args(argv)
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
    else:
        sizes = [10, 40] if args.quick else [25, 50, 100, 200, 400]
    repeats = 2 if args.quick else 5

    times: dict[str, list[float]] = {name: [] for name in METHODS}
    print(f"seconds per tangent step, k={K}, backend={jax.default_backend()}")
    print(f"{'d':>6} " + " ".join(f"{name:>20}" for name in METHODS))
    for d in sizes:
        for name, make in METHODS.items():
            times[name].append(time_method(make, d, repeats))
        print(f"{d:>6} " + " ".join(f"{times[n][-1]:>20.3e}" for n in METHODS))

    fig, ax = plt.subplots(figsize=(6, 4))
    for (name, ts), marker in zip(times.items(), "osd", strict=True):
        ax.plot(sizes, ts, marker + "-", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes, [str(d) for d in sizes])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("state dimension d (Kuramoto nodes)")
    ax.set_ylabel(f"seconds per tangent step (k = {K})")
    ax.set_title("Dense Jacobian vs matrix-free tangents")
    ax.legend()
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    print(f"figure written to {out.resolve()}")


if __name__ == "__main__":
    main()
