"""GPU acceleration: at which problem size does the GPU start to win?
===================================================================

Nothing in lyapax is written for a particular device: JAX decides where the
arrays live and where the kernels run.  Whether a GPU makes a run *faster* is
a separate question.  Every call to a GPU pays a fixed price -- launching
kernels, moving data between host and device -- that a CPU call does not.
When the state vector is small, that price is larger than the arithmetic
itself and the CPU finishes first.  As the work per step grows, the fixed
price is spread over more floating-point operations and the GPU's parallelism
takes over.  The size at which the two curves cross depends on the CPU and
GPU at hand, so this script measures it instead of quoting a number.

The workload is a dense all-to-all Kuramoto network: one phase per node and a
full d x d coupling matrix, so the work per integration step grows like d**2
while the number of tracked exponents stays at k = 5.  For each network size
d the script times ``lyapunov_spectrum`` end to end.

JAX reads ``JAX_PLATFORMS`` once, when a process first uses a device, and
cannot switch afterwards.  So every measurement below runs in a new Python
process started with the environment variable already set: ``cpu`` for the
CPU and exactly ``cuda`` for the GPU.  (A list such as ``cuda,cpu`` would let
JAX quietly fall back to the CPU and produce CPU numbers labelled "GPU"; the
measuring process also reports ``jax.default_backend()`` and any mismatch is
rejected.)  Inside that process a first call with the same arguments pays for
tracing and compilation, and only the second call is timed, with
``jax.block_until_ready`` so that asynchronous dispatch cannot hide work.

If no GPU is usable here, no GPU number is invented: the figure lists the GPU
as unavailable, with the reason.

Usage::

    python examples/14_gpu_acceleration.py                       # full sweep
    python examples/14_gpu_acceleration.py --quick  # = --sizes 10,20 --steps 20
    python examples/14_gpu_acceleration.py --backends cpu,tpu --precision float32

The same measurement, as a pytest suite with one worker per backend and a
merged benchmark report, is ``pytest perf_tests --jax-backend=cpu,gpu``.
"""

# %%
# Stored reference measurement
# ----------------------------
#
# The documentation builder has no GPU, and timing it would only describe
# the builder.  So the documentation does not run this script: it shows a
# figure measured once with ``pytest perf_tests --jax-backend=cpu,gpu`` and
# stored, with the report it was drawn from, as
# ``docs/_static/gpu_acceleration_reference.png`` and ``.json``.  Run the
# script yourself to measure your own machine.
#
# .. figure:: /_static/gpu_acceleration_reference.png
#    :alt: wall time of lyapunov_spectrum against network size, per backend
#    :width: 100%
#
#    Measured on |gpu_ref_machine| with jax |gpu_ref_jax| on |gpu_ref_date|.
#    |gpu_ref_note|
#
# Each point is the median of the timed rounds and the band their
# interquartile range; a wide band, or a curve that dips as the network
# grows, means other work shared the machine while it was measured.
#
# Why the curves cross, in the report's own numbers
# ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
#
# pytest-lyapax fits each backend's series with the cost model
# ``t(d) = a + b * d**p``: ``a`` is the fixed price of one call (the launch
# and transfer price above), ``b * d**p`` the arithmetic that grows with the
# network, ``p`` close to 2 for this all-to-all coupling.  A GPU loses while
# its larger ``a`` dominates and wins once ``b * d**p`` does; the predicted
# crossover is where the two fitted curves meet, with a bootstrap interval.
# A series that one power law cannot describe (for instance a jump where the
# working set outgrows a cache) is reported as not fitting, without numbers.
# The lines below are written from the stored report when the documentation
# is built (``docs/_scripts/gpu_explain.py``); nothing in them is typed in.
#
# .. include:: /_generated/gpu_explained.rst

