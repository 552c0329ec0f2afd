"""The second crossover: a dense tanh RNN driven by an input sequence.

``h_{n+1} = tanh(W h_n + w_in u_n)`` with dense ``(n, n)`` weights: each step
is one ``(n, n) @ (n, k + 1)`` product (the state and k = 16 tangents), the
GPU-shaped work of a recurrent network, while the inputs are read one slice
per step by the engine's step counter. Timed end to end through
``lyapunov_spectrum`` of a ``driven_problem`` (200 steps, QR every 10).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lyapax import driven_problem, lyapunov_spectrum

K, N_STEPS, RENORM_EVERY = 16, 200, 10


class TanhRNN(eqx.Module):
    """One step ``tanh(W h + w_in u)``; the weights are runtime leaves."""

    W: jax.Array
    w_in: jax.Array

    def __call__(self, h, u):
        return jnp.tanh(self.W @ h + self.w_in * u)


def rnn_problem(n_units: int):
    """A driven RNN near the edge of chaos (gain 1.5), inputs N(0, 1)."""
    rng = np.random.default_rng(0)
    W = jnp.asarray(rng.normal(size=(n_units, n_units)) * 1.5 / np.sqrt(n_units))
    step = TanhRNN(W, jnp.asarray(rng.normal(size=n_units)))
    inputs = jnp.asarray(rng.normal(size=N_STEPS))
    return driven_problem(step, jnp.asarray(rng.normal(size=n_units) * 0.1), inputs)


@pytest.mark.jax_sizes(64, 128, 256, 512, 1024, 2048, 4096, label="RNN units n")
def test_rnn_driven(benchmark, jax_backend, jax_size):
    problem = rnn_problem(jax_size)

    # Jitted with the problem as its argument, so the plugin compiles it
    # apart from the timed calls and reads its work from XLA (roofline).
    @eqx.filter_jit
    def leading_exponents(problem):
        result = lyapunov_spectrum(
            problem, n_steps=N_STEPS, k=K, renorm_every=RENORM_EVERY
        )
        return result.exponents

    exponents = benchmark(leading_exponents, problem)
    assert exponents.shape == (K,)
    assert bool(jnp.all(jnp.isfinite(exponents)))
