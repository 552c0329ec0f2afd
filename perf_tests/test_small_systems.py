"""Per-backend timings of the small validation systems.

Tiny state vectors (Lorenz, Henon) show the fixed per-call cost of each
backend; the linear network is a second size-parametrized case whose per-step
work is a dense matrix-vector product.  Each benchmark also checks one exact
property of its result, so a fast but wrong computation cannot pass.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

from lyapax.core import lyapunov_spectrum, ode_problem
from lyapax.coupling import linear_coupling
from lyapax.network import Network, network_problem
from lyapax.simulator import ModelSpec, Parameter, StateVar, build_jax_dfun
from lyapax.systems import henon_map, lorenz

SIGMA, RHO, BETA = 10.0, 28.0, 8.0 / 3.0


def test_lorenz(benchmark, jax_backend, jax_tolerance, jax_results):
    problem = ode_problem(
        lorenz(SIGMA, RHO, BETA), jnp.array([1.0, 1.0, 1.0]), 0.01, integrator="rk4"
    )

    @eqx.filter_jit  # lowerable: compiled apart, its work read from XLA
    def spectrum(problem):
        result = lyapunov_spectrum(problem, n_steps=5000, renorm_every=10)
        return result.exponents, result.stderr

    exponents, stderr = benchmark(spectrum, problem)
    # Compared with the reference backend within their error bars (and the
    # rounding of the lower precision): another precision's run is another
    # chaotic trajectory, the same exponents.
    jax_results.record("exponents", exponents, stderr=stderr)
    # The Lorenz flow contracts volume at the constant rate sigma + 1 + beta:
    # to RK4's error at this step, or the rounding of the label's precision
    # accumulated over the run where that is larger (float32, bf16 passes).
    bound = max(1e-3, 100 * jax_tolerance.atol)
    assert float(exponents.sum()) == pytest.approx(-(SIGMA + 1 + BETA), abs=bound)


def test_henon(benchmark, jax_backend, jax_tolerance, jax_results):
    step = henon_map()

    @eqx.filter_jit
    def spectrum(state0):
        result = lyapunov_spectrum(step, state0, dt=1.0, n_steps=10_000)
        return result.exponents, result.stderr

    exponents, stderr = benchmark(spectrum, jnp.array([0.1, 0.1]))
    jax_results.record("exponents", exponents, stderr=stderr)
    # The Henon map's Jacobian determinant is -b everywhere: the sum is exact
    # up to the rounding of the label's precision, accumulated over the run.
    bound = max(1e-6, 100 * jax_tolerance.atol)
    assert float(exponents.sum()) == pytest.approx(math.log(0.3), abs=bound)


def linear_network_problem(n_nodes: int):
    """Stable linear network dx/dt = gamma x + G W x with random weights."""
    model = ModelSpec(
        name="linear",
        state_variables=(StateVar("x", default_init=0.0),),
        parameters=(Parameter("gamma", -1.0),),
        cvar=("x",),
        dfun_str={"x": "gamma * x + c"},
    )
    key = jax.random.PRNGKey(0)
    weights = jax.random.normal(key, (n_nodes, n_nodes)) / jnp.sqrt(n_nodes)
    network = Network(weights=weights, cvar_indices=model.cvar_indices)
    return network_problem(
        build_jax_dfun(model),
        network,
        linear_coupling(a=1.0, b=0.0),
        params={"gamma": -1.0, "G": 0.5},
        state0=jnp.ones(n_nodes),
        dt=1e-2,
    )


@pytest.mark.jax_sizes(20, 200, 2000, label="network size n (nodes)")
def test_linear_network(benchmark, jax_backend, jax_size):
    problem = linear_network_problem(jax_size)

    @eqx.filter_jit
    def leading_exponents(problem):
        return lyapunov_spectrum(problem, n_steps=200, k=5, renorm_every=10).exponents

    exponents = benchmark(leading_exponents, problem)
    assert exponents.shape == (5,)
    assert bool(jnp.all(jnp.isfinite(exponents)))
