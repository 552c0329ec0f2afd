"""A driven tanh RNN's conditional spectrum against a hand-written floor.

``h_{n+1} = tanh(W h_n + w_in u_n)``, ``W`` dense ``(n, n)`` with ``N(0,
1.5^2/n)`` entries, one scalar input per step, k = 16 exponents, QR every 10
steps, 10^4 steps (``--quick``: 10^3 steps, small sizes):

- ``ours``: ``lyapunov_spectrum(driven_problem(step, h0, inputs), ...)``,
  warm (compiled beforehand with the same arguments);
- ``floor``: one hand-written jitted loop over the same inputs doing, per
  step, ``W @ h``, the tanh, ``(1 - h'^2) * (W @ Y)`` and nothing else but
  the QR every 10 steps (the Benettin loop anyone would write in JAX); the
  faster of two forms of the product (``W @ Y`` and ``(Y^T W^T)^T``, which
  XLA:CPU runs with different kernels) at each size.

Times are the best of ``--repeats`` interleaved rounds (seconds); the load
average is printed beside each row. Run:

    python benchmarks/rnn_bench.py [--quick] [--sizes 64,256] [--repeats 3]
"""

from __future__ import annotations

import os

# One OpenBLAS thread for both sides, set before NumPy loads it: its spinning
# threads compete with XLA's for the cores (docs/performance.md), and lyapax
# holds it to one thread during a run anyway, so a floor with the default
# threads measured 9x slower at n = 1024 on a loaded 2-core machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from functools import partial  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.tree_util import Partial  # noqa: E402

jax.config.update("jax_enable_x64", True)

from _timing import best_interleaved, parse_sizes, sizes_parser  # noqa: E402

from lyapax import driven_problem, lyapunov_spectrum  # noqa: E402

K, RENORM = 16, 10
SIZES = (64, 256, 1024, 4096)


def rnn_step(W, w_in, h, u):
    return jnp.tanh(W @ h + w_in * u)


def _plain(W, w_in, u, h, Y):
    h = jnp.tanh(W @ h + w_in * u)
    return h, (1.0 - h * h)[:, None] * (W @ Y)


def _transposed(W, w_in, u, h, Y):
    # The same product as (Y^T W^T)^T: XLA:CPU picks another kernel for it,
    # faster at some sizes.
    h = jnp.tanh(W @ h + w_in * u)
    return h, ((Y.T @ W.T) * (1.0 - h * h)[None, :]).T


@partial(jax.jit, static_argnames=("n_steps", "form"))
def floor(W, w_in, h0, Y0, inputs, *, n_steps, form=_plain):
    """Exponents ``(k,)`` by a plain Benettin loop over ``inputs``."""

    def block(b, carry):
        h, Y, cum = carry
        h, Y = jax.lax.fori_loop(
            0, RENORM, lambda i, c: form(W, w_in, inputs[b * RENORM + i], *c), (h, Y)
        )
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

    def hand(form):
        return lambda: floor(W, w_in, h0, Y0, inputs, n_steps=n_steps, form=form)

    a = np.asarray(ours())  # compile, and compare
    for form in (_plain, _transposed):
        assert np.allclose(a, np.asarray(hand(form)()), atol=0.05)
    calls = {"ours": ours, "plain": hand(_plain), "transposed": hand(_transposed)}
    best = best_interleaved(calls, repeats)
    # The floor: the faster of the two hand-written forms at this size.
    return {"ours": best["ours"], "floor": min(best["plain"], best["transposed"])}


if __name__ == "__main__":
    main()
