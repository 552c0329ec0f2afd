"""
Differentiating an exponent
===========================

``lyapunov_spectrum`` is an ordinary JAX function of its inputs, so
``jax.grad`` gives the derivative of an exponent with respect to a parameter
-- useful for sensitivity analysis or for tuning a model toward (or away from)
stability. Two cases with exact answers:

* the logistic map at ``r = 2.8`` sits on its fixed point, where
  ``lambda(r) = ln(r - 2)``, so ``d lambda / d r = 1 / (r - 2) = 1.25``;
* the Lorenz system at ``rho = 15`` settles on a stable fixed point
  ``C+ = (sqrt(beta (rho - 1)), same, rho - 1)``; its two leading exponents
  are the real part of the Jacobian's complex eigenvalue pair there, whose
  derivative is computed here by finite differences of
  ``numpy.linalg.eigvals``.

A caveat, shown at the end: for a *chaotic* orbit the derivative of a
finite-time average does not converge as the run grows (perturbations of the
orbit grow exponentially), so gradients there are not meaningful without
special methods (e.g. shadowing).

Run ``python examples/20_grad_exponent.py`` (``--quick`` for a short run,
``--out FILE`` is accepted; this example prints rather than plots).
"""

import argparse

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import numpy as np

from lyapax import lyapunov_spectrum, ode_problem
from lyapax.systems import logistic_map, lorenz

parser = argparse.ArgumentParser(description="gradient of an exponent")
parser.add_argument("--quick", action="store_true", help="short run (CI, docs)")
parser.add_argument("--out", default=None, help="accepted; no figure")
args, _ = parser.parse_known_args()


# %%
# The logistic map
# ----------------
def logistic_lambda(r):
    res = lyapunov_spectrum(
        logistic_map(r), jnp.array([0.3]), dt=1.0, n_steps=2_000, t_transient=200.0
    )
    return res.exponents[0]


r = 2.8
val, grad = jax.value_and_grad(logistic_lambda)(r)
print(f"logistic r = {r}: lambda expected ln(0.8) = {np.log(r - 2):.6f}, got {val:.6f}")
print(f"   d lambda/dr expected 1/(r - 2) = {1 / (r - 2):.6f}, got {grad:.6f}")

# %%
# The Lorenz system at a stable fixed point
# -----------------------------------------
beta = 8.0 / 3.0


# The pair rotates, so a single exponent's finite-time estimate carries an
# oscillating ``O(1/T)`` term whose phase, and hence derivative, depends on
# ``rho``; the mean of the pair (the growth rate of areas in its plane) has no
# such term. So the function differentiated is ``(lambda_1 + lambda_2) / 2``.
def lorenz_pair(rho, n_steps):
    c = jnp.sqrt(beta * (rho - 1.0))
    x0 = jnp.array([c, c, rho - 1.0]) + 0.1  # start near C+
    problem = ode_problem(lorenz(rho=rho), x0, dt=0.01)
    res = lyapunov_spectrum(
        problem, n_steps=n_steps, k=2, renorm_every=10, t_transient=50.0
    )
    return jnp.mean(res.exponents)


def jacobian_lambda1(rho):
    c = np.sqrt(beta * (rho - 1.0))
    J = np.array([[-10.0, 10.0, 0.0], [1.0, -1.0, -c], [c, c, -beta]])
    return np.linalg.eigvals(J).real.max()


rho, h = 15.0, 1e-5
n = 4_000 if args.quick else 40_000
fd = (jacobian_lambda1(rho + h) - jacobian_lambda1(rho - h)) / (2 * h)

# %%
# With one parameter, forward mode (``jax.jvp``: value and derivative in one
# pass) costs about one extra tangent per step and compiles faster than
# reverse mode; ``jax.grad`` gives the same number (run in the full mode
# only, its compile takes a few seconds).
val, fwd = jax.jvp(lambda r: lorenz_pair(r, n), (rho,), (1.0,))
ref = jacobian_lambda1(rho)
print(f"Lorenz rho = {rho}: Re(pair) expected {ref:.6f}, got {val:.6f}")
print(f"   derivative by jax.jvp:  expected {fd:.6f}, got {fwd:.6f}")
if not args.quick:
    rev = jax.grad(lorenz_pair)(rho, n)
    print(f"   derivative by jax.grad: expected {fd:.6f}, got {rev:.6f}")

# %%
# The chaotic caveat
# ------------------
# The logistic map at ``r = 3.8`` is chaotic. The derivative of its
# finite-time exponent, for runs of growing length, does not settle: it grows
# with the run, because the orbit's dependence on ``r`` grows like
# ``exp(lambda n)``.
for steps in [10, 80] if args.quick else [10, 20, 40, 80, 160]:
    g = jax.grad(
        lambda r, s=steps: lyapunov_spectrum(
            logistic_map(r), jnp.array([0.3]), dt=1.0, n_steps=s
        ).exponents[0]
    )(3.8)
    print(f"   r = 3.8, {steps:>3} iterations: d lambda/dr = {g:+.3e}")