# %%
# Measured on a TPU v5e
# ---------------------
#
# The same main job, ``pytest perf_tests --jax-backend=cpu,tpu``, was run on
# a lent machine with one Google TPU v5e chip (15.7 GiB) and 13 host cores
# (AMD x86-64 at 2.45 GHz, 40 GiB of memory, a gVisor sandbox), JAX 0.10.2, on
# 2026-12-06, with nothing else running there (load average 0.00 before and
# after).  Each platform ran its native precision, as the main job does by
# default: float64 on the CPU, float32 on the chip with its default matmul
# precision (bfloat16 passes for the user's vector field; lyapax's own QR and
# tangent products run at ``Precision.HIGHEST``).  float64 on a TPU is
# emulated with pairs of float32: it compiles about 20 times longer and is
# slower than the host's CPU from d = 2000 (see :doc:`/method`, "Precision").
# The run took 6 min 38 s, exit code 0, 94 passed and 6 skipped (the device
# counts this example does not ask for, and two sparse sizes over the
# budget); its 48 comparisons of results across backends all agreed within
# their own error.  The whole report is stored as
# ``docs/_static/measured/tpu-v5e/benchmark.json``.
#
# .. figure:: /_static/measured/tpu-v5e/crossover.png
#    :alt: wall time per call of every main-job series, CPU against TPU v5e
#    :width: 100%
#
#    pytest-lyapax's figure of that run: one panel per series, CPU (float64)
#    against the TPU v5e (float32).
#
# What it shows:
#
# - The dense Kuramoto network of this page: the chip is faster at every
#   measured size, barely at d = 20 and about 150 times at d = 2000.  Its
#   fixed price per call is about 1.1 ms (the launch floor the roofline
#   reports), so below d ~ 20 the CPU may win.  Asked where exactly
#   (``--jax-find-crossover``, sizes 5, 10, 20 marked), the plugin added
#   d = 14 and bracketed the crossing: the chip is faster from d in
#   [14, 20].  Asked how large the network may grow on the chip
#   (``--jax-find-ceiling`` from d = 4000), it found that d = 45255 fits in
#   float32 and d = 64000 does not (30.5 GB of temporaries asked, 15.75 GB
#   there).  Both runs and their figures are in :doc:`/pytest_lyapax`
#   ("Measured on the lent TPU v5e").
# - Batched work pays off only in bulk: a sweep of one Lorenz system is 15
#   times slower on the chip, and the medians cross at about 26 systems.
# - Single small systems (one Lorenz or one Henon map) are 8 to 35 times
#   slower on the chip: thousands of tiny sequential steps are what a CPU
#   does best.
# - This script itself, run there on 2026-12-07 with ``--backends cpu,tpu
#   --precision float32 --sizes 20,200,2000`` (the second call of fresh
#   processes, as below): CPU 2.8, 17.6 and 285 ms, TPU 4.65, 4.30 and
#   5.11 ms, so the chip wins from d = 200 here and by 56x at d = 2000.  The
#   CPU side of this script runs float32 too; the main job above compares
#   the CPU's float64 with the chip's float32.
#
# In the report's own numbers (written from the stored JSON when the
# documentation is built):
#
# .. include:: /_generated/tpu_explained.rst

# %%
# The script
# ----------
#
# Run as a script, everything below measures this machine.

# sphinx_gallery_thumbnail_path = '_static/gpu_acceleration_reference.png'
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import subprocess
import sys
import textwrap
import time
from pathlib import Path

THIS_FILE = Path(__file__).resolve()
PLATFORM_OF = {"cpu": "cpu", "gpu": "cuda", "tpu": "tpu"}  # never "cuda,cpu": see above
PRECISIONS = ("float64", "float32", "mixed")
DEFAULT_SIZES = (20, 50, 100, 200, 500, 1000, 2000)
K, RENORM_EVERY, DT = 5, 10, 1e-2
MARK = "TIMING "


# --------------------------------------------------------------------------
# The measuring process: imports JAX only after JAX_PLATFORMS was set by the
# parent, builds the network, compiles, then times one call.
# --------------------------------------------------------------------------
def measure(n_nodes: int, n_steps: int, precision: str) -> None:
    """Print one timing (or the error that prevented it) as a JSON line."""
    try:
        payload = _measure(n_nodes, n_steps, precision)
    except Exception as exc:  # reported to the driving process, which decides
        payload = {"error_type": type(exc).__name__, "error": str(exc)}
    print(MARK + json.dumps(payload), flush=True)


