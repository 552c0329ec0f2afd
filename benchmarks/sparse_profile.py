"""Where the time of the sparse Kuramoto run goes: a ladder of programs.

The run of ``benchmarks/sparse_bench.py`` (ring lattice, ``--neighbours``
edges per node, k = 5, 200 Heun steps of dt = 1e-2, QR every 10 steps: 400
coupling stages, 20 QRs), rebuilt rung by rung, each rung one jitted
program doing what the one before it does and more:

- ``products``: the 400 products ``W @ X`` of the weights (lyapax's neighbour
  list, the ``EllWeights`` a BCOO input becomes) with an ``(n, 2 + 2k)`` block,
  nothing else (``products_bcoo``: the same with the BCOO matrix);
- ``state``: Heun on the phases, each stage's block ``[sin th, cos th, V, V]``
  (the tangent columns carried unscaled), ``dth = omega + g (cos th W sin th -
  sin th W cos th)``, the tangents only moved by their product columns;
- ``tangent``: the tangents' elementwise work too: the block ``[sin th, cos th,
  cos th V, sin th V]`` and ``dV = g (cos th (W cos th V) + sin th (W sin th V)
  - (sin th W sin th + cos th W cos th) V)`` (what ``KuramotoCoupling``'s fused
  jvp computes);
- ``qr``: ``tangent`` plus the QR every 10 steps and the log-growth sums (the
  QR method lyapax picks for the frame);
- ``lyapax``: the public call of ``sparse_bench``.

``sincos`` is apart from the ladder: the stages' 800 evaluations of ``sin`` and
``cos`` of n phases alone, the transcendental work a stage cannot avoid.
Each rung computes sin and cos once per stage (through
``lyapax._internal.fusion.computed_apart`` when the installed lyapax has it,
as its Kuramoto coupling then does; fused into the users otherwise, as before).
Times are the best of ``--repeats`` interleaved warm calls, compilation apart;
``process_time`` medians beside them. Run:

    python benchmarks/sparse_profile.py [--n 10000] [--repeats 7] [--quick]
"""

from __future__ import annotations

import argparse
import os
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from network_floor import N_STEPS, RENORM, K, ours  # noqa: E402
from sparse_bench import problem_for, ring_lattice  # noqa: E402

from lyapax._engine.benettin import qr_factor  # noqa: E402
from lyapax._engine.options import Renormalisation  # noqa: E402
from lyapax._internal import sparse as _sparse  # noqa: E402

try:  # where the installed lyapax keeps it (sparse.py in the first version)
    from lyapax._internal.fusion import computed_apart as _APART
except ImportError:
    _APART = getattr(_sparse, "computed_apart", None)
from lyapax._internal.sparse import EllWeights, as_ell  # noqa: E402

RUNGS = ("products", "state", "tangent", "qr")


def _sin_cos(theta):
    return jnp.sin(theta), jnp.cos(theta)


def _trig(theta, weights):
    """sin, cos of the phases, as the installed lyapax's coupling forms them."""
    if _APART is None:
        return _sin_cos(theta)
    return _APART(_sin_cos, weights, theta)


@partial(jax.jit, static_argnames=("rung", "k", "qr"))
def ladder(weights, omega, theta0, Y0, gain, dt, *, rung, k, qr):
    """One rung (see the module docstring): 20 blocks of 10 Heun steps."""
    n_blocks = N_STEPS // RENORM
    if rung == "products":

        def stage(X):
            return weights @ X

        X0 = jnp.concatenate([jnp.stack([theta0, theta0], 1), Y0, Y0], axis=1)
        X = jax.lax.fori_loop(0, 2 * N_STEPS, lambda _, X: stage(X), X0)
        return X[:k, 0]

    def f(theta, V):
        s, c = _trig(theta, weights)
        if rung == "state":
            block = [s[:, None], c[:, None], V, V]
        else:
            block = [s[:, None], c[:, None], c[:, None] * V, s[:, None] * V]
        p = weights @ jnp.concatenate(block, axis=1)
        ws, wc, wcv, wsv = p[:, 0], p[:, 1], p[:, 2 : 2 + k], p[:, 2 + k :]
        dtheta = omega + gain * (c * ws - s * wc)
        if rung == "state":
            return dtheta, gain * (wcv + wsv)
        diag = (s * ws + c * wc)[:, None]
        return dtheta, gain * (c[:, None] * wcv + s[:, None] * wsv - diag * V)

    def heun(_, carry):
        theta, V = carry
        k1, l1 = f(theta, V)
        k2, l2 = f(theta + dt * k1, V + dt * l1)
        return theta + 0.5 * dt * (k1 + k2), V + 0.5 * dt * (l1 + l2)

    def block(_, carry):
        theta, V, cum = carry
        theta, V = jax.lax.fori_loop(0, RENORM, heun, (theta, V))
        if rung != "qr":
            return theta, V, cum + V[0]
        Q, R = qr_factor(V, qr)
        diag = jnp.diagonal(R)
        return theta, Q * jnp.where(diag < 0, -1.0, 1.0), cum + jnp.log(jnp.abs(diag))

    start = (theta0, Y0, jnp.zeros(k, theta0.dtype))
    return jax.lax.fori_loop(0, n_blocks, block, start)[2]


