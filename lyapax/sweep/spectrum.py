"""``sweep_lyapunov_spectrum``: the spectra of a batch of rows in one program.

Batch, devices and multi-host use: see :mod:`lyapax.sweep`.
"""

from __future__ import annotations

import contextlib
import os
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, PyTree, Shaped

from lyapax._engine import finite, run
from lyapax._engine import progress as _progress
from lyapax._engine.abstract import AbstractProblem
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.precision import check_precision
from lyapax._engine.progress import TextSink
from lyapax._engine.run import LyapunovResult, RunOptions
from lyapax._engine.shapes import Scalar, Seed, StateLike, StepFn
from lyapax._engine.summary import keep_rows
from lyapax._engine.tree import split_static
from lyapax._internal import batching
from lyapax._internal.rows import ProblemFamily, resolve
from lyapax.sweep._checkpoint import chunk_hook
from lyapax.sweep._kernels import spectrum_kernel
from lyapax.sweep._setup import warn_trajectory

__all__ = ["sweep_lyapunov_spectrum"]


@holds_one_blas_thread
def sweep_lyapunov_spectrum(
    step_fn: StepFn | AbstractProblem | ProblemFamily,
    state0: StateLike | None,
    params_batch: PyTree[Shaped[ArrayLike, "n ..."]] | None,
    dt: Scalar | None,
    n_steps: int,
    k: int | None = None,
    renorm_every: int = 1,
    t_transient: float = 0.0,
    seed: Seed = 0,
    state0_batch: Float[ArrayLike, "n d"] | None = None,
    save_states: bool = False,
    decimate: int = 1,
    batch_size: int | None = None,
    trajectory_to_host: bool = False,
    *,
    devices: Any = None,
    pad: bool = True,
    qr: str = "auto",
    progress: bool | TextSink = False,
    checkpoint: str | os.PathLike[str] | None = None,
    precision: str | None = None,
) -> LyapunovResult:
    """Lyapunov spectra of a batch of parameter sets and/or initial states.

    Each batch row runs exactly what :func:`lyapax.lyapunov_spectrum` runs for
    ``step = lambda x: step_fn(x, params_row)`` from its initial state and seed,
    so a Python loop over the rows gives the same numbers; here all rows run in
    one vmapped, jitted program (cached by the structure of ``step_fn``). With
    several devices the rows are split over them (see the module docstring).

    Args:
        step_fn: what each row runs, one of

            * ``step_fn(state (d,), params) -> (d,)`` with ``params`` one row of
              ``params_batch`` (``step_fn(state)`` when ``params_batch`` is
              None); a step declaring ``uses_step_index`` is called
              ``step_fn(state, step_index, params)``;
            * a problem (``ODEProblem``, network problem): rows differ by
              ``state0_batch`` and/or ``seed``;
            * a delay problem (``DDEProblem``): rows differ by ``params_batch``
              (a dict whose batched entries replace those of
              ``problem.params``) and/or ``seed``; the phase space is state
              plus history buffer as in ``lyapunov_spectrum_dde`` (``k``
              defaults to the state size, with a warning; one history length
              of transient is always run first) and each row's checkpoint is
              a ``DDECheckpoint``;
            * a driven, random or SDE problem (``driven_problem``,
              ``random_problem``, ``sde_problem``): rows of ``params_batch``
              are input sequences (the structure of its ``inputs``) or PRNG
              keys (``jax.random.split(key, n)``): many realisations at once;
            * :func:`problem_family` ``(make_problem)``: rows are
              ``make_problem(params_row)``, for parameters inside a problem.

            With a problem or family, ``state0`` must be None and ``dt`` may
            be None (the problem's own ``dt``).
        state0: initial state ``(d,)`` shared by every row (may be None when
            ``state0_batch`` is given).
        params_batch: pytree whose array leaves share a leading batch axis of
            length ``n`` (e.g. ``{"rho": jnp.linspace(0, 30, n)}``), or None.
        dt: time per step (1.0 for maps), shared by every row.
        n_steps: measured steps per row, a positive multiple of ``renorm_every``.
        k: exponents per row, ``1 <= k <= d`` (default ``d``).
        renorm_every: steps between QR re-orthonormalisations.
        t_transient: model time run first, growth discarded (as in
            ``lyapunov_spectrum``).
        seed: initial-frame seed, one int or a 1-D batch ``(n,)`` of them.
        state0_batch: ``(n, d)`` initial states, one per row.
        save_states: also return each row's trajectory every ``decimate`` steps.
        decimate: must divide ``renorm_every`` when ``save_states``.
        batch_size: run at most this many rows at a time (bounds memory); the
            results equal the unchunked sweep. The last chunk is padded to the
            same length so every chunk reuses one compiled program.
        trajectory_to_host: copy each chunk's trajectory to host memory (NumPy)
            before the next chunk runs.
        devices: devices to split the batch over: None (all visible), an int
            (the first n) or a list of ``jax.Device``.
        pad: when a chunk does not divide evenly over the devices, pad it with
            copies of its last row (computed, then discarded). With
            ``pad=False`` that is an error instead.
        qr: re-orthonormalisation, as in ``lyapunov_spectrum``; ``"auto"``
            here is the fused Householder QR for frames with ``k <= 8`` and
            ``d <= 256`` (one vectorised computation for all rows) and LAPACK
            for larger ones.
        progress: True for a progress bar (tqdm) on stderr, or a text file to
            draw it in, moved after each chunk of ``batch_size`` rows (pass
            ``batch_size`` for a bar that moves during the sweep).
        checkpoint: a folder: each chunk of ``batch_size`` rows is saved
            there (``chunk-NNNNN.npz``, atomically) once computed, and the
            same call after a kill or a Ctrl-C loads the chunks found there
            and computes the rest, with the numbers of an uninterrupted
            sweep. Chunks of another sweep (problem, numbers, settings,
            chunking, devices) or lyapax version are refused. Single-process
            sweeps only.
        precision: as in :func:`~lyapax.core.lyapunov_spectrum`: None (the
            state's dtype), ``"float64"``, ``"float32"`` or ``"mixed"``
            (float32 rows, sums of ``log|diag R|`` in float64 where x64 is on).

    Returns:
        :class:`~lyapax.core.LyapunovResult` with a leading batch axis ``n`` on
        every field: ``exponents (n, k)``, ``history (n, n_renorm, k)``,
        ``times (n, n_renorm)``, ``checkpoint`` fields (``state (n, d)``, ``Y
        (n, d, k)``, ``cum_log_growth (n, k)``, ``elapsed_time (n,)``, ``dt
        (n,)``; each row resumes with ``lyapunov_spectrum``), ``trajectory (n,
        n_steps // decimate, d)`` and ``save_times`` when ``save_states``, and
        ``stderr (n, k)``.

    Raises:
        CheckpointError: (a ``ValueError``) a chunk file in ``checkpoint``
            that is truncated or belongs to another sweep (left unchanged).
        OSError: the checkpoint folder cannot be created or written.
        ValueError: batched leaves with different leading sizes, a scalar leaf
            in ``params_batch``, ``state0_batch`` not ``(n, d)`` or not matching
            ``state0``, ``batch_size`` < 1, a batch that cannot be split over
            the devices with ``pad=False``, and the range checks of
            ``lyapunov_spectrum`` (each naming the argument).
        TypeError: non-callable ``step_fn``, bad ``devices``, traced inputs.

    Warns:
        UserWarning: before allocating more than ``TRAJECTORY_WARN_BYTES`` of
        saved trajectory.
    """
    options = RunOptions.of(
        k=k,
        renorm_every=renorm_every,
        t_transient=t_transient,
        seed=seed,
        save_states=save_states,
        decimate=decimate,
        qr=qr,
        progress=progress,
    )
    check_precision(precision)
    batch = resolve(
        "sweep_lyapunov_spectrum",
        step_fn,
        state0,
        dt,
        params_batch,
        state0_batch,
        seed,
        (batch_size, devices, pad),
    )
    plan = batch.plan
    args, method = run.setup_run(
        options,
        batch.view,
        d=batch.d,
        dt=batch.dt,
        n_steps=n_steps,
        dtype=batch.dtype,
        min_transient_steps=batch.min_transient_steps,
        batched=True,
    )
    kernel_sizes = args.kernel_lengths()
    lengths = kernel_sizes.lengths
    sizes = {
        "capacity": kernel_sizes.capacity,
        "save_capacity": kernel_sizes.save_capacity,
    }
    if save_states:
        # The device holds the kernel's buffer, rounded up (see kernel_lengths).
        n_rows = kernel_sizes.save_capacity
        warn_trajectory(plan, n_rows, batch.n_state, batch.dtype, trajectory_to_host)
    dynamic, static = split_static(batch.builder)

    def kernel_of(dyn: Any) -> Any:
        return partial(
            spectrum_kernel,
            dyn,
            static=static,
            mesh=plan.mesh,
            k=args.k,
            qr=method,
            precision=precision,
        )

    kernel = kernel_of(dynamic)
    to_host = ("trajectory",) if save_states and trajectory_to_host else ()
    with (
        _progress.Bar(
            options.progress, plan.n, "sweep_lyapunov_spectrum", "row"
        ) as bar,
        contextlib.ExitStack() as owner,
    ):
        first = batching.take(batch.batched_inputs, 0, plan.chunk, plan.padded)
        hook = chunk_hook(
            checkpoint,
            bar,
            plan,
            lambda dyn, *rows: kernel_of(dyn)(*rows, batch.dt, lengths, **sizes),
            (dynamic, *first),
            batch.batched_inputs,
            {"kind": "spectrum", "to_host": bool(to_host)}
            | ({} if precision is None else {"precision": precision}),
            to_host,
            owner,
        )
        raw = plan.run(
            lambda *rows: kernel(*rows, batch.dt, lengths, **sizes),
            batch.batched_inputs,
            to_host,
            hook,
        )
    return _finish(raw, args, batch.dt, plan, trajectory_to_host)


