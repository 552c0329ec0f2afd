"""The CPU/GPU crossover benchmark: a dense all-to-all Kuramoto network.

One phase per node and dense d x d coupling weights, so the work per step grows
like d**2 while only k = 5 exponents are tracked.  The problem is built
through the same public path a user takes (ModelSpec -> build_jax_dfun ->
Network -> network_problem, in lyapax.systems.kuramoto_network) and timed end
to end through lyapunov_spectrum.

The QR re-orthonormalisation is a choice whose best value depends on the
backend (on a GPU, LAPACK-style QR is a solver library call that XLA cannot
fuse), so besides what users get by default (``qr="auto"``) each method has a
benchmark of its own: the report then shows both per backend.
"""

import equinox as eqx
import jax.numpy as jnp
import pytest

from lyapax.core import lyapunov_spectrum
from lyapax.systems import kuramoto_network

K, N_STEPS, RENORM_EVERY, DT = 5, 200, 10, 1e-2


def kuramoto_problem(n_nodes: int):
    """All-to-all Kuramoto network with spread natural frequencies."""
    return kuramoto_network(n_nodes, omega=jnp.linspace(-1.0, 1.0, n_nodes), dt=DT)


def _benchmark(qr: str):
    """The size-parametrized benchmark of one QR method (a test function of
    its own, so the report draws one curve per backend and method)."""

    # search: where --jax-find-crossover may go (k = 5 exponents need d >= 5).
    @pytest.mark.jax_sizes(
        20,
        50,
        100,
        200,
        500,
        1000,
        2000,
        label="network size d (nodes)",
        search=(K, 64000),
    )
    def test(benchmark, jax_backend, jax_size):
        problem = kuramoto_problem(jax_size)
        benchmark.extra_info["qr"] = qr

        # Jitted with the problem as its argument, so the plugin compiles it
        # apart from the timed calls and reads its work from XLA (roofline).
        @eqx.filter_jit
        def leading_exponents(problem):
            result = lyapunov_spectrum(
                problem,
                n_steps=N_STEPS,
                k=K,
                renorm_every=RENORM_EVERY,
                t_transient=0.0,
                qr=qr,
            )
            return result.exponents

        exponents = benchmark(leading_exponents, problem)
        assert exponents.shape == (K,)
        assert bool(jnp.all(jnp.isfinite(exponents)))

    return test


test_kuramoto_dense = _benchmark("auto")
test_kuramoto_dense_lapack_qr = _benchmark("lapack")
test_kuramoto_dense_householder_qr = _benchmark("householder")
