"""The seed benchmark against a hand-written floor.

Dense all-to-all Kuramoto network (examples/14_gpu_acceleration.py), k = 5
exponents, 200 Heun steps of dt = 1e-2, QR every 10 steps, for growing
d = n_nodes:

- ``ours``: the public call ``lyapunov_spectrum(problem, ...)`` on the problem
  built as that example builds it (ModelSpec -> build_jax_dfun -> Network ->
  network_problem, which lyapax.systems.kuramoto_network does), warm
  (compiled beforehand with the same arguments);
- ``floor``: one hand-written jitted ``lax.scan`` doing, per Heun stage, the
  single product ``(d, d) @ (d, 2 + 2k)`` of the weights with
  ``[sin th, cos th, cos th * V, sin th * V]`` and nothing else but the
  d-sized updates and the QR;
- ``rebuilt``: the public call with the whole problem (spec, dfun, network,
  problem) rebuilt from new arrays before each call: it must not recompile;
- ``page``: the user's page code as written, rebuilt before each call
  (``ModelSpec``, ``build_jax_dfun``, ``Network``, ``network_problem`` with
  its own eager ``jnp`` arrays), against ``floor`` given arrays built the same
  way (``page floor``: the hand-written user builds them too).

Times are the best of ``--repeats`` interleaved calls (seconds). Run:

    python benchmarks/network_floor.py [--sizes 20,50,100] [--repeats 5]
"""

from __future__ import annotations

import itertools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from _timing import best_interleaved, parse_sizes, sizes_parser  # noqa: E402

from lyapax.core import lyapunov_spectrum  # noqa: E402
from lyapax.coupling import kuramoto_coupling  # noqa: E402
from lyapax.network import Network, network_problem  # noqa: E402
from lyapax.simulator import ModelSpec, Parameter, StateVar, build_jax_dfun  # noqa: E402
from lyapax.systems import kuramoto_network  # noqa: E402

K, N_STEPS, RENORM, DT = 5, 200, 10, 1e-2
SIZES = (20, 50, 100, 200, 500, 1000, 2000)


def seed_problem(n_nodes: int, shift: float = 0.0):
    """The example's problem; ``shift`` changes the numbers, not the structure."""
    omega = jnp.linspace(-1.0, 1.0, n_nodes) + shift
    return kuramoto_network(n_nodes, omega=omega, K=1.0, dt=DT)


def page_arrays(n_nodes: int, shift: float = 0.0):
    """The page's eager arrays: weights, omega, state0."""
    weights = jnp.ones((n_nodes, n_nodes)) - jnp.eye(n_nodes)
    omega = jnp.linspace(-1.0, 1.0, n_nodes) + shift
    state0 = jnp.linspace(0.0, 2 * jnp.pi, n_nodes, endpoint=False)
    return weights, omega, state0


def page_problem(n_nodes: int, shift: float = 0.0):
    """The user's page code (examples/14_gpu_acceleration.py), as written."""
    weights, omega, state0 = page_arrays(n_nodes, shift)
    model = ModelSpec(
        name="kuramoto",
        state_variables=(StateVar("theta", default_init=0.0),),
        parameters=(Parameter("omega", 0.0),),
        cvar=("theta",),
        dfun_str={"theta": "omega + c"},
    )
    dfun = build_jax_dfun(model)
    network = Network(weights=weights, cvar_indices=model.cvar_indices)
    return network_problem(
        dfun,
        network,
        kuramoto_coupling(alpha=0.0),
        params={"omega": omega, "G": 1.0},
        state0=state0,
        dt=DT,
    )


def page_floor(n_nodes: int, shift: float = 0.0):
    """The floor on arrays built as the page builds them."""
    weights, omega, state0 = page_arrays(n_nodes, shift)
    return floor(
        weights,
        omega,
        state0,
        1.0,
        DT,
        k=K,
        n_blocks=N_STEPS // RENORM,
        renorm_every=RENORM,
    )


def ours(problem):
    return lyapunov_spectrum(
        problem, n_steps=N_STEPS, k=K, renorm_every=RENORM, t_transient=0.0
    ).exponents


