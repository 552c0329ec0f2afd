"""
Chaotic flows: Lorenz, Rössler and Lorenz-96
============================================

Three classic flows, each with something exact to check:

* every bounded, non-stationary orbit of an autonomous flow has one exponent
  equal to zero (the direction along the flow);
* the exponents sum to the time average of the divergence of the vector field:
  ``-(sigma + 1 + beta)`` for Lorenz and ``-N`` for Lorenz-96 (both constant),
  ``a - c + <x>`` for Rössler (a time average, printed from the orbit);
* literature values: Lorenz ``(0.9056, 0, -14.5723)``, Rössler at
  ``a = b = 0.2, c = 5.7``: ``(0.0714, 0, -5.3943)``.

Run ``python examples/05_chaotic_flows.py`` (``--quick`` for a short run,
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

from lyapax import lyapunov_spectrum, ode_problem
from lyapax.systems import lorenz, lorenz96, rossler

args = example_args("chaotic flows", "05_chaotic_flows.png")
scale = 1 if args.quick else 10


def show(name, res, reference=None):
    """Print the spectrum next to its reference values."""
    got = np.asarray(res.exponents)
    print(f"{name}: got      {np.array2string(got, precision=4)}")
    if reference is not None:
        print(f"{' ' * len(name)}  expected {np.array2string(reference, precision=4)}")


# %%
# Lorenz
# ------
# ``t_transient`` runs first (frame included) and is not counted.
lz = lyapunov_spectrum(
    ode_problem(lorenz(), jnp.ones(3), dt=0.01),
    n_steps=10_000 * scale,
    renorm_every=10,
    t_transient=20.0,
)
show("Lorenz", lz, np.array([0.9056, 0.0, -14.5723]))
print(f"  sum: expected -(10 + 1 + 8/3) = -13.6667, got {lz.exponents.sum():.4f}")

# %%
# Rössler
# -------
# Its leading exponent is small, so it needs a long run: in quick mode expect
# only the first digit. ``save_states=True`` returns the orbit too, for the
# divergence average ``a - c + <x>``.
rs = lyapunov_spectrum(
    ode_problem(rossler(), jnp.array([1.0, 1.0, 0.0]), dt=0.05),
    n_steps=20_000 * scale,
    renorm_every=10,
    t_transient=200.0,
    save_states=True,
    decimate=10,
)
show("Rössler", rs, np.array([0.0714, 0.0, -5.3943]))
mean_x = float(jnp.mean(rs.trajectory[:, 0]))
div = 0.2 - 5.7 + mean_x
print(f"  sum: expected a - c + <x> = {div:.4f}, got {rs.exponents.sum():.4f}")

# %%
# Lorenz-96
# ---------
# ``dx_i/dt = (x_{i+1} - x_{i-2}) x_{i-1} - x_i + F`` on a ring of ``N``
# sites; ``F = 8`` is chaotic. Only the ``-x_i`` term depends on ``x_i``, so
# the divergence is ``-N``.
N = 10 if args.quick else 40
x0 = 8.0 * jnp.ones(N) + 0.01 * jnp.arange(N)
l96 = lyapunov_spectrum(
    ode_problem(lorenz96(8.0), x0, dt=0.01),
    n_steps=10_000 * scale,
    renorm_every=10,
    t_transient=20.0,
)
show(f"Lorenz-96 N={N}", l96)
print(f"  sum: expected -N = {-N}, got {l96.exponents.sum():.4f}")
zero = int(np.argmin(np.abs(np.asarray(l96.exponents))))
print(f"  exponent closest to zero: {float(l96.exponents[zero]):+.4f} (index {zero})")

# %%
# Figure
# ------
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
for ax, (name, res) in zip(axes[:2], [("Lorenz", lz), ("Rössler", rs)], strict=True):
    ax.plot(res.times, res.history)
    ax.set_xscale("log")
    ax.set_title(f"{name}: running estimates")
    ax.set_xlabel("time")
axes[1].set_ylim(-6, 0.5)
axes[2].plot(np.arange(1, N + 1), l96.exponents, "o-")
axes[2].axhline(0, color="k", lw=0.6)
axes[2].set_title(f"Lorenz-96 (N={N}, F=8) spectrum")
axes[2].set_xlabel("index")
axes[0].set_ylabel("exponent (1/time)")
fig.tight_layout()
save_figure(fig, args.out)