def _measure(n_nodes: int, n_steps: int, precision: str) -> dict:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)

    from lyapax.core import lyapunov_spectrum
    from lyapax.systems import kuramoto_network

    # ModelSpec -> build_jax_dfun -> Network -> network_problem, all-to-all.
    # float32 and mixed runs start from float32 arrays, so nothing is cast per call.
    dtype = jnp.float64 if precision == "float64" else jnp.float32
    problem = kuramoto_network(
        n_nodes, omega=jnp.linspace(-1.0, 1.0, n_nodes, dtype=dtype), K=1.0, dt=DT
    )

    def run():
        result = lyapunov_spectrum(
            problem,
            n_steps=n_steps,
            k=K,
            renorm_every=RENORM_EVERY,
            t_transient=0.0,
            precision=precision,
        )
        return jax.block_until_ready(result.exponents)

    start = time.perf_counter()
    run()  # same arguments as the timed call: this one compiles
    first = time.perf_counter() - start
    start = time.perf_counter()
    exponents = run()
    elapsed = time.perf_counter() - start
    return {
        "backend": jax.default_backend(),
        "device": jax.devices()[0].device_kind,
        "seconds": elapsed,
        "first_call_seconds": first,
        "finite": bool(jnp.all(jnp.isfinite(exponents))),
    }


# --------------------------------------------------------------------------
# The driving process: never imports JAX itself.
# --------------------------------------------------------------------------
def time_once(backend: str, n_nodes: int, n_steps: int, timeout: float, precision: str):
    """One measurement in a fresh process; returns (payload, None) or (None, reason)."""
    env = dict(os.environ, JAX_PLATFORMS=PLATFORM_OF[backend])
    command = [sys.executable, str(THIS_FILE), "--measure", str(n_nodes), str(n_steps)]
    command.append(precision)
    try:
        proc = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None, f"no result within {timeout:g} s"
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            payload = json.loads(line[len(MARK) :])
            if "error_type" in payload:
                return None, explain(backend, payload["error_type"], payload["error"])
            if payload["backend"] != backend:
                return None, f"JAX ran on {payload['backend']!r}, not {backend!r}"
            if not payload["finite"]:
                return None, "the computed exponents are not finite"
            return payload, None
    lines = [s for s in proc.stderr.strip().splitlines() if s.strip()]
    return None, lines[-1] if lines else f"exit code {proc.returncode}"


def explain(backend: str, error_type: str, error: str) -> str:
    """A readable reason for a backend that could not run."""
    message = error.strip().splitlines()[0] if error.strip() else ""
    if backend == "gpu" and not message:
        # Without a usable GPU, JAX_PLATFORMS=cuda fails with a bare AssertionError.
        found = "found" if glob.glob("/dev/nvidia*") else "no"
        return (
            f"JAX could not start CUDA ({error_type} without a message); "
            f"{found} /dev/nvidia* devices; is a jax CUDA plugin installed?"
        )
    return f"{error_type}: {message}"


def crossover(sizes, cpu, accel):
    """Smallest measured size from which the accelerator is faster at every
    larger size."""
    common = [s for s in sizes if s in cpu and s in accel]
    winning = [cpu[s] > accel[s] for s in common]
    if not common or not winning[-1]:
        return None
    j = len(common) - 1
    while j > 0 and winning[j - 1]:
        j -= 1
    return common[j]


