"""
Your own coupling function
==========================

A coupling is any function ``coupling(x (n_cvar, n), weights (n, n), params)
-> (n_cvar, n)`` that returns, for every node, what its neighbours feed into
its equations. Here: a nonlinear diffusive coupling

``c_i = G sum_j W_ij sin(x_j - x_i)``

on a ring of ``n`` nodes, each node ``dx_i/dt = -a x_i - x_i^3 + c_i``. The
state ``x = 0`` is a stable fixed point, so the exponents are the eigenvalues
of the Jacobian there, ``-a - G mu_m`` with ``mu_m = 2 - 2 cos(2 pi m / n)``
the ring Laplacian's eigenvalues. lyapax differentiates the coupling with
``jax.jvp`` -- you write only the function.

Run ``python examples/08_custom_coupling.py`` (``--quick`` for a short run,
``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import lyapunov_spectrum
from lyapax.network import Network, network_problem

args = example_args("custom coupling", "08_custom_coupling.png")
n = 10 if args.quick else 40
n_steps = 5_000 if args.quick else 50_000


# %%
# The coupling and the node
# -------------------------
# ``x`` holds one row per coupled variable, so ``x[:, None, :] - x[:, :, None]``
# is the ``(n_cvar, n, n)`` array of differences ``x_j - x_i`` (target ``i``,
# source ``j``).
def sine_diffusion(x, weights, params):
    diff = x[:, None, :] - x[:, :, None]
    return params["G"] * jnp.sum(weights * jnp.sin(diff), axis=-1)


def node(x, c, params):
    return -params["a"] * x - x**3 + c


ring = np.roll(np.eye(n), 1, axis=1) + np.roll(np.eye(n), -1, axis=1)
params = {"a": 0.1, "G": 0.5}
x0 = 0.5 * jax.random.normal(jax.random.PRNGKey(0), (n,))
problem = network_problem(
    node,
    Network(jnp.asarray(ring), (0,)),
    sine_diffusion,
    params,
    x0,
    dt=0.05,
    integrator="rk4",
)
res = lyapunov_spectrum(problem, n_steps=n_steps, renorm_every=10, t_transient=200.0)

# %%
# Reference: the Jacobian at ``x = 0``
# ------------------------------------
mu = 2 - 2 * np.cos(2 * np.pi * np.arange(n) / n)
expected = np.sort(-params["a"] - params["G"] * mu)[::-1]
got = np.asarray(res.exponents)
print("top 4 expected:", np.array2string(expected[:4], precision=5))
print("top 4 got:     ", np.array2string(got[:4], precision=5))
print(f"max |got - expected| over all {n}: {np.abs(got - expected).max():.2e}")
print(f"sum: expected {expected.sum():.5f}, got {got.sum():.5f}")

# %%
# Figure
# ------
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(np.arange(1, n + 1), expected, "k_", ms=14, label="-a - G mu_m (exact)")
ax.plot(np.arange(1, n + 1), got, "o", mfc="none", label="lyapax")
ax.set_xlabel("index")
ax.set_ylabel("exponent")
ax.set_title(f"Ring of {n} nodes, sine diffusive coupling")
ax.legend()
fig.tight_layout()
save_figure(fig, args.out)
