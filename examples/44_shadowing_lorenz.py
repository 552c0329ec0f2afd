"""
How the mean of z in the Lorenz system depends on rho (least-squares shadowing)
===============================================================================

``jax.grad`` of a time average along a chaotic orbit grows like
``exp(lambda_1 T)`` (see ``20_grad_exponent.py``): it differentiates one
trajectory, not the statistics. :func:`lyapax.shadowing_sensitivity`
differentiates along a shadowing trajectory instead (non-intrusive
least-squares shadowing, Ni & Wang 2017): its derivative of ``<z>`` with
respect to ``rho`` is bounded and converges as the run grows.

Here ``d<z>/drho`` over ``rho`` in [20, 40], every ``rho`` a row of one
``jax.vmap``-ed call, with its batch-means error bar, beside central finite
differences of long-time averages of ``z`` (several orbits per ``rho``). Below
``rho`` about 24.7 the orbit eventually settles on a fixed point with
``z* = rho - 1`` (derivative exactly 1), after a chaotic transient that can
outlast a short run (then the error bar is wide); above, the attractor is
chaotic and published shadowing gives about 1.01 at ``rho = 28``.

Run ``python examples/44_shadowing_lorenz.py`` (``--quick`` for short runs,
``--out FILE`` for the figure's path).
"""

import time

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import rk4_step, shadowing_sensitivity

args = example_args("d<z>/drho of Lorenz by shadowing", "44_shadowing_lorenz.png")
DT = 0.01


def lorenz(u, rho):
    x, y, z = u
    return jnp.stack([10.0 * (y - x), x * (rho - z) - y, x * y - 8.0 / 3.0 * z])


def z_of(u, rho):
    return u[2]


# %%
# Shadowing, one vmapped call over rho
# ------------------------------------
# ``n_unstable=1`` is given (the chaotic attractor has one positive exponent),
# so the call traces under ``jax.vmap``; on the fixed points below rho ~ 24
# the extra homogeneous tangent is a stable one, which the least-squares
# problem handles as well.
rhos = np.linspace(20.0, 40.0, 5 if args.quick else 21)
n_segments = 50 if args.quick else 500
x0 = jnp.array([1.0, 1.0, 20.0])


def sensitivity(rho):
    res = shadowing_sensitivity(
        lorenz, x0, rho, z_of, DT, n_segments, 100, n_unstable=1, t_transient=20.0
    )
    return res.average, res.gradient, res.stderr


start = time.perf_counter()
average, grad, err = jax.vmap(sensitivity)(jnp.asarray(rhos))
print(f"shadowing of {len(rhos)} rho values: {time.perf_counter() - start:.1f} s")

# %%
# Finite differences of long-time averages
# ----------------------------------------
# ``<z>`` at ``rho -+ h`` from several orbits each; the error bar is the
# spread of the orbits' averages.
h, n_orbits = 1.0, 8 if args.quick else 16
n_steps = 20_000 if args.quick else 200_000


def mean_z(rho, u0):
    step = rk4_step(lambda u: lorenz(u, rho), DT)
    u = jax.lax.fori_loop(0, 2000, lambda _, u: step(u), u0)
    _, zs = jax.lax.scan(lambda u, _: (step(u), u[2]), u, length=n_steps)
    return jnp.mean(zs)


starts = x0 + jax.random.normal(jax.random.key(0), (n_orbits, 3))
both = jnp.concatenate([jnp.asarray(rhos) - h, jnp.asarray(rhos) + h])
start = time.perf_counter()
means = np.asarray(
    jax.jit(jax.vmap(jax.vmap(mean_z, (None, 0)), (0, None)))(both, starts)
)
print(f"finite differences: {time.perf_counter() - start:.1f} s")
lo, hi = means[: len(rhos)], means[len(rhos) :]
fd = (hi.mean(1) - lo.mean(1)) / (2 * h)
fd_err = np.sqrt(hi.var(1, ddof=1) / n_orbits + lo.var(1, ddof=1) / n_orbits) / (2 * h)

rows = zip(rhos, np.asarray(grad), np.asarray(err), fd, fd_err, strict=True)
for r, g, e, f, fe in rows:
    print(
        f"rho = {r:4.1f}: shadowing {g:6.3f} +- {e:.3f}, "
        f"finite differences {f:6.3f} +- {fe:.3f}"
    )

# %%
# The figure
# ----------
fig, ax = plt.subplots(figsize=(6.4, 3.8))
ax.errorbar(
    rhos,
    np.asarray(grad),
    yerr=2 * np.asarray(err),
    fmt="o",
    label="shadowing (2 s.e.)",
)
ax.errorbar(
    rhos + 0.2,
    fd,
    yerr=2 * fd_err,
    fmt="s",
    mfc="none",
    label=f"finite differences, h = {h}",
)
ax.axhline(1.0, color="grey", lw=0.8, ls=":")
ax.axvline(24.74, color="grey", lw=0.8, ls="--")
ax.set_xlabel(r"$\rho$")
ax.set_ylabel(r"$d\langle z\rangle / d\rho$")
ax.set_ylim(0.5, 1.5)
ax.legend(loc="lower right", fontsize=8)
fig.tight_layout()
save_figure(fig, args.out)