def plot(sizes, times, unavailable, n_steps, output: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # write a file; no window needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    styles = {"cpu": ("o-", "C0"), "gpu": ("s-", "C1"), "tpu": ("^-", "C2")}
    for backend, by_size in times.items():
        marker, color = styles[backend]
        xs = [s for s in sizes if s in by_size]
        ax.plot(
            xs, [by_size[s] for s in xs], marker, color=color, label=backend.upper()
        )
    for backend, reason in unavailable.items():
        _, color = styles[backend]
        ax.plot([], [], "--", color=color, label=f"{backend.upper()}: unavailable")
        ax.text(
            0.03,
            0.97,
            f"{backend.upper()} not measured:\n"
            + "\n".join(textwrap.wrap(reason, 55)[:3]),
            transform=ax.transAxes,
            ha="left",
            va="top",
            fontsize=8,
            bbox={"boxstyle": "round,pad=0.3", "facecolor": "white", "alpha": 0.85},
        )
    for accel in (b for b in times if b != "cpu" and "cpu" in times):
        at = crossover(sizes, times["cpu"], times[accel])
        if at is not None:
            ax.axvline(at, color="0.4", linestyle=":")
            ax.annotate(
                f"{accel.upper()} faster from d={at}",
                (at, 0.05),
                xycoords=("data", "axes fraction"),
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes, [str(s) for s in sizes])  # label the measured sizes
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("network size d (nodes)")
    ax.set_ylabel(f"wall time, {n_steps} steps, k={K} (s)")
    ax.set_title(
        f"Dense Kuramoto network: lyapunov_spectrum wall time\n{platform.node()}, "
        f"{platform.processor() or platform.machine()}",
        fontsize=10,
    )
    ax.legend(loc="best")
    fig.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, DEFAULT_SIZES)),
        help="comma-separated network sizes d (default: %(default)s)",
    )
    parser.add_argument("--steps", type=int, default=200, help="integration steps")
    parser.add_argument("--backends", default="cpu,gpu", help="subset of cpu,gpu,tpu")
    parser.add_argument(
        "--precision",
        default="float64",
        choices=PRECISIONS,
        help="lyapunov_spectrum's precision= (default: %(default)s; on a TPU float64 "
        "is emulated and each size compiles for about a minute)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=Path("lyapax-report/gpu_acceleration.png"),
        help="where the figure is written (default: %(default)s)",
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="per measurement (s)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: sizes 10,20 and 20 steps (as the other examples' --quick)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.steps = "10,20", 20
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(backends) - set(PLATFORM_OF)
    if unknown or not sizes or min(sizes) < 1 or args.steps % RENORM_EVERY:
        parser.error(
            f"sizes must be positive, steps a multiple of {RENORM_EVERY}, "
            f"backends among {', '.join(PLATFORM_OF)}"
        )

    times: dict[str, dict[int, float]] = {}
    unavailable: dict[str, str] = {}
    for backend in backends:
        # A small, real run first: is this backend usable at all?
        payload, reason = time_once(
            backend, sizes[0], RENORM_EVERY, args.timeout, args.precision
        )
        if payload is None:
            unavailable[backend] = reason
            print(f"{backend}: unavailable ({reason}); it is not timed")
        else:
            times[backend] = {}
            print(f"{backend}: {payload['device']}")

    print(f"\n{'d':>6}" + "".join(f"{b + ' (s)':>14}" for b in times))
    for n_nodes in sizes:
        row = f"{n_nodes:>6}"
        for backend in times:
            payload, reason = time_once(
                backend, n_nodes, args.steps, args.timeout, args.precision
            )
            if payload is None:
                print(f"{backend} failed at d={n_nodes}: {reason}", file=sys.stderr)
                row += f"{'-':>14}"
                continue
            times[backend][n_nodes] = payload["seconds"]
            row += f"{payload['seconds']:>14.4g}"
        print(row)

    for accel in (b for b in times if b != "cpu"):
        both = [s for s in sizes if s in times.get("cpu", {}) and s in times[accel]]
        if both:
            at = crossover(sizes, times["cpu"], times[accel])
            speedup = times["cpu"][both[-1]] / times[accel][both[-1]]
            where = f"from d={at}" if at is not None else "at no measured size"
            print(
                f"\n{accel.upper()} faster {where}; speedup {speedup:.3g}x "
                f"at d={both[-1]} ({args.precision})"
            )
    plot(sizes, times, unavailable, args.steps, args.output)
    print(f"figure written to {args.output}")
    return 0 if any(times.values()) else 1


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--measure":
        measure(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(main())
