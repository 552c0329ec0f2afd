"""
Covariant Lyapunov vectors of the Lorenz flow
=============================================

The Lyapunov exponents say how fast perturbations grow; the covariant
Lyapunov vectors (CLVs) say in which directions. Each CLV ``v_i(x)`` is
carried into ``v_i`` at the next point by the tangent map and grows at the
rate of its exponent, unlike the orthogonal Gram-Schmidt frame of a Benettin
run. :func:`lyapax.covariant_vectors` computes them by Ginelli's method: a
forward Benettin pass that keeps its ``R`` factors, a backward pass over
them.

For Lorenz the three vectors are the unstable direction (``lambda_1 ~
0.906``), the flow direction ``f(x)`` (``lambda_2 = 0``; a structural check)
and the stable direction (``lambda_3 ~ -14.57``). The angle between the
unstable and the stable direction measures hyperbolicity: where it comes
close to zero the splitting into expanding and contracting directions nearly
degenerates. Its distribution, with the smallest 1% of the angles marked as
near-tangencies, and where on the attractor they occur, are in the figure.

Run ``python examples/26_covariant_vectors.py`` (``--quick`` for a short run,
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

from lyapax import covariant_vectors, ode_problem, subspace_angles
from lyapax.systems import lorenz

args = example_args("Lorenz covariant vectors", "26_covariant_vectors.png")

# %%
# The run
# -------
# A forward transient lets the Gram-Schmidt frame converge; the backward
# transient at the end of the window lets the backward pass converge (both
# at the rates of the exponent gaps). A vector is saved every 5 steps.
rhs = lorenz()
problem = ode_problem(rhs, jnp.array([1.0, 1.0, 1.0]), dt=0.01)
n_steps = 50_000 if args.quick else 500_000
res = covariant_vectors(
    problem,
    n_steps,
    renorm_every=5,
    save_every=5,
    t_transient=50.0,
    t_backward=50.0,
)
print(f"{len(res.times)} vectors saved, storage={res.storage!r}")
print("exponents:", np.asarray(res.exponents), "(reference ~ 0.906, 0, -14.57)")

# %%
# The zero-exponent vector is the flow direction
# ----------------------------------------------
F = np.asarray(jax.vmap(rhs)(jnp.asarray(res.states)))
flow_angle = np.asarray(subspace_angles(res.vectors[:, :, 1:2], F[:, :, None]))
print(f"angle(v_2, f(x)): max {flow_angle.max():.1e} rad (reference 0)")

# %%
# Local growth rates
# ------------------
# Averaged over the saved intervals, each vector's finite-time growth rate
# is its exponent (the window's average, less the backward transient).
print("mean local growth:", res.local_growth.mean(axis=0))

# %%
# Angle between the unstable and the stable direction
# ---------------------------------------------------
v1, v3 = res.vectors[:, :, 0], res.vectors[:, :, 2]
cos = np.abs(np.sum(v1 * v3, axis=1))
angle = np.degrees(np.arccos(np.clip(cos, 0.0, 1.0)))
# Near-tangencies: the smallest 1% of the angles.
threshold = float(np.percentile(angle, 1.0))
near = angle <= threshold
print(
    f"angle(v_1, v_3): median {np.median(angle):.1f} deg, min {angle.min():.2f} deg; "
    f"1% of the time below {threshold:.1f} deg (near-tangencies)"
)

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4))
ax0.hist(angle, bins=90, range=(0, 90), density=True, color="tab:blue")
ax0.axvline(
    threshold,
    color="tab:red",
    ls="--",
    lw=1,
    label=f"1% quantile ({threshold:.1f} deg)",
)
ax0.set_yscale("log")
ax0.set_xlabel("angle between unstable and stable CLV (deg)")
ax0.set_ylabel("density")
ax0.legend()
xz = res.states[:, [0, 2]]
ax1.scatter(xz[:, 0], xz[:, 1], c=angle, s=1, cmap="viridis", vmin=0, vmax=90)
ax1.scatter(xz[near, 0], xz[near, 1], s=6, color="tab:red", label="near-tangency")
ax1.set_xlabel("x")
ax1.set_ylabel("z")
ax1.set_title("Lorenz attractor coloured by the angle")
ax1.legend(loc="upper right")
fig.tight_layout()
save_figure(fig, args.out)