def _finish(
    raw: LyapunovResult,
    args: run.RunArgs,
    dt: Any,
    plan: batching.Plan,
    trajectory_to_host: bool,
) -> LyapunovResult:
    """The kernel's buffers cut to the run's rows (on the host, see
    :mod:`lyapax._engine.summary`) and placed like the rows were."""
    if not _addressable((raw.history, raw.trajectory)):
        # Rows on other processes: cut on the devices (compiled per length).
        return _finish_on_devices(raw, dt, args=args)
    n = args.n_blocks
    rows = {
        "history": keep_rows(raw.history, n, axis=-2),
        "times": keep_rows(raw.times, n, axis=-1),
    }
    finite.warn_nonfinite_rows(rows["history"])
    trajectory = save_times = None
    if args.save_states:
        trajectory = keep_rows(raw.trajectory, args.n_saved, axis=-2)
        times = run.save_times(np.asarray(dt), args.decimate, 0.0, args.n_saved)
        rows["save_times"] = np.broadcast_to(times, trajectory.shape[:-1])
    rows = plan.place(rows)
    if args.save_states:
        save_times = rows["save_times"]
        trajectory = trajectory if trajectory_to_host else plan.place(trajectory)
    return raw._replace(
        history=rows["history"],
        times=rows["times"],
        trajectory=trajectory,
        save_times=save_times,
    )


def _addressable(buffers: Any) -> bool:
    """Every shard of ``buffers`` is readable by this process."""
    return all(getattr(b, "is_fully_addressable", True) for b in buffers)


@partial(jax.jit, static_argnames=("args",))
def _finish_on_devices(raw, dt, *, args):
    n = args.n_blocks
    trajectory = save_times = None
    if args.save_states:
        trajectory = raw.trajectory[:, : args.n_saved]
        times = run.save_times(dt, args.decimate, 0.0, args.n_saved)
        save_times = jnp.broadcast_to(times, trajectory.shape[:-1])
    return raw._replace(
        history=raw.history[:, :n],
        times=raw.times[:, :n],
        trajectory=trajectory,
        save_times=save_times,
    )
