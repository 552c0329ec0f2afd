"""
A long run that survives a kill
===============================

``run_until_converged(..., checkpoint="run.npz")`` saves the run after every
chunk (written to a temporary file, then renamed over the checkpoint, so the
file is never half-written). This example starts the run in a child process,
kills it with SIGKILL in the middle, and calls the same function again: it
continues from the last chunk saved and ends with the numbers of a run that
was never interrupted. ``progress=True`` draws a bar (tqdm) with the worst
``stderr / tol`` and the remaining time. ``history="all"`` keeps every running
estimate for the figure (on disk: one segment file per chunk beside the
checkpoint; the default keeps the last chunk's, so the file stays small at
any length). The call owns the checkpoint while it runs: a second process on
the same file is refused at start, naming the owner.

Run ``python examples/35_long_run_checkpoint.py`` (``--quick`` for a short
run, ``--out FILE`` for the figure's path).
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import ode_problem, run_until_converged
from lyapax.systems import lorenz

args = example_args("checkpoint and resume", "32_checkpoint.png")
problem = ode_problem(lorenz(), jnp.ones(3), dt=0.01)
CALL = dict(
    tol=1e-6,  # never reached: the run spends its budget
    max_steps=20_000 if args.quick else 200_000,
    chunk_steps=1_000 if args.quick else 10_000,
    renorm_every=10,
    t_transient=10.0,
    history="all",
)
# The process that gets killed: the same call, slowed down by its callback.
CHILD = f"""
import sys, time, jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from lyapax import ode_problem, run_until_converged
from lyapax.systems import lorenz
problem = ode_problem(lorenz(), jnp.ones(3), dt=0.01)
run_until_converged(problem, checkpoint=sys.argv[1],
                    callback=lambda info: time.sleep(0.2), **{CALL!r})
"""

# %%
# The run, uninterrupted
# ----------------------
reference = run_until_converged(problem, **CALL)

# %%
# The same run, killed mid-way and continued
# ------------------------------------------
folder = Path(tempfile.mkdtemp())
path = folder / "run.npz"
env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], env=env)
while True:  # wait until a few chunks are saved, then kill
    time.sleep(0.05)
    if child.poll() is not None:
        raise RuntimeError(f"the child process ended early ({child.returncode})")
    if path.exists() and int(np.load(path)["n_steps"]) >= 3 * CALL["chunk_steps"]:
        break
child.send_signal(signal.SIGKILL)
child.wait()
killed_at = int(np.load(path)["n_steps"])
print(f"killed (SIGKILL) after {killed_at} of {CALL['max_steps']} steps were saved")

out = run_until_converged(problem, checkpoint=path, progress=True, **CALL)
print(f"resumed: {out.n_steps} steps in {out.n_chunks} chunks, reason {out.reason}")
lam, ref = np.asarray(out.result.exponents), np.asarray(reference.result.exponents)
print("resumed      :", np.array2string(lam, precision=6))
print("uninterrupted:", np.array2string(ref, precision=6))
print(f"max |difference| = {np.max(np.abs(lam - ref)):.1e} (promised: <= 1e-12)")
same_times = np.array_equal(out.result.times, reference.result.times)
print("times equal exactly:", same_times)
print("reference: 0.9056, 0, -14.5723 (to the error bars of a short run)")
print("files:", sorted(p.name for p in folder.iterdir()))

# %%
# Running estimates
# -----------------
fig, ax = plt.subplots(figsize=(6, 3.5))
t = out.result.times
ax.plot(t, reference.result.history[:, 0], lw=3, alpha=0.4, label="uninterrupted")
ax.plot(t, out.result.history[:, 0], lw=1, color="k", label="killed, resumed")
ax.axvline(t[killed_at // CALL["renorm_every"] - 1], ls="--", color="C3", label="kill")
ax.set_xlabel("time")
ax.set_ylabel(r"running $\lambda_1$")
ax.legend()
fig.tight_layout()
save_figure(fig, args.out, dpi=120)
