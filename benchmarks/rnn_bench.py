"""A driven tanh RNN's conditional spectrum against a hand-written floor.

``h_{n+1} = tanh(W h_n + w_in u_n)``, ``W`` dense ``(n, n)`` with ``N(0,
1.5^2/n)`` entries, one scalar input per step, k = 16 exponents, QR every 10
steps, 10^4 steps (``--quick``: 10^3 steps, small sizes):

- ``ours``: ``lyapunov_spectrum(driven_problem(step, h0, inputs), ...)``,
  warm (compiled beforehand with the same arguments);
- ``floor``: one hand-written jitted loop over the same inputs doing, per
  step, ``W @ h``, the tanh, ``(1 - h'^2) * (W @ Y)`` and nothing else but
  the QR every 10 steps (the Benettin loop anyone would write in JAX).

Times are the best of ``--repeats`` interleaved rounds (seconds); the load
average is printed beside each row. Run:

    python benchmarks/rnn_bench.py [--quick] [--sizes 64,256] [--repeats 3]
"""

from __future__ import annotations

import os
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.tree_util import Partial

jax.config.update("jax_enable_x64", True)

from _timing import best_interleaved, parse_sizes, sizes_parser  # noqa: E402

from lyapax import driven_problem, lyapunov_spectrum  # noqa: E402

K, RENORM = 16, 10
SIZES = (64, 256, 1024, 4096)


def rnn_step(W, w_in, h, u):
    return jnp.tanh(W @ h + w_in * u)


@partial(jax.jit, static_argnames=("n_steps",))
def floor(W, w_in, h0, Y0, inputs, *, n_steps):
    """Exponents ``(k,)`` by a plain Benettin loop over ``inputs``."""

    def step(n, carry):
        h, Y = carry
        h = jnp.tanh(W @ h + w_in * inputs[n])
        return h, (1.0 - h * h)[:, None] * (W @ Y)

    def block(b, carry):
        h, Y, cum = carry
        h, Y = jax.lax.fori_loop(b * RENORM, (b + 1) * RENORM, step, (h, Y))
        Q, R = jnp.linalg.qr(Y)
        return h, Q, cum + jnp.log(jnp.abs(jnp.diagonal(R)))

    cum0 = jnp.zeros(Y0.shape[1], h0.dtype)
    _, _, cum = jax.lax.fori_loop(0, n_steps // RENORM, block, (h0, Y0, cum0))
    return jnp.sort(cum / n_steps)[::-1]


def main() -> None:
    parser = sizes_parser(
        __doc__.splitlines()[0], SIZES, "units n", 3, "10^3 steps, n <= 256"
    )
    parser.add_argument("--steps", type=int, default=10_000)
    args = parser.parse_args()
    sizes, n_steps = parse_sizes(args.sizes), args.steps
    if args.quick:
        sizes, n_steps = [n for n in sizes if n <= 256], 1_000
    print(
        f"backend {jax.default_backend()}, k = {K}, {n_steps} steps, QR every {RENORM}"
    )
    print(f"{'n':>6} {'ours s':>10} {'floor s':>10} {'ratio':>6}  load")
    for n in sizes:
        best = measure(n, n_steps, args.repeats)
        ratio = best["ours"] / best["floor"]
        row = f"{n:6d} {best['ours']:10.4f} {best['floor']:10.4f} {ratio:6.2f}"
        print(f"{row}  {os.getloadavg()[0]:.1f}")


def measure(n: int, n_steps: int, repeats: int) -> dict[str, float]:
    """Best interleaved seconds of ``ours`` and ``floor`` for ``n`` units."""
    rng = np.random.default_rng(n)
    W = jnp.asarray(rng.normal(size=(n, n)) * 1.5 / np.sqrt(n))
    w_in = jnp.asarray(rng.normal(size=n))
    h0 = jnp.asarray(rng.normal(scale=0.1, size=n))
    inputs = jnp.asarray(rng.normal(size=n_steps))
    # A pytree partial: W and w_in stay runtime leaves, not baked constants.
    problem = driven_problem(Partial(rnn_step, W, w_in), h0, inputs)
    Y0 = jnp.linalg.qr(jnp.asarray(rng.normal(size=(n, K))))[0]

    def ours():
        return lyapunov_spectrum(
            problem, n_steps, k=K, renorm_every=RENORM, qr="lapack"
        ).exponents

    def hand():
        return floor(W, w_in, h0, Y0, inputs, n_steps=n_steps)

    a, b = np.asarray(ours()), np.asarray(hand())  # compile, and compare
    assert np.allclose(a, b, atol=0.05), (a, b)
    return best_interleaved({"ours": ours, "floor": hand}, repeats)


if __name__ == "__main__":
    main()
