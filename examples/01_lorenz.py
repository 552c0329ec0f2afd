"""
Quick start: the Lorenz spectrum
================================

The three Lyapunov exponents of the Lorenz (1963) system at the classic
parameters ``sigma = 10, rho = 28, beta = 8/3``, with the Kaplan-Yorke
dimension. Reference values: ``(0.9056, 0, -14.5723)``; the sum must equal the
constant divergence ``-(sigma + 1 + beta) = -13.6667``.

This is the README's first example. Run ``python examples/01_lorenz.py``
(``--quick`` for a short run, ``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # lyapax expects float64

import jax.numpy as jnp
import matplotlib

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import kaplan_yorke_dimension, lyapunov_spectrum, ode_problem
from lyapax.systems import lorenz

args = example_args("Lorenz Lyapunov spectrum", "01_lorenz.png")
n_steps = 10_000 if args.quick else 100_000

# %%
# The run
# -------
# RK4 at ``dt = 0.01``; the QR re-orthonormalisation every 10 steps; 50 time
# units of transient (orbit and tangent frame) are not counted.
problem = ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)
result = lyapunov_spectrum(problem, n_steps=n_steps, renorm_every=10, t_transient=50.0)
print("exponents:", result.exponents, "(expected about 0.9056, 0, -14.5723)")
print("stderr:   ", result.stderr)
print(f"sum: expected -13.6667, got {float(result.exponents.sum()):.4f}")
print(
    f"Kaplan-Yorke dimension: {kaplan_yorke_dimension(result.exponents):.4f} "
    "(expected about 2.062)"
)

# %%
# Running estimates
# -----------------
fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
for i, (ax, ref) in enumerate(zip(axes, [0.9056, 0.0, -14.5723], strict=True)):
    ax.plot(result.times, result.history[:, i])
    ax.axhline(ref, color="k", ls="--", lw=0.7)
    ax.set_xscale("log")
    ax.set_title(rf"$\lambda_{i + 1}$ (reference {ref})")
    ax.set_xlabel("time")
fig.tight_layout()
save_figure(fig, args.out)
