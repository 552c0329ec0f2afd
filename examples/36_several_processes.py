"""
A sweep run by two processes (jax.distributed)
==============================================

The same script runs in every process of a multi-process job: it calls
:func:`lyapax.distributed.initialize` first, then
:func:`~lyapax.sweep.sweep_lyapunov_spectrum` with the same arguments in
each. The batch is split over the devices of all processes, each process
computes its rows, and :func:`lyapax.distributed.gather` brings the global
result to NumPy on process 0.

On a cluster a launcher (``srun``, ``torchrun``, ``mpirun``) starts the
processes. Here, without one, this script is its own launcher: it starts two
copies of itself on 127.0.0.1 with the ``torchrun``-style variables
(``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``, ``RANK``), each with one
CPU device, and compares their gathered exponents with a one-process run of
the same sweep: calm rows (rho below about 24.7) agree to rounding, chaotic
rows within their standard errors (bitwise equality across layouts is not
promised for chaos).

Run ``python examples/36_several_processes.py`` (``--quick`` for a short
run, ``--out FILE`` for the figure's path).
"""

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt

from lyapax import rk4_step
from lyapax.distributed import gather, initialize
from lyapax.sweep import sweep_lyapunov_spectrum
from lyapax.systems import lorenz

parser = argparse.ArgumentParser(description="a sweep run by two processes")
parser.add_argument("--quick", action="store_true", help="short run (CI, docs)")
parser.add_argument("--out", help="figure path (default: a temporary directory)")
parser.add_argument("--result", help=argparse.SUPPRESS)  # a worker's output
args, _ = parser.parse_known_args()

N_ROWS, N_STEPS = (32, 2_000) if args.quick else (128, 20_000)
RHOS = np.linspace(2.0, 60.0, N_ROWS)


def step(x, p):
    return rk4_step(lorenz(rho=p["rho"]), 0.01)(x)


def sweep(**kw):
    return sweep_lyapunov_spectrum(
        step,
        np.array([1.0, 1.0, 1.0]),
        {"rho": RHOS},
        dt=0.01,
        n_steps=N_STEPS,
        renorm_every=10,
        t_transient=10.0,
        **kw,
    )


if "WORLD_SIZE" in os.environ:
    # One process of the job: what a cluster would run in every process.
    info = initialize(timeout=120.0)
    res = sweep()
    print(
        f"process {info.process_id} of {info.num_processes}: exponents "
        f"{res.exponents.shape} over {len(res.exponents.sharding.device_set)} "
        f"devices, fully addressable: {res.exponents.is_fully_addressable}"
    )
    got = gather(res, to=0)
    if got is not None:
        np.savez(args.result, exponents=got.exponents, stderr=got.stderr)
    sys.exit(0)

# The launcher: two processes on a free loopback port.
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
tmp = Path(tempfile.mkdtemp())
result = tmp / "two_processes.npz"
env = dict(os.environ, JAX_PLATFORMS="cpu", MASTER_ADDR="127.0.0.1")
env.update(MASTER_PORT=str(port), WORLD_SIZE="2")
env.pop("XLA_FLAGS", None)  # one CPU device per process
cmd = [sys.executable, str(Path(__file__).resolve()), "--result", str(result)]
cmd += ["--quick"] if args.quick else []
t0 = time.perf_counter()
procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r))) for r in range(2)]
codes = [p.wait(timeout=900) for p in procs]
if any(codes):
    raise SystemExit(f"a process of the job failed: exit codes {codes}")
wall = time.perf_counter() - t0
two = np.load(result)

one = gather(sweep())  # the one-process reference, in this process
calm = RHOS < 24.0
diff = np.abs(two["exponents"] - one.exponents)
bar = np.hypot(two["stderr"], one.stderr)
print(f"two processes: {N_ROWS} rows x {N_STEPS} steps in {wall:.1f} s (compile incl.)")
print(f"calm rows (rho < 24): max |two - one| = {diff[calm].max():.1e} (< 1e-10)")
print(
    f"chaotic rows: max |two - one| = {diff[~calm].max():.1e}, "
    f"max of diff / combined stderr = {(diff[~calm] / bar[~calm]).max():.2f} "
    "(expect < 3)"
)
for i in range(0, N_ROWS, max(1, N_ROWS // 8)):
    print(
        f"  rho = {RHOS[i]:5.1f}: lambda_1 two processes {two['exponents'][i, 0]:+.4f}"
        f", one process {one.exponents[i, 0]:+.4f} +- {one.stderr[i, 0]:.4f}"
    )

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.errorbar(
    RHOS, one.exponents[:, 0], one.stderr[:, 0], fmt="o", ms=3, label="one process"
)
ax.plot(RHOS, two["exponents"][:, 0], "x", label="two processes (gathered)")
ax.axhline(0.0, color="0.6", lw=0.8)
ax.set(
    xlabel="rho", ylabel="lambda_1", title="Lorenz: a sweep split over two processes"
)
ax.legend()
fig.tight_layout()
out = Path(args.out) if args.out else tmp / "several_processes.png"
fig.savefig(out, dpi=120)
print(f"figure: {out}")
