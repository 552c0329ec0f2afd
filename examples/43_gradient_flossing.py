"""
Gradient flossing: training an RNN with its Lyapunov exponents pushed to zero
==============================================================================

The gradient of a loss at time ``T`` with respect to an early hidden state of
an RNN is a product of ``T`` Jacobians, whose growth rates are the network's
conditional Lyapunov exponents: negative exponents make it vanish, positive
ones make it explode. Engelken (NeurIPS 2023, "Gradient flossing") adds
``beta * sum_i lambda_i^2`` over the leading exponents to the loss, keeping
them near zero so that gradients survive long delays.

Here the exponents come from :func:`lyapax.lyapunov_spectrum` of a
:func:`lyapax.driven_problem` (the RNN fed an input sequence), and
``jax.grad`` differentiates straight through the Benettin run (QR included)
into the weights. The task needs a long memory: the sign of the first input
must be reported ``T`` steps later, with noise in between. Both runs start
from the same weights and use the same optax optimiser; the figure shows the
task loss, the largest exponent and the norm of the loss gradient with
respect to the initial hidden state (the signal that must cross ``T``
steps) over training.

Run ``python examples/43_gradient_flossing.py`` (``--quick``: fewer training
steps; ``--out FILE`` for the figure's path).
"""

import jax

jax.config.update("jax_enable_x64", True)  # before any array is created

import equinox as eqx
import jax.numpy as jnp
import matplotlib
import numpy as np
import optax

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args, save_figure

from lyapax import driven_problem, lyapunov_spectrum

args = example_args("gradient flossing vs plain training", "43_flossing.png")
n_units, delay, batch, k_floss, beta = 32, 40, 32, 4, 1.0
n_train = 60 if args.quick else 600
floss_steps = 40


class RNN(eqx.Module):
    """``h' = tanh(W h + w_in u + b)`` with a linear readout ``w_out``."""

    W: jax.Array
    w_in: jax.Array
    b: jax.Array
    w_out: jax.Array

    def __call__(self, h, u):
        return jnp.tanh(self.W @ h + self.w_in * u + self.b)


def task_batch(key):
    """Inputs ``(batch, delay)``: a sign at step 0, then noise; targets ±1."""
    k1, k2 = jax.random.split(key)
    signs = jnp.where(jax.random.bernoulli(k1, shape=(batch,)), 1.0, -1.0)
    noise = 0.5 * jax.random.normal(k2, (batch, delay))
    return noise.at[:, 0].set(signs), signs


def task_loss(model, h0, inputs, targets):
    """Logistic loss of the readout after ``delay`` steps (mean over the batch)."""

    def one(h0, u):
        h = jax.lax.scan(lambda h, ut: (model(h, ut), None), h0, u)[0]
        return model.w_out @ h

    y = jax.vmap(one)(h0, inputs)
    return jnp.mean(jax.nn.softplus(-targets * y)), jnp.mean(targets * y > 0)


def exponents(model, u):
    """Leading conditional exponents of the RNN driven by ``u``."""
    problem = driven_problem(model, jnp.zeros(n_units), u)
    return lyapunov_spectrum(problem, floss_steps, k=k_floss).exponents


def h0_gradient(model, inputs, targets):
    """|d loss / d h0|: how much of the loss reaches the initial state."""
    h0 = jnp.zeros((batch, n_units))
    g = jax.grad(lambda h: task_loss(model, h, inputs, targets)[0])(h0)
    return jnp.linalg.norm(g) * batch


def train(flossing):
    rng = np.random.default_rng(1)
    model = RNN(
        jnp.asarray(rng.normal(size=(n_units, n_units)) * 1.8 / np.sqrt(n_units)),
        jnp.asarray(rng.normal(size=n_units)),
        jnp.zeros(n_units),
        jnp.asarray(rng.normal(size=n_units) / np.sqrt(n_units)),
    )
    optimiser = optax.adam(3e-3)
    state = optimiser.init(model)

    @eqx.filter_jit
    def update(model, state, key):
        k1, k2 = jax.random.split(key)
        inputs, targets = task_batch(k1)
        u = 0.5 * jax.random.normal(k2, (floss_steps,))

        def loss(m):
            task, acc = task_loss(m, jnp.zeros((batch, n_units)), inputs, targets)
            lam = exponents(m, u)
            total = task + (beta * jnp.sum(lam**2) if flossing else 0.0)
            return total, (task, acc, lam[0])

        (_, (task, acc, lam1)), grads = jax.value_and_grad(loss, has_aux=True)(model)
        updates, state = optimiser.update(grads, state, model)
        norm = h0_gradient(model, inputs, targets)
        return optax.apply_updates(model, updates), state, (task, acc, lam1, norm)

    key = jax.random.PRNGKey(0)
    rows = []
    for _ in range(n_train):
        key, sub = jax.random.split(key)
        model, state, out = update(model, state, sub)
        rows.append([float(x) for x in out])
    return np.array(rows)


logs = {"plain": train(False), "flossing": train(True)}
for name, log in logs.items():
    tail = log[-max(1, n_train // 10) :]
    print(
        f"{name:9s} last tenth: loss {tail[:, 0].mean():.3f}, accuracy "
        f"{tail[:, 1].mean():.2f}, lambda_1 {tail[:, 2].mean():+.3f}, "
        f"|dL/dh0| {tail[:, 3].mean():.2e}"
    )

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), constrained_layout=True)
steps = np.arange(1, n_train + 1)
for name, log in logs.items():
    axes[0].plot(steps, log[:, 0], label=name)
    axes[1].plot(steps, log[:, 2], label=name)
    axes[2].semilogy(steps, log[:, 3], label=name)
axes[0].set_ylabel("task loss")
axes[1].set_ylabel(r"$\lambda_1$ (per step)")
axes[1].axhline(0.0, color="k", lw=0.6)
axes[2].set_ylabel(r"$|\partial L / \partial h_0|$")
for ax in axes:
    ax.set_xlabel("training step")
    ax.legend()
fig.suptitle(f"delayed recall over {delay} steps: plain vs flossing")
save_figure(fig, args.out)
