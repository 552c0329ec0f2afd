"""
The 0-1 test for chaos over the logistic map's parameter
========================================================

:func:`lyapax.indicators.zero_one_test` turns an observable's series into
``K``: near 1 when the dynamics are chaotic, near 0 when they are regular
(Gottwald & Melbourne 2004, 2009). A batch of series runs as one vmapped
program, so a parameter grid is one call: the orbits of the logistic map
``x -> r x (1 - x)`` for every ``r`` come from one
:func:`lyapax.sweep.sweep_trajectory` program, their ``K`` from one
``zero_one_test`` program, and their Lyapunov exponents from one
:func:`lyapax.sweep.sweep_lyapunov_spectrum` program to compare with.

Checks: ``K > 0.9`` at ``r = 4`` (chaotic, lambda = ln 2), ``K < 0.1`` at
``r = 3.5`` (period 4) and in the period-3 window at ``r = 3.83``; over the
grid, ``K`` and the sign of the exponent agree on almost every row; the
rows where they disagree are printed: weak chaos just before a periodic
window (intermittency: long, nearly periodic stretches) or chaos confined to
bands the orbit visits in a fixed order, where a few thousand samples are
short for the test (the full run: 18 of 510 rows with lambda > 0.05, all
with lambda < 0.23).

Run ``python examples/33_zero_one_test.py`` (``--quick`` for a coarse grid,
``--out FILE`` for the figure's path).
"""

import math
import time

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax.indicators import zero_one_test
from lyapax.sweep import sweep_lyapunov_spectrum, sweep_trajectory

args = example_args(
    "0-1 test over the logistic map",
    "33_zero_one_test.png",
    quick_help="coarse grid (CI, docs)",
)
n_r = 120 if args.quick else 800
n_samples = 2_000 if args.quick else 5_000


def logistic(x, params):
    return params["r"] * x * (-x + 1.0)  # -x + 1.0: exact on a TPU too


rs = np.concatenate([np.linspace(3.4, 4.0, n_r - 3), [3.5, 3.83, 4.0]])
x0 = jnp.array([0.3])
batch = {"r": jnp.asarray(rs)}

# %%
# One program for the orbits, one for K
# -------------------------------------
orbits = sweep_trajectory(
    logistic, x0, batch, dt=1.0, n_steps=n_samples, t_transient=1000.0
)
series = orbits.states[..., 0]  # (n_r, n_samples)
start = time.perf_counter()
res = zero_one_test(series, n_frequencies=100, seed=0)
K = np.asarray(jax.block_until_ready(res.K))
print(
    f"0-1 test of {n_r} series of {n_samples} samples, 100 frequencies: "
    f"{time.perf_counter() - start:.2f} s (compilation included)"
)
lam = np.asarray(
    sweep_lyapunov_spectrum(
        logistic, x0, batch, dt=1.0, n_steps=20_000, t_transient=1000.0
    ).exponents[:, 0]
)

# %%
# Checks
# ------
for r, label in (
    (4.0, "chaotic, lambda = ln 2"),
    (3.5, "period 4"),
    (3.83, "period 3"),
):
    i = int(np.flatnonzero(rs == r)[-1])
    print(f"r = {r:<5}: K = {K[i]:.4f}  lambda = {lam[i]:+.4f}  ({label})")
print(f"ln 2 = {math.log(2):.4f}")
chaotic, regular = lam > 0.05, lam < -0.05
print(
    f"clearly chaotic rows (lambda > 0.05): {chaotic.sum()}, K > 0.5 in "
    f"{(K[chaotic] > 0.5).sum()}; clearly regular rows (lambda < -0.05): "
    f"{regular.sum()}, K < 0.5 in {(K[regular] < 0.5).sum()}"
)
for i in np.flatnonzero((chaotic & (K <= 0.5)) | (regular & (K >= 0.5))):
    print(f"  disagree: r = {rs[i]:.4f}, K = {K[i]:.3f}, lambda = {lam[i]:+.3f}")

# %%
# Figure
# ------
order = np.argsort(rs)
fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
ax1.plot(rs[order], K[order], ".-", ms=3, lw=0.6)
ax1.set_ylabel("K (0-1 test)")
ax1.set_ylim(-0.1, 1.1)
ax2.plot(rs[order], lam[order], ".-", ms=3, lw=0.6, color="C1")
ax2.axhline(0.0, color="k", lw=0.6)
ax2.set_ylabel("Lyapunov exponent")
ax2.set_xlabel("r")
ax1.set_title("logistic map: the 0-1 test and the exponent over r")
fig.tight_layout()
save_figure(fig, args.out)
