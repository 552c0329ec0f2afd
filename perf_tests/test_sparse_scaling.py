"""Sparse-network benchmark: a Kuramoto ring lattice, 20 edges per node.

Node ``i`` receives from its 20 nearest nodes on a ring (weight 1), passed as
``jax.experimental.sparse.BCOO`` weights to the public builder
``lyapax.systems.kuramoto_network``; k = 5 exponents, 200 Heun steps, QR every
10. Work per step grows like ``n * 20``, so this draws the sparse CPU/GPU
crossover next to the dense one of ``test_kuramoto_scaling.py`` (on a GPU the
gather pattern of the sparse product matters more than on a CPU).
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse

from lyapax.core import lyapunov_spectrum
from lyapax.systems import kuramoto_network

K, N_STEPS, RENORM_EVERY, DT, NEIGHBOURS = 5, 200, 10, 1e-2, 20


def ring_lattice(n: int, neighbours: int = NEIGHBOURS) -> sparse.BCOO:
    """``(n, n)`` BCOO: node i receives from i +- 1 .. i +- neighbours/2 (mod n)."""
    half = min(neighbours // 2, (n - 1) // 2)
    offsets = np.concatenate([np.arange(-half, 0), np.arange(1, half + 1)])
    rows = np.repeat(np.arange(n), offsets.size)
    cols = (rows + np.tile(offsets, n)) % n
    indices = jnp.asarray(np.stack([rows, cols], axis=1), dtype=jnp.int32)
    return sparse.BCOO((jnp.ones(rows.size), indices), shape=(n, n))


@pytest.mark.jax_sizes(
    1_000, 10_000, 100_000, 1_000_000, label="sparse network size n (nodes)"
)
def test_kuramoto_sparse(benchmark, jax_backend, jax_size):
    problem = kuramoto_network(
        ring_lattice(jax_size), omega=jnp.linspace(-1.0, 1.0, jax_size), dt=DT
    )

    @eqx.filter_jit  # lowerable: compiled apart, its work read from XLA
    def leading_exponents(problem):
        result = lyapunov_spectrum(
            problem, n_steps=N_STEPS, k=K, renorm_every=RENORM_EVERY, t_transient=0.0
        )
        return result.exponents

    exponents = benchmark(leading_exponents, problem)
    assert exponents.shape == (K,)
    assert bool(jnp.all(jnp.isfinite(exponents)))
