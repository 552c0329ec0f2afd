"""Sweeps: Lyapunov spectra of many parameter sets and initial states at once.

``sweep_lyapunov_spectrum`` runs the Benettin/QR engine for a whole batch of
parameters (a pytree whose leaves share a leading batch axis) and/or initial
states in one ``jax.vmap``-ed, jitted program; every field of the returned
:class:`~lyapax.core.LyapunovResult` gains that leading axis. The compiled
program is cached by the structure of ``step_fn`` and the static arguments, so
a second sweep with new numbers of the same shapes does not recompile.

Devices. When several devices are visible (GPUs, TPU cores, or CPU devices
forced with ``XLA_FLAGS=--xla_force_host_platform_device_count=N``), the batch
axis is split over a 1-D mesh with ``jax.sharding`` and each device runs its
share through ``jax.shard_map``; the numbers are those of a single-device run.
The same code scales to several hosts: start every process with
``jax.distributed.initialize()`` and call the sweep with the same arguments in
each; ``jax.devices()`` then lists every host's devices, each process places
its own shards, and the returned arrays are global ``jax.Array`` s (gather them
with ``jax.experimental.multihost_utils.process_allgather``). Keep the batch a
multiple of the global device count there, so no padding slice is needed::

    import jax
    jax.distributed.initialize()        # one process per host (or per GPU)
    from lyapax.sweep import sweep_lyapunov_spectrum
    res = sweep_lyapunov_spectrum(step, x0, {"rho": rhos}, dt, n_steps)
    from jax.experimental import multihost_utils
    lam = multihost_utils.process_allgather(res.exponents, tiled=True)
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float, PyTree

from lyapax._engine import finite, run, validate
from lyapax._engine.benettin import resolve_qr
from lyapax._engine.problem import Problem
from lyapax._engine.run import LyapunovResult
from lyapax._engine.shapes import Scalar, Seed, StateLike, StepFn
from lyapax._engine.summary import keep_rows
from lyapax._engine.tree import split_static
from lyapax.sweep import _batching as batching
from lyapax.sweep._kernels import spectrum_kernel, trajectory_kernel
from lyapax.sweep._rows import Probe, ProblemFamily, StepRows, builder_for, probe
from lyapax.utils import Trajectory

__all__ = [
    "TRAJECTORY_WARN_BYTES",
    "ProblemFamily",
    "problem_family",
    "sweep_lyapunov_spectrum",
    "sweep_trajectory",
]

#: Saved trajectories larger than this many bytes (on the device per call, or
#: on the host in total) trigger a ``UserWarning`` before they are allocated.
TRAJECTORY_WARN_BYTES = 2**30


def problem_family(make_problem: Any) -> ProblemFamily:
    """Mark ``make_problem(params) -> problem`` as a sweepable family.

    Use it to sweep parameters that live inside a problem (ODE, network or
    delay), e.g. ``problem_family(lambda beta: dde_problem(mackey_glass(
    beta=beta), 1.2, tau=17.0, dt=0.1))`` with ``params_batch=betas``. Rows
    must share one structure (functions, shapes, delays in steps, ``dt``).
    """
    if not callable(make_problem):
        raise TypeError(
            f"make_problem must be callable; got {type(make_problem).__name__}"
        )
    return ProblemFamily(make_problem)


class _Setup(NamedTuple):
    n: int
    builder: Any
    batched: tuple
    probe: Probe
    dt: Any
    plan: batching.Plan


def _setup(step_fn, state0, params_batch, dt, state0_batch, seed, plan_args):
    """Validate the batch and describe its rows (shared by both sweeps)."""
    if validate.is_traced((params_batch, state0, state0_batch, dt)):
        raise TypeError(
            "sweeps are eager entry points (they jit and shard internally); call "
            "them outside jax.jit/vmap, or vmap lyapunov_spectrum yourself"
        )
    n, _ = batching.batch_size_of(params_batch, state0_batch, seed)
    builder = builder_for(step_fn, params_batch is not None, state0_batch is not None)
    if isinstance(builder, StepRows):
        states = batching.state_batch(state0, state0_batch, n)
        validate.positive_dt(dt)
    else:
        if state0 is not None:
            raise TypeError(
                "a problem (or problem_family) carries its own state0; pass "
                "state0=None, or state0_batch to sweep initial states"
            )
        states = np.zeros((n, 1))
        if state0_batch is not None:
            states = batching.state_batch(None, state0_batch, n)
    found = probe(builder, params_batch, states)
    if found.dt is not None:
        validate.same_dt(dt, found.dt)
        dt = validate.positive_dt(found.dt)
    plan = batching.Plan(n, *plan_args)
    return _Setup(
        n,
        builder,
        (params_batch, states, batching.seed_batch(seed, n)),
        found,
        dt,
        plan,
    )


def _min_transient(found: Probe) -> int:
    return 0 if found.view is None else found.view.min_transient_steps


def _warn_trajectory(
    plan: batching.Plan, n_saved: int, d: int, dtype: Any, to_host: bool
):
    itemsize = np.dtype(dtype).itemsize
    host_bytes = plan.n * n_saved * d * itemsize
    device_bytes = plan.padded * n_saved * d * itemsize
    if not to_host and plan.chunk < plan.n:
        device_bytes = host_bytes  # chunks stay on the device until joined
    biggest, where = (host_bytes, "host") if to_host else (device_bytes, "device")
    if biggest > TRAJECTORY_WARN_BYTES:
        warnings.warn(
            f"saving states will allocate {biggest / 2**30:.2f} GiB of trajectory "
            f"on the {where} ({plan.n} rows x {n_saved} saved states x d={d}); "
            "increase decimate, or pass batch_size with trajectory_to_host=True "
            "to keep one chunk at a time on the device",
            UserWarning,
            stacklevel=3,
        )


def sweep_lyapunov_spectrum(
    step_fn: StepFn | Problem | ProblemFamily,
    state0: StateLike | None,
    params_batch: PyTree[Float[ArrayLike, "n ..."]] | None,
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

    Returns:
        :class:`~lyapax.core.LyapunovResult` with a leading batch axis ``n`` on
        every field: ``exponents (n, k)``, ``history (n, n_renorm, k)``,
        ``times (n, n_renorm)``, ``checkpoint`` fields (``state (n, d)``, ``Y
        (n, d, k)``, ``cum_log_growth (n, k)``, ``elapsed_time (n,)``, ``dt
        (n,)``; each row resumes with ``lyapunov_spectrum``), ``trajectory (n,
        n_steps // decimate, d)`` and ``save_times`` when ``save_states``, and
        ``stderr (n, k)``.

    Raises:
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
    setup = _setup(
        step_fn,
        state0,
        params_batch,
        dt,
        state0_batch,
        seed,
        (batch_size, devices, pad),
    )
    found, plan = setup.probe, setup.plan
    if k is None and found.view is not None:
        k = run.default_k(found.view, None, None, stacklevel=2)
    args = run.run_args(
        d=found.d,
        dt=setup.dt,
        n_steps=n_steps,
        k=found.d if k is None else k,
        renorm_every=renorm_every,
        t_transient=t_transient,
        save_states=save_states,
        decimate=decimate,
        dtype=found.dtype,
        min_transient_steps=_min_transient(found),
    )
    method = resolve_qr(qr, batched=True)
    sizes = args.kernel_lengths()
    lengths = sizes.pop("lengths")
    if save_states:
        # The device holds the kernel's buffer, rounded up (see kernel_lengths).
        n_rows = sizes["save_capacity"]
        _warn_trajectory(plan, n_rows, found.n_state, found.dtype, trajectory_to_host)
    dynamic, static = split_static(setup.builder)
    kernel = partial(
        spectrum_kernel, dynamic, static=static, mesh=plan.mesh, k=args.k, qr=method
    )
    to_host = ("trajectory",) if save_states and trajectory_to_host else ()
    raw = plan.run(
        lambda *rows: kernel(*rows, setup.dt, lengths, **sizes), setup.batched, to_host
    )
    return _finish(raw, args, setup.dt, plan, trajectory_to_host)


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
    finite.warn_nonfinite_rows(rows["history"], stacklevel=3)  # issue 24
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


def sweep_trajectory(
    step_fn: StepFn | Problem | ProblemFamily,
    state0: StateLike | None,
    params_batch: PyTree[Float[ArrayLike, "n ..."]] | None,
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
    setup = _setup(
        step_fn, state0, params_batch, dt, state0_batch, 0, (batch_size, devices, pad)
    )
    found, plan = setup.probe, setup.plan
    n_steps = validate.as_int("n_steps", n_steps, minimum=1)
    decimate = validate.as_int("decimate", decimate, minimum=1)
    if n_steps % decimate:
        raise ValueError(f"decimate={decimate} must divide n_steps={n_steps}")
    renorm_every = validate.as_int("renorm_every", renorm_every, minimum=1)
    _, n_tr = run.transient_blocks(
        t_transient, setup.dt, renorm_every, _min_transient(found)
    )
    n_saved = n_steps // decimate
    _warn_trajectory(plan, n_saved, found.n_state, found.dtype, trajectory_to_host)
    dynamic, static = split_static(setup.builder)
    kernel = partial(
        trajectory_kernel,
        dynamic,
        static=static,
        mesh=plan.mesh,
        n_transient=n_tr * renorm_every,
        n_saved=n_saved,
        decimate=decimate,
    )
    to_host = ("states",) if trajectory_to_host else ()
    return plan.run(lambda *rows: kernel(*rows, setup.dt), setup.batched, to_host)
