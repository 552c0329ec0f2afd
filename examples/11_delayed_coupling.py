"""
Delayed coupling
================

Two leaky nodes that hear each other with a delay ``tau``,

``dx_1/dt = -x_1 + G x_2(t - tau)``,  ``dx_2/dt = -x_2 + G x_1(t - tau)``.

The sum and difference of ``x_1, x_2`` decouple, and each obeys
``dy/dt = -y + mu G y(t - tau)`` with ``mu = +1`` (in phase) or ``-1``
(anti-phase). Trying ``y = exp(lambda t)`` gives
``lambda = -1 + W(mu G tau e^tau) / tau`` with ``W`` the Lambert W function
(principal branch, which gives the rightmost root). The leading Lyapunov
exponent is the larger real part of the two modes: the in-phase mode goes
unstable at ``G = 1``, whatever the delay.

A delay equation has an infinite-dimensional phase space (the history over
one delay); lyapax carries a discretised history with the state
(:func:`lyapax.dde.network_dde_problem`) and measures the leading ``k``
exponents of that. All coupling strengths run as one batch with
:func:`lyapax.sweep.sweep_lyapunov_spectrum`.

Run ``python examples/11_delayed_coupling.py`` (``--quick`` for a short run,
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
from lyapax.sweep import sweep_lyapunov_spectrum

args = example_args("delayed coupling", "11_delayed_coupling.png")
tau, dt = 1.0, 0.02
n_steps = 5_000 if args.quick else 50_000


def leading_root(G):
    """Rightmost characteristic root over the in-phase and anti-phase modes."""
    z = np.array([mu * G * tau * np.exp(tau) for mu in (1.0, -1.0)])
    return float(np.max(-1.0 + lambertw(z, 0).real / tau))


# %%
# The problem
# -----------
# ``interpolate=True`` reads the delayed values at each Runge-Kutta stage by
# cubic Hermite interpolation, so the integrator keeps its order.
def leaky(x, c, params):
    return -x + c


pair = Network(jnp.array([[0.0, 1.0], [1.0, 0.0]]), cvar_indices=(0,))
problem = network_dde_problem(
    leaky,
    pair,
    linear_coupling(),
    {"G": 1.0},
    state0=jnp.array([0.3, -0.1]),
    dt=dt,
    tau=tau,
    integrator="rk4",
    interpolate=True,
)

# %%
# A sweep over the coupling strength
# ----------------------------------
Gs = np.linspace(-2.0, 2.0, 9 if args.quick else 41)
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
got = np.asarray(res.exponents[:, 0])
expected = np.array([leading_root(G) for G in Gs])
print("   G   expected lambda_1   got")
for G, e, g in zip(Gs, expected, got, strict=True):
    print(f"{G:+5.2f}   {e:+.5f}          {g:+.5f}")
print(f"max |got - expected|: {np.abs(got - expected).max():.1e}")

# %%
# Figure
# ------
G_fine = np.linspace(Gs[0], Gs[-1], 400)
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(G_fine, [leading_root(G) for G in G_fine], "k-", lw=1, label="Lambert W")
ax.plot(Gs, got, "o", mfc="none", label="lyapax")
ax.axhline(0, color="gray", lw=0.6)
ax.set_xlabel("coupling G")
ax.set_ylabel(r"$\lambda_1$")
ax.set_title(f"Two leaky nodes, delayed coupling, tau = {tau}")
ax.legend()
fig.tight_layout()
save_figure(fig, args.out)
