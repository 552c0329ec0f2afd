"""
Kuramoto oscillators: synchronisation seen by the exponents
===========================================================

``dtheta_i/dt = omega_i + (K/N) sum_j sin(theta_j - theta_i)`` on an
all-to-all network (:func:`lyapax.systems.kuramoto_network`).

* Identical oscillators lock into one phase. Linearised there, the coupling
  matrix is ``(K/N)(1 1^T - N I)``: one exponent ``0`` (shifting every phase
  together) and ``N - 1`` exponents equal to ``-K``.
* With spread frequencies, the phases lock only when ``K`` exceeds a critical
  value. Below it the motion is quasi-periodic or weakly chaotic (exponents
  near zero); above it every relative phase is damped and all exponents but
  the zero one are negative. The order parameter ``r = |<exp(i theta)>|``
  tells the same story.

Run ``python examples/07_kuramoto_sync.py`` (``--quick`` for a short run,
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
from lyapax.systems import kuramoto_network

args = example_args("Kuramoto synchronisation", "07_kuramoto_sync.png")
N = 8 if args.quick else 30
n_steps = 4_000 if args.quick else 40_000
theta0 = jax.random.uniform(jax.random.PRNGKey(0), (N,), maxval=2 * jnp.pi)

# %%
# Identical oscillators
# ---------------------
K = 1.5
sync = kuramoto_network(N, omega=1.0, K=K, theta0=theta0, dt=0.05)
res = lyapunov_spectrum(sync, n_steps=n_steps, renorm_every=10, t_transient=50.0)
lam = np.asarray(res.exponents)
print(f"identical, K = {K}: expected 0 and {N - 1} x {-K}")
print(f"  got top {lam[0]:+.2e}, others in [{lam[1:].min():.5f}, {lam[1:].max():.5f}]")

# %%
# The ``-K`` is met up to the integrator: Heun (the network default) turns
# ``exp(-K dt)`` into ``1 - K dt + (K dt)^2 / 2``, so the exponent of the
# discrete map is exactly ``ln(1 - K dt + (K dt)^2 / 2) / dt``.
h = 0.05
heun = np.log(1 - K * h + (K * h) ** 2 / 2) / h
print(f"  Heun at dt = {h}: expected {heun:.5f}")

# %%
# Spread frequencies: a sweep over K
# ----------------------------------
# Evenly spaced ``omega`` in ``[-1, 1]``. The problem is rebuilt for each
# ``K``; its numbers are runtime inputs, so only the first call compiles.
omega = jnp.linspace(-1.0, 1.0, N)
Ks = np.linspace(0.2, 3.0, 8 if args.quick else 29)
top3, order = [], []
for K in Ks:
    problem = kuramoto_network(N, omega=omega, K=float(K), theta0=theta0, dt=0.05)
    r = lyapunov_spectrum(
        problem,
        n_steps=n_steps,
        k=3,
        renorm_every=10,
        t_transient=100.0,
        save_states=True,
        decimate=10,
    )
    top3.append(np.asarray(r.exponents))
    order.append(float(jnp.mean(jnp.abs(jnp.mean(jnp.exp(1j * r.trajectory), axis=1)))))
top3 = np.array(top3)
print(" K      r      lambda_1   lambda_2   lambda_3")
for K, r, l in zip(Ks, order, top3, strict=True):
    print(f"{K:4.2f}  {r:5.3f}  {l[0]:+.4f}   {l[1]:+.4f}   {l[2]:+.4f}")

# %%
# Figure
# ------
fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(6, 6), sharex=True)
ax1.plot(Ks, order, "o-")
ax1.set_ylabel("order parameter r")
ax1.set_title(f"Kuramoto, N = {N}, omega evenly spaced in [-1, 1]")
ax2.plot(Ks, top3, "o-")
ax2.axhline(0, color="k", lw=0.6)
ax2.set_xlabel("coupling K")
ax2.set_ylabel("leading 3 exponents")
fig.tight_layout()
save_figure(fig, args.out)
