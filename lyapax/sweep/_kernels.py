"""The jitted, vmapped (and optionally shard_mapped) programs behind sweeps.

Both kernels take ``(dynamic, params, states, seeds, dt)``: the row builder's
traced leaves (shared by every row), three batched inputs with a leading row
axis, and the shared step ``dt``. The builder's static part, the mesh and the
run sizes are static arguments, so a second sweep with new numbers of the same
shapes reuses the compiled program.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from lyapax._engine.benettin import RUN_SIZES, run_benettin
from lyapax._engine.run import assemble
from lyapax._engine.trajectory import iterate
from lyapax._engine.tree import merge_static, split_static
from lyapax.sweep._batching import BATCH_AXIS
from lyapax.utils import Trajectory


def _spread(f, mesh):
    """``f(dynamic, params, states, seeds, dt)`` split over ``mesh`` along the
    row axis of the three batched arguments (unchanged when ``mesh`` is None)."""
    if mesh is None:
        return f
    rows, whole = PartitionSpec(BATCH_AXIS), PartitionSpec()
    # check_vma=False: the engine starts its carry from constants (zeros) that
    # become per-device values inside its scan; rows are independent, so there
    # is nothing for the varying-axis check to protect.
    return jax.shard_map(
        f,
        mesh=mesh,
        in_specs=(whole, rows, rows, rows, whole),
        out_specs=rows,
        check_vma=False,
    )


@partial(jax.jit, static_argnames=("static", "mesh", *RUN_SIZES))
def spectrum_kernel(
    dynamic,
    params,
    states,
    seeds,
    dt,
    *,
    static,
    mesh,
    k,
    n_blocks,
    n_transient_blocks,
    renorm_every,
    decimate,
    save_states,
):
    """One Benettin run per row; returns a LyapunovResult with a row axis."""

    def one(dyn, p, x0, seed, dt):
        view = merge_static(dyn, static).build(p, x0, dt)
        step_dyn, step_static = split_static(view.step)
        out = run_benettin(
            step_dyn,
            view.z0,
            None,
            None,
            seed,
            dt,
            0.0,
            static=step_static,
            k=k,
            n_blocks=n_blocks,
            n_transient_blocks=n_transient_blocks,
            renorm_every=renorm_every,
            decimate=decimate,
            save_states=save_states,
            small_qr=True,
        )
        return assemble(view._replace(dt=dt), out)

    batched = jax.vmap(one, in_axes=(None, 0, 0, 0, None))
    return _spread(batched, mesh)(dynamic, params, states, seeds, dt)


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
