"""
Sweeps split over several devices
=================================

:func:`lyapax.sweep.sweep_lyapunov_spectrum` splits the batch axis over every
visible device (``devices=None``), or over the ones you name. Each row's
numbers do not depend on how the batch is split. GPUs and TPUs show up as
devices on their own; on a CPU, XLA can be asked to present the host as
several devices with ``XLA_FLAGS=--xla_force_host_platform_device_count=N``,
which must be set before JAX is imported -- this script does that first
thing, so it runs a real two-device sweep on any machine.

(If JAX was already imported in the same process -- e.g. when the
documentation builder runs every example in one interpreter -- the flag has
no effect, one device is visible, and the script says so.)

Run ``python examples/23_sharded_sweep.py`` (``--quick`` for a short run,
``--out FILE`` for the figure's path).
"""

import os
import sys

if "jax" not in sys.modules:  # only effective before JAX starts
    flag = "--xla_force_host_platform_device_count=2"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()

import time

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import rk4_step
from lyapax.sweep import sweep_lyapunov_spectrum
from lyapax.systems import lorenz

args = example_args("sharded sweep", "23_sharded_sweep.png")
n_rows = 16 if args.quick else 256
n_steps = 2_000 if args.quick else 20_000
print("visible devices:", jax.devices())
if len(jax.devices()) == 1:
    print("one device only: JAX started before this script could set XLA_FLAGS")


# %%
# The sweep
# ---------
# Lorenz over ``rho``; each row is ``rk4_step(lorenz(rho=rho), dt)``.
def step(x, params):
    return rk4_step(lorenz(rho=params["rho"]), 0.01)(x)


rhos = 10.0 + (6.0 if args.quick else 0.75) * jnp.arange(n_rows)  # holds 28


def sweep(devices):
    t0 = time.perf_counter()
    res = sweep_lyapunov_spectrum(
        step,
        jnp.ones(3),
        {"rho": rhos},
        dt=0.01,
        n_steps=n_steps,
        renorm_every=10,
        t_transient=20.0,
        devices=devices,
    )
    jax.block_until_ready(res.exponents)
    return res, time.perf_counter() - t0


# %%
# All devices, then one
# ---------------------
# Each is called twice: the first call compiles, the second is timed warm.
sweep(None)
split, t_split = sweep(None)
sweep(1)
single, t_single = sweep(1)
print("placement of the result:", split.exponents.sharding)

# %%
# Comparing the numbers: on rows whose orbit is not chaotic the two runs agree
# to the last bits. On chaotic rows, any difference in the last bit of a
# floating-point operation between two compiled programs is amplified like
# ``exp(lambda_1 t)``, so the two finite-time estimates differ by about their
# statistical error -- both are equally valid samples, as the error bars say.
lam_split, lam_single = np.asarray(split.exponents), np.asarray(single.exponents)
diff = np.abs(lam_split - lam_single).max(axis=1)
chaotic = lam_single[:, 0] > 0.05
if (~chaotic).any():
    quiet = diff[~chaotic].max()
    print(f"non-chaotic rows ({(~chaotic).sum()}): max |split - single| {quiet:.1e}")
if chaotic.any():
    worst = (diff / np.asarray(single.stderr).max(axis=1))[chaotic].max()
    print(
        f"chaotic rows ({chaotic.sum()}): max |split - single| "
        f"{diff[chaotic].max():.2f}, at most {worst:.1f} x the row's largest stderr"
    )
print(
    f"warm time: {len(jax.devices())} device(s) {t_split:.3f} s, one device "
    f"{t_single:.3f} s"
)
print(
    "(host 'devices' share the same CPU cores: the split shows that sharding "
    "works, a speed-up needs real extra hardware)"
)
i28 = int(np.argmin(np.abs(np.asarray(rhos) - 28.0)))
print(
    f"rho = {float(rhos[i28]):.1f}: lambda_1 = {float(split.exponents[i28, 0]):.3f} "
    "(0.906 at rho = 28)"
)

# %%
# Figure
# ------
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(rhos, split.exponents[:, 0], "o-", ms=3)
ax.axhline(0, color="k", lw=0.6)
ax.set_xlabel("rho")
ax.set_ylabel(r"$\lambda_1$")
ax.set_title(f"Lorenz, {n_rows} values of rho on {len(jax.devices())} device(s)")
fig.tight_layout()
save_figure(fig, args.out)
