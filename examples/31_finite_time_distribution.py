"""
Finite-time exponent distributions narrow with the window
=========================================================

:func:`lyapax.finite_time.finite_time_exponents` cuts one Benettin run into
consecutive windows and returns the exponent of each window; with
``state0_batch`` an ensemble runs as one program. The spread of the
distribution shrinks as the window ``n`` grows, at a rate set by the
dynamics:

* asymmetric tent map (break point ``p = 0.3``): the symbols are independent,
  so the ``n``-step exponent is binomial, with mean ``-p ln p - (1-p) ln(1-p)``
  and standard deviation ``sqrt(p (1-p)) |ln((1-p)/p)| / sqrt(n)``;
* logistic map at ``r = 4``: ``ln|f'|`` is ``ln 2`` plus a coboundary, so the
  mean is ``ln 2`` and the spread decays like ``1/n``: ``n std -> pi / sqrt 6``.

Run ``python examples/31_finite_time_distribution.py`` (``--quick`` for a
small ensemble, ``--out FILE`` for the figure's path).
"""

import math

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax.finite_time import finite_time_exponents
from lyapax.systems import logistic_map

args = example_args(
    "finite-time exponent distributions",
    "31_finite_time_distribution.png",
    quick_help="small ensemble (CI, docs)",
)
members = 500 if args.quick else 4000
windows = (4, 16, 64) if args.quick else (4, 16, 64, 256)
P = 0.3


def asymmetric_tent(x):
    # -x + 1.0: a TPU's float64 computes 1.0 - x of one element 1.8e-8 off
    return jnp.where(x < P, x / P, (-x + 1.0) / (1.0 - P))


x0 = np.random.default_rng(0).uniform(0.0, 1.0, (members, 1))
tent_mean = -P * math.log(P) - (1 - P) * math.log(1 - P)

# %%
# One ensemble run per window length; each member gives 8 windows.
results = {}
for n in windows:
    tent = finite_time_exponents(
        asymmetric_tent, None, 1.0, 8 * n, n, state0_batch=x0, t_transient=50.0
    )
    logistic = finite_time_exponents(
        logistic_map(4.0), None, 1.0, 8 * n, n, state0_batch=x0, t_transient=50.0
    )
    results[n] = (tent, logistic)
    tent_std = math.sqrt(P * (1 - P)) * abs(math.log((1 - P) / P)) / math.sqrt(n)
    print(
        f"n={n:4d}  tent: mean {tent.mean()[0]:.4f} (exact {tent_mean:.4f}), std "
        f"{tent.std()[0]:.4f} (exact {tent_std:.4f})   logistic: mean "
        f"{logistic.mean()[0]:.4f} (ln 2 = {math.log(2):.4f}), n*std "
        f"{n * logistic.std()[0]:.3f} (-> pi/sqrt 6 = {math.pi / math.sqrt(6):.3f})"
    )

# %%
# Figure
# ------
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
for n, (tent, logistic) in results.items():
    ax1.stairs(*tent.histogram(bins=40), label=f"n = {n}")
    ax2.stairs(*logistic.histogram(bins=60), label=f"n = {n}")
ax1.axvline(tent_mean, color="k", lw=0.7, ls="--")
ax2.axvline(math.log(2), color="k", lw=0.7, ls="--")
ax1.set_title(f"asymmetric tent map, p = {P}")
ax2.set_title("logistic map, r = 4")
for ax in (ax1, ax2):
    ax.set_xlabel("finite-time exponent")
    ax.set_ylabel("density")
    ax.legend()
fig.tight_layout()
save_figure(fig, args.out)
