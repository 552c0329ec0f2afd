"""
Conditional Lyapunov spectrum of a driven tanh RNN: the echo-state transition
==============================================================================

A recurrent network ``h_{n+1} = tanh(g W h_n + w_in u_n)`` fed an input
sequence ``u`` has exponents *conditional on that sequence*: the growth rates
of perturbations of ``h`` while the same inputs keep arriving.
:func:`lyapax.driven_problem` runs it through the ordinary engine: the step
``step(h, u_n)`` receives slice ``n`` of the inputs, ``n`` counted from the
first transient step.

When the largest conditional exponent is negative the network forgets its
initial state: two copies fed the same inputs converge (the echo-state
property of a reservoir). As the gain ``g`` of the random coupling ``W``
(``N(0, 1/N)`` entries) grows, the largest exponent crosses zero; a strong
input pushes the units into saturation and moves the crossing to larger
gains (input suppresses chaos). Each curve is one vmapped sweep over the
gains (``problem_family``: the network is an ``equinox.Module``, so every
gain shares one compiled program).

Run ``python examples/42_rnn_conditional_spectrum.py`` (``--quick``: a
shorter run and fewer gains; ``--out FILE`` for the figure's path).
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

from lyapax import driven_problem, lyapunov_spectrum, problem_family
from lyapax import sweep_lyapunov_spectrum as sweep

args = example_args("conditional spectrum of a driven RNN", "42_rnn_spectrum.png")
n_units, k = 64, 8
n_steps, transient = (1_500, 300) if args.quick else (20_000, 2_000)
gains = np.linspace(0.4, 3.0, 12 if args.quick else 40)
amplitudes = (0.0, 0.5, 1.5)

rng = np.random.default_rng(0)
W = jnp.asarray(rng.normal(size=(n_units, n_units)) / np.sqrt(n_units))
w_in = jnp.asarray(rng.normal(size=n_units))
noise = jnp.asarray(rng.normal(size=n_steps + transient))
h0 = jnp.asarray(rng.normal(scale=0.1, size=n_units))


class RNN(eqx.Module):
    """One step ``tanh(g W h + w_in u)``; numbers are leaves (one program)."""

    gain: jax.Array
    W: jax.Array
    w_in: jax.Array

    def __call__(self, h, u):
        return jnp.tanh(self.gain * (self.W @ h) + self.w_in * u)


def spectra(amplitude):
    """Conditional spectra ``(n_gains, k)`` for one input amplitude."""
    inputs = amplitude * noise

    def make(gain):
        return driven_problem(RNN(gain, W, w_in), h0, inputs)

    family = problem_family(make)
    result = sweep(
        family,
        None,
        jnp.asarray(gains),
        None,
        n_steps,
        k=k,
        renorm_every=10,
        t_transient=float(transient),
    )
    return np.asarray(result.exponents)


curves = {a: spectra(a) for a in amplitudes}
for a, lam in curves.items():
    above = gains[lam[:, 0] > 0]
    where = f"g = {above[0]:.2f}" if above.size else "none in range"
    print(f"input amplitude {a}: first gain with lambda_1 > 0: {where}")

# A sweep row is the single run of the same problem: at the smallest gain
# (contracting) they agree to rounding; in the chaotic range rounding
# differences between the batched and the single program grow like
# exp(lambda_1 n), and only the statistics agree.
single = lyapunov_spectrum(
    driven_problem(RNN(jnp.asarray(gains[0]), W, w_in), h0, amplitudes[1] * noise),
    n_steps,
    k=k,
    renorm_every=10,
    t_transient=float(transient),
)
gap = np.max(np.abs(np.asarray(single.exponents) - curves[amplitudes[1]][0]))
print(f"smallest gain: single run vs sweep row, max difference {gap:.1e}")

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
for a, lam in curves.items():
    ax1.plot(gains, lam[:, 0], "o-", ms=3, label=f"input amplitude {a}")
ax1.axhline(0.0, color="k", lw=0.6)
ax1.set_xlabel("gain g")
ax1.set_ylabel(r"largest conditional exponent $\lambda_1$")
ax1.set_title("echo-state (λ1 < 0) to chaos (λ1 > 0)")
ax1.legend()
lam = curves[amplitudes[1]]
for i in range(k):
    ax2.plot(gains, lam[:, i], lw=0.9, color=plt.cm.viridis(i / k))
ax2.axhline(0.0, color="k", lw=0.6)
ax2.set_xlabel("gain g")
ax2.set_ylabel(r"$\lambda_i$ (per step)")
ax2.set_title(f"leading {k} exponents, input amplitude {amplitudes[1]}")
save_figure(fig, args.out)
