"""
Error bars, and running until they are small enough
===================================================

Every result carries ``stderr``: a standard error per exponent from
non-overlapping batch means over the renormalisation blocks (the batches
lengthen with the run, so their correlation fades). It measures statistical
scatter only -- not the bias of a finite ``dt``.

This example checks the error bar against reality: 16 runs from different
initial states (one :func:`lyapax.sweep.sweep_lyapunov_spectrum` call), whose
scatter is what a standard error should predict. Then :func:`lyapax.run_until_converged`
advances a run chunk by chunk (each chunk resumes the last exactly) until
every exponent's ``stderr`` is below a tolerance.

Run ``python examples/22_error_bars.py`` (``--quick`` for a short run,
``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import lyapunov_spectrum, ode_problem, run_until_converged
from lyapax.sweep import sweep_lyapunov_spectrum
from lyapax.systems import lorenz

args = example_args("error bars", "22_error_bars.png")
n_steps = 5_000 if args.quick else 50_000
tol = 0.05 if args.quick else 0.01
problem = ode_problem(lorenz(), jnp.ones(3), dt=0.01)

# %%
# One run with its error bars
# ---------------------------
res = lyapunov_spectrum(problem, n_steps=n_steps, renorm_every=10, t_transient=20.0)
for i, (lam, err) in enumerate(zip(res.exponents, res.stderr, strict=True)):
    print(f"lambda_{i + 1} = {float(lam):+.4f} +- {float(err):.4f}")
print("reference: 0.9056, 0, -14.5723")

# %%
# Are the error bars honest?
# --------------------------
# 16 initial states spread over the attractor, one program for all of them.
starts = jnp.ones(3) + jax.random.normal(jax.random.PRNGKey(0), (16, 3))
batch = sweep_lyapunov_spectrum(
    problem,
    None,
    None,
    None,
    n_steps=n_steps,
    renorm_every=10,
    t_transient=20.0,
    state0_batch=starts,
)
spread = np.std(np.asarray(batch.exponents), axis=0, ddof=1)
typical = np.sqrt(np.mean(np.asarray(batch.stderr) ** 2, axis=0))
print("scatter across 16 runs:", np.array2string(spread, precision=4))
print("typical stderr:        ", np.array2string(typical, precision=4))
print("stderr / scatter:      ", np.array2string(typical / spread, precision=1))

# %%
# Here the error bars are *conservative*: larger than the scatter they
# predict, by a factor of a few for ``lambda_1`` (measured for this example
# with 32 runs: about 3.7 at 5 000 steps and 3.2 at 200 000) and much more for
# the zero exponent. Part of a finite-time estimate's error is a bounded term
# (``ln`` of the ratio of the tangent's length at the end and at the start of
# a batch) that cancels between consecutive batches; it shrinks like
# ``1/T`` for the whole run but looks like independent noise to the batch
# means. Treat ``stderr`` as an upper estimate for flows like this one.

# %%
# Run until converged
# -------------------
# The callback sees the progress after each chunk; here it records it.
# ``progress=True`` draws a bar on stderr: steps, worst stderr / tol, time left.
trace = []
run = run_until_converged(
    problem,
    tol=tol,
    max_steps=20 * n_steps,
    chunk_steps=n_steps,
    renorm_every=10,
    t_transient=20.0,
    callback=trace.append,
    progress=True,
)
print(f"stopped: {run.reason} after {run.n_steps} steps in {run.n_chunks} chunks")
print("exponents:", np.array2string(np.asarray(run.result.exponents), precision=4))
print("stderr:   ", np.array2string(np.asarray(run.result.stderr), precision=4))

# %%
# Figure
# ------
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
lam1 = np.asarray(batch.exponents[:, 0])
ax1.errorbar(np.arange(16), lam1, yerr=np.asarray(batch.stderr[:, 0]), fmt="o")
ax1.axhline(0.9056, color="k", ls="--", lw=0.7, label="0.9056")
ax1.set_xlabel("run (initial state)")
ax1.set_ylabel(r"$\lambda_1$ +- stderr")
ax1.set_title(f"16 runs of {n_steps} steps")
ax1.legend()
steps = [p.n_steps for p in trace]
ax2.errorbar(
    steps,
    [p.exponents[0] for p in trace],
    yerr=[p.stderr[0] for p in trace],
    fmt="o-",
    label=r"$\lambda_1$",
)
ax2.axhline(0.9056, color="k", ls="--", lw=0.7)
ax2.set_xlabel("measured steps")
ax2.set_title(f"run_until_converged, tol = {tol}")
fig.tight_layout()
save_figure(fig, args.out)
