"""
Continuing a delay-equation run exactly
=======================================

Long runs can be cut into pieces: every result carries a ``checkpoint``, and
``lyapunov_spectrum(problem, n_steps, resume=checkpoint)`` continues from it.
For a delay equation the checkpoint (:class:`lyapax.DDECheckpoint`) holds the
present state *and* the history ring buffer, its step counter, the tangent
frame over both, the accumulated log-growth and the elapsed time, so the
pieces add up to the same numbers as one long run. Here: the Mackey-Glass
equation at ``tau = 17`` in one run and in two halves.

Run ``python examples/19_dde_resume.py`` (``--quick`` for a short run,
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

from lyapax import kaplan_yorke_dimension, lyapunov_spectrum
from lyapax.dde import dde_problem
from lyapax.systems import mackey_glass

args = example_args("DDE resume", "19_dde_resume.png")
half = 5_000 if args.quick else 100_000
k = 4
problem = dde_problem(
    mackey_glass(),
    jnp.array([1.2]),
    tau=17.0,
    dt=0.1,
    integrator="rk4",
)  # tau is 170 steps of dt exactly, so the grid reads need no rounding

# %%
# One run, and the same run in two halves
# ---------------------------------------
# The transient runs once, in the first piece.
kw = dict(k=k, renorm_every=10)
whole = lyapunov_spectrum(problem, n_steps=2 * half, t_transient=500.0, **kw)
first = lyapunov_spectrum(problem, n_steps=half, t_transient=500.0, **kw)
second = lyapunov_spectrum(problem, n_steps=half, resume=first.checkpoint, **kw)

ck = first.checkpoint
print("checkpoint:", {name: np.shape(v) for name, v in ck._asdict().items()})
print("one run:    ", np.array2string(np.asarray(whole.exponents), precision=6))
print("two halves: ", np.array2string(np.asarray(second.exponents), precision=6))
diff = np.abs(np.asarray(whole.exponents) - np.asarray(second.exponents)).max()
print(f"max difference: {diff:.1e} (round-off only)")
print(
    f"elapsed time: {float(whole.checkpoint.elapsed_time)} vs "
    f"{float(second.checkpoint.elapsed_time)}"
)
print(
    f"Kaplan-Yorke dimension: {kaplan_yorke_dimension(whole.exponents):.3f} "
    "(Farmer 1982 reports about 2.1 at tau = 17)"
)

# %%
# Figure: the running estimates of the pieces line up with the whole run
# ----------------------------------------------------------------------
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(whole.times, whole.history[:, :2], color="0.6", lw=3, label="one run")
ax.plot(first.times, first.history[:, :2], "C0", lw=1, label="first half")
ax.plot(second.times, second.history[:, :2], "C1", lw=1, label="second half (resumed)")
handles, labels = ax.get_legend_handles_labels()
ax.legend(handles[::2], labels[::2])
ax.set_xscale("log")
ax.set_xlabel("time")
ax.set_ylabel("running estimates of lambda_1, lambda_2")
ax.set_title("Mackey-Glass, tau = 17")
fig.tight_layout()
save_figure(fig, args.out)
