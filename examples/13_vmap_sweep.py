"""
A parameter sweep in one program
================================

The logistic map ``x -> r x (1 - x)`` for many values of ``r`` at once:
:func:`lyapax.sweep.sweep_lyapunov_spectrum` runs every row in one vmapped,
compiled program, and :func:`lyapax.sweep.sweep_trajectory` gives the orbits
for the bifurcation diagram. Checks along the way:

* below ``r = 3`` the orbit sits on the fixed point ``1 - 1/r`` where
  ``f' = 2 - r``, so ``lambda = ln|2 - r|`` exactly;
* ``lambda`` touches 0 at the period-doubling points ``r = 3`` and
  ``r = 1 + sqrt 6 = 3.4495``; at ``r = 4`` it is ``ln 2``;
* each row is exactly what a single ``lyapunov_spectrum`` call gives, and a
  plain ``jax.vmap`` over ``lyapunov_spectrum`` gives the same numbers too.

Run ``python examples/13_vmap_sweep.py`` (``--quick`` for a short run, ``--out
FILE`` for the figure's path).
"""

import math

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import lyapunov_spectrum
from lyapax.sweep import sweep_lyapunov_spectrum, sweep_trajectory

args = example_args("parameter sweep", "13_vmap_sweep.png")
n_r = 200 if args.quick else 2_000
n_iter = 2_000 if args.quick else 20_000


# %%
# A step with its parameters as an argument
# -----------------------------------------
# ``step(x, params)``: each row of the sweep calls it with one row of
# ``params_batch``. ``-x + 1.0`` rather than ``1.0 - x``: the same number,
# but a TPU's emulated float64 computes a constant minus a one-element array
# 1.8e-8 off (docs/method.md, "Precision"; a float64 run there says so).
def logistic(x, params):
    return params["r"] * x * (-x + 1.0)


rs = jnp.concatenate([jnp.linspace(2.5, 4.0, n_r - 1), jnp.array([4.0])])
x0 = jnp.array([0.3])
res = sweep_lyapunov_spectrum(
    logistic, x0, {"r": rs}, dt=1.0, n_steps=n_iter, t_transient=500.0
)
lam = np.asarray(res.exponents[:, 0])
orbits = sweep_trajectory(
    logistic, x0, {"r": rs}, dt=1.0, n_steps=200, t_transient=500.0
)

# %%
# Checks
# ------
below3 = np.asarray(rs) < 2.95
exact = np.log(np.abs(2.0 - np.asarray(rs[below3])))
print(
    f"fixed-point regime ({below3.sum()} rows): max |lambda - ln|2-r||"
    f" = {np.abs(lam[below3] - exact).max():.1e}"
)
print(f"r = 4: expected ln 2 = {math.log(2):.4f}, got {lam[-1]:.4f}")

i = int(np.argmin(np.abs(np.asarray(rs) - 3.8)))
single = lyapunov_spectrum(
    lambda x: logistic(x, {"r": rs[i]}), x0, dt=1.0, n_steps=n_iter, t_transient=500.0
)
print(
    f"r = {float(rs[i]):.4f}: sweep row {lam[i]:.12f}, single call "
    f"{float(single.exponents[0]):.12f}"
)


# %%
# ``jax.vmap`` works too: ``lyapunov_spectrum`` is traceable. The sweep
# function adds chunking (``batch_size``), device sharding and error bars on
# top of the same program.
def lam_of(r):
    step = jax.tree_util.Partial(lambda r, x: logistic(x, {"r": r}), r)
    return lyapunov_spectrum(
        step, x0, dt=1.0, n_steps=n_iter, t_transient=500.0
    ).exponents[0]


vm = jax.vmap(lam_of)(rs[:8])
print(f"jax.vmap vs sweep on 8 rows: max difference {np.abs(vm - lam[:8]).max():.1e}")

# %%
# Figure
# ------
fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
pts = np.asarray(orbits.states[:, :, 0])
ax1.plot(np.repeat(np.asarray(rs), pts.shape[1]), pts.ravel(), ",k", alpha=0.4)
ax1.set_ylabel("x (after transient)")
ax1.set_title("Logistic map")
ax2.plot(rs, lam, lw=0.8)
ax2.axhline(0, color="k", lw=0.6)
ax2.axhline(math.log(2), color="gray", ls="--", lw=0.7)
ax2.set_ylim(-2, 1)
ax2.set_xlabel("r")
ax2.set_ylabel(r"$\lambda$ (per iteration)")
fig.tight_layout()
save_figure(fig, args.out)
