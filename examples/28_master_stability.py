"""
Master stability function: when does a network of Rössler oscillators synchronise?
==================================================================================

``N`` identical Rössler oscillators (``a = b = 0.2``, ``c = 5.7``) coupled
diffusively through their ``x`` variable,
``x_i' = F(x_i) + sigma sum_j A_ij (x_j - x_i)``, i.e.
``x_i' = F(x_i) - sigma sum_j L_ij H x_j`` with ``L = D - A`` the Laplacian
and ``H = diag(1, 0, 0)``. Perturbations of the synchronous state along the
Laplacian eigenvector ``k`` obey ``xi' = [DF(s) - alpha DH(s)] xi`` with
``alpha = sigma gamma_k``; the master stability function ``Lambda(alpha)``
is the largest exponent of that equation (Pecora & Carroll 1998). The network
synchronises when ``Lambda(sigma gamma_k) < 0`` for every ``k >= 1``.

:func:`lyapax.network.master_stability_function` computes ``Lambda`` on a grid
of ``alpha`` in one vmapped program (one trajectory, one initial frame);
:func:`lyapax.network.synchronisation` reads it on a network's Laplacian and
returns the synchronisable ``sigma`` interval. The example checks both
against the references:

* ``Lambda(0)`` is the node's own largest exponent (0.0714 for these
  parameters);
* for a ring and for an all-to-all network, the transversal exponents of the
  *network problem itself* (:func:`lyapax.network.transversal_exponents`,
  one variational problem per Laplacian mode) at a ``sigma`` inside and one
  outside the interval have the predicted signs.

Run ``python examples/28_master_stability.py`` (``--quick`` for a short run,
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

from lyapax.coupling import linear_coupling
from lyapax.network import (
    Network,
    master_stability_function,
    network_problem,
    synchronisation,
    transversal_exponents,
)
from lyapax.systems import rossler

args = example_args("master stability function", "28_master_stability.png")
dt = 0.02
n_steps = 20_000 if args.quick else 200_000  # T = 400 or 4000
n_alpha = 41 if args.quick else 121
t_transient = 100.0
s0 = jnp.array([1.0, 1.0, 0.0])
H = np.diag([1.0, 0.0, 0.0])  # x-coupling

# %%
# The master stability function
# -----------------------------
alphas = np.linspace(0.0, 6.0, n_alpha)
msf = master_stability_function(
    rossler(), H, alphas, s0, dt, n_steps, renorm_every=10, t_transient=t_transient
)
lam = np.asarray(msf.exponent)
print(f"Lambda(0) = {lam[0]:.4f} +- {float(msf.stderr[0]):.4f}  (node: 0.0714)")
negative = alphas[lam < 0]
print(
    f"Lambda < 0 on the grid for alpha in [{negative.min():.2f}, {negative.max():.2f}]"
)

# %%
# Two networks of N = 6 nodes
# ---------------------------
# A ring has ``gamma_k = 2 - 2 cos(2 pi k / N)`` (from 1 to 4 for N = 6);
# all-to-all coupling has ``gamma_k = N`` for every ``k >= 1``. The
# synchronisable interval is ``(alpha_1 / gamma_1, alpha_2 / gamma_max)``.
N = 6
ring = np.zeros((N, N))
for i in range(N):
    ring[i, (i + 1) % N] = ring[i, (i - 1) % N] = 1.0
full = np.ones((N, N)) - np.eye(N)
networks = {"ring": ring, "all-to-all": full}
reports = {}
for name, A in networks.items():
    rep = synchronisation(msf, A)
    reports[name] = rep
    lo, hi = rep.sigma_interval
    gam = rep.gammas
    print(
        f"{name:10s}: gamma_1 = {gam[1]:.3f}, gamma_max = {gam[-1]:.3f}; "
        f"synchronises for {lo:.3f} < sigma < {hi:.3f}"
    )


# %%
# The network problems agree
# --------------------------
# The same networks as ``network_problem`` s (linear coupling, the node's
# ``dfun`` subtracting ``sigma deg x_i`` so that the coupling is diffusive),
# started synchronised: their transversal exponents (one variational problem
# per Laplacian mode) must be negative inside the interval and not outside.
def dfun_for(degree):
    node = rossler()

    def dfun(x, c, p):
        f = jax.vmap(node, in_axes=1, out_axes=1)(x)
        return f.at[0].add(c[0] - p["G"] * degree * x[0])

    return dfun


x_sync = jnp.tile(s0[:, None], (1, N))
for name, A in networks.items():
    lo, hi = reports[name].sigma_interval
    for sigma, where in ((0.5 * (lo + hi), "inside"), (1.3 * hi, "above")):
        problem = network_problem(
            dfun_for(A[0].sum()),
            Network(A, (0,)),
            linear_coupling(),
            {"G": sigma},
            x_sync,
            dt,
            integrator="rk4",
        )
        modes = transversal_exponents(
            problem, n_steps // 4, k=1, t_transient=t_transient
        )
        predicted = synchronisation(msf, A, sigma=sigma)
        print(
            f"{name:10s} sigma = {sigma:.3f} ({where}): largest transversal "
            f"exponent {modes.transversal_max:+.4f}, MSF predicts "
            f"{np.nanmax(predicted.exponent[1:]):+.4f} "
            f"({'synchronises' if predicted.synchronised else 'does not'})"
        )

# %%
# Figure
# ------
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.plot(alphas, lam, "-", color="C0", label=r"$\Lambda(\alpha)$")
ax.fill_between(
    alphas,
    lam - 2 * np.asarray(msf.stderr),
    lam + 2 * np.asarray(msf.stderr),
    color="C0",
    alpha=0.2,
)
ax.axhline(0, color="k", lw=0.6)
for (name, rep), color in zip(reports.items(), ("C1", "C2"), strict=True):
    sigma = 0.5 * sum(rep.sigma_interval)
    ax.plot(
        sigma * rep.gammas[1:],
        np.interp(sigma * rep.gammas[1:], alphas, lam),
        "o",
        color=color,
        label=rf"{name}: $\sigma\gamma_k$, $\sigma$ = {sigma:.2f}",
    )
ax.set_xlabel(r"$\alpha = \sigma \gamma$")
ax.set_ylabel("largest transversal exponent")
ax.set_title("x-coupled Rössler oscillators (a = b = 0.2, c = 5.7)")
ax.legend()
fig.tight_layout()
save_figure(fig, args.out)
