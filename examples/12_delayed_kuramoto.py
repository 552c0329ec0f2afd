"""
A delayed Kuramoto network
==========================

``N`` identical phase oscillators, all-to-all, each hearing the others one
delay ``tau`` late:

``dtheta_i/dt = omega + (K/N) sum_{j != i} sin(theta_j(t - tau) - theta_i(t))``.

The in-phase state ``theta_i = Omega t`` exists when
``Omega = omega - K (N-1)/N sin(Omega tau)`` -- the delay shifts the common
frequency. Linearised around it, with ``a = (K/N) cos(Omega tau)``, every
perturbation transverse to sync (multiplicity ``N - 1``) obeys
``lambda = -a (N-1) - a exp(-lambda tau)``, solved by Lambert W:
``lambda_perp = -a (N-1) + W(-a tau e^{a (N-1) tau}) / tau``. The uniform shift
of all phases obeys ``lambda = a (N-1) (exp(-lambda tau) - 1)``: the root
``0`` (a common phase shift) and, from the other Lambert W branches, a complex
pair with real part ``-a (N-1) + Re W_{-1}(a (N-1) tau e^{a (N-1) tau}) / tau``.
The second exponent is the larger of ``lambda_perp`` and that real part: the
delay makes a uniform oscillation of the phases the slowest-decaying
perturbation at strong coupling. This example measures ``Omega``, the zero
exponent and the second exponent over a range of couplings ``K`` with
:func:`lyapax.dde.network_dde_problem` and the built-in Kuramoto coupling,
which costs what the undelayed coupling costs.

Run ``python examples/12_delayed_kuramoto.py`` (``--quick`` for a short run,
``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np
from scipy.optimize import brentq
from scipy.special import lambertw

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax.coupling import kuramoto_coupling
from lyapax.dde import network_dde_problem
from lyapax.network import Network
from lyapax.sweep import sweep_lyapunov_spectrum

args = example_args("delayed Kuramoto network", "12_delayed_kuramoto.png")
N, omega, tau, dt = 6, 1.0, 0.5, 0.02
n_steps = 5_000 if args.quick else 50_000


def theory(K):
    """``(Omega, lambda_2)`` of the in-phase state."""
    Omega = brentq(lambda w: w - omega + K * (N - 1) / N * np.sin(w * tau), -5, 5)
    a = K / N * np.cos(Omega * tau)
    b = a * (N - 1)
    perp = -b + lambertw(-a * tau * np.exp(b * tau), 0).real / tau
    uniform = -b + lambertw(b * tau * np.exp(b * tau), -1).real / tau
    return Omega, float(max(perp, uniform))


# %%
# The network
# -----------
def phase(theta, c, params):
    return params["omega"] + c


weights = jnp.ones((N, N)) - jnp.eye(N)
theta0 = 0.5 * jax.random.uniform(jax.random.PRNGKey(0), (N,))  # near sync
problem = network_dde_problem(
    phase,
    Network(weights, cvar_indices=(0,)),
    kuramoto_coupling(),
    {"omega": omega, "G": 1.0},
    theta0,
    dt=dt,
    tau=tau,
    integrator="rk4",
    interpolate=True,
)

# %%
# A sweep over ``K``
# ------------------
# ``G`` is the coupling strength the Kuramoto coupling reads. The saved
# trajectory (present phases first, then the history buffer) gives ``Omega``
# as the phase advance per unit time.
Ks = np.linspace(0.5, 3.0, 6 if args.quick else 26)
res = sweep_lyapunov_spectrum(
    problem,
    None,
    {"G": jnp.asarray(Ks)},
    None,
    n_steps=n_steps,
    k=3,
    renorm_every=10,
    t_transient=50.0,
    save_states=True,
    decimate=10,
)
phases = np.asarray(res.trajectory)[:, :, :N]  # present phases (state first)
times = np.asarray(res.save_times[0])
Omega_got = (phases[:, -1, 0] - phases[:, 0, 0]) / (times[-1] - times[0])

print("  K   Omega exp/got        lambda_1   lambda_2 exp/got")
for K, W_, l in zip(Ks, Omega_got, np.asarray(res.exponents), strict=True):
    Om, lam = theory(K)
    print(f"{K:4.2f}  {Om:.5f} {W_:.5f}    {l[0]:+.1e}   {lam:+.5f} {l[1]:+.5f}")

# %%
# Figure
# ------
K_fine = np.linspace(Ks[0], Ks[-1], 200)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
ax1.plot(K_fine, [theory(K)[0] for K in K_fine], "k-", lw=1, label="theory")
ax1.plot(Ks, Omega_got, "o", mfc="none", label="lyapax run")
ax1.set_xlabel("K")
ax1.set_ylabel("common frequency Omega")
ax1.legend()
ax2.plot(
    K_fine, [theory(K)[1] for K in K_fine], "k-", lw=1, label="Lambert W, lambda_2"
)
ax2.plot(Ks, res.exponents[:, 1], "o", mfc="none", label=r"$\lambda_2$ (lyapax)")
ax2.plot(Ks, res.exponents[:, 0], "x", label=r"$\lambda_1$ (lyapax)")
ax2.set_xlabel("K")
ax2.set_ylabel("exponent")
ax2.legend()
fig.suptitle(f"Delayed Kuramoto, N = {N}, tau = {tau}")
fig.tight_layout()
save_figure(fig, args.out)
