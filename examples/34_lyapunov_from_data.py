"""
The largest Lyapunov exponent of a measured series
==================================================

When all you have is a recorded signal, the largest exponent comes from the
divergence of nearby delay vectors:
:func:`lyapax.indicators.lyapunov_rosenstein` (Rosenstein et al. 1993) and
:func:`lyapax.indicators.lyapunov_kantz` (Kantz 1994) return the divergence
curve ``S(t)``, the linear region found on it and its slope. Here the
"measurements" are the x coordinate of two systems whose exponent is known:

* the Hénon map (a = 1.4, b = 0.3): lambda_1 = 0.419 per iteration;
* the Lorenz flow at sigma = 16, rho = 45.92, beta = 4, sampled every 0.01
  time units: lambda_1 = 1.50 per time unit (Wolf et al. 1985; lyapax's
  own Benettin run gives 1.505).

Pure noise has no linear region, and the fit says so (a
``NoLinearRegionWarning`` and ``exponent = nan``). The full run also shows
how much the Lorenz estimate moves with the embedding (dimension and lag):
an estimate from data carries that spread, not just its fit's error.

An exponent is a rate (per time unit; per sample when ``dt=1``), a dimension
is a pure number: do not compare a largest-exponent estimate with a
Kaplan-Yorke or correlation dimension (Lorenz at sigma=10, rho=28: lambda_1
= 0.906, dimension 2.06), and convert per-sample rates with the sampling
interval before comparing with a model's exponent.

Run ``python examples/34_lyapunov_from_data.py`` (``--quick`` for shorter
series, ``--out FILE`` for the figure's path).
"""

import warnings

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import rk4_step, simulate_trajectory
from lyapax.indicators import (
    NoLinearRegionWarning,
    lyapunov_kantz,
    lyapunov_rosenstein,
)
from lyapax.systems import henon_map, lorenz

args = example_args(
    "largest exponent from data",
    "34_lyapunov_from_data.png",
    quick_help="shorter series (CI, docs)",
)
n = 5_000 if args.quick else 10_000

# %%
# The measured series
# -------------------
henon_x = simulate_trajectory(henon_map(), jnp.array([0.1, 0.1]), n, n_transient=1000)
henon_x = np.asarray(henon_x.states[:, 0])  # a NumPy array ...
step = rk4_step(lorenz(16.0, 45.92, 4.0), 0.01)
lorenz_x = simulate_trajectory(step, jnp.ones(3), n, dt=0.01, n_transient=2000)
lorenz_x = lorenz_x.states[:, 0]  # ... or a JAX array
noise = np.random.default_rng(0).normal(size=n)

# %%
# Estimates
# ---------
runs = {
    "Hénon": (henon_x, dict(dimension=2, lag=1, horizon=20), 0.419),
    "Lorenz": (lorenz_x, dict(dimension=5, lag=5, horizon=300, dt=0.01), 1.50),
}
results = {}
for name, (x, kw, exact) in runs.items():
    for estimator in (lyapunov_rosenstein, lyapunov_kantz):
        res = estimator(x, **kw)
        results[name, res.method] = res
        print(
            f"{name:7s} {res.method:10s} lambda_1 = {res.exponent:.4f} "
            f"(reference {exact}, {100 * (res.exponent / exact - 1):+.1f}%), "
            f"linear region t = {res.fit.t_start:g} .. {res.fit.t_stop:g}, "
            f"max residual {res.fit.max_residual:.3f} of a rise {res.fit.rise:.2f}"
        )
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", NoLinearRegionWarning)
    res = lyapunov_rosenstein(noise, dimension=3, horizon=20)
results["noise", res.method] = res
print(
    f"noise   rosenstein exponent = {res.exponent} (found = {res.fit.found}; "
    f"{len(caught)} NoLinearRegionWarning: {res.fit.reason[:60]}...)"
)

# %%
# An exponent is not a dimension
# ------------------------------
# The standard Lorenz system has lambda_1 = 0.906 per time unit and a
# Kaplan-Yorke dimension of 2.06. nolds' own Lorenz test of ``lyap_r``
# accepts 2.4 +- 0.5 for these parameters: a number the size of the
# dimension, not of the exponent.
std = simulate_trajectory(rk4_step(lorenz(), 0.01), jnp.ones(3), n, dt=0.01)
res = lyapunov_rosenstein(std.states[2000:, 0], 5, 11, horizon=400, dt=0.01)
print(
    f"standard Lorenz (10, 28, 8/3), Rosenstein: {res.exponent:.3f} per time "
    "unit; compare with lambda_1 = 0.906, not with the dimension 2.06"
)

# %%
# The spread over embeddings (full run)
# -------------------------------------
if not args.quick:
    print("Lorenz, Rosenstein / Kantz over the embedding (dimension x lag):")
    for m in (3, 5, 7):
        row = []
        for lag in (5, 11, 17):
            r = lyapunov_rosenstein(lorenz_x, m, lag, horizon=300, dt=0.01)
            k = lyapunov_kantz(lorenz_x, m, lag, horizon=300, dt=0.01)
            row.append(f"lag {lag:2d}: {r.exponent:.3f} / {k.exponent:.3f}")
        print(f"  m = {m}: " + ",  ".join(row))

# %%
# Figure: divergence curves with the fitted linear regions
# --------------------------------------------------------
fig, axes = plt.subplots(1, 3, figsize=(14, 4))
for ax, name in zip(axes, ("Hénon", "Lorenz", "noise"), strict=True):
    for method, color in (("rosenstein", "C0"), ("kantz", "C1")):
        res = results.get((name, method))
        if res is None:
            continue
        ax.plot(res.times, res.divergence, ".", ms=3, color=color, label=method)
        if res.fit.found:
            t = res.times[res.fit.start : res.fit.stop]
            ax.plot(
                t,
                res.fit.line(t),
                "-",
                color="k",
                lw=1.2,
                label=f"fit: {res.exponent:.3f}",
            )
            ax.axvspan(res.fit.t_start, res.fit.t_stop, color=color, alpha=0.08)
    ax.set_title(name if name != "noise" else "Gaussian noise: no linear region")
    ax.set_xlabel("t (iterations)" if name != "Lorenz" else "t (time units)")
    ax.set_ylabel("S(t) = <ln distance>")
    ax.legend(fontsize=8)
fig.tight_layout()
save_figure(fig, args.out)
