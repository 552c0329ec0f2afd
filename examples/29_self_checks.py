"""
Exponents that check themselves
===============================

Wrong exponents often break an invariant that can be checked along the run:

* the **sum rule**: the sum of the full spectrum is the mean phase-space
  contraction, ``<tr Df>`` for a flow (Lorenz: ``-(sigma + 1 + beta)``) and
  ``<ln|det DPhi|>`` for a map (Hénon: ``ln b``);
* each exponent equals the continuous-QR estimator ``<q_i^T Df q_i>`` on the
  same frames, and the tangents of a step are the derivative of its state
  update (finite differences of the step say whether they are);
* an autonomous flow on a bounded attractor has an exponent ``0``.

:func:`lyapax.checks.check_invariants` continues a finished run for a window
of steps and checks all of these; a failed check warns by name. A run that
is not checked pays nothing. Independently, every run that turns non-finite
now warns, saying at which step.

Run ``python examples/29_self_checks.py`` (``--quick`` for a short run,
``--out FILE`` for the figure's path).
"""

import warnings
from typing import ClassVar

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import ODEProblem, lyapunov_spectrum, ode_problem, rk4_step
from lyapax.checks import check_invariants
from lyapax.core import AbstractStep
from lyapax.systems import henon_map, lorenz

args = example_args("self-checks of Lyapunov runs", "29_self_checks.png")
n_steps = 20_000 if args.quick else 100_000

# %%
# An honest run
# -------------
problem = ode_problem(lorenz(), jnp.ones(3), 0.01)
result = lyapunov_spectrum(problem, n_steps, renorm_every=10, t_transient=20.0)
honest = check_invariants(problem, result)
print("Lorenz:", np.asarray(result.exponents).round(4))
print(honest)
print(f"  sum rule reference -(sigma + 1 + beta) = {-(10 + 1 + 8 / 3):.6f}")


# %%
# A step whose tangents are wrong
# -------------------------------
# ``stop_gradient`` hides ``d(x (rho - z)) / dz`` from the tangents: the run
# returns plausible-looking numbers, the checks do not agree.
def lorenz_with_a_hidden_derivative(x):
    z = jax.lax.stop_gradient(x[2])
    return jnp.array(
        [10.0 * (x[1] - x[0]), x[0] * (28.0 - z) - x[1], x[0] * x[1] - 8.0 / 3.0 * x[2]]
    )


wrong_problem = ode_problem(lorenz_with_a_hidden_derivative, jnp.ones(3), 0.01)
wrong = lyapunov_spectrum(wrong_problem, n_steps, renorm_every=10, t_transient=20.0)
print("\nwith a stop_gradient:", np.asarray(wrong.exponents).round(4))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    flagged = check_invariants(wrong_problem, wrong)
print(flagged)
print("  warning:", str(caught[0].message)[:120], "...")

# %%
# A map: the Hénon sum rule ln b
# ------------------------------
henon = ODEProblem(henon_map(), jnp.array([0.1, 0.1]), 1.0)
henon_result = lyapunov_spectrum(henon, 10_000, t_transient=100.0)
rule = check_invariants(henon, henon_result)["sum_rule"]
print(
    f"\nHénon: sum {rule.value:.9f}, <ln|det J|> {rule.expected:.9f}, ln 0.3 = "
    f"{np.log(0.3):.9f}"
)


# %%
# A forced system presented as autonomous
# ---------------------------------------
# ``x'' + 0.2 x' + x = cos t`` with the time read from the step counter: a
# periodic orbit, exponents ``-0.1, -0.1`` and no zero exponent. Declared
# autonomous, the zero-exponent check says so.
class ForcedOscillator(AbstractStep):
    uses_step_index: ClassVar[bool] = True
    dt: float

    def __call__(self, state, i):
        t = i * self.dt

        def rhs(y):
            return jnp.array([y[1], -0.2 * y[1] - y[0] + jnp.cos(t)])

        return rk4_step(rhs, self.dt)(state)


forced = ODEProblem(ForcedOscillator(0.01), jnp.array([1.0, 0.0]), 0.01)
forced_result = lyapunov_spectrum(forced, n_steps, renorm_every=10, t_transient=50.0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    zero = check_invariants(forced, forced_result, autonomous=True)["zero_exponent"]
print(
    f"\nforced oscillator: exponents {np.asarray(forced_result.exponents).round(4)}"
    f" (expected -0.1, -0.1); zero_exponent passed = {zero.passed}"
)

# %%
# A run that blows up
# -------------------
# ``x' = x^2`` from ``x = 1`` reaches infinity at ``t = 1``; RK4 at
# ``dt = 0.01`` overflows a few steps later. The run warns (``check_finite=True``
# raises instead) and ``result.nonfinite`` says when.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    blown = lyapunov_spectrum(ode_problem(lambda x: x**2, jnp.ones(1), 0.01), 500)
message = str(caught[0].message)
print("\nx' = x^2:", np.asarray(blown.exponents), "-", message[:90], "...")
print(
    f"  steps {blown.nonfinite.step_range}, times {blown.nonfinite.time_range}"
    " (blow-up of the exact solution at t = 1)"
)

# %%
# Figure
# ------
# ``|value - expected| / tolerance`` per check: below 1 passes.
names = [c.name for c in honest.checks if c.passed is not None]


def ratios(report):
    out = []
    for name in names:
        c = report[name]
        gap = np.max(np.abs(np.asarray(c.value) - np.asarray(c.expected)))
        out.append(max(gap / np.max(np.asarray(c.tolerance)), 1e-6))
    return out


x = np.arange(len(names))
fig, ax = plt.subplots(figsize=(6.5, 3.8))
ax.bar(x - 0.2, ratios(honest), 0.4, label="Lorenz")
ax.bar(x + 0.2, ratios(flagged), 0.4, label="Lorenz with a stop_gradient")
ax.axhline(1.0, color="k", lw=0.8)
ax.set_yscale("log")
ax.set_xticks(x, names)
ax.set_ylabel("|value - expected| / tolerance")
ax.set_title("check_invariants: below the line passes")
ax.legend()
fig.tight_layout()
save_figure(fig, args.out)
