"""
Speed and accuracy: which integrator, which step?
=================================================

A flow's exponents are computed on a discretised flow, so they carry the
integrator's error. The cleanest place to see it is the sum of all exponents:
for Lorenz it must equal the divergence ``-(sigma + 1 + beta) = -13.6667``
exactly, and lyapax's sum is the average of ``ln|det J_step| / dt`` over the
run, with no statistical error to hide the truncation error. So
``|sum + 13.6667|`` shrinks like ``dt^p`` with the integrator's order ``p``:
1 (Euler), 2 (Heun), 4 (RK4), 6 (RK6).

The second panel puts the error against the cost of one time unit of
simulation (warm, compiled, measured here), which is what decides the choice:
higher order costs more stages per step but allows far larger steps.

Run ``python examples/09_speed_accuracy.py`` (``--quick`` for a short run,
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

from lyapax import lyapunov_spectrum, ode_problem
from lyapax.systems import lorenz

args = example_args("integrators vs dt", "09_speed_accuracy.png")
dts = [0.02, 0.01, 0.005] if args.quick else [0.02, 0.01, 0.005, 0.0025, 0.00125]
n_steps = 2_000 if args.quick else 20_000  # same for every dt: one compile each
EXACT_SUM = -(10.0 + 1.0 + 8.0 / 3.0)
x0 = jnp.array([-5.0, -6.0, 22.0])  # close to the attractor already


# %%
# Measure
# -------
# The first call per integrator compiles; ``dt`` is a runtime input, so the
# other step sizes reuse that program and the timed call is warm.
def run(integrator, dt):
    problem = ode_problem(lorenz(), x0, dt, integrator=integrator)
    return lyapunov_spectrum(problem, n_steps=n_steps, renorm_every=10)


errors, costs = {}, {}
for integrator in ["euler", "heun", "rk4", "rk6"]:
    jax.block_until_ready(run(integrator, dts[0]).exponents)  # compile
    errors[integrator], costs[integrator] = [], []
    for dt in dts:
        wall = float("inf")
        for _ in range(3):  # best of 3: other processes add noise, never speed
            t0 = time.perf_counter()
            res = run(integrator, dt)
            total = float(jax.block_until_ready(res.exponents).sum())
            wall = min(wall, time.perf_counter() - t0)
        errors[integrator].append(abs(total - EXACT_SUM))
        costs[integrator].append(wall / (n_steps * dt))  # seconds per time unit

print(f"|sum of exponents - ({EXACT_SUM:.4f})|")
print("dt        " + "".join(f"{name:>12}" for name in errors))
for i, dt in enumerate(dts):
    print(f"{dt:<10}" + "".join(f"{errors[m][i]:>12.2e}" for m in errors))
for name, order in [("euler", 1), ("heun", 2), ("rk4", 4), ("rk6", 6)]:
    err = np.array(errors[name])
    ok = err > 1e-12  # below that the sum sits at round-off
    slope = np.polyfit(np.log(np.array(dts)[ok]), np.log(err[ok]), 1)[0]
    print(f"{name:6s} fitted slope {slope:.2f} (integrator order {order})")

# %%
# A slope steeper than the order is possible: the sum only sees the average of
# the local error of ``ln|det J_step|`` along the orbit, and for this flow's
# constant divergence the leading term can partly average out.

# %%
# Figure
# ------
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
for name in errors:
    ax1.loglog(dts, errors[name], "o-", label=name)
    ax2.loglog(costs[name], errors[name], "o-", label=name)
ax1.set_xlabel("dt")
ax1.set_ylabel("|sum of exponents + 13.6667|")
ax1.set_title("Lorenz: truncation error of the exponents")
ax2.set_xlabel(f"seconds per time unit (warm, {jax.default_backend()}, this machine)")
ax2.set_title("error vs cost")
ax1.legend()
fig.tight_layout()
save_figure(fig, args.out)
