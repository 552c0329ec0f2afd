"""
A MEGNO stability map of the Hénon–Heiles system at E = 1/8
===========================================================

MEGNO (Cincotta & Simó 2000) follows one deviation vector along an orbit and
averages its growth: ``<Y>`` tends to 2 on a quasi-periodic (regular) orbit,
to 0 on a stable periodic one, and grows like ``λ t / 2`` on a chaotic one.
:func:`lyapax.indicators.megno` runs every initial condition of a grid as one
row of one vmapped program (``state0_batch``), on the symplectic step of
:func:`lyapax.hamiltonian_problem`.

The grid is the Poincaré plane ``q1 = 0`` of the energy surface ``H = 1/8``:
each point ``(q2, p2)`` fixes ``p1 > 0`` from the energy; points outside the
allowed region are left blank. Orbits with final ``<Y>`` above 2.5 are
called chaotic.

Run ``python examples/39_megno_stability_map.py`` (``--quick`` for a coarse
grid, ``--out FILE`` for the figure's path).
"""

import time

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax.indicators import megno
from lyapax.systems import henon_heiles

args = example_args(
    "MEGNO map of Hénon–Heiles",
    "39_megno_stability_map.png",
    quick_help="coarse grid (CI, docs)",
)
side = 40 if args.quick else 200
n_steps = 4000 if args.quick else 20_000
dt, energy = 0.05, 0.125

# %%
# The grid on the plane q1 = 0: p1 from the energy, where it is real.
y, py = np.meshgrid(np.linspace(-0.45, 0.65, side), np.linspace(-0.5, 0.5, side))
kinetic = 2 * (energy - (0.5 * y**2 - y**3 / 3)) - py**2
allowed = kinetic > 0
px = np.sqrt(np.where(allowed, kinetic, 0.0))
rows = np.stack([np.zeros_like(y), y, px, py], axis=-1)[allowed]

system = henon_heiles()
problem = system.problem(rows[0, :2], rows[0, 2:], dt, "yoshida4")
megno(problem, 100, state0_batch=rows, save_every=100)  # compile
start = time.perf_counter()
res = megno(problem, n_steps, state0_batch=rows, save_every=n_steps)
wall = time.perf_counter() - start
print(
    f"{len(rows)} orbits x {n_steps} steps (t = {n_steps * dt:g}) in one call: "
    f"{wall:.2f} s; chaotic fraction {res.chaotic.mean():.3f}"
)
regular = ~res.chaotic
print(
    f"regular orbits: median <Y> = {np.median(res.mean_megno[regular, -1]):.3f} "
    "(quasi-periodic: -> 2)"
)

# %%
# Final <Y> over the plane (clipped at 8; blank: outside the energy surface).
image = np.full(y.shape, np.nan)
image[allowed] = np.clip(res.mean_megno[:, -1], 0, 8)
fig, ax = plt.subplots(figsize=(6.4, 5.2), constrained_layout=True)
im = ax.imshow(
    image,
    origin="lower",
    extent=(y.min(), y.max(), py.min(), py.max()),
    cmap="RdYlBu_r",
    vmin=0,
    vmax=8,
    aspect="auto",
)
fig.colorbar(im, ax=ax, label="<Y> (2: regular, larger: chaotic)")
ax.set_xlabel("q2")
ax.set_ylabel("p2")
ax.set_title(f"Hénon–Heiles E = 1/8, MEGNO at t = {n_steps * dt:g}")
save_figure(fig, args.out)