@jax.jit
def sincos_only(theta0, dt):
    """800 evaluations of sin and cos of n phases (2 per Heun stage)."""

    def stage(_, theta):
        s, c = jnp.sin(theta), jnp.cos(theta)
        return theta + dt * (s * c)

    return jax.lax.fori_loop(0, 2 * N_STEPS, stage, theta0)


def programs(n: int, neighbours: int) -> dict[str, object]:
    """``{name: zero-argument call}`` of every rung, lyapax and the extras."""
    bcoo = ring_lattice(n, neighbours)
    ell = as_ell(bcoo)
    problem = problem_for(bcoo, n)
    params = problem.step_fn.params
    theta0 = problem.state0
    Y0, _ = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(0), (n, K)))
    qr = Renormalisation(RENORM, False, "auto").method(batched=False, d=n, k=K)
    # Products alone run with weights scaled to row sums 1, so that 400
    # products of the block stay finite.
    scaled = EllWeights(ell.indices, ell.values / neighbours)
    bcoo_scaled = type(bcoo)((bcoo.data / neighbours, bcoo.indices), shape=bcoo.shape)
    args = (params["omega"], theta0, Y0, params["G"] / n, problem.dt)
    calls = {
        "products": lambda: ladder(scaled, *args, rung="products", k=K, qr=qr),
        "products_bcoo": lambda: ladder(
            bcoo_scaled, *args, rung="products", k=K, qr=qr
        ),
    }
    for rung in RUNGS[1:]:
        calls[rung] = partial(ladder, ell, *args, rung=rung, k=K, qr=qr)
    calls["lyapax"] = lambda: ours(problem)
    calls["sincos"] = lambda: sincos_only(theta0, problem.dt)
    return calls


def measure(calls: dict[str, object], repeats: int) -> dict[str, tuple[float, float]]:
    """``{name: (best wall s, median process s)}`` over interleaved rounds."""
    for fn in calls.values():
        jax.block_until_ready(fn())  # compile outside the timing
    wall: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(fn())
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return {name: (min(wall[name]), float(np.median(cpu[name]))) for name in calls}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="node count")
    parser.add_argument("--neighbours", type=int, default=20, help="edges per node")
    parser.add_argument("--repeats", type=int, default=7, help="best of N calls")
    parser.add_argument("--quick", action="store_true", help="smoke run: n = 500, once")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.repeats = 500, 1
    calls = programs(args.n, args.neighbours)
    load0 = os.getloadavg()[0]
    times = measure(calls, args.repeats)
    load1 = os.getloadavg()[0]
    total = times["lyapax"][0]
    bound = times["products"][0]
    print(
        f"n={args.n}  {args.neighbours} edges/node  k={K}  {2 * N_STEPS} stages  "
        f"best of {args.repeats}  load {load0:.1f}-{load1:.1f}  "
        f"computed_apart={_APART is not None}"
    )
    print(
        f"{'program':>14} {'best ms':>9} {'cpu med ms':>11} {'step ms':>8} {'share':>6}"
    )
    previous = 0.0
    for name in ("products", *RUNGS[1:], "lyapax"):
        best, cpu = times[name]
        part = best - previous if name != "products" else best
        previous = best
        print(
            f"{name:>14} {best * 1e3:>9.1f} {cpu * 1e3:>11.1f} "
            f"{part * 1e3:>8.1f} {part / total:>6.0%}"
        )
    for name in ("products_bcoo", "sincos"):
        best, cpu = times[name]
        print(f"{name:>14} {best * 1e3:>9.1f} {cpu * 1e3:>11.1f}")
    print(f"lyapax / products = {total / bound:.2f}")


if __name__ == "__main__":
    main()
