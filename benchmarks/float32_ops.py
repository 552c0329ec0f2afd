"""How accurate float32 arithmetic is on the device JAX picks (made for the lent TPU).

Each operation runs as one jitted float32 program (x64 off) on random
arguments and is compared with NumPy in float64 on the same float32 inputs:
``x, y`` uniform in [0.1, 10], ``u`` uniform in [-0.05, 0.05]. Printed per
operation: the largest and the mean error in units of float32's last place
at the exact result (ulp), and the mean signed relative error (a bias).
Then a 64 x 64 float32 product at each matmul precision, and the two
exponents of a linear flow (x1' = -2 x1 + x2, x2' = -x2; RK4, dt = 0.01,
QR every 10) with and without a matrix product in its vector field.
docs/method.md ("Precision") has the figures of the TPU v5e and the CPU.

    python benchmarks/float32_ops.py [--n 200000] [--steps 20000]
    python benchmarks/float32_ops.py --quick
"""

from __future__ import annotations

import argparse

import jax

jax.config.update("jax_enable_x64", False)  # before any array: all float32

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lyapax._engine.precision import growth_log  # noqa: E402


def _near1(u: np.ndarray) -> np.ndarray:
    """``1 + u`` as the device's float32 sum has it, in float64."""
    return (1 + u).astype(np.float32).astype(np.float64)


OPS = {
    "add": (lambda x, y, u: x + y, lambda x, y, u: x + y),
    "multiply": (lambda x, y, u: x * y, lambda x, y, u: x * y),
    "divide": (lambda x, y, u: x / y, lambda x, y, u: x / y),
    "sqrt": (lambda x, y, u: jnp.sqrt(x), lambda x, y, u: np.sqrt(x)),
    "exp": (lambda x, y, u: jnp.exp(x), lambda x, y, u: np.exp(x)),
    "expm1(u)": (lambda x, y, u: jnp.expm1(u), lambda x, y, u: np.expm1(u)),
    "log": (lambda x, y, u: jnp.log(x), lambda x, y, u: np.log(x)),
    "log(1+u)": (lambda x, y, u: jnp.log(1 + u), lambda x, y, u: np.log(_near1(u))),
    # What lyapax takes a growth |R_jj|'s log with on this device.
    "glog(x)": (lambda x, y, u: growth_log(x), lambda x, y, u: np.log(x)),
    "glog(1+u)": (lambda x, y, u: growth_log(1 + u), lambda x, y, u: np.log(_near1(u))),
    "log1p(u)": (lambda x, y, u: jnp.log1p(u), lambda x, y, u: np.log1p(u)),
    "sin": (lambda x, y, u: jnp.sin(x), lambda x, y, u: np.sin(x)),
    "cos": (lambda x, y, u: jnp.cos(x), lambda x, y, u: np.cos(x)),
    "tanh(x/5)": (lambda x, y, u: jnp.tanh(x / 5), lambda x, y, u: np.tanh(x / 5)),
}


def op_errors(n: int, seed: int = 0) -> list[dict]:
    """One row per operation: max and mean error (ulp), mean relative error."""
    rng = np.random.default_rng(seed)
    x, y = (rng.uniform(0.1, 10.0, n).astype(np.float32) for _ in range(2))
    u = rng.uniform(-0.05, 0.05, n).astype(np.float32)
    wide = [a.astype(np.float64) for a in (x, y, u)]
    rows = []
    for name, (device_op, exact_op) in OPS.items():
        got = np.asarray(jax.jit(device_op)(x, y, u), np.float64)
        exact = exact_op(*wide)
        ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
        err = np.abs(got - exact) / ulp
        rel = (got - exact) / np.abs(exact)
        rows.append(
            {
                "op": name,
                "max_ulp": float(err.max()),
                "mean_ulp": float(err.mean()),
                "mean_rel": float(rel.mean()),
            }
        )
    return rows


def matmul_errors(seed: int = 1) -> dict[str, float]:
    """Largest absolute error of a 64 x 64 product per matmul precision."""
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    exact = a.astype(np.float64) @ b.astype(np.float64)
    out = {}
    for precision in ("default", "high", "highest"):
        with jax.default_matmul_precision(precision):
            got = np.asarray(jax.jit(jnp.matmul)(a, b), np.float64)
        out[precision] = float(np.abs(got - exact).max())
    return out


def linear_flow(n_steps: int) -> dict[str, list[float]]:
    """The flow's two exponents (exactly -1 and -2 as the run grows)."""
    from lyapax import lyapunov_spectrum, ode_problem

    m = jnp.array([[-2.0, 1.0], [0.0, -1.0]], jnp.float32)
    fields = {
        "elementwise": lambda x: jnp.stack([-2.0 * x[0] + x[1], -x[1]]),
        "matrix product": lambda x: m @ x,
    }
    out = {}
    for name, field in fields.items():
        problem = ode_problem(field, jnp.array([1.0, 1.0], jnp.float32), dt=0.01)
        result = lyapunov_spectrum(problem, n_steps=n_steps, renorm_every=10)
        out[name] = [float(v) for v in np.asarray(result.exponents)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="arguments per op")
    parser.add_argument("--steps", type=int, default=20_000, help="linear flow")
    parser.add_argument("--quick", action="store_true", help="--n 2000 --steps 200")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.steps = 2000, 200
    if args.n < 1 or args.steps < 10 or args.steps % 10:
        parser.error("--n must be >= 1 and --steps a positive multiple of 10")
    device = jax.devices()[0]
    print(
        f"device: {jax.default_backend()} ({device.device_kind}), jax {jax.__version__}"
    )
    print(f"{'operation':<11}{'max ulp':>10}{'mean ulp':>10}{'mean rel':>12}")
    for row in op_errors(args.n):
        print(
            f"{row['op']:<11}{row['max_ulp']:>10.1f}{row['mean_ulp']:>10.2f}"
            f"{row['mean_rel']:>+12.1e}"
        )
    for precision, err in matmul_errors().items():
        print(f"64 x 64 product, matmul precision {precision}: max error {err:.2e}")
    for name, lam in linear_flow(args.steps).items():
        print(f"linear flow ({name}), {args.steps} steps: exponents {lam}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
