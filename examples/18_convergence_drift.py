"""
Has the estimate settled? Convergence drift
===========================================

A Lyapunov exponent is a long-time average, and a finite run returns a
finite-time estimate. :func:`lyapax.convergence_drift` looks at the running
estimates in ``result.history`` over the last ``window`` fraction of the run
and reports how far they still wander from the final value (absolute and
relative); with ``tol`` it says whether every exponent stayed within it.

It is a cheap heuristic, not an error bar: a slow drift can hide inside a
short window. ``result.stderr`` (see example 22) is a statistical error
estimate. Here both are shown for Lorenz runs of increasing length.

Run ``python examples/18_convergence_drift.py`` (``--quick`` for a short run,
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

from lyapax import convergence_drift, lyapunov_spectrum, ode_problem
from lyapax.systems import lorenz

args = example_args("convergence drift", "18_drift.png")
lengths = [1_000, 10_000, 40_000] if args.quick else [1_000, 10_000, 100_000, 1_000_000]
problem = ode_problem(lorenz(), jnp.ones(3), dt=0.01)

# %%
# Runs of increasing length
# -------------------------
# One long run; the first ``m`` rows of its ``history`` are exactly what a run
# of ``10 m`` steps along the same orbit would return, so each prefix is
# checked as a shorter run. ``window=0.2``: the last 20 % of the
# renormalisations; ``tol=0.02`` in units of the exponents (1/time).
longest = lyapunov_spectrum(
    problem, n_steps=lengths[-1], renorm_every=10, t_transient=20.0
)
print("steps     lambda_1   drift_1    converged(tol=0.02)")
for n in lengths:
    prefix = longest._replace(history=longest.history[: n // 10])
    drift = convergence_drift(prefix, window=0.2, tol=0.02)
    print(
        f"{n:<9} {float(prefix.history[-1, 0]):.4f}     "
        f"{float(drift.absolute[0]):.4f}     {drift.converged}"
    )
print(f"stderr of lambda_1 after {lengths[-1]} steps: {float(longest.stderr[0]):.4f}")
print("reference lambda_1 about 0.906")

# %%
# Note the longest quick run: its drift is inside ``tol`` while its standard
# error is larger than ``tol``. Drift measures how much the estimate moved
# late in the run, not how far it may be from the limit.

# %%
# The relative drift of the zero exponent is meaningless (it divides by a
# number near 0); look at ``absolute`` for exponents near zero.
drift = convergence_drift(longest, window=0.2, tol=0.02)
print(
    "absolute drift, longest run:",
    np.array2string(np.asarray(drift.absolute), precision=4),
)
print(
    "relative drift, longest run:",
    np.array2string(np.asarray(drift.relative), precision=4),
)

# %%
# Figure: the running estimate of lambda_1 and the window checked
# ---------------------------------------------------------------
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(longest.times, longest.history[:, 0], lw=0.8, label=r"running $\lambda_1$")
t_end = float(longest.times[-1])
ax.axvspan(0.8 * t_end, t_end, color="orange", alpha=0.2, label="last 20 % (window)")
ax.axhline(0.9056, color="k", ls="--", lw=0.7, label="0.9056")
ax.set_ylim(0.5, 1.3)
ax.set_xlabel("time")
ax.set_ylabel(r"$\lambda_1$ estimate")
ax.legend()
fig.tight_layout()
save_figure(fig, args.out)
