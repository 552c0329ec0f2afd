"""
Kuramoto–Sivashinsky: extensive chaos, covariant vectors, convergence
======================================================================

``u_t = -u u_x - u_xx - u_xxxx`` on a periodic domain of length ``L``,
pseudo-spectral in space (``n`` grid points, the 2/3 rule) and ETDRK4 in
time (:func:`lyapax.pde.kuramoto_sivashinsky`). The engine pushes the
tangent frame through the same step with ``jax.jvp``, so these are the
exponents of the discrete scheme.

- a space-time plot of ``u(x, t)``;
- the spectrum for several ``L`` at a fixed resolution ``L / n``: plotted
  against ``i / L`` the spectra collapse (extensive chaos), and the number
  of positive exponents and the Kaplan–Yorke dimension grow linearly in ``L``
  (a least-squares line through them is printed);
- the covariant Lyapunov vectors (:func:`lyapax.covariant_vectors`): the
  inverse participation ratio ``sum_x v^4 / (sum_x v^2)^2`` times ``n``
  (1.5 for a single Fourier mode ``cos(q x)``, large for a vector that lives
  on a few grid points), averaged over time, per index: the vectors of the
  physical (leading) exponents are localised, the strongly decaying ones
  beyond them are close to single Fourier modes;
- convergence: the leading exponents at ``L = 22`` against ``n`` and ``dt``
  (error bars: the run's standard error).

Run ``python examples/37_kuramoto_sivashinsky.py`` (``--quick`` for a short
run, ``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import covariant_vectors, kaplan_yorke_dimension, lyapunov_spectrum
from lyapax.pde import kuramoto_sivashinsky
from lyapax.utils import simulate_trajectory

args = example_args("Kuramoto-Sivashinsky spectra", "37_kuramoto_sivashinsky.png")
quick = args.quick
DT = 0.25
lengths = (22.0, 44.0, 66.0) if quick else (22.0, 44.0, 66.0, 88.0, 110.0)
n_steps = 1000 if quick else 16000  # t = 250 or 4000
K = 24 if quick else 40


def grid_points(length):
    """Even ``n`` with ``L / n`` close to 22 / 64 (the classic resolution)."""
    return 2 * round(length * 32 / 22)


# %%
# Spectra for growing L at a fixed resolution
# -------------------------------------------
spectra = {}
for length in lengths:
    problem = kuramoto_sivashinsky(grid_points(length), length, dt=DT)
    r = lyapunov_spectrum(problem, n_steps, k=min(K, grid_points(length)))
    lam, err = np.asarray(r.exponents), np.asarray(r.stderr)
    n_pos = int(np.sum(lam > 3 * err + 1e-3))
    spectra[length] = (lam, err, n_pos, kaplan_yorke_dimension(lam))
    print(
        f"L = {length:5.0f} (n = {grid_points(length)}): lambda_1 = {lam[0]:.4f} "
        f"+- {err[0]:.4f}, positive {n_pos}, D_KY = {spectra[length][3]:.2f}"
    )

L = np.array(lengths)
n_pos = np.array([spectra[x][2] for x in lengths], float)
d_ky = np.array([spectra[x][3] for x in lengths])
fits = {}
for name, y in (("positive exponents", n_pos), ("Kaplan-Yorke dimension", d_ky)):
    (slope, icpt), res, *_ = np.polyfit(L, y, 1, full=True)
    rms = float(np.sqrt(res[0] / len(L))) if len(res) else 0.0
    fits[name] = (slope, icpt)
    print(f"{name}: {slope:.4f} per unit length (intercept {icpt:.2f}, rms {rms:.2f})")

# %%
# Space-time plot and covariant vectors at L = 44
# -----------------------------------------------
cl_len = 44.0
ks = kuramoto_sivashinsky(grid_points(cl_len), cl_len, dt=DT)
traj = np.asarray(simulate_trajectory(ks.step_fn, ks.state0, 800, dt=DT, decimate=2))
k_clv = 32
clv = covariant_vectors(
    ks, n_steps=400 if quick else 4000, k=k_clv, t_backward=50.0, save_every=4
)
v2 = np.asarray(clv.vectors) ** 2  # (n_saved, n, k)
ipr = grid_points(cl_len) * np.sum(v2**2, axis=1) / np.sum(v2, axis=1) ** 2
print(
    f"CLVs at L = {cl_len:g}: {v2.shape[0]} saved, participation ratio "
    f"v_1 {ipr[:, 0].mean():.2f}, v_{k_clv} {ipr[:, -1].mean():.2f}"
)

# %%
# Convergence in n_points and dt at L = 22
# ----------------------------------------
conv_steps = 2000 if quick else 40000
k_conv = 3
by_n, by_dt = [], []
for n in (32, 48, 64) if quick else (32, 48, 64, 96, 128):
    r = lyapunov_spectrum(kuramoto_sivashinsky(n, 22.0, dt=DT), conv_steps, k=k_conv)
    by_n.append((n, np.asarray(r.exponents), np.asarray(r.stderr)))
for dt in (0.5, 0.25) if quick else (0.5, 0.25, 0.1, 0.05):
    steps = int(round(conv_steps * DT / dt))
    r = lyapunov_spectrum(kuramoto_sivashinsky(64, 22.0, dt=dt), steps, k=k_conv)
    by_dt.append((dt, np.asarray(r.exponents), np.asarray(r.stderr)))
for n, lam, err in by_n:
    print(f"L = 22, n = {n:3d}: lambda_1..3 = {np.round(lam, 4)} (+- {err[0]:.4f})")
for dt, lam, err in by_dt:
    print(f"L = 22, dt = {dt:4g}: lambda_1..3 = {np.round(lam, 4)} (+- {err[0]:.4f})")

# %%
fig, axes = plt.subplots(2, 3, figsize=(14, 8), constrained_layout=True)
ax = axes[0, 0]
x = np.arange(grid_points(cl_len)) * cl_len / grid_points(cl_len)
t = np.arange(traj.shape[0]) * 2 * DT
ax.pcolormesh(x, t, traj, shading="auto", cmap="RdBu_r")
ax.set_xlabel("x")
ax.set_ylabel("t")
ax.set_title(f"u(x, t), L = {cl_len:g}")

ax = axes[0, 1]
for length in lengths:
    lam = spectra[length][0]
    ax.plot(np.arange(1, lam.size + 1) / length, lam, ".-", label=f"L = {length:g}")
ax.axhline(0, color="k", lw=0.5)
ax.set_ylim(-1.5, 0.2)
ax.set_xlim(0, 0.5)
ax.set_xlabel("i / L")
ax.set_ylabel("lambda_i")
ax.set_title("spectra collapse against i / L")
ax.legend(fontsize=8)

ax = axes[0, 2]
for y, name, mark in (
    (n_pos, "positive exponents", "o"),
    (d_ky, "Kaplan-Yorke dimension", "s"),
):
    slope, icpt = fits[name]
    ax.plot(L, y, mark, label=f"{name}: {slope:.3f} L {icpt:+.2f}")
    ax.plot(L, slope * L + icpt, "k-", lw=0.7)
ax.set_xlabel("L")
ax.set_title("extensivity")
ax.legend(fontsize=8)

ax = axes[1, 0]
ax.plot(np.arange(1, k_clv + 1), ipr.mean(axis=0), "o-")
ax.set_xlabel("CLV index i")
ax.set_ylabel("n * IPR (time mean)")
ax.set_title(f"localisation of the covariant vectors, L = {cl_len:g}")


def convergence_panel(ax, rows, xlabel, title):
    """Exponents ``j = 1 .. k_conv`` with their standard errors per run."""
    xs = [row[0] for row in rows]
    for j in range(k_conv):
        lam, err = [row[1][j] for row in rows], [row[2][j] for row in rows]
        ax.errorbar(xs, lam, yerr=err, fmt="o-", capsize=3, label=f"lambda_{j + 1}")
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(fontsize=8)


convergence_panel(axes[1, 1], by_n, "n_points", f"L = 22, dt = {DT}: exponents vs n")
convergence_panel(axes[1, 2], by_dt, "dt", "L = 22, n = 64: exponents vs dt")
axes[1, 2].set_xscale("log")

save_figure(fig, args.out, dpi=100)
