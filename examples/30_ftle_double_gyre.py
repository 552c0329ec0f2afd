"""
FTLE fields of the double gyre, forward and backward
====================================================

The time-dependent double gyre (Shadden, Lekien & Marsden 2005) with
``A = 0.1``, ``eps = 0.25``, ``omega = 2 pi / 10``: the ridges of the forward
FTLE are repelling Lagrangian coherent structures, those of the backward FTLE
(``T < 0``) attracting ones. :func:`lyapax.finite_time.ftle_grid` integrates
every grid point together with its two tangents (exact flow-map Jacobian, no
finite differences) and returns the fields as images. Checks:

* steady gyre (``eps = 0``): FTLE = pi^2 A at the saddles (1, 0) and (1, 1)
  for every T, and 0 at the centre (0.5, 0.5);
* the flow is incompressible, so ``ftle_max + ftle_min = 0`` at every point.

Run ``python examples/30_ftle_double_gyre.py`` (``--quick`` for a coarse grid,
``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import systems
from lyapax.finite_time import ftle_field, ftle_grid

args = example_args(
    "double-gyre FTLE fields",
    "30_ftle_double_gyre.png",
    quick_help="coarse grid (CI, docs)",
)
nx, ny = (101, 51) if args.quick else (601, 301)
A, OMEGA, T = 0.1, 2 * np.pi / 10, 15.0


# %%
# The velocity field ``rhs(t, x)``
# --------------------------------
# :func:`lyapax.systems.double_gyre` is ``u = -pi A sin(pi f) cos(pi y)``,
# ``v = pi A cos(pi f) sin(pi y) df/dx`` with ``f = a x^2 + b x``,
# ``a = eps sin(omega t)``, ``b = 1 - 2 a``; any ``rhs(t, x)`` works the same.
def double_gyre(eps):
    return systems.double_gyre(A=A, eps=eps, omega=OMEGA)


# %%
# Exact checks on the steady gyre
# -------------------------------
points = np.array([[1.0, 0.0], [1.0, 1.0], [0.5, 0.5]])
for t_end in (2.0, 15.0):
    steady = ftle_field(double_gyre(0.0), points, 0.0, t_end, 0.25, True, "rk6")
    print(
        f"steady gyre, T={t_end:4.1f}: FTLE at (1,0), (1,1), (0.5,0.5) = "
        f"{np.array2string(np.asarray(steady.ftle_max), precision=10)}; "
        f"exact {np.pi**2 * A:.10f}, {np.pi**2 * A:.10f}, 0"
    )

# %%
# Forward and backward fields on a grid
# -------------------------------------
# RK6 with steps of at most 0.25 (the run takes ``ceil(15 / 0.25) = 60``
# equal steps and ends exactly at ``t0 + T``); ``T = -15`` from ``t0 = 15``
# is the backward field at the same final time. Here omega T = 3 pi, and then
# the backward field is the forward one mirrored in y = 1/2 (a symmetry of
# the gyre: y -> 1 - y maps (u, v) to (-u, v)).
x = np.linspace(0.0, 2.0, nx)
y = np.linspace(0.0, 1.0, ny)
rhs = double_gyre(0.25)
forward = ftle_grid(rhs, x, y, 0.0, T, 0.25, time_dependent=True, integrator="rk6")
backward = ftle_grid(rhs, x, y, T, -T, 0.25, time_dependent=True, integrator="rk6")
for name, field in (("forward", forward), ("backward", backward)):
    fmax = np.asarray(field.ftle_max)
    incompressible = np.abs(fmax + np.asarray(field.ftle_min)).max()
    print(
        f"{name:8s} T={field.T:+.0f}: max FTLE {fmax.max():.4f}, mean "
        f"{fmax.mean():.4f}; max |ftle_max + ftle_min| = {incompressible:.1e} "
        "(exact 0)"
    )

mirror = np.abs(np.asarray(backward.ftle_max) - np.asarray(forward.ftle_max)[::-1])
print(f"max |backward - forward mirrored in y| = {mirror.max():.1e} (exact 0)")

# %%
# Figure
# ------
fig, axes = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True)
for ax, field, title in (
    (axes[0], forward, f"forward FTLE, t0 = 0, T = {T:g}"),
    (axes[1], backward, f"backward FTLE, t0 = {T:g}, T = {-T:g}"),
):
    im = ax.imshow(
        np.asarray(field.ftle_max),
        origin="lower",
        extent=(0, 2, 0, 1),
        cmap="magma",
        vmin=0,
    )
    ax.set_title(title)
    ax.set_ylabel("y")
    fig.colorbar(im, ax=ax, shrink=0.8, label="FTLE")
axes[1].set_xlabel("x")
fig.tight_layout()
save_figure(fig, args.out)
