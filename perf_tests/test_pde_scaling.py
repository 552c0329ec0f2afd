"""A PDE series for the crossover figure: Kuramoto–Sivashinsky spectra.

Pseudo-spectral KS (``lyapax.pde.kuramoto_sivashinsky``) at the resolution of
64 points per 22 length units (``L = 22 n / 64``), ETDRK4 with ``dt = 0.25``,
``k = 16`` exponents, QR every step, 100 steps, timed end to end through
``lyapunov_spectrum``. The work per step is ``(k + 1)`` batched real FFTs of
length ``n`` per stage, ``O(k n log n)``: FFT-bound, unlike the dense
``d**2`` Kuramoto network, so its CPU/GPU crossover is a different one.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lyapax.core import lyapunov_spectrum
from lyapax.pde import kuramoto_sivashinsky

K, N_STEPS, DT = 16, 100, 0.25


@pytest.mark.jax_sizes(64, 256, 1024, 4096, 16384, label="grid points n")
def test_kuramoto_sivashinsky(benchmark, jax_backend, jax_size):
    problem = kuramoto_sivashinsky(jax_size, 22.0 * jax_size / 64, dt=DT)
    # The builder keeps its linear operator as a NumPy array: put it on the
    # device once, or every timed round would copy it host -> device.
    problem = jax.tree_util.tree_map(
        lambda leaf: jnp.asarray(leaf) if isinstance(leaf, np.ndarray) else leaf,
        problem,
    )

    # Jitted with the problem as its argument: the plugin reads the work of
    # the program its warm-up compiled (roofline) instead of compiling a copy.
    @eqx.filter_jit
    def leading_exponents(problem):
        return lyapunov_spectrum(problem, N_STEPS, k=K).exponents

    exponents = benchmark(leading_exponents, problem)
    assert exponents.shape == (K,)
    assert bool(jnp.all(jnp.isfinite(exponents)))
