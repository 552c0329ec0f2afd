"""The CPU/GPU crossover benchmark: a dense all-to-all Kuramoto network.

One phase per node and dense d x d coupling weights, so the work per step grows
like d**2 while only k = 5 exponents are tracked.  The problem is built
through the same public path a user takes (ModelSpec -> build_jax_dfun ->
Network -> network_problem, in lyapax.systems.kuramoto_network) and timed end
to end through lyapunov_spectrum.
"""

import jax.numpy as jnp
import pytest

from lyapax.core import lyapunov_spectrum
from lyapax.systems import kuramoto_network

K, N_STEPS, RENORM_EVERY, DT = 5, 200, 10, 1e-2


def kuramoto_problem(n_nodes: int):
    """All-to-all Kuramoto network with spread natural frequencies."""
    return kuramoto_network(n_nodes, omega=jnp.linspace(-1.0, 1.0, n_nodes), dt=DT)


@pytest.mark.jax_sizes(
    20, 50, 100, 200, 500, 1000, 2000, label="network size d (nodes)"
)
def test_kuramoto_dense(benchmark, jax_backend, jax_size):
    problem = kuramoto_problem(jax_size)

    def leading_exponents():
        result = lyapunov_spectrum(
            problem, n_steps=N_STEPS, k=K, renorm_every=RENORM_EVERY, t_transient=0.0
        )
        return result.exponents

    exponents = benchmark(leading_exponents)
    assert exponents.shape == (K,)
    assert bool(jnp.all(jnp.isfinite(exponents)))
