"""Kuramoto-Sivashinsky spectra: lyapax.pde against a hand-written floor.

KS ``u_t = -u u_x - u_xx - u_xxxx`` on ``[0, L)`` with ``L = 22 n / 64``
(the resolution of the classic ``L = 22``, 64-point grid at every size), the
2/3 rule, ETDRK4 with ``dt = 0.25``, ``k = 16`` exponents, QR every step,
``--steps`` steps (no transient: both start from the same attractor point),
for ``n_points`` 64 ... 4096:

- ``ours``: ``lyapunov_spectrum(kuramoto_sivashinsky(n, L), n_steps, k=16)``,
  warm (compiled beforehand with the same arguments);
- ``floor``: one jitted ``lax.fori_loop`` written here without lyapax: the
  ETDRK4 step in ``rfft`` modes with Kassam & Trefethen's coefficients
  (computed below with NumPy), its tangents by ``jax.jvp`` batched by
  ``jax.vmap``, ``jnp.linalg.qr`` and ``log|diag R|`` every step.

Times are the best of ``--repeats`` interleaved calls (seconds), every call
ended by ``jax.block_until_ready``; ``|ours-floor|`` is the largest
difference of the 16 exponents (the two compute the same thing, so it is at
rounding level). ``--quick`` (CI) runs n = 64, 128 with few steps.

    python benchmarks/pde_bench.py [--sizes 64,256,1024] [--steps 200]
        [--repeats 5] [--quick]
"""

from __future__ import annotations

import os
import time
from functools import partial

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _timing import best_interleaved, parse_sizes, sizes_parser  # noqa: E402

from lyapax import lyapunov_spectrum  # noqa: E402
from lyapax.pde import kuramoto_sivashinsky  # noqa: E402

K, DT = 16, 0.25
SIZES = (64, 128, 256, 512, 1024, 2048, 4096)


def length_of(n: int) -> float:
    return 22.0 * n / 64


def ours(problem, n_steps: int, qr: str = "auto"):
    return lyapunov_spectrum(problem, n_steps, k=K, qr=qr).exponents


