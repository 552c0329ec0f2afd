"""
Chaotic maps: logistic, tent and Hénon
======================================

For a map the "time step" is one iteration, so pass ``dt=1.0`` and the
exponents come out per iteration. Three maps with known answers:

* logistic map at ``r = 4``: ``lambda = ln 2`` (it is conjugate to the tent map);
* tent map: ``|f'| = 2`` everywhere, so ``lambda = ln 2`` on every orbit;
* Hénon map at ``a = 1.4, b = 0.3``: ``lambda_1 ~ 0.4192`` (numerical
  literature value) and, because the Jacobian determinant is ``-b`` at every
  point, ``lambda_1 + lambda_2 = ln 0.3`` exactly.

Run ``python examples/04_chaotic_maps.py`` (``--quick`` for a short run,
``--out FILE`` for the figure's path).
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

from lyapax import lyapunov_spectrum, simulate_trajectory
from lyapax.systems import henon_map, logistic_map, tent_map

args = example_args("chaotic maps", "04_chaotic_maps.png")
n_iter = 20_000 if args.quick else 1_000_000

# %%
# One-dimensional maps
# --------------------
# The builders return the map itself, ``x_next = f(x)`` on ``(1,)`` states.
results = {}
for name, f, x0 in [
    ("logistic r=4", logistic_map(4.0), 0.3),
    ("tent", tent_map(), 0.3),
]:
    res = lyapunov_spectrum(f, jnp.array([x0]), dt=1.0, n_steps=n_iter)
    results[name] = res
    lam = float(res.exponents[0])
    print(f"{name:13s} expected ln 2 = {math.log(2):.4f}, got {lam:.4f}")

# %%
# A caveat about the tent map: multiplying by 2 shifts the binary digits of a
# float64 left, so after about 55 iterations every floating-point orbit lands
# on the fixed point 0. The exponent is still exactly ``ln 2`` there (the slope
# is 2 everywhere), but the orbit is no longer chaotic -- the logistic map at
# ``r = 4`` does not have this problem.
orbit = simulate_trajectory(tent_map(), jnp.array([0.3]), n_steps=80)
print("tent orbit after 80 iterations:", float(orbit.states[-1, 0]))

# %%
# The Hénon map
# -------------
res = lyapunov_spectrum(henon_map(), jnp.array([0.1, 0.1]), dt=1.0, n_steps=n_iter)
results["Hénon"] = res
l1, l2 = (float(v) for v in res.exponents)
print(f"Hénon lambda_1: literature ~0.4192, got {l1:.4f}")
print(f"Hénon lambda_2: literature ~-1.6232, got {l2:.4f}")
print(f"Hénon sum: expected ln 0.3 = {math.log(0.3):.6f}, got {l1 + l2:.6f}")

# %%
# Figure: the Hénon attractor and the running estimates
# -----------------------------------------------------
pts = np.asarray(
    simulate_trajectory(
        henon_map(), jnp.array([0.1, 0.1]), 5_000, n_transient=100
    ).states
)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
ax1.plot(pts[:, 0], pts[:, 1], ",", color="k")
ax1.set_title("Hénon attractor")
ax1.set_xlabel("x")
ax1.set_ylabel("y")
for name, r in results.items():
    ax2.plot(r.times, r.history[:, 0], label=name)
ax2.axhline(math.log(2), color="k", ls="--", lw=0.7, label="ln 2")
ax2.axhline(0.4192, color="gray", ls=":", lw=0.9, label="0.4192")
ax2.set_xscale("log")
ax2.set_xlabel("iterations")
ax2.set_ylabel(r"running $\lambda_1$ (per iteration)")
ax2.legend(loc="upper right")
fig.tight_layout()
save_figure(fig, args.out)
