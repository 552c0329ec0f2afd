"""Strong scaling of a Lorenz rho sweep split over 1, 2 and 4 devices.

The same batch of Lorenz systems (the size axis) runs on each device count of
the run (``jax_devices`` in this folder's pytest.ini: one worker per count,
on a CPU the host platform split before JAX starts); ``sweep_lyapunov_spectrum``
spreads its batch over the ``jax_mesh`` devices with ``jax.sharding``.  The
report's device scaling table gives speedup and efficiency per count, with the
physical cores behind the devices: on a CPU, the devices share its cores.
Each result is checked against the Lorenz sum rule, so a fast but wrong
computation cannot pass, and each count's exponents are compared with one
device's.  Its roofline says "not available", as test_sweep_perf.py explains
(the sweep is a host-side driver that cannot be wrapped in ``jax.jit``).
"""

import jax.numpy as jnp
import pytest

from lyapax.integrators import rk4_step
from lyapax.sweep import sweep_lyapunov_spectrum
from lyapax.systems import lorenz

SIGMA, BETA, DT, N_STEPS, RENORM_EVERY = 10.0, 8.0 / 3.0, 1e-2, 500, 10


def lorenz_step(x, rho):
    """RK4 step of Lorenz (sigma=10, beta=8/3) with rho as the swept parameter."""
    return rk4_step(lorenz(SIGMA, rho, BETA), DT)(x)


# Each count's exponents are compared with one device's: rows split over
# devices run in batches of another length, which XLA vectorises differently,
# so the last bits of a chaotic run differ (about 5e-12 relative measured);
# 1e-8 is the sweep's own contract (equal to a loop of single runs).
@pytest.mark.jax_agree(rtol=1e-8)
@pytest.mark.jax_devices(1, 2, 4)
@pytest.mark.jax_sizes(64, 256, label="sweep batch size (Lorenz systems)")
def test_lorenz_sweep_sharded(benchmark, jax_mesh, jax_size, jax_tolerance):
    rhos = jnp.linspace(20.0, 30.0, jax_size)
    x0 = jnp.array([1.0, 1.0, 20.0])
    devices = list(jax_mesh.devices.flat)

    def sweep():
        return sweep_lyapunov_spectrum(
            lorenz_step,
            x0,
            rhos,
            DT,
            N_STEPS,
            renorm_every=RENORM_EVERY,
            devices=devices,
        ).exponents

    exponents = benchmark(sweep)
    assert exponents.shape == (jax_size, 3)
    # Every row contracts volume at the constant rate sigma + 1 + beta.
    sums = exponents.sum(axis=1)
    bound = max(1e-3, 100 * jax_tolerance.atol)  # RK4, or the precision's rounding
    assert float(jnp.max(jnp.abs(sums + (SIGMA + 1 + BETA)))) < bound
