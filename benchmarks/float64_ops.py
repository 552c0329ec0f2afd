"""How accurate float64 operations are, per array size, on the device JAX picks.

Made for the lent TPU, whose float64 is emulated with pairs of float32 and
whose transcendental functions were float32-accurate on arrays of one
element (docs/method.md, "Precision"). Each operation runs jitted in float64
on arguments uniform in [0.05, 3] and is compared with NumPy in float64 on
the same inputs, at four shapes: ``()`` and ``(1,)`` and ``(8,)`` as the body
of a ``lax.map`` (the shape a scalar ODE's field sees inside the run's loop),
and ``(N,)`` in one call. Printed per operation and shape: the largest and
the median relative error. The last rows are what lyapax uses in their place
on a TPU (``growth_log``, ``float_power``, ``float_sin``, ``float_cos`` and
the series ``exp``), with the platform pretended a TPU where it is not one,
so that the same rows are computed everywhere.

    python benchmarks/float64_ops.py [--n 2048] [--json out.json]
    python benchmarks/float64_ops.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lyapax._engine import precision  # noqa: E402

# (device operation, NumPy reference); each takes x and returns an array.
NATIVE = {
    "exp": (jnp.exp, np.exp),
    "log": (jnp.log, np.log),
    "sin": (jnp.sin, np.sin),
    "cos": (jnp.cos, np.cos),
    "tanh": (jnp.tanh, np.tanh),
    "sqrt": (jnp.sqrt, np.sqrt),
    "1.0 / x": (lambda x: 1.0 / x, lambda x: 1.0 / x),
    "1.0 - x": (lambda x: 1.0 - x, lambda x: 1.0 - x),
    "-x + 1.0": (lambda x: -x + 1.0, lambda x: -x + 1.0),
    "x ** 10.0": (lambda x: x**10.0, lambda x: x**10.0),
    "x * (x + 0.37)": (lambda x: x * (x + 0.37), lambda x: x * (x + 0.37)),
}
LIBRARY = {
    "growth_log": (precision.growth_log, np.log),
    "float_power(x, 10)": (lambda x: precision.float_power(x, 10.0), lambda x: x**10.0),
    "float_sin": (precision.float_sin, np.sin),
    "float_cos": (precision.float_cos, np.cos),
    "series exp": (precision._series_exp64, np.exp),
}


def shapes(n: int) -> dict[str, tuple[tuple[int, ...], bool]]:
    """Label -> (argument shape, mapped over its first axis)."""
    rows = max(n // 8, 1)
    return {
        "()": ((n,), True),
        "(1,)": ((n, 1), True),
        "(8,)": ((rows, 8), True),
        f"({n},)": ((n,), False),
    }


def errors(fn: Any, exact: Any, x: np.ndarray, mapped: bool) -> tuple[float, float]:
    """Largest and median relative error of ``fn`` on ``x`` against ``exact``."""
    program = jax.jit((lambda a: jax.lax.map(fn, a)) if mapped else fn)
    got = np.asarray(program(jnp.asarray(x)), np.float64)
    want = exact(x)
    rel = np.abs(got - want) / np.maximum(np.abs(want), np.finfo(np.float64).tiny)
    return float(rel.max()), float(np.median(rel))


def measure(n: int, seed: int = 0) -> list[dict]:
    """One row per operation and shape."""
    rng = np.random.default_rng(seed)
    rows = []
    platform = precision._platform
    for group, table in (("native", NATIVE), ("lyapax", LIBRARY)):
        if group == "lyapax":
            # The library's TPU forms, wherever this runs.
            precision._platform = lambda: "tpu"
        try:
            for name, (fn, exact) in table.items():
                for label, (shape, mapped) in shapes(n).items():
                    x = rng.uniform(0.05, 3.0, shape)
                    worst, median = errors(fn, exact, x, mapped)
                    rows.append(
                        {
                            "group": group,
                            "op": name,
                            "shape": label,
                            "max_rel": worst,
                            "median_rel": median,
                        }
                    )
        finally:
            precision._platform = platform
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2048, help="arguments per row")
    parser.add_argument("--quick", action="store_true", help="--n 64")
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args(argv)
    if args.quick:
        args.n = 64
    if args.n < 8:
        parser.error(f"--n must be >= 8; got {args.n}")
    device = jax.devices()[0]
    print(
        f"device: {jax.default_backend()} ({device.device_kind}), jax {jax.__version__}"
    )
    rows = measure(args.n)
    labels = list(shapes(args.n))
    print(f"{'max relative error':<24}" + "".join(f"{s:>11}" for s in labels))
    for group in ("native", "lyapax"):
        for op in dict.fromkeys(r["op"] for r in rows if r["group"] == group):
            cells = {r["shape"]: r["max_rel"] for r in rows if r["op"] == op}
            line = f"{op:<24}" + "".join(f"{cells[s]:>11.1e}" for s in labels)
            print(line)
    if args.json:
        # Written beside and moved in: a reader never sees half a file.
        partial = args.json + ".partial"
        with open(partial, "w") as f:
            json.dump({"device": str(device), "n": args.n, "rows": rows}, f, indent=1)
        os.replace(partial, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
