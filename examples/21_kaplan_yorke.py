"""
The Kaplan-Yorke dimension
==========================

Order the exponents ``lambda_1 >= lambda_2 >= ...`` and add them up. ``j``
directions together still expand (partial sum ``S_j >= 0``), ``j + 1`` contract;
the Kaplan-Yorke (Lyapunov) dimension interpolates between the two:

``D_KY = j + S_j / |lambda_{j+1}|``.

It is where the piecewise-linear curve of partial sums crosses zero, and it
estimates the attractor's information dimension. Known values: Hénon about
``1 + 0.4192 / 1.6232 = 1.258``, Lorenz about ``2 + 0.9056 / 14.5723 = 2.062``.

Run ``python examples/21_kaplan_yorke.py`` (``--quick`` for a short run,
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

from lyapax import kaplan_yorke_dimension, lyapunov_spectrum, ode_problem
from lyapax.systems import henon_map, lorenz, lorenz96

args = example_args("Kaplan-Yorke dimension", "21_kaplan_yorke.png")
scale = 1 if args.quick else 10
N = 10 if args.quick else 20

# %%
# Three spectra
# -------------
spectra = {
    "Hénon": lyapunov_spectrum(
        henon_map(), jnp.array([0.1, 0.1]), dt=1.0, n_steps=20_000 * scale
    ).exponents,
    "Lorenz": lyapunov_spectrum(
        ode_problem(lorenz(), jnp.ones(3), dt=0.01),
        n_steps=10_000 * scale,
        renorm_every=10,
        t_transient=20.0,
    ).exponents,
    f"Lorenz-96 N={N}": lyapunov_spectrum(
        ode_problem(lorenz96(8.0), 8.0 + 0.01 * jnp.arange(N), dt=0.01),
        n_steps=5_000 * scale,
        renorm_every=10,
        t_transient=20.0,
    ).exponents,
}
reference = {"Hénon": 1.258, "Lorenz": 2.062}
for name, lam in spectra.items():
    D = kaplan_yorke_dimension(lam)
    ref = f"expected about {reference[name]}, " if name in reference else ""
    print(f"{name:15s} D_KY: {ref}got {D:.3f}")

# %%
# A partial spectrum
# ------------------
# With only the leading ``k`` exponents, pass ``d_total`` (the phase-space
# dimension): if the partial sums have not turned negative yet, the dimension
# lies beyond the exponents computed and lyapax says so instead of returning
# a wrong number.
lam96 = spectra[f"Lorenz-96 N={N}"]
try:
    kaplan_yorke_dimension(lam96[:3], d_total=N)
except ValueError as err:
    print("k=3 of", N, "->", err)
# ``floor(D_KY) + 1`` leading exponents are the fewest that locate it.
k_needed = int(kaplan_yorke_dimension(lam96)) + 1
partial = kaplan_yorke_dimension(lam96[:k_needed], d_total=N)
print(f"k={k_needed} of {N}: {partial:.3f}")

# %%
# Figure: the partial sums cross zero at D_KY
# -------------------------------------------
fig, ax = plt.subplots(figsize=(7, 4))
for name, lam in spectra.items():
    sums = np.concatenate([[0.0], np.cumsum(np.sort(np.asarray(lam))[::-1])])
    D = kaplan_yorke_dimension(lam)
    (line,) = ax.plot(np.arange(sums.size), sums, "o-", label=f"{name}: {D:.3f}")
    ax.plot([D], [0], "x", ms=12, color=line.get_color())
ax.axhline(0, color="k", lw=0.6)
ax.set_ylim(-5, 4)
ax.set_xlabel("number of exponents j")
ax.set_ylabel("partial sum S_j")
ax.set_title("Kaplan-Yorke dimension: where S_j crosses zero")
ax.legend()
fig.tight_layout()
save_figure(fig, args.out)
