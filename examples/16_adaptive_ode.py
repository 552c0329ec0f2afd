"""
Adaptive sub-steps for ODEs
===========================

``lyapax.adaptive.diffrax_adaptive_step`` lets an embedded Runge-Kutta pair
(Tsit5, Dopri5 or Dopri8, through diffrax) choose its own sub-steps inside each
interval ``dt`` between two renormalisations, under tolerances ``rtol`` and
``atol``. You set an accuracy instead of hunting for a step size.

Two checks:

1. Lorenz: the exponent sum must equal the divergence ``-(sigma + 1 + beta)``
   exactly, so its error measures integration error alone (the scatter of a
   chaotic finite-time estimate cancels in the sum). It shrinks with ``rtol``.
2. A stiff linear system with eigenvalues -1 and -1000: the exponents are
   exactly the eigenvalues. The sub-steps are sized by the error of the state
   *and* of the tangent vectors (the default), so the fast -1000 direction is
   resolved; sizing them by the state alone (``tangent_control=False``, as in
   lyapax 0.3.0) lets the fast tangent go unresolved once the state has decayed.

Run ``python examples/16_adaptive_ode.py [--quick] [--out PATH]``; needs the
``adaptive`` extra (``pip install lyapax[adaptive]``).
"""

# %%
# Setup
# -----
import argparse

import jax

jax.config.update("jax_enable_x64", True)  # lyapax expects float64

import jax.numpy as jnp  # noqa: E402
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from lyapax import lyapunov_spectrum, ode_problem  # noqa: E402
from lyapax.adaptive import diffrax_adaptive_step  # noqa: E402
from lyapax.systems import lorenz  # noqa: E402

parser = argparse.ArgumentParser(description="adaptive sub-steps for ODEs")
parser.add_argument("--quick", action="store_true", help="short runs (CI)")
parser.add_argument("--out", default="adaptive_ode.png", help="figure path")
args, _ = parser.parse_known_args()

rtols = [1e-4, 1e-7] if args.quick else [1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10]
n_lorenz = 500 if args.quick else 5_000

# %%
# Lorenz: error of the exponent sum against the exact divergence
# --------------------------------------------------------------
divergence = -(10.0 + 1.0 + 8.0 / 3.0)
sum_error, lambda1 = [], []
for rtol in rtols:
    integrator = diffrax_adaptive_step("dopri5", rtol=rtol, atol=rtol * 1e-2)
    problem = ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), 0.1, integrator)
    result = lyapunov_spectrum(problem, n_steps=n_lorenz, t_transient=20.0)
    sum_error.append(abs(float(result.exponents.sum()) - divergence))
    lambda1.append(float(result.exponents[0]))
    print(f"Lorenz rtol={rtol:.0e}: lambda1={lambda1[-1]:.4f}", end="  ")
    print(f"|sum - div|={sum_error[-1]:.1e}")

# %%
# Stiff linear system: both exponents need the tangents in the error control
# ----------------------------------------------------------------------------
c, s = np.cos(0.3), np.sin(0.3)
rot = np.array([[c, -s], [s, c]])
a = jnp.asarray(rot @ np.diag([-1.0, -1000.0]) @ rot.T)


def stiff(y):
    return a @ y


fast = {}
for control in (True, False):
    fast[control] = []
    for rtol in rtols:
        integrator = diffrax_adaptive_step(
            "dopri5", rtol=rtol, atol=rtol * 1e-3, tangent_control=control
        )
        problem = ode_problem(stiff, jnp.array([1.0, 0.5]), 0.01, integrator)
        result = lyapunov_spectrum(problem, n_steps=100, t_transient=0.1)
        fast[control].append(float(result.exponents[1]))
    label = "state+tangents" if control else "state only"
    print(f"stiff, {label}: lambda2 = {np.round(fast[control], 2)} (exact -1000)")

# %%
# Figure
# ------
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
left.loglog(rtols, sum_error, "o-")
left.set_xlabel("rtol (atol = rtol / 100)")
left.set_ylabel("|sum of exponents - divergence|")
left.set_title("Lorenz, Dopri5, dt = 0.1")
left.invert_xaxis()
for control, marker in ((True, "o-"), (False, "s--")):
    label = "error control on state + tangents" if control else "state only (0.3.0)"
    right.semilogx(rtols, fast[control], marker, label=label)
right.axhline(-1000.0, color="k", lw=0.8, label="exact -1000")
right.set_xlabel("rtol (atol = rtol / 1000)")
right.set_ylabel("fast exponent")
right.set_title("stiff linear system, eigenvalues -1, -1000")
right.invert_xaxis()
right.legend()
fig.tight_layout()
fig.savefig(args.out, dpi=120)
print("saved", args.out)
