"""
A linear network
================

A network of ``n`` nodes, each ``dx_i/dt = -x_i + c_i``, with linear coupling
``c_i = G sum_j W_ij x_j``, is the linear ODE ``dx/dt = (G W - I) x``. For a
symmetric ``W`` the exponents are exactly the eigenvalues of ``G W - I``: the
reference this example checks against.

It shows the two ways to write a node model for
:func:`lyapax.network.network_problem`: a Python function
``dfun(state (n_sv, n), coupling (n_cvar, n), params)``, and the same model as
a :class:`lyapax.simulator.ModelSpec` of expression strings (parsed against a
whitelist, never executed), which gives identical numbers.

Run ``python examples/06_linear_network.py`` (``--quick`` for a short run,
``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import jax.numpy as jnp
import matplotlib
import numpy as np

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import lyapunov_spectrum
from lyapax.coupling import linear_coupling
from lyapax.network import Network, network_problem
from lyapax.simulator import ModelSpec, Parameter, StateVar, build_jax_dfun

args = example_args("linear network", "06_linear_network.png")
n = 8 if args.quick else 30
n_steps = 20_000 if args.quick else 100_000

# %%
# Weights and the reference spectrum
# ----------------------------------
# A random symmetric weight matrix, indexed ``W[target, source]``, without
# self-loops. ``G`` is chosen so that the top mode is unstable (an exponent
# > 0) while most are damped.
rng = np.random.default_rng(3)
W = rng.uniform(0, 1, (n, n)) * (rng.uniform(size=(n, n)) < 0.5)
W = np.triu(W, 1)
W = W + W.T
G = 1.2 / np.linalg.eigvalsh(W).max()
expected = np.sort(np.linalg.eigvalsh(G * W - np.eye(n)))[::-1]


# %%
# The node as a Python function
# -----------------------------
def dfun(state, c, params):
    return -state + c


network = Network(jnp.asarray(W), cvar_indices=(0,))
x0 = jnp.asarray(rng.normal(size=n))
problem = network_problem(
    dfun, network, linear_coupling(), {"G": G}, x0, dt=0.01, integrator="rk4"
)
# ``t_transient`` lets the tangent frame align with the eigenvectors before
# growth is counted, which removes most of the ``O(1/T)`` bias of a short run.
res = lyapunov_spectrum(problem, n_steps=n_steps, renorm_every=10, t_transient=20.0)

# %%
# The same node as a ModelSpec
# ----------------------------
# ``c`` in an expression is the coupling of the node's coupled variable.
spec = ModelSpec(
    name="leaky",
    state_variables=(StateVar("x"),),
    parameters=(Parameter("G", 1.0),),
    cvar=("x",),
    dfun_str={"x": "-x + c"},
)
problem_spec = network_problem(
    build_jax_dfun(spec),
    Network(jnp.asarray(W), cvar_indices=spec.cvar_indices),
    linear_coupling(),
    {"G": G},
    x0,
    dt=0.01,
    integrator="rk4",
)
res_spec = lyapunov_spectrum(
    problem_spec, n_steps=n_steps, renorm_every=10, t_transient=20.0
)

got = np.asarray(res.exponents)
print(f"{n} nodes, G = {G:.4f}")
print("max |exponent - eigenvalue of G W - I|:", np.abs(got - expected).max())
print("max |function - ModelSpec|:", np.abs(got - np.asarray(res_spec.exponents)).max())
print(f"top: expected {expected[0]:+.5f}, got {got[0]:+.5f}")
print(f"sum: expected trace = {-n:.5f}, got {got.sum():+.5f}")

# %%
# Figure
# ------
fig, ax = plt.subplots(figsize=(5, 4.5))
ax.plot(expected, got, "o")
lim = [expected.min() - 0.1, expected.max() + 0.1]
ax.plot(lim, lim, "k--", lw=0.7)
ax.set_xlabel("eigenvalue of G W - I")
ax.set_ylabel("Lyapunov exponent (lyapax)")
ax.set_title(f"Linear network, n = {n}")
fig.tight_layout()
save_figure(fig, args.out)
