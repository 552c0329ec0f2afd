"""Sparse Kuramoto networks against hand-written sparse floors.

A ring lattice of ``n`` phase oscillators, each coupled to its ``--neighbours``
nearest nodes (half on each side, weight 1), k = 5 exponents, 200 Heun steps of
dt = 1e-2, QR every 10 steps. In one process, interleaved:

- ``ours``: the public API, ``lyapax.systems.kuramoto_network(W)`` +
  ``lyapunov_spectrum``, with ``W`` a ``jax.experimental.sparse.BCOO`` matrix;
- ``floor_bcoo``: the hand-written jitted ``lax.scan`` of
  ``network_floor.floor`` doing, per Heun stage, one BCOO product of the
  weights (an argument) with the ``(n, 2 + 2k)`` block
  ``[sin th, cos th, cos th * V, sin th * V]``, the n-sized updates and the QR;
- ``floor_ell``: the same with the weights as a padded neighbour list
  (``(n, w)`` indices and weights: one row gather and a weighted row sum).

The ratio is ``ours / min(floor_bcoo, floor_ell)``. ``first`` is the first call
(compile + run) of ours; ``compile`` is first minus warm, the tracing and
compile cost (it must not grow with ``n``: sizes are shapes, not unrolled
code). Times are the best of ``--repeats`` warm calls.

    python benchmarks/sparse_bench.py [--sizes 1000,10000] [--repeats 3] [--quick]
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from _timing import best_interleaved, parse_sizes, sizes_parser, timed  # noqa: E402
from jax.experimental import sparse  # noqa: E402

# The seed benchmark's run and floor, on sparse couplings.
from network_floor import DT, N_STEPS, RENORM, K, floor_call, ours  # noqa: E402

from lyapax._internal.sparse import as_ell  # noqa: E402
from lyapax.systems import kuramoto_network  # noqa: E402

SIZES = (1_000, 10_000, 100_000, 1_000_000)


def ring_lattice(n: int, neighbours: int, dtype=np.float64) -> sparse.BCOO:
    """BCOO ``(n, n)`` of ``dtype`` ones: node i receives from i +- 1 ..
    i +- neighbours/2 (mod n)."""
    half = neighbours // 2
    offsets = np.concatenate([np.arange(-half, 0), np.arange(1, half + 1)])
    rows = np.repeat(np.arange(n), offsets.size)
    cols = (rows + np.tile(offsets, n)) % n
    idx = np.stack([rows, cols], axis=1).astype(np.int32)
    data = np.ones(rows.size, dtype)
    return sparse.BCOO((jnp.asarray(data), jnp.asarray(idx)), shape=(n, n))


def problem_for(weights, n: int):
    omega = jnp.linspace(-1.0, 1.0, n)
    return kuramoto_network(weights, omega=omega, K=1.0, dt=DT)


def measure(n: int, neighbours: int, repeats: int) -> dict[str, float]:
    bcoo = ring_lattice(n, neighbours)
    ell = as_ell(bcoo)
    problem = problem_for(bcoo, n)
    jax.clear_caches()
    first = timed(lambda: ours(problem))
    a = np.asarray(ours(problem))
    b = np.asarray(floor_call(problem, bcoo))
    c = np.asarray(floor_call(problem, ell))
    diff = float(max(np.max(np.abs(a - b)), np.max(np.abs(a - c))))
    calls = {
        "ours": lambda: ours(problem),
        "floor_bcoo": lambda: floor_call(problem, bcoo),
        "floor_ell": lambda: floor_call(problem, ell),
    }
    best = best_interleaved(calls, repeats)
    return {
        **best,
        "nnz": int(bcoo.nse),
        "first": first,
        "compile": first - best["ours"],
        "diff": diff,
    }


def main(argv: list[str] | None = None) -> None:
    parser = sizes_parser(
        __doc__.splitlines()[0],
        SIZES,
        "node counts",
        repeats=3,
        quick="smoke run: n = 200, 500, one repeat",
    )
    parser.add_argument("--neighbours", type=int, default=20, help="edges per node")
    args = parser.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    repeats = args.repeats
    if args.quick:
        sizes, repeats = [200, 500], 1
    print(
        f"backend={jax.default_backend()}  k={K}  steps={N_STEPS}  "
        f"renorm_every={RENORM}  dt={DT}  heun  {args.neighbours} edges/node  "
        f"best of {repeats}"
    )
    print(
        f"{'n':>8} {'nnz':>9} {'ours s':>9} {'bcoo s':>9} {'ell s':>9} "
        f"{'ratio':>6} {'ns/node/step':>13} {'first s':>8} {'compile s':>9} "
        f"{'|diff|':>8}"
    )
    for n in sizes:
        m = measure(n, args.neighbours, repeats)
        fl = min(m["floor_bcoo"], m["floor_ell"])
        per = m["ours"] / (n * N_STEPS) * 1e9
        print(
            f"{n:>8} {m['nnz']:>9} {m['ours']:>9.4f} {m['floor_bcoo']:>9.4f} "
            f"{m['floor_ell']:>9.4f} {m['ours'] / fl:>6.2f} {per:>13.1f} "
            f"{m['first']:>8.2f} {m['compile']:>9.2f} {m['diff']:>8.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
