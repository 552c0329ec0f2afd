"""
A tour of the public API
========================

Everything a user needs is importable from ``lyapax`` itself or from one of a
few public modules. This script lists them with the first line of each
docstring, straight from the installed package (so the list cannot go out of
date), then runs the smallest possible example of each way in: a step
function, a problem, a network, a delay equation, a sweep and a run to a
tolerance.

Run ``python examples/15_public_api.py`` (``--quick`` skips the delay
equation and the sweep, which have their own examples).
"""

import argparse
import importlib
import inspect

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp

import lyapax

parser = argparse.ArgumentParser(description="public API tour")
parser.add_argument("--quick", action="store_true", help="skip the slower items")
parser.add_argument("--out", default=None, help="accepted; no figure")
args, _ = parser.parse_known_args()

# %%
# What is exported
# ----------------
# ``__all__`` of each public module is the contract; names starting with an
# underscore are private and may change.
for name in ("lyapax", *lyapax.PUBLIC_MODULES):
    module = importlib.import_module(name)
    print(f"\n{name} -- {(module.__doc__ or '').strip().splitlines()[0]}")
    for attr in sorted(getattr(module, "__all__", [])):
        obj = getattr(module, attr)
        if callable(obj):
            summary = (inspect.getdoc(obj) or "").splitlines()[0]
        else:  # a constant: show its value
            summary = f"= {obj!r}"
        print(f"  {attr:34s} {summary[:70]}")

# %%
# The ways in, smallest form
# --------------------------
# 1. A step function and a state (maps: ``dt=1.0``).
from lyapax import lyapunov_spectrum, ode_problem, run_until_converged
from lyapax.systems import henon_map, kuramoto_network, lorenz, mackey_glass

r = lyapunov_spectrum(henon_map(), jnp.array([0.1, 0.1]), dt=1.0, n_steps=2_000)
print("\nHénon map, step function:", r.exponents)

# 2. A problem: an ODE with its integrator.
p = ode_problem(lorenz(), jnp.ones(3), dt=0.01)
r = lyapunov_spectrum(p, n_steps=2_000, renorm_every=10, t_transient=10.0)
print("Lorenz problem, k=3:", r.exponents, "+-", r.stderr)

# 3. A network problem (here the ready-made Kuramoto builder).
p = kuramoto_network(5, omega=jnp.linspace(-0.5, 0.5, 5), K=2.0)
r = lyapunov_spectrum(p, n_steps=1_000, renorm_every=10, t_transient=20.0)
print("Kuramoto N=5, locked (0 and negatives):", r.exponents)

# 4. and 5. compile programs of their own, so the quick mode (CI, docs) skips
# them; examples 19 and 13 show both at length.
from lyapax import rk4_step
from lyapax.dde import dde_problem
from lyapax.sweep import sweep_lyapunov_spectrum


def step(x, params):
    return rk4_step(lorenz(rho=params["rho"]), 0.01)(x)


if args.quick:
    print("(quick mode: the delay equation and the sweep are skipped)")
else:
    # 4. A delay equation: ask for k, the history makes the phase space large.
    p = dde_problem(mackey_glass(), jnp.array([1.2]), tau=17.0, dt=0.1)
    r = lyapunov_spectrum(p, n_steps=2_000, k=2, renorm_every=10, t_transient=100.0)
    print("Mackey-Glass tau=17, k=2:", r.exponents)

    # 5. A sweep: one program for a batch of parameter rows.
    r = sweep_lyapunov_spectrum(
        step,
        jnp.ones(3),
        {"rho": jnp.array([20.0, 28.0])},
        dt=0.01,
        n_steps=2_000,
        renorm_every=10,
        t_transient=10.0,
    )
    print("Lorenz rho in (20, 28), lambda_1:", r.exponents[:, 0])

# 6. Until the error bars are small enough.
run = run_until_converged(
    ode_problem(lorenz(), jnp.ones(3), dt=0.01),
    tol=0.1,
    max_steps=10_000,
    chunk_steps=2_000,
    renorm_every=10,
    t_transient=10.0,
)
print(
    f"run_until_converged: {run.reason} after {run.n_steps} steps,",
    run.result.exponents,
    "+-",
    run.result.stderr,
)

# 7. Covariant Lyapunov vectors (Ginelli's method), any problem kind.
from lyapax import covariant_vectors

clv = covariant_vectors(henon_map(), jnp.array([0.1, 0.1]), dt=1.0, n_steps=400)
print(
    "Hénon covariant vectors:",
    clv.vectors.shape,
    "exponents",
    clv.exponents,
    f"storage={clv.storage!r}",
)

# 8. Chaos indicators: the largest exponent from two trajectories (the step
# is only called, never differentiated) and GALI_2's regular/chaotic verdict.
from lyapax import gali, two_trajectory_exponent

two = two_trajectory_exponent(henon_map(), jnp.array([0.1, 0.1]), 1.0, 20_000)
print(f"Hénon, two trajectories: {two.exponent:.4f} +- {two.stderr:.4f} (0.419)")
g = gali(henon_map(), jnp.array([0.1, 0.1]), 1.0, 200)
print(f"Hénon GALI_2: chaotic={g.chaotic} after {g.steps_to_threshold} steps")
