"""
Covariant vectors of a delay equation
=====================================

A delay equation's phase space is the history ``x(t + theta)``, ``theta in
[-tau, 0]``: lyapax discretises it as a ring buffer that travels with the
state, so its covariant Lyapunov vectors are functions of ``theta`` too.

For the linear equation ``x'(t) = -a x(t - tau)`` every solution is a sum of
``exp(lambda t)`` over the roots of ``lambda = -a exp(-lambda tau)`` (Lambert
W: ``lambda = W_k(-a tau) / tau``), so the covariant vector of a real root is
the history ``exp(lambda theta)`` itself. Here ``a = 0.3``, ``tau = 1``: two
real roots, ``W_0`` and ``W_-1``. Mackey-Glass (``tau = 17``) then shows the
leading vector of a chaotic delay equation as a profile over its history.

Run ``python examples/27_covariant_delay.py`` (``--quick`` for a short run,
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

from lyapax import covariant_vectors, systems
from lyapax.dde import dde_problem

args = example_args("delay-equation covariant vectors", "27_covariant_delay.png")


def history_profile(problem, res, n, column):
    """Value part of ``res.vectors[n, :, column]`` ordered by ``theta`` (0 first),
    with the ``theta`` grid: at step ``t = res.steps[n]`` ring-buffer slot
    ``(t - j) % H`` holds ``x(t - j dt)``."""
    H = problem.buf0.shape[0]
    m = problem.buf0[0].size  # numbers per slot: value (and derivative)
    step = int(res.steps[n])
    buf = np.asarray(res.vectors[n, problem.state0.size :, column]).reshape(H, m)
    j = np.arange(H)
    return -j * problem.dt, buf[(step - j) % H, 0]


# %%
# Linear delay equation: the vectors are exponentials
# ---------------------------------------------------
a, tau, dt = 0.3, 1.0, 0.01
linear = dde_problem(
    systems.linear_scalar_dde(a), 1.0, tau, dt, integrator="rk4", interpolate=True
)
res = covariant_vectors(
    linear,
    4_000,
    k=2,
    renorm_every=10,
    save_every=100,
    t_transient=20.0,
    t_backward=20.0,
)
roots = [float((lambertw(-a * tau, k=b) / tau).real) for b in (0, -1)]
for i, lam in enumerate(roots):
    print(f"lambda_{i + 1}: {float(res.exponents[i]):+.8f} (Lambert W {lam:+.8f})")
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4))
for i, lam in enumerate(roots):
    theta, v = history_profile(linear, res, 0, i)
    err = np.abs(v / v[0] - np.exp(lam * theta)).max()
    print(f"vector {i + 1} on the buffer vs exp(lambda theta): max error {err:.1e}")
    ax0.plot(theta, v / v[0], lw=2, label=f"CLV {i + 1}")
    ax0.plot(theta, np.exp(lam * theta), "k--", lw=0.8)
ax0.set_xlabel("theta")
ax0.set_ylabel("covariant vector (scaled to 1 at theta = 0)")
ax0.set_title("x' = -0.3 x(t-1): CLVs = exp(lambda theta) (dashed)")
ax0.legend()

# %%
# Mackey-Glass: the leading vector over the history
# -------------------------------------------------
mg = dde_problem(systems.mackey_glass(), jnp.array([1.2]), tau=17.0, dt=0.1)
n_steps = 20_000 if args.quick else 100_000
res = covariant_vectors(
    mg,
    n_steps,
    k=3,
    renorm_every=10,
    save_every=500,
    t_transient=500.0,
    t_backward=500.0,
)
print("Mackey-Glass exponents:", np.asarray(res.exponents), "(~ +0.007, 0, < 0)")
for n in range(0, len(res.times), max(1, len(res.times) // 4)):
    theta, v = history_profile(mg, res, n, 0)
    ax1.plot(theta, v / np.abs(v).max(), lw=1, label=f"t = {res.times[n]:.0f}")
ax1.set_xlabel("theta")
ax1.set_ylabel("leading CLV (max-normalised)")
ax1.set_title("Mackey-Glass tau = 17: leading CLV on the history")
ax1.legend(fontsize=8)
fig.tight_layout()
save_figure(fig, args.out)