@partial(jax.jit, static_argnames=("k", "n_blocks", "renorm_every"))
def floor(weights, omega, theta0, G, dt, *, k, n_blocks, renorm_every):
    """Benettin for the Kuramoto network by hand: one product per Heun stage."""
    d = theta0.shape[0]
    gain = G / d
    Y0, _ = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(0), (d, k)))

    def f(theta, V):
        s, c = jnp.sin(theta), jnp.cos(theta)
        p = weights @ jnp.concatenate(
            [s[:, None], c[:, None], c[:, None] * V, s[:, None] * V], axis=1
        )
        ws, wc, wcv, wsv = p[:, 0], p[:, 1], p[:, 2 : 2 + k], p[:, 2 + k :]
        dtheta = omega + gain * (c * ws - s * wc)
        dV = gain * (
            c[:, None] * wcv + s[:, None] * wsv - (s * ws + c * wc)[:, None] * V
        )
        return dtheta, dV

    def heun(carry, _):
        theta, V = carry
        k1, l1 = f(theta, V)
        k2, l2 = f(theta + dt * k1, V + dt * l1)
        return (theta + 0.5 * dt * (k1 + k2), V + 0.5 * dt * (l1 + l2)), None

    def block(carry, _):
        theta, V, cum = carry
        (theta, V), _ = jax.lax.scan(heun, (theta, V), None, length=renorm_every)
        Q, R = jnp.linalg.qr(V)
        diag = jnp.diagonal(R)
        Q = Q * jnp.where(diag < 0, -1.0, 1.0)
        return (theta, Q, cum + jnp.log(jnp.abs(diag))), None

    start = (theta0, Y0, jnp.zeros(k, theta0.dtype))
    (_, _, cum), _ = jax.lax.scan(block, start, None, length=n_blocks)
    return -jnp.sort(-cum / (dt * renorm_every * n_blocks))


def floor_call(problem, weights=None):
    """The floor on ``problem``'s network (``weights``: the coupling in another
    format, default the problem's own)."""
    params = problem.step_fn.params
    return floor(
        problem.step_fn.weights if weights is None else weights,
        params["omega"],
        problem.state0,
        params["G"],
        problem.dt,
        k=K,
        n_blocks=N_STEPS // RENORM,
        renorm_every=RENORM,
    )


def measure(n_nodes: int, repeats: int) -> dict[str, float]:
    problem = seed_problem(n_nodes)
    a = jax.block_until_ready(ours(problem))  # compile outside the timing
    b = jax.block_until_ready(floor_call(problem))
    diff = float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
    # "rebuilt": a new problem each round (new coupling, same structure).
    rounds = itertools.count(1)
    # The order matters at small d, where ~0.2 ms of a 1 ms call is host
    # Python: "ours" timed right after "page_floor" read ~50 us (5 %) slower
    # at d = 20, in every tree, than after a lyapax call (presumably the CPU
    # caches, which the call before it filled with other code). So "ours"
    # follows "page" (the last call of the previous round), as it followed
    # "rebuilt" before the page's calls were added; "floor" follows "ours"
    # and "rebuilt" follows "floor", as then.
    calls = {
        "ours": lambda: ours(problem),
        "floor": lambda: floor_call(problem),
        "rebuilt": lambda: ours(seed_problem(n_nodes, 1e-3 * next(rounds))),
        "page_floor": lambda: page_floor(n_nodes, 1e-3 * next(rounds)),
        "page": lambda: ours(page_problem(n_nodes, 1e-3 * next(rounds))),
    }
    jax.block_until_ready(calls["page"]())  # the page's own kuramoto_coupling
    jax.block_until_ready(calls["page_floor"]())
    return {**best_interleaved(calls, repeats), "diff": diff}


def main(argv: list[str] | None = None) -> None:
    parser = sizes_parser(__doc__.splitlines()[0], SIZES, "node counts", repeats=5)
    args = parser.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    print(
        f"backend={jax.default_backend()}  k={K}  steps={N_STEPS}  "
        f"renorm_every={RENORM}  dt={DT}  integrator=heun  best of {args.repeats}"
    )
    header = (
        f"{'d':>6} {'ours s':>9} {'floor s':>9} {'ratio':>6} "
        f"{'rebuilt s':>10} {'ratio':>6} {'page s':>9} {'ratio':>6} "
        f"{'pgfloor s':>10} {'ratio':>6} {'|ours-floor|':>13}"
    )
    print(header)
    for n in sizes:
        m = measure(n, args.repeats)
        print(
            f"{n:>6} {m['ours']:>9.4f} {m['floor']:>9.4f} "
            f"{m['ours'] / m['floor']:>6.2f} {m['rebuilt']:>10.4f} "
            f"{m['rebuilt'] / m['floor']:>6.2f} {m['page']:>9.4f} "
            f"{m['page'] / m['floor']:>6.2f} {m['page_floor']:>10.4f} "
            f"{m['page'] / m['page_floor']:>6.2f} {m['diff']:>13.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
