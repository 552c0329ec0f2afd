"""
Delay equations: reading the history between grid points
========================================================

A delay equation needs ``x(t - tau)``, but a fixed-step integrator only stores
``x`` on its grid. lyapax offers two ways to read it:

* grid (default): ``tau`` is rounded to a whole number of steps and the
  delayed value is read once per step -- simple, but **first order** in ``dt``
  whatever the integrator, plus the error of the rounded delay;
* ``interpolate=True``: a cubic Hermite interpolant of the stored values and
  derivatives is read at every Runge-Kutta stage's own time, so the delay is
  exact and the integrator keeps its order (up to 4).

The test case is ``dx/dt = -x(t - tau)`` with ``tau = 1.05``. Its leading
exponents are a complex pair with real part ``Re W(-tau) / tau`` (principal
Lambert W branch), ``-0.27054...``. The steps compared divide ``tau`` exactly,
so the grid mode's error below is its first-order error alone; a last run
asks for a delay that is not a multiple of ``dt`` and shows what rounding
does (and the warning that says so).

Run ``python examples/17_dde_interpolation.py`` (``--quick`` for a short run,
``--out FILE`` for the figure's path).
"""

import warnings

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np
from scipy.special import lambertw

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import lyapunov_spectrum
from lyapax.dde import dde_problem
from lyapax.systems import linear_scalar_dde

args = example_args("DDE history interpolation", "17_dde_interp.png")
tau = 1.05
exact = float(lambertw(-tau, 0).real / tau)
dts = [0.15, 0.075] if args.quick else [0.15, 0.075, 0.0375, 0.01875]
T = 100.0 if args.quick else 1_000.0


# %%
# Measure
# -------
# The pair's two exponents are equal, but a finite run splits them a little
# while the frame turns with the oscillation; their mean (the growth rate of
# areas in the pair's plane) converges much faster, so that is what is
# compared.
def pair_rate(dt, interpolate, tau=tau):
    problem = dde_problem(
        linear_scalar_dde(1.0),
        jnp.array([1.0]),
        tau=tau,
        dt=dt,
        integrator="rk4",
        interpolate=interpolate,
    )
    n = int(round(T / dt / 10)) * 10
    res = lyapunov_spectrum(problem, n_steps=n, k=2, renorm_every=10, t_transient=50.0)
    return float(jnp.mean(res.exponents)), float(problem.tau_eff)


errors = {"grid": [], "interpolate=True": []}
print(f"exact Re(lambda) = {exact:.8f}")
for dt in dts:
    grid, _ = pair_rate(dt, False)
    interp, _ = pair_rate(dt, True)
    errors["grid"].append(abs(grid - exact))
    errors["interpolate=True"].append(abs(interp - exact))
    print(f"dt = {dt:<8} grid: {grid:.8f}   interpolated: {interp:.8f}")

for name, err in errors.items():
    slope = np.polyfit(np.log(dts), np.log(err), 1)[0]
    print(f"{name}: error slope vs dt {slope:.2f}")

# %%
# When ``tau`` is not a multiple of ``dt``
# ----------------------------------------
# Ask for ``tau = 1.1`` at ``dt = 0.15``: grid mode rounds it to 7 steps, says
# so, and computes the exponent of the delay it really used.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    rounded, tau_used = pair_rate(dts[0], False, tau=1.1)
print(f"warning: {caught[0].message if caught else 'none'}")
exact_11 = float(lambertw(-1.1, 0).real / 1.1)
print(
    f"grid, tau = 1.1 asked: {rounded:.8f}, the same as the tau = {tau_used:g} "
    f"run above (it is the same delay); exact for tau = 1.1: {exact_11:.8f}"
)

# %%
# Figure
# ------
fig, ax = plt.subplots(figsize=(6, 4))
for name, err in errors.items():
    ax.loglog(dts, err, "o-", label=name)
ax.set_xlabel("dt")
ax.set_ylabel("|Re(lambda) estimate - Lambert W value|")
ax.set_title("dx/dt = -x(t - 1.05), RK4")
ax.legend()
fig.tight_layout()
save_figure(fig, args.out)
