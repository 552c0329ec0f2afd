"""
Your own system
===============

Any JAX function ``rhs(x) -> dx/dt`` on a 1-D state is a flow lyapax can
measure; any ``step(x) -> x_next`` is a map. This example writes Thomas'
cyclically symmetric attractor from scratch,

``dx/dt = sin(y) - b x,  dy/dt = sin(z) - b y,  dz/dt = sin(x) - b z``,

chaotic for ``b = 0.208186``. Its divergence is ``-3 b`` everywhere, so the
exponents must sum to exactly ``-3 b``, and one of them must be zero (an
autonomous flow).

How to pass parameters: wrap the function and its numbers in
``jax.tree_util.Partial``. The numbers are then pytree leaves, which lyapax
feeds to its compiled program as runtime inputs, so a new ``b`` reuses the
program instead of compiling a new one (a plain Python closure over ``b``
works too, but each new closure compiles again).

Run ``python examples/03_custom_system.py`` (``--quick`` for a short run,
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

from lyapax import lyapunov_spectrum, ode_problem

args = example_args("a custom system", "03_custom_system.png")
n_steps = 20_000 if args.quick else 400_000


# %%
# The vector field
# ----------------
# Written once, with its parameter as the first argument so that
# ``Partial(thomas, b)`` is a function of the state alone.
def thomas(b, x):
    return jnp.sin(jnp.roll(x, -1)) - b * x


def spectrum(b):
    problem = ode_problem(
        jax.tree_util.Partial(thomas, b), jnp.array([0.1, 0.0, -0.1]), dt=0.05
    )
    return lyapunov_spectrum(
        problem,
        n_steps=n_steps,
        renorm_every=10,
        t_transient=500.0,
        save_states=True,
        decimate=10,
    )


# %%
# The spectrum, and the compile cache
# -----------------------------------
# The first call traces and compiles; the second, with another ``b``, only
# runs.
t0 = time.perf_counter()
res = spectrum(0.208186)
jax.block_until_ready(res.exponents)
t_first = time.perf_counter() - t0
t0 = time.perf_counter()
res2 = spectrum(0.25)
jax.block_until_ready(res2.exponents)
t_second = time.perf_counter() - t0
print(f"first call (compile + run) {t_first:.2f} s, new b (run only) {t_second:.2f} s")

for b, r in [(0.208186, res), (0.25, res2)]:
    lam = np.asarray(r.exponents)
    print(f"b = {b}: exponents {np.array2string(lam, precision=4)}")
    print(f"   sum: expected -3b = {-3 * b:.6f}, got {lam.sum():.6f}")
    zero = lam[np.argmin(np.abs(lam))]
    print(f"   exponent closest to 0: expected 0, got {zero:+.1e}")

# %%
# At ``b = 0.25`` the orbit is a limit cycle: the leading exponent is the zero
# one and the other two are negative -- no chaos.

# %%
# Figure
# ------
pts = np.asarray(res.trajectory)
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
ax1.plot(pts[:, 0], pts[:, 1], lw=0.3)
ax1.set_title("Thomas attractor, b = 0.208186 (x, y)")
ax2.plot(res.times, res.history)
ax2.set_xscale("log")
ax2.set_xlabel("time")
ax2.set_ylabel("running estimates (1/time)")
fig.tight_layout()
save_figure(fig, args.out)
