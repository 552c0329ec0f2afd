"""The README example's first call with JAX's persistent compilation cache.

For each dtype, a new cache folder and two fresh processes in turn: the
first fills the cache (``cold``), the second reads it (``second``); each
reports its first call, its best warm call and JAX's own events (tracing,
lowering, compiling, reading the cache; cache hits and misses). The documented
numbers (docs/getting_started.md, "Compile once: the persistent cache") come
from this script. Run::

    python benchmarks/persistent_cache.py [--dtypes float64,float32]
                                          [--n-steps 100000] [--rounds 1]

On a machine with an accelerator JAX picks it as usual (``JAX_PLATFORMS``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

MARK = "PERSISTENT_CACHE "


def worker(cache: str, dtype: str, n_steps: int) -> None:
    """One process: the README example's call, first and warm, with events."""
    import jax

    jax.config.update("jax_enable_x64", dtype == "float64")
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    seconds: dict[str, float] = {}
    counts: dict[str, int] = {}

    def on_duration(event: str, duration: float, **kwargs: object) -> None:
        name = event.rsplit("/", 1)[-1]
        seconds[name] = seconds.get(name, 0.0) + duration

    def on_event(event: str, **kwargs: object) -> None:
        name = event.rsplit("/", 1)[-1]
        counts[name] = counts.get(name, 0) + 1

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    import jax.numpy as jnp

    from lyapax import lyapunov_spectrum, ode_problem
    from lyapax.systems import lorenz

    problem = ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)

    def call() -> float:
        t0 = time.perf_counter()
        result = lyapunov_spectrum(
            problem, n_steps=n_steps, renorm_every=10, t_transient=50.0
        )
        jax.block_until_ready(result.exponents)
        return time.perf_counter() - t0

    first = call()
    warm = min(call() for _ in range(3))
    keep = (
        "jaxpr_trace_duration",
        "jaxpr_to_mlir_module_duration",
        "backend_compile_duration",
        "cache_retrieval_time_sec",
    )
    report = {
        "backend": jax.default_backend(),
        "first_s": round(first, 4),
        "warm_s": round(warm, 4),
        **{k: round(v, 4) for k, v in seconds.items() if k in keep},
        "hits": counts.get("cache_hits", 0),
        "misses": counts.get("cache_misses", 0),
    }
    print(MARK + json.dumps(report), flush=True)


def run(cache: str, dtype: str, n_steps: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", cache, dtype, str(n_steps)],
        capture_output=True,
        text=True,
        check=True,
    )
    line = [x for x in out.stdout.splitlines() if x.startswith(MARK)][-1]
    return json.loads(line[len(MARK) :])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="float64,float32")
    parser.add_argument("--n-steps", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    for _ in range(args.rounds):
        for dtype in args.dtypes.split(","):
            with tempfile.TemporaryDirectory(prefix="lyapax-jax-cache-") as cache:
                for label in ("cold", "second"):
                    row = run(cache, dtype, args.n_steps)
                    print(f"{dtype:8s} {label:7s} {json.dumps(row)}", flush=True)


if __name__ == "__main__":
    main()
