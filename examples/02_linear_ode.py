"""
Linear ODE: the exponents are the real parts of the eigenvalues
===============================================================

For ``dx/dt = A x`` every solution is a combination of ``exp(mu t) v`` over the
eigenpairs of ``A``, so the Lyapunov exponents are exactly ``Re(mu)``, each
counted with its multiplicity. That makes linear systems the first test of any
Lyapunov code. Here ``A`` is a random, non-normal ``6 x 6`` matrix built to have
one complex pair (two equal exponents) and four distinct real eigenvalues.

Run ``python examples/02_linear_ode.py`` (``--quick`` for a short run, ``--out
FILE`` for the figure's path).
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
from lyapax.systems import linear_system

args = example_args("linear ODE spectrum", "02_linear_ode.png")

# %%
# A matrix with a known spectrum
# ------------------------------
# ``A = V D V^-1`` with a block-diagonal ``D``: a rotation block (eigenvalues
# ``-0.2 +- 2i``) and four real eigenvalues. A random ``V`` makes ``A``
# non-normal, so its eigenvectors are not orthogonal -- the QR steps have to
# sort that out.
D = np.zeros((6, 6))
D[:2, :2] = [[-0.2, 2.0], [-2.0, -0.2]]
D[2:, 2:] = np.diag([0.3, -0.5, -1.0, -1.5])
V = np.random.default_rng(0).normal(size=(6, 6))
A = V @ D @ np.linalg.inv(V)
expected = np.sort(np.linalg.eigvals(A).real)[::-1]

# %%
# The spectrum
# ------------
# A positive exponent makes the state grow without bound; lyapax only needs
# the tangent frame to stay finite, and the QR steps keep it orthonormal.
# RK4 at ``dt = 0.01`` changes each rate by far less than the statistical
# error of a finite run, which here comes from the frame aligning with the
# eigenvectors (an ``O(1/T)`` bias).
n_steps = 20_000 if args.quick else 200_000
problem = ode_problem(linear_system(jnp.asarray(A)), jnp.ones(6) * 1e-3, dt=0.01)
res = lyapunov_spectrum(problem, n_steps=n_steps, renorm_every=10)
got = np.asarray(res.exponents)
for e, g in zip(expected, got, strict=True):
    print(f"expected Re(mu) = {e:+.4f}, got {g:+.4f}  (diff {g - e:+.1e})")
print(f"sum: expected trace(A) = {np.trace(A):+.6f}, got {got.sum():+.6f}")

# %%
# Running estimates
# -----------------
# ``res.history`` holds the estimate after every renormalisation; each
# column settles on its eigenvalue's real part (dashed).
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(res.times, res.history, lw=1)
for e in expected:
    ax.axhline(e, color="k", ls="--", lw=0.6)
ax.set_xscale("log")
ax.set_xlabel("time")
ax.set_ylabel("running exponent estimate")
ax.set_title("dx/dt = A x: exponents -> Re eig(A)")
fig.tight_layout()
save_figure(fig, args.out)