def floor_coefficients(n: int, length: float, dt: float):
    """ETDRK4 coefficients of KS written out (Kassam & Trefethen 2005, their
    ``kursiv.m`` recipe: a contour of 64 points of radius 1 around ``h L``)."""
    q = 2 * np.pi * np.arange(n // 2 + 1) / length
    hL = dt * (q**2 - q**4)
    r = hL[:, None] + np.exp(2j * np.pi * (np.arange(64) + 0.5) / 64)[None, :]
    E, E2 = np.exp(hL), np.exp(hL / 2)
    Q = dt * np.mean((np.exp(r / 2) - 1) / r, axis=1).real
    f1 = dt * np.mean((-4 - r + np.exp(r) * (4 - 3 * r + r**2)) / r**3, axis=1).real
    f2 = dt * np.mean((2 + r + np.exp(r) * (r - 2)) / r**3, axis=1).real
    f3 = dt * np.mean((-4 - 3 * r - r**2 + np.exp(r) * (4 - r)) / r**3, axis=1).real
    k = np.arange(n // 2 + 1)
    # -(u^2/2)_x in modes, with the 2/3 rule and no Nyquist derivative.
    g = -0.5j * q * (3 * k < n) * (k != n // 2)
    return tuple(jnp.asarray(c) for c in (E, E2, Q, f1, f2, f3, g))


@partial(jax.jit, static_argnames=("k",))
def floor(u0, coeffs, n_steps, *, k):
    """Benettin for KS by hand: ETDRK4 step, jvp + vmap tangents, QR per step."""
    E, E2, Q, f1, f2, f3, g = coeffs
    n = u0.shape[0]

    def nl(v):
        u = jnp.fft.irfft(v, n=n)
        return g * jnp.fft.rfft(u * u)

    def etdrk4(u):
        v = jnp.fft.rfft(u)
        Nv = nl(v)
        a = E2 * v + Q * Nv
        Na = nl(a)
        b = E2 * v + Q * Na
        Nb = nl(b)
        c = E2 * a + Q * (2 * Nb - Nv)
        Nc = nl(c)
        v = E * v + Nv * f1 + 2 * (Na + Nb) * f2 + Nc * f3
        return jnp.fft.irfft(v, n=n)

    def one(i, carry):
        u, Y, cum = carry
        u, Y = jax.vmap(
            lambda y: jax.jvp(etdrk4, (u,), (y,)), in_axes=1, out_axes=(None, 1)
        )(Y)
        Qm, R = jnp.linalg.qr(Y)
        diag = jnp.diagonal(R)
        Qm = Qm * jnp.where(diag < 0, -1.0, 1.0)
        return u, Qm, cum + jnp.log(jnp.abs(diag))

    Y0, _ = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(0), (n, k)))
    _, _, cum = jax.lax.fori_loop(0, n_steps, one, (u0, Y0, jnp.zeros(k)))
    return -jnp.sort(-cum / (n_steps * DT))


def measure(n: int, n_steps: int, repeats: int) -> dict[str, float]:
    problem = kuramoto_sivashinsky(n, length_of(n), dt=DT)
    coeffs = floor_coefficients(n, length_of(n), DT)
    steps = jnp.asarray(n_steps, jnp.int32)
    t0 = time.perf_counter()
    a = jax.block_until_ready(ours(problem, n_steps))
    compile_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = jax.block_until_ready(floor(problem.state0, coeffs, steps, k=K))
    compile_floor = time.perf_counter() - t0
    diff = float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
    jax.block_until_ready(ours(problem, n_steps, "lapack"))
    calls = {
        "ours": lambda: ours(problem, n_steps),
        # The default QR of tall frames on CPU is the Householder one, which
        # keeps its speed when another process is busy (docs/performance.md);
        # LAPACK's, as the floor uses, is shown beside it.
        "lapack": lambda: ours(problem, n_steps, "lapack"),
        "floor": lambda: floor(problem.state0, coeffs, steps, k=K),
    }
    return {
        **best_interleaved(calls, repeats),
        "diff": diff,
        "first_ours": compile_ours,
        "first_floor": compile_floor,
        "lambda1": float(np.asarray(a)[0]),
    }


def main(argv: list[str] | None = None) -> None:
    parser = sizes_parser(
        __doc__.splitlines()[0],
        SIZES,
        "n_points",
        repeats=5,
        quick="smoke run: n = 64, 128, 40 steps",
    )
    parser.add_argument("--steps", type=int, default=200, help="steps per call")
    args = parser.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    if args.quick:
        sizes, args.steps, args.repeats = [64, 128], 40, 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"backend={jax.default_backend()}  k={K}  steps={args.steps}  dt={DT}  "
        f"L=22n/64  etdrk4, QR every step  best of {args.repeats}  "
        f"load average {load:.2f}"
    )
    print(
        f"{'n':>6} {'L':>7} {'ours s':>9} {'floor s':>9} {'ratio':>6} "
        f"{'qr=lapack':>10} {'ratio':>6} "
        f"{'1st ours':>9} {'1st floor':>9} {'lambda1':>8} {'|ours-floor|':>13}"
    )
    for n in sizes:
        m = measure(n, args.steps, args.repeats)
        print(
            f"{n:>6} {length_of(n):>7.1f} {m['ours']:>9.4f} {m['floor']:>9.4f} "
            f"{m['ours'] / m['floor']:>6.2f} {m['lapack']:>10.4f} "
            f"{m['lapack'] / m['floor']:>6.2f} {m['first_ours']:>9.2f} "
            f"{m['first_floor']:>9.2f} {m['lambda1']:>8.4f} {m['diff']:>13.1e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
