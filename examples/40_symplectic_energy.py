"""
Energy error: symplectic steps stay bounded, RK4 drifts
========================================================

A symplectic step is the exact flow of a nearby Hamiltonian, so the energy
error of a symplectic integrator oscillates within a band of size
``O(dt^order)`` for ever; a Runge–Kutta step has no such structure and its
error grows with time. :func:`lyapax.hamiltonian_problem` gives the
leapfrog (Störmer–Verlet, order 2) and Yoshida's compositions of order 4 and
6 for any separable ``H = T(p) + V(q)``.

The Hénon–Heiles system at ``E = 1/8`` on a regular orbit, ``dt = 0.1``:
the energy error of each symplectic step against classical RK4 on the same
vector field, recorded every 100 steps in one lax loop per integrator.

Run ``python examples/40_symplectic_energy.py`` (``--quick``: 10^4 steps
instead of 10^6; ``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import equinox as eqx
import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import ode_problem
from lyapax.systems import henon_heiles

args = example_args("energy error, symplectic vs RK4", "40_symplectic_energy.png")
n_steps = 10_000 if args.quick else 1_000_000
block, dt, energy = 100, 0.1, 0.125

system = henon_heiles()
y = 0.1
q0 = np.array([0.0, y])
p0 = np.array([np.sqrt(2 * (energy - 0.5 * y * y + y**3 / 3)), 0.0])


@eqx.filter_jit
def energy_error(step, z0):
    """|H - E| every ``block`` steps (one lax loop)."""

    def body(z, _):
        z = jax.lax.fori_loop(0, block, lambda _, x: step(x), z)
        return z, jnp.abs(system.hamiltonian(z[:2], z[2:]) - energy)

    return jax.lax.scan(body, z0, None, length=n_steps // block)[1]


errors = {}
for method in ("leapfrog", "yoshida4", "yoshida6"):
    problem = system.problem(q0, p0, dt, method)
    errors[method] = np.asarray(energy_error(problem.step_fn, problem.state0))


def hamilton(z):
    return jnp.concatenate([z[2:], -system.grad_v(z[:2])])


rk4 = ode_problem(hamilton, np.concatenate([q0, p0]), dt, "rk4")
errors["rk4"] = np.asarray(energy_error(rk4.step_fn, jnp.asarray(rk4.state0)))

times = dt * block * np.arange(1, n_steps // block + 1)
tenth = len(times) // 10
for name, err in errors.items():
    print(
        f"{name:9s} max |dE| first tenth {err[:tenth].max():.2e}, "
        f"last tenth {err[-tenth:].max():.2e}"
    )

# %%
fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
for name, err in errors.items():
    ax.loglog(times, np.maximum(err, 1e-17), label=name, lw=0.8)
ax.set_xlabel("t")
ax.set_ylabel("|H - 1/8|")
ax.set_title(f"Hénon–Heiles, dt = {dt}: bounded (symplectic) vs drifting (RK4)")
ax.legend()
save_figure(fig, args.out)
