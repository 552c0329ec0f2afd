"""
A different delay on every edge
===============================

In a network the delay of each connection usually depends on its length:
``tau_ij = length_ij / speed``. :class:`lyapax.simulator.Connectivity` holds
weights, tract lengths and a conduction speed and turns them into whole-step
delays; :func:`lyapax.dde.network_dde_problem` accepts those (through
``Network(delay_steps=...)``) or a matrix ``tau (n, n)`` of exact delays, with
any coupling.

An exact check: two leaky nodes, ``dx_1/dt = -x_1 + G x_2(t - tau_12)`` and
``dx_2/dt = -x_2 + G x_1(t - tau_21)``. Trying ``exp(lambda t)`` gives
``(lambda + 1)^2 = G^2 exp(-lambda (tau_12 + tau_21))``: only the mean delay
matters, so delays ``(0.5, 1.5)`` must give the spectrum of a uniform delay
``1.0`` -- the Lambert W formula of example 11.

Run ``python examples/24_per_edge_delays.py`` (``--quick`` for a short run,
``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np
from scipy.special import lambertw

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax.coupling import linear_coupling
from lyapax.dde import network_dde_problem
from lyapax.network import Network
from lyapax.simulator import Connectivity
from lyapax.sweep import sweep_lyapunov_spectrum

args = example_args("per-edge delays", "24_per_edge.png")
dt = 0.02
n_steps = 5_000 if args.quick else 50_000
Gs = np.linspace(-2.0, 2.0, 5 if args.quick else 21)


def leading_root(G, tau_mean=1.0):
    z = np.array([mu * G * tau_mean * np.exp(tau_mean) for mu in (1.0, -1.0)])
    return float(np.max(-1.0 + lambertw(z, 0).real / tau_mean))


def leaky(x, c, params):
    return -x + c


# %%
# A connectome with tract lengths
# -------------------------------
# Lengths 5 and 15 (say mm) at speed 10 (mm per time unit): delays 0.5 and
# 1.5. ``W[target, source]``: node 0 hears node 1 through the 5 mm tract.
W = np.array([[0.0, 1.0], [1.0, 0.0]])
conn = Connectivity(W, tract_lengths=[[0.0, 5.0], [15.0, 0.0]], speed=10.0)
print("delays (time units):\n", conn.delays())
print("delay_steps at dt = 0.02:\n", conn.delay_steps(dt))
print("ring-buffer horizon:", conn.horizon(dt), "steps")

x0 = jnp.array([0.3, -0.1])
problems = {
    # whole-step delays from the connectome (grid reads, first order in dt)
    "Connectivity.delay_steps (grid)": network_dde_problem(
        leaky,
        Network(jnp.asarray(W), (0,), delay_steps=conn.delay_steps(dt)),
        linear_coupling(),
        {"G": 1.0},
        x0,
        dt=dt,
        integrator="rk4",
    ),
    # the exact delays as a matrix, read by interpolation at every stage
    "tau matrix, interpolate=True": network_dde_problem(
        leaky,
        Network(jnp.asarray(W), (0,)),
        linear_coupling(),
        {"G": 1.0},
        x0,
        dt=dt,
        tau=conn.delays(),
        integrator="rk4",
        interpolate=True,
    ),
}

# %%
# Sweep the coupling strength for each form
# -----------------------------------------
lam1 = {}
for name, problem in problems.items():
    res = sweep_lyapunov_spectrum(
        problem,
        None,
        {"G": jnp.asarray(Gs)},
        None,
        n_steps=n_steps,
        k=2,
        renorm_every=10,
        t_transient=50.0,
    )
    lam1[name] = np.asarray(res.exponents[:, 0])
expected = np.array([leading_root(G) for G in Gs])
for name, got in lam1.items():
    print(
        f"{name:32s} max |lambda_1 - Lambert W(mean delay)|: "
        f"{np.abs(got - expected).max():.1e}"
    )

# %%
# Figure
# ------
G_fine = np.linspace(Gs[0], Gs[-1], 300)
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.plot(
    G_fine,
    [leading_root(G) for G in G_fine],
    "k-",
    lw=1,
    label="Lambert W, mean delay 1",
)
for (name, got), marker in zip(lam1.items(), "os", strict=True):
    ax.plot(Gs, got, marker, mfc="none", label=name)
ax.axhline(0, color="gray", lw=0.6)
ax.set_xlabel("coupling G")
ax.set_ylabel(r"$\lambda_1$")
ax.set_title("Two nodes, delays 0.5 and 1.5")
ax.legend(fontsize=8)
fig.tight_layout()
save_figure(fig, args.out)
