"""
Look at the trajectory first
============================

Before trusting a Lyapunov exponent, look at the orbit it is computed on: is it
bounded, has the transient died out, does it look like the attractor you
expect? This example integrates the Lorenz system with
:func:`lyapax.simulate_trajectory`, then does the oldest sanity check of chaos
by hand: start a few twins a distance ``1e-10`` away and watch the separation
grow like ``exp(lambda_1 t)`` until it saturates at the size of the attractor.
The slope of the mean log-separation is a rough estimate of the leading
exponent, which :func:`lyapax.lyapunov_spectrum` then measures properly.

Run ``python examples/00_time_series_sanity.py`` (``--quick`` for a short
run, ``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import lyapunov_spectrum, ode_problem, rk4_step, simulate_trajectory
from lyapax.sweep import sweep_trajectory
from lyapax.systems import lorenz

args = example_args("trajectory sanity check", "00_time_series.png")

# %%
# The orbit
# ---------
# ``rk4_step(rhs, dt)`` is the discrete step every lyapax routine iterates.
# ``n_transient`` steps are thrown away so that the saved states lie on the
# attractor.
dt = 0.01
step = rk4_step(lorenz(), dt)
traj = simulate_trajectory(
    step, jnp.array([1.0, 1.0, 1.0]), n_steps=5_000, dt=dt, n_transient=2_000
)
states = np.asarray(traj.states)
print(f"{states.shape[0]} states saved, t = {float(traj.times[-1]):.0f} time units")
print("all finite:", bool(np.isfinite(states).all()))
print("range of x, y, z:", np.ptp(states, axis=0).round(1))

# %%
# Twins that drift apart
# ----------------------
# Eight copies of the last state, each nudged by ``1e-10`` in a random
# direction, are integrated side by side (one vmapped program through
# :func:`lyapax.sweep.sweep_trajectory`).
n_twins, eps = 8, 1e-10
x_ref = traj.states[-1]
kick = jax.random.normal(jax.random.PRNGKey(1), (n_twins, 3))
kick = eps * kick / jnp.linalg.norm(kick, axis=1, keepdims=True)
starts = jnp.concatenate([x_ref[None], x_ref + kick])
t_sep = 15.0 if args.quick else 30.0
runs = sweep_trajectory(
    step, None, None, dt, n_steps=int(t_sep / dt), state0_batch=starts
)
sep = jnp.linalg.norm(runs.states[1:] - runs.states[0], axis=-1)
log_sep = np.asarray(jnp.mean(jnp.log(sep), axis=0))
t = np.asarray(runs.times[0])

# Fit the straight part: well above the starting distance, well below the
# attractor's size.
grow = (log_sep > np.log(eps) + 2) & (log_sep < np.log(1e-1))
slope = np.polyfit(t[grow], log_sep[grow], 1)[0]

# %%
# The proper measurement
# ----------------------
n_steps = 20_000 if args.quick else 200_000
res = lyapunov_spectrum(
    ode_problem(lorenz(), x_ref, dt), n_steps=n_steps, k=1, renorm_every=10
)
lam1 = float(res.exponents[0])
print(f"separation slope (rough, finite-time): {slope:.3f}")
print(f"lyapunov_spectrum lambda_1:            {lam1:.4f}")
print("reference lambda_1 (Lorenz 1963 parameters): about 0.906")

# %%
# Figure
# ------
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
ax1.plot(states[:, 0], states[:, 2], lw=0.4)
ax1.set_xlabel("x")
ax1.set_ylabel("z")
ax1.set_title("Lorenz attractor (x, z)")
ax2.plot(t, log_sep, label="mean log separation of 8 twins")
ax2.plot(t, np.log(eps) + lam1 * t, "--", label=rf"slope $\lambda_1$ = {lam1:.3f}")
ax2.set_ylim(np.log(eps) - 2, 5)
ax2.set_xlabel("time")
ax2.set_ylabel("log |separation|")
ax2.legend(loc="lower right")
fig.tight_layout()
save_figure(fig, args.out)
