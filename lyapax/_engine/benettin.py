"""The Benettin/QR kernel: one jitted ``lax.scan`` over renormalisation blocks.

Benettin, Galgani, Giorgilli & Strelcyn (1980); Shimada & Nagashima (1979).
The tangent frame ``Y (d, k)`` is pushed forward matrix-free with ``jax.jvp``
batched by ``jax.vmap`` (or by a step's own ``tangent_step`` when it has a
cheaper fused form), re-orthonormalised by QR every ``renorm_every`` steps, and
``log|diag R|`` is accumulated.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int

from lyapax._engine.qr import thin_qr
from lyapax._engine.stats import batch_means_stderr, block_growths
from lyapax._engine.tree import merge_static


class BenettinState(NamedTuple):
    """Carry of the scan: point, orthonormal frame, accumulated log-growth and
    the integer step counter (read by steps that index a delay ring buffer)."""

    state: Float[Array, " d"]
    Y: Float[Array, "d k"]
    cum: Float[Array, " k"]
    step: Int[Array, ""]


def tangent_step(
    step_fn: Any,
    state: Float[Array, " d"],
    Y: Float[Array, "d k"],
    step: Int[Array, ""],
) -> tuple[Float[Array, " d"], Float[Array, "d k"]]:
    """Advance ``state`` one step and push the columns of ``Y`` through its JVP.

    A step function may provide ``tangent_step(state, Y)`` (a fused, cheaper
    form) and may declare ``uses_step_index = True`` to be called as
    ``step_fn(state, step)``.
    """
    indexed = getattr(step_fn, "uses_step_index", False)
    fused = getattr(step_fn, "tangent_step", None)
    if fused is not None:
        return fused(state, Y, step) if indexed else fused(state, Y)
    f = (lambda x: step_fn(x, step)) if indexed else step_fn

    def one(v):
        return jax.jvp(f, (state,), (v,))

    new_state, new_Y = jax.vmap(one, in_axes=1, out_axes=(None, 1))(Y)
    return new_state, new_Y


def _qr_renormalise(
    Y: Float[Array, "d k"], small_qr: bool = False
) -> tuple[Float[Array, "d k"], Float[Array, " k"]]:
    # Small frames: Householder in jnp ops (fused, vectorised under vmap);
    # LAPACK's per-call overhead dominated sweeps of small systems.
    # LAPACK for a single run (its compiled program is smaller: faster first
    # call); under vmap (sweeps) LAPACK runs one small call per row, so sweeps
    # ask for the fused jnp Householder QR of small frames instead.
    Q, R = thin_qr(Y) if small_qr else jnp.linalg.qr(Y)
    diag = jnp.diagonal(R)
    # Positive diagonal keeps each column's identity continuous between blocks.
    sign = jnp.where(diag < 0, -1.0, 1.0).astype(Y.dtype)
    return Q * sign, jnp.log(jnp.abs(diag))


def _block(
    step_fn: Any,
    renorm_every: int,
    decimate: int,
    save: bool,
    small_qr: bool,
    carry: BenettinState,
    _: None,
) -> tuple[BenettinState, tuple[Float[Array, " k"], Float[Array, "m d"] | None]]:
    """``renorm_every`` tangent steps then one QR; optionally saves states."""

    indexed = getattr(step_fn, "uses_step_index", False)

    def one_step(c, _):
        s, Y = tangent_step(step_fn, c[0], c[1], c[2])
        # The counter costs a loop-carried op per step: only steps that read it
        # (ring buffers) get it incremented per step; others per block.
        return (s, Y, c[2] + 1 if indexed else c[2]), None

    def save_group(c, _):
        c, _ = jax.lax.scan(one_step, c, None, length=decimate)
        return c, c[0]

    start = (carry.state, carry.Y, carry.step)
    if save:
        (state, Y, step), saved = jax.lax.scan(
            save_group, start, None, length=renorm_every // decimate
        )
    else:
        (state, Y, step), _ = jax.lax.scan(one_step, start, None, length=renorm_every)
        saved = None
    if not indexed:
        step = step + renorm_every
    Y, growth = _qr_renormalise(Y, small_qr)
    cum = carry.cum + growth
    return BenettinState(state, Y, cum, step), (cum, saved)


def _check_step_output(step_fn: Any, state: Float[Array, " d"]) -> None:
    # Runs at trace time only, so cached calls pay nothing for it.
    if getattr(step_fn, "uses_step_index", False):
        out = jax.eval_shape(step_fn, state, jnp.zeros((), jnp.int32))
    else:
        out = jax.eval_shape(step_fn, state)
    shape = getattr(out, "shape", None)
    dtype = getattr(out, "dtype", None)
    if shape != state.shape or dtype != state.dtype:
        raise ValueError(
            f"step_fn must map a state of shape {state.shape} and dtype {state.dtype} "
            f"to the same shape and dtype; it returned shape {shape} and dtype {dtype}"
        )


#: The run sizes every Benettin program is compiled for (static arguments of
#: :func:`run_benettin` and of the sweep kernels; see ``RunArgs.kernel_kwargs``).
RUN_SIZES = (
    "k",
    "n_blocks",
    "n_transient_blocks",
    "renorm_every",
    "decimate",
    "save_states",
)


@partial(jax.jit, static_argnames=("static", *RUN_SIZES, "small_qr"))
def run_benettin(
    dynamic: list[Any],
    state0: Float[Array, " d"],
    Y0: Float[Array, "d k"] | None,
    cum0: Float[Array, " k"] | None,
    seed: Int[ArrayLike, ""],
    dt: Float[ArrayLike, ""],
    t0: Float[ArrayLike, ""],
    step0: Int[ArrayLike, ""] = 0,
    *,
    static: Any,
    k: int,
    n_blocks: int,
    n_transient_blocks: int,
    renorm_every: int,
    decimate: int,
    save_states: bool,
    small_qr: bool = False,
) -> dict[str, Any]:
    """Run transient blocks (growth discarded) then ``n_blocks`` measured blocks.

    ``Y0``/``cum0`` are ``None`` for a fresh run (frame drawn from ``seed``) or
    come from a checkpoint; ``step0`` is the step counter at the start. Returns
    a dict with the final carry (raw column order), sorted ``exponents (k,)``,
    ``history (n_blocks, k)`` with columns in the order of the final estimate,
    ``times (n_blocks,)`` and ``saved`` states.
    """
    step_fn = merge_static(dynamic, static)
    _check_step_output(step_fn, state0)
    d = state0.shape[0]
    if Y0 is None:
        Y0 = initial_basis(seed, d=d, k=k, dtype=state0.dtype)
        cum0 = jnp.zeros((k,), dtype=state0.dtype)
    carry = BenettinState(state0, Y0, cum0, jnp.asarray(step0, jnp.int32))
    if n_transient_blocks and save_states:
        block = partial(_block, step_fn, renorm_every, decimate, False, small_qr)
        carry, _ = jax.lax.scan(block, carry, None, length=n_transient_blocks)
        carry = carry._replace(cum=cum0)
        n_transient_blocks = 0
    block = partial(_block, step_fn, renorm_every, decimate, save_states, small_qr)
    if n_transient_blocks:
        # One loop for transient and measurement (half the code to compile):
        # the accumulated growth is reset after the last transient block.
        def measured_block(c, i):
            c, (cum, saved) = block(c, None)
            c = c._replace(cum=jnp.where(i < n_transient_blocks, cum0, c.cum))
            return c, (c.cum, saved)

        total = n_transient_blocks + n_blocks
        carry, (cum_hist, saved) = jax.lax.scan(
            measured_block, carry, jnp.arange(total)
        )
        cum_hist = cum_hist[n_transient_blocks:]
    else:
        carry, (cum_hist, saved) = jax.lax.scan(block, carry, None, length=n_blocks)
    blocks = jnp.arange(1, n_blocks + 1, dtype=cum_hist.dtype)
    times = t0 + dt * renorm_every * blocks
    history_raw = cum_hist / times[:, None]
    order = jnp.argsort(-history_raw[-1])
    history = history_raw[:, order]
    # Error bars, the checkpoint time and save times are computed here so that
    # a call is one compiled program (no eager ops compiled on the first call).
    growth = block_growths(history, times, cum0[order])
    save_times = None
    if saved is not None:
        saved = saved.reshape((-1, d))
        every = dt * decimate
        save_times = t0 + every * jnp.arange(1, saved.shape[0] + 1, dtype=times.dtype)
    return {
        "carry": carry,
        "exponents": history[-1],
        "history": history,
        "times": times,
        "elapsed": times[-1],
        "stderr": batch_means_stderr(growth, dt * renorm_every, times[-1]),
        "saved": saved,
        "save_times": save_times,
    }


def initial_basis(
    seed: Int[ArrayLike, ""], *, d: int, k: int, dtype: Any
) -> Float[Array, "d k"]:
    """Orthonormal ``(d, k)`` frame: QR of a standard-normal matrix from ``seed``."""
    M = jax.random.normal(jax.random.PRNGKey(seed), (d, k), dtype=dtype)
    Q, _ = jnp.linalg.qr(M)
    return Q
