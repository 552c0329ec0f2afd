"""
A GALI map of the standard map: regular islands and the chaotic sea
===================================================================

:func:`lyapax.indicators.gali` follows ``k = 2`` deviation vectors along an
orbit (``jax.jvp`` tangents, normalised every step) and reports GALI_2, the
area of the parallelogram they span. On a chaotic orbit both vectors turn
towards the most unstable direction and GALI_2 decays like
``exp(-(lambda_1 - lambda_2) n)``; on a regular orbit (a KAM torus) it decays
only like ``1/n``. An orbit is called chaotic when GALI_2 falls below
``threshold = 1e-12`` within the run.

The standard (Chirikov) map ``p' = p + K sin(theta)``, ``theta' = theta +
p'`` (both mod 2 pi) at ``K = 1``: every point of a grid over the phase
space is one orbit, and the whole grid runs as one vmapped program
(``state0_batch``). Chaotic orbits stop once they are classified, so the
batch ends when the slowest orbit does. References (Skokos et al. 2007,
ChaosTools' tests): the orbit from (0.001, 0.008) falls below 1e-12 within 50
iterations, the one from (pi, 0.01) stays above it for 10^4.

Run ``python examples/32_gali_map.py`` (``--quick`` for a coarse grid,
``--out FILE`` for the figure's path).
"""

import time

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax.indicators import gali

args = example_args(
    "GALI map of the standard map",
    "32_gali_map.png",
    quick_help="coarse grid (CI, docs)",
)
side = 100 if args.quick else 300
n_steps = 500 if args.quick else 2000
K = 1.0


def standard_map(x):
    p = x[1] + K * jnp.sin(x[0])
    return jnp.mod(jnp.stack([x[0] + p, p]), 2 * jnp.pi)


# %%
# The two reference orbits first.
ref = gali(
    standard_map, None, 1.0, 10_000, state0_batch=[[0.001, 0.008], [np.pi, 0.01]]
)
print(
    f"orbit (0.001, 0.008): chaotic={ref.chaotic[0]}, GALI_2 < 1e-12 after "
    f"{ref.steps_to_threshold[0]} iterations (reference: within 50)"
)
print(
    f"orbit (pi, 0.01):     chaotic={ref.chaotic[1]}, GALI_2 = {ref.gali[1]:.3g} "
    "after 10^4 iterations (reference: stays above 1e-12)"
)

# %%
# The grid: ``side x side`` orbits in one program.
theta, p = np.meshgrid(
    np.linspace(0, 2 * np.pi, side, endpoint=False),
    np.linspace(0, 2 * np.pi, side, endpoint=False),
)
points = np.stack([theta.ravel(), p.ravel()], axis=1)
gali(standard_map, None, 1.0, 10, state0_batch=points)  # compile
start = time.perf_counter()
res = gali(standard_map, None, 1.0, n_steps, state0_batch=points)
wall = time.perf_counter() - start
chaotic = res.chaotic.reshape(side, side)
print(
    f"{side}x{side} = {side * side} orbits, up to {n_steps} iterations: "
    f"{wall:.2f} s; chaotic fraction {chaotic.mean():.3f}"
)
steps = np.where(res.chaotic, res.steps_to_threshold, n_steps).reshape(side, side)
print(
    f"median iterations to threshold on chaotic orbits: {np.median(steps[chaotic]):.0f}"
)

# %%
# Left: log10 GALI_2 at the end (chaotic orbits: at their classification);
# right: iterations an orbit took to fall below the threshold.
fig, axes = plt.subplots(1, 2, figsize=(11, 4.8), constrained_layout=True)
log_g = np.log10(np.clip(res.gali, 1e-16, 1)).reshape(side, side)
extent = (0, 2 * np.pi, 0, 2 * np.pi)
im = axes[0].imshow(log_g, origin="lower", extent=extent, cmap="viridis")
fig.colorbar(im, ax=axes[0], label="log10 GALI_2")
axes[0].set_title(f"standard map K={K}: GALI_2 after {n_steps} iterations")
im = axes[1].imshow(
    np.log10(steps), origin="lower", extent=extent, cmap="magma_r", vmin=1
)
fig.colorbar(im, ax=axes[1], label="log10 iterations to GALI_2 < 1e-12")
axes[1].set_title("time to the chaotic verdict (regular: the whole run)")
for ax in axes:
    ax.set_xlabel("theta")
    ax.set_ylabel("p")
save_figure(fig, args.out)
