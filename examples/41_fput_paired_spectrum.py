"""
The paired Lyapunov spectrum of an FPUT-β chain
================================================

The tangent map of a symplectic step is symplectic, so the exponents of a
Hamiltonian system come in pairs ``λ_i = -λ_{2n+1-i}``, with the central pair
at 0 (the energy and the direction of the flow). With the engine's random
initial frame the pairs close only as the run grows (an error of order
``1/t``); started from :meth:`HamiltonianProblem.paired_start` (an
orthonormal frame that is symplectic for the pairing of column ``i`` with
``2n + 1 - i``) every QR factor pairs its diagonal exactly, and the spectrum
pairs to rounding at any length.

The Fermi–Pasta–Ulam–Tsingou β chain of ``n = 8`` masses with fixed ends,
``β = 1``, started with energy in its lowest mode.

Run ``python examples/41_fput_paired_spectrum.py`` (``--quick`` for a short
run, ``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import lyapunov_spectrum
from lyapax.systems import fput_beta

args = example_args("paired spectrum of FPUT-beta", "41_fput_paired_spectrum.png")
n, dt = 8, 0.1
n_steps = 5000 if args.quick else 100_000

chain = fput_beta(n, beta=1.0)
p0 = 1.5 * np.sin(np.pi * np.arange(1, n + 1) / (n + 1))
problem = chain.problem(np.zeros(n), p0, dt, "yoshida4")
print(f"energy H = {float(problem.energy(problem.state0)):.4f}")

paired = np.asarray(
    lyapunov_spectrum(problem, n_steps, resume=problem.paired_start()).exponents
)
random = np.asarray(lyapunov_spectrum(problem, n_steps).exponents)
for name, ex in (("paired frame", paired), ("random frame", random)):
    print(
        f"{name}: lambda_1 = {ex[0]:.4f}, max |lambda_i + lambda_(2n+1-i)| = "
        f"{np.abs(ex + ex[::-1]).max():.1e}, central pair {ex[n - 1]:+.1e} "
        f"{ex[n]:+.1e}"
    )

# %%
fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
i = np.arange(1, 2 * n + 1)
ax.plot(i, paired, "o", label="lambda_i")
ax.plot(i, -paired[::-1], "x", ms=9, label="-lambda_(2n+1-i)")
ax.axhline(0, color="k", lw=0.5)
ax.set_xlabel("i")
ax.set_ylabel("exponent")
ax.set_title(f"FPUT-β n = {n}, t = {n_steps * dt:g}: exactly paired spectrum")
ax.legend()
save_figure(fig, args.out)
