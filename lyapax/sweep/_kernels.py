"""The jitted, vmapped (and optionally shard_mapped) programs behind sweeps.

Both kernels take ``(dynamic, params, states, seeds, dt)``: the row builder's
traced leaves (shared by every row), three batched inputs with a leading row
axis, and the shared step ``dt``. The builder's static part and the mesh are
static arguments, so a second sweep with new numbers of the same shapes reuses
the compiled program. The spectrum kernel also takes the run lengths as data
(a sweep of another length reuses it too); the trajectory kernel's sizes are
static.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from lyapax._engine.benettin import Lengths, initial_frame, run_benettin
from lyapax._engine.precision import precision_view
from lyapax._engine.run import LyapunovResult, make_checkpoint
from lyapax._engine.summary import finish
from lyapax._engine.trajectory import Trajectory, iterate
from lyapax._engine.tree import merge_static, split_static
from lyapax._internal.batching import BATCH_AXIS


def _spread(f, mesh, n_shared: int = 1):
    """``f(dynamic, params, states, seeds, *shared)`` split over ``mesh`` along
    the row axis of the three batched arguments, the ``n_shared`` trailing
    arguments (``dt``, ...) replicated (unchanged when ``mesh`` is None)."""
    if mesh is None:
        return f
    rows, whole = PartitionSpec(BATCH_AXIS), PartitionSpec()
    # check_vma=False: the engine starts its carry from constants (zeros) that
    # become per-device values inside its scan; rows are independent, so there
    # is nothing for the varying-axis check to protect.
    return jax.shard_map(
        f,
        mesh=mesh,
        in_specs=(whole, rows, rows, rows) + (whole,) * n_shared,
        out_specs=rows,
        check_vma=False,
    )


@partial(
    jax.jit,
    static_argnames=(
        "static",
        "mesh",
        "k",
        "capacity",
        "save_capacity",
        "qr",
        "precision",
    ),
)
def spectrum_kernel(
    dynamic,
    params,
    states,
    seeds,
    dt,
    lengths,
    *,
    static,
    mesh,
    k,
    capacity,
    save_capacity,
    qr,
    precision=None,
):
    """One Benettin run per row. Returns a LyapunovResult with a row axis whose
    ``history``, ``times`` and ``trajectory`` are buffers longer than the run
    (see :mod:`lyapax._engine.summary`); the caller keeps their first rows.
    ``precision``: see :func:`lyapax._engine.precision.resolve`."""

    def one(dyn, p, x0, seed, dt, lengths):
        lengths = Lengths.unpack(lengths)
        view = merge_static(dyn, static).build(p, x0, dt)
        view, sums = precision_view(view, precision)
        step_dyn, step_static = split_static(view.step)
        z0 = view.z0
        Y0, cum0 = initial_frame(seed, d=z0.shape[0], k=k, dtype=z0.dtype)
        if sums is not None:  # precision="mixed": the sums in their own dtype
            cum0 = cum0.astype(sums)
        out = run_benettin(
            step_dyn,
            z0,
            Y0,
            cum0,
            0,
            lengths,
            static=step_static,
            capacity=capacity,
            save_capacity=save_capacity,
            qr=qr,
        )
        carry, saved = out.carry, out.saved
        est = finish(out.cum, cum0, lengths.n_blocks, dt, lengths.renorm_every, 0.0)
        checkpoint = make_checkpoint(view, carry, est.elapsed, dt)
        if saved is not None:
            saved = saved[:, : view.n_state]
        return LyapunovResult(
            est.exponents,
            est.history,
            est.times,
            checkpoint,
            saved,
            None,
            est.stderr,
        )

    batched = jax.vmap(one, in_axes=(None, 0, 0, 0, None, None))
    spread = _spread(batched, mesh, n_shared=2)
    return spread(dynamic, params, states, seeds, dt, lengths)


@partial(
    jax.jit,
    static_argnames=("static", "mesh", "n_transient", "n_saved", "decimate"),
)
def trajectory_kernel(
    dynamic, params, states, seeds, dt, *, static, mesh, n_transient, n_saved, decimate
):
    """Iterate each row's step (no tangents); returns a Trajectory with a row
    axis. ``seeds`` is unused: the signature matches ``spectrum_kernel``."""

    def one(dyn, p, x0, _seed, dt):
        view = merge_static(dyn, static).build(p, x0, dt)
        saved = iterate(
            view.step,
            view.z0,
            n_transient=n_transient,
            n_saved=n_saved,
            decimate=decimate,
        )
        saved = saved[:, : view.n_state]
        times = dt * decimate * jnp.arange(1, n_saved + 1, dtype=saved.dtype)
        return Trajectory(times, saved)

    batched = jax.vmap(one, in_axes=(None, 0, 0, 0, None))
    return _spread(batched, mesh)(dynamic, params, states, seeds, dt)
