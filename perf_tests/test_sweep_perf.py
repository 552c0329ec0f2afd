"""Per-backend timing of a batched Lorenz rho sweep, batch size as the size axis.

A batch of tiny systems (d = 3) is the other way, besides a large state, to
give a device enough parallel work: the crossover figure shows from which batch
size a GPU pays off for sweeps. One call of sweep_lyapunov_spectrum is timed
per round; the result is checked against the Lorenz sum rule, so a fast but
wrong computation cannot pass.

``sweep_lyapunov_spectrum`` is a host-side driver (chunking, progress,
checkpoints) that refuses traced inputs, so it cannot be wrapped in
``jax.jit`` without timing another program than the one users call; its
counters and roofline are the sum of the programs its first call compiled
(``extra_info["roofline"]["programs_note"]``).
"""

import jax.numpy as jnp
import pytest

from lyapax.integrators import rk4_step
from lyapax.sweep import sweep_lyapunov_spectrum
from lyapax.systems import lorenz

SIGMA, BETA, DT, N_STEPS, RENORM_EVERY = 10.0, 8.0 / 3.0, 1e-2, 1000, 10


def lorenz_step(x, rho):
    """RK4 step of Lorenz (sigma=10, beta=8/3) with rho as the swept parameter."""
    return rk4_step(lorenz(SIGMA, rho, BETA), DT)(x)


@pytest.mark.jax_sizes(1, 16, 128, 1024, label="sweep batch size (Lorenz systems)")
def test_lorenz_rho_sweep(benchmark, jax_backend, jax_size, jax_tolerance):
    rhos = jnp.linspace(20.0, 30.0, jax_size)
    x0 = jnp.array([1.0, 1.0, 20.0])

    def sweep():
        return sweep_lyapunov_spectrum(
            lorenz_step, x0, rhos, DT, N_STEPS, renorm_every=RENORM_EVERY
        ).exponents

    exponents = benchmark(sweep)
    assert exponents.shape == (jax_size, 3)
    # Every row contracts volume at the constant rate sigma + 1 + beta.
    sums = exponents.sum(axis=1)
    bound = max(1e-3, 100 * jax_tolerance.atol)  # RK4, or the precision's rounding
    assert float(jnp.max(jnp.abs(sums + (SIGMA + 1 + BETA)))) < bound
