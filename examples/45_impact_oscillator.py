"""
Impact oscillator: the saltation matrix, or the wrong spectrum
==============================================================

A mass on a spring, ``x'' = -x``, bounces off a wall at ``x = 0``, where
its velocity is reversed and scaled by the restitution ``r``:
``(x, v) -> (x, -r v)``. Between impacts the flow is a rotation, and every
impact multiplies a tangent vector by the saltation matrix
``S = DR + (f+ - DR f-) grad g^T / (grad g . f-) = -r I``, once per
half-turn of duration ``pi``: both exponents are ``ln r / pi``, their sum
``2 ln r / pi`` (the phase-space area shrinks by ``r^2`` per impact, as the
velocity and the impact time both scale by ``r``).

Differentiating the reset alone (``DR = diag(1, -r)``, the impact time held
fixed) forgets that a perturbed orbit hits the wall earlier or later: its
sum is ``ln r / pi``, half the right one. :func:`lyapax.hybrid_problem`
locates each impact inside its step to rounding and differentiates the
located impact time, so its tangents carry ``S``; ``saltation=False`` shows
the naive answer beside it.

Run ``python examples/45_impact_oscillator.py`` (``--quick``: shorter runs;
``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import equinox as eqx
import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import hybrid_problem, lyapunov_spectrum

args = example_args("impact oscillator spectrum vs r", "45_impact_oscillator.png")
n_steps = 5_000 if args.quick else 50_000
dt = 0.01
restitutions = np.linspace(0.2, 1.0, 5 if args.quick else 17)


def spring(x):
    return jnp.stack([x[1], -x[0]])


def wall(x):
    return x[0]  # the event: x crosses from > 0 to <= 0 at the wall


class Bounce(eqx.Module):
    """``(x, v) -> (x, -r v)``; ``r`` is a leaf, so every ``r`` reuses one
    compiled program."""

    r: float

    def __call__(self, x):
        return jnp.stack([x[0], -self.r * x[1]])


spectra = {True: [], False: []}
for saltation in (True, False):
    for r in restitutions:
        problem = hybrid_problem(
            spring, wall, Bounce(r), [1.0, 0.0], dt, saltation=saltation
        )
        res = lyapunov_spectrum(problem, n_steps, t_transient=10.0)
        spectra[saltation].append(np.asarray(res.exponents))
right, naive = np.array(spectra[True]), np.array(spectra[False])
exact = np.log(restitutions) / np.pi
for r, e, s, n in zip(restitutions, exact, right, naive, strict=True):
    print(
        f"r={r:.2f}  ln r/pi={e:+.4f}  saltation {s[0]:+.4f} {s[1]:+.4f}  "
        f"naive DR {n[0]:+.4f} {n[1]:+.4f}  sums {s.sum():+.4f} vs {n.sum():+.4f}"
    )

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2), constrained_layout=True)
grid = np.linspace(restitutions[0], 1.0, 200)
ax1.plot(grid, np.log(grid) / np.pi, "k-", lw=1, label=r"$\ln r / \pi$ (exact)")
ax1.plot(restitutions, right[:, 0], "o", label=r"$\lambda_1$, saltation")
ax1.plot(restitutions, right[:, 1], "x", label=r"$\lambda_2$, saltation")
ax1.plot(restitutions, naive[:, 0], "s", mfc="none", label=r"$\lambda_1$, naive $DR$")
ax1.plot(restitutions, naive[:, 1], "d", mfc="none", label=r"$\lambda_2$, naive $DR$")
ax1.set(xlabel="restitution r", ylabel="exponent", title="exponents")
ax1.legend(fontsize=8)
ax2.plot(grid, 2 * np.log(grid) / np.pi, "k-", lw=1, label=r"$2 \ln r / \pi$")
ax2.plot(grid, np.log(grid) / np.pi, "k--", lw=1, label=r"$\ln r / \pi$")
ax2.plot(restitutions, right.sum(axis=1), "o", label="saltation (right)")
ax2.plot(restitutions, naive.sum(axis=1), "s", mfc="none", label="naive DR (wrong)")
ax2.set(xlabel="restitution r", ylabel="sum of exponents", title="sum")
ax2.legend(fontsize=8)
save_figure(fig, args.out)
