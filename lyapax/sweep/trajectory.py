"""``sweep_trajectory``: the trajectories of a sweep, without tangents."""

from __future__ import annotations

from functools import partial
from typing import Any

from jaxtyping import ArrayLike, Float, PyTree, Shaped

from lyapax._engine import run, validate
from lyapax._engine.abstract import AbstractProblem
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.options import RunOptions
from lyapax._engine.progress import Bar, TextSink, chunks_hook
from lyapax._engine.shapes import Scalar, StateLike, StepFn
from lyapax._engine.trajectory import Trajectory
from lyapax._engine.tree import split_static
from lyapax._internal.rows import ProblemFamily, resolve
from lyapax.sweep._kernels import trajectory_kernel
from lyapax.sweep._setup import warn_trajectory

__all__ = ["sweep_trajectory"]


@holds_one_blas_thread
def sweep_trajectory(
    step_fn: StepFn | AbstractProblem | ProblemFamily,
    state0: StateLike | None,
    params_batch: PyTree[Shaped[ArrayLike, "n ..."]] | None,
    dt: Scalar | None,
    n_steps: int,
    renorm_every: int = 1,
    t_transient: float = 0.0,
    state0_batch: Float[ArrayLike, "n d"] | None = None,
    decimate: int = 1,
    batch_size: int | None = None,
    trajectory_to_host: bool = False,
    *,
    devices: Any = None,
    pad: bool = True,
    progress: bool | TextSink = False,
) -> Trajectory:
    """The trajectories of a sweep, without tangents.

    Same batch, transient and saving rule as :func:`sweep_lyapunov_spectrum`
    with ``save_states=True`` (the transient is ``renorm_every * max(1,
    round(t_transient / dt / renorm_every))`` steps), so its states line up
    with that run's ``trajectory`` at a fraction of the cost.

    Every argument except ``decimate`` means what it means in
    :func:`sweep_lyapunov_spectrum`.

    Args:
        decimate: keep every ``decimate``-th state; must divide ``n_steps``.

    Returns:
        :class:`lyapax.utils.Trajectory` with ``times (n, n_steps // decimate)``
        (model time since the transient) and ``states (n, n_steps // decimate,
        d)``; ``states`` is a NumPy array with ``trajectory_to_host=True``.

    Raises:
        ValueError / TypeError: as :func:`sweep_lyapunov_spectrum`, and
        ``decimate`` not dividing ``n_steps``.

    Warns:
        UserWarning: before allocating more than ``TRAJECTORY_WARN_BYTES``.
    """
    renorm = RunOptions.of(
        renorm_every=renorm_every, decimate=decimate, progress=progress
    ).renorm
    batch = resolve(
        "sweep_trajectory",
        step_fn,
        state0,
        dt,
        params_batch,
        state0_batch,
        0,
        (batch_size, devices, pad),
    )
    plan = batch.plan
    n_steps = validate.as_int("n_steps", n_steps, minimum=1)
    decimate = validate.as_int("decimate", decimate, minimum=1)
    if n_steps % decimate:
        raise ValueError(f"decimate={decimate} must divide n_steps={n_steps}")
    _, n_tr = run.transient_blocks(
        t_transient, batch.dt, renorm.every, batch.min_transient_steps
    )
    n_saved = n_steps // decimate
    warn_trajectory(plan, n_saved, batch.n_state, batch.dtype, trajectory_to_host)
    dynamic, static = split_static(batch.builder)
    kernel = partial(
        trajectory_kernel,
        dynamic,
        static=static,
        mesh=plan.mesh,
        n_transient=n_tr * renorm.every,
        n_saved=n_saved,
        decimate=decimate,
    )
    to_host = ("states",) if trajectory_to_host else ()
    with Bar(progress, plan.n, "sweep_trajectory", "row") as bar:
        hook = chunks_hook(bar)
        return plan.run(
            lambda *rows: kernel(*rows, batch.dt), batch.batched_inputs, to_host, hook
        )
