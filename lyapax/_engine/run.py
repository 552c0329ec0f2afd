"""One Lyapunov run of any problem: run arguments, resume, kernel call, result.

The options of a run arrive as one :class:`~lyapax._engine.options.RunOptions`;
:func:`run_args` checks them against the problem into :class:`RunArgs`, the one
record of validated run sizes (single runs and sweeps build it there).
:func:`spectrum` runs an :class:`~lyapax._engine.abstract.AbstractProblem`
through the Benettin kernel and assembles the :class:`LyapunovResult`.
"""

from __future__ import annotations

import math
import time
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import finite, progress, validate
from lyapax._engine.abstract import AbstractProblem, EngineView, as_step
from lyapax._engine.benettin import (
    BenettinState,
    KernelOutput,
    Lengths,
    capacity,
    fresh_frame,
    run_benettin,
)
from lyapax._engine.options import RunOptions
from lyapax._engine.precision import (
    EMULATED_FLOAT64,
    as_run_time_values,
    constant_minus_element,
    emulated_float64,
    precision_view,
)
from lyapax._engine.problem import LyapunovCheckpoint
from lyapax._engine.shapes import (
    Exponents,
    History,
    Saved,
    SaveTimes,
    Scalar,
    Seed,
    Times,
)
from lyapax._engine.summary import finish, finish_program, keep_rows, split_rows
from lyapax._engine.tree import (
    Static,
    leaf_shapes,
    merge_static,
    read_fields,
    split_static,
)
from lyapax._engine.warn import warn_at_caller

__all__ = [
    "LyapunovCheckpoint",
    "LyapunovResult",
    "RunArgs",
    "RunOptions",
    "default_k",
    "run_args",
    "spectrum",
]


class LyapunovResult(NamedTuple):
    """Result of a Lyapunov run.

    ``exponents (k,)`` descending (1/time units); ``history (n_renorm, k)``
    running estimates after each renormalisation, columns ordered like the final
    row; ``times (n_renorm,)`` elapsed time since the transient (offset by the
    checkpoint on resume); ``checkpoint`` to resume; ``trajectory
    (n_steps // decimate, d)`` and ``save_times`` when ``save_states=True``;
    ``stderr (k,)`` standard error of each exponent (same order), NaN when the
    run has fewer than 2 renormalisation blocks; ``nonfinite``: None, or a
    :class:`~lyapax._engine.finite.NonFinite` saying when the run became
    non-finite (a ``UserWarning`` says so too).

    ``exponents``, ``stderr`` and the checkpoint are JAX arrays. The rows of
    a single run (``history``, ``times``, ``trajectory``, ``save_times``) are
    NumPy arrays: they are cut to the run's length on the host, so that runs
    of any length share one compiled program (``jnp.asarray`` puts them on a
    device). Sweeps place their rows on the devices of the batch. Inside a
    caller's ``jit``/``vmap`` every field is a traced JAX array.

    ``stderr`` comes from non-overlapping batch means over the renormalisation
    blocks with the square-root rule: the ``n`` blocks form
    ``b = max(2, floor(sqrt(n)))`` consecutive batches of ``n // b`` blocks, so
    batches lengthen (and decorrelate) as the run grows while enough remain to
    estimate a variance; the error is ``sqrt(tau * var(batch rates) / T)`` with
    ``tau`` the batch duration and ``T`` the elapsed time (see
    :mod:`lyapax._engine.stats`). It measures statistical scatter only, not the
    bias of a finite step ``dt``.
    """

    exponents: Exponents
    history: History
    times: Times
    checkpoint: Any
    trajectory: Saved | None = None
    save_times: SaveTimes | None = None
    stderr: Exponents | None = None
    nonfinite: Any = None


class RunArgs(NamedTuple):
    """Validated run sizes (see :func:`run_args`)."""

    n_steps: int
    k: int
    renorm_every: int
    decimate: int
    t_transient: float
    n_transient_blocks: int
    save_states: bool

    @property
    def n_blocks(self) -> int:
        """Measured renormalisation blocks."""
        return self.n_steps // self.renorm_every

    @property
    def n_saved(self) -> int:
        """Saved states (0 unless ``save_states``)."""
        return self.n_steps // self.decimate if self.save_states else 0

    def kernel_lengths(
        self, traced: bool = False, static_every: bool = False
    ) -> KernelSizes:
        """The run lengths and buffer sizes of
        :func:`~lyapax._engine.benettin.run_benettin`: lengths as data and
        buffers rounded up to powers of two (runs of different lengths share
        one compiled program), with ``renorm_every`` also compiled in when
        ``static_every``; or, when the caller is being traced (``traced``),
        lengths and buffers exactly as compiled constants."""
        ints = (
            self.n_blocks,
            self.n_transient_blocks,
            self.renorm_every,
            self.decimate,
        )
        if traced:
            return KernelSizes(Lengths(*ints), self.n_blocks, self.n_saved)
        return KernelSizes(
            Lengths.pack(*ints),
            capacity(self.n_blocks),
            capacity(self.n_saved) if self.save_states else 0,
            self.renorm_every if static_every else None,
        )


class KernelSizes(NamedTuple):
    """What :meth:`RunArgs.kernel_lengths` decides for the kernel:
    ``lengths`` (packed by :meth:`~lyapax._engine.benettin.Lengths.pack`, or
    :class:`~lyapax._engine.benettin.Lengths` of Python ints compiled in),
    the growth buffer's ``capacity`` and the saved-state buffer's
    ``save_capacity`` (rows), and ``static_every`` (``renorm_every``
    compiled in, or None)."""

    lengths: Any
    capacity: int
    save_capacity: int
    static_every: int | None = None


def make_checkpoint(
    view: EngineView, carry: BenettinState | RunOutput, elapsed: Any, dt: Any
) -> Any:
    """The problem's checkpoint (``view.checkpoint``) of a run that ended in
    ``carry`` (its ``state``, ``Y``, ``cum`` and ``step``) after ``elapsed``
    model time, with step ``dt``."""
    return view.checkpoint(carry.state, carry.Y, carry.cum, carry.step, elapsed, dt)


def checkpoint_template(view: EngineView, k: int) -> Any:
    """The shapes and dtypes (``jax.ShapeDtypeStruct`` leaves) of the
    checkpoint a run of ``view`` tracking ``k`` exponents makes: what a file
    must hold to resume it."""
    d, dtype = int(view.z0.shape[0]), view.z0.dtype

    def shaped(*shape: int, of: Any = dtype) -> Any:
        return jax.ShapeDtypeStruct(shape, of)

    carry = BenettinState(shaped(d), shaped(d, k), shaped(k), shaped(of=jnp.int32))
    dt = jnp.asarray(view.dt, dtype)
    return jax.eval_shape(
        lambda carry, elapsed: make_checkpoint(view, carry, elapsed, dt),
        carry,
        shaped(),
    )


def check_multiple(name: str, n: int, renorm_every: int) -> None:
    """``n`` steps must be whole renormalisation blocks."""
    if n % renorm_every:
        raise ValueError(
            f"{name}={n} must be a multiple of renorm_every={renorm_every}"
        )


def transient_blocks(
    t_transient: Any, dt: Any, renorm_every: int, min_steps: int = 0
) -> tuple[float, int]:
    """``(t_transient, blocks)``: ``renorm_every * max(1, round(t/dt/renorm_every))``
    steps when ``t_transient > 0``, raised to at least ``min_steps`` steps
    (rounded up to whole blocks)."""
    if validate.is_traced(t_transient):
        raise TypeError("t_transient must be a concrete number, not a traced value")
    t_transient = float(t_transient)
    if not np.isfinite(t_transient) or t_transient < 0:
        raise ValueError(f"t_transient must be a finite number >= 0; got {t_transient}")
    blocks = 0
    if t_transient > 0:
        dt_value = validate.concrete_float("dt", dt, why="when t_transient > 0")
        blocks = max(1, round(t_transient / dt_value / renorm_every))
    return t_transient, max(blocks, math.ceil(min_steps / renorm_every))


def default_k(view: EngineView, k: Any, resume: Any) -> Any:
    """``k`` as given; else the checkpoint's, else the present-state size (with
    a warning when the phase space is larger, as for delay equations)."""
    if k is not None:
        return k
    if resume is not None:
        return int(jnp.shape(resume.Y)[1])
    d = int(view.z0.shape[0])
    if view.n_state < d:
        warn_at_caller(
            f"k not given: computing the leading k={view.n_state} exponents (the "
            "size of the present state); the discretised phase space (state + "
            f"history buffer) has dimension {d}. Pass k= to choose."
        )
    return view.n_state


def _warn_constant_minus(view: EngineView) -> None:
    """Name a constant minus a state element in the step's program, which a
    TPU's emulated float64 computes about 1.8e-8 off. The step's parameters
    and ``dt`` enter as run-time values, as they do in the run."""
    dynamic, static = split_static(view.step)
    # The search traces the step (~5 ms): once per step structure, as the run
    # compiles once per structure.
    key = (static, leaf_shapes(dynamic), jnp.shape(view.z0), jnp.result_type(view.z0))
    try:
        found = _CONSTANT_MINUS_FOUND[key]
    except KeyError:
        found = _search_constant_minus(dynamic, static, view.z0)
        if len(_CONSTANT_MINUS_FOUND) >= _CONSTANT_MINUS_KEPT:
            del _CONSTANT_MINUS_FOUND[next(iter(_CONSTANT_MINUS_FOUND))]
        _CONSTANT_MINUS_FOUND[key] = found
    except TypeError:  # a static leaf that cannot be hashed: search every call
        found = _search_constant_minus(dynamic, static, view.z0)
    if found is not None:
        warn_at_caller(
            f"the step computes {found} with x of one element (such as a "
            "state's x[i]): a TPU's emulated float64 computes a constant minus "
            "a one-element array about 1.8e-8 relative off (measured: 28.0 - x "
            "at x = 2.1); write it as -x + c, or pass c as a parameter "
            "(docs/method.md, 'Precision')"
        )


def _search_constant_minus(dynamic: list[Any], static: Any, z0: Any) -> str | None:
    def advance(dyn: list[Any], z: Any, step: Any) -> Any:
        return as_step(merge_static(dyn, static)).advance(z, step)

    try:
        return constant_minus_element(advance, dynamic, z0, jnp.int32(0))
    except Exception:  # a diagnosis: the run itself says what is wrong, if anything
        return None


#: What :func:`_warn_constant_minus` found, by step structure (oldest dropped).
_CONSTANT_MINUS_FOUND: dict[Any, str | None] = {}
_CONSTANT_MINUS_KEPT = 64


def run_args(
    options: RunOptions,
    *,
    d: int,
    dt: Any,
    n_steps: Any,
    k: Any,
    dtype: Any = None,
    min_transient_steps: int = 0,
) -> RunArgs:
    """The run sizes of ``options`` for a phase space of size ``d`` (``k``
    already defaulted).

    ``min_transient_steps`` raises the transient to at least that many steps,
    rounded up to whole renormalisation blocks (delay equations: one history).

    Raises:
        TypeError / ValueError: naming the argument, its value and what is allowed.
    """
    renorm_every, saving = options.renorm.every, options.saving
    n_steps = validate.as_int("n_steps", n_steps, minimum=1)
    check_multiple("n_steps", n_steps, renorm_every)
    k = validate.as_int("k", k)
    if not 1 <= k <= d:
        raise ValueError(f"k must satisfy 1 <= k <= d={d}; got k={k}")
    if saving.states and renorm_every % saving.decimate:
        raise ValueError(
            f"decimate={saving.decimate} must divide renorm_every={renorm_every} "
            "when save_states=True"
        )
    t_transient, n_transient_blocks = transient_blocks(
        options.t_transient, dt, renorm_every, min_transient_steps
    )
    if dtype == jnp.float32 and not jax.config.jax_enable_x64:  # type: ignore[attr-defined]
        warn_at_caller(
            "state0 is float32 and jax_enable_x64 is off: exponents will carry "
            "single-precision errors; call jax.config.update('jax_enable_x64', True)"
        )
    if emulated_float64(dtype):
        warn_at_caller(EMULATED_FLOAT64)
    return RunArgs(
        n_steps,
        k,
        renorm_every,
        saving.decimate,
        t_transient,
        n_transient_blocks,
        saving.states,
    )


class RunSetup(NamedTuple):
    """What :func:`setup_run` decides: the run sizes and the kernel's QR method."""

    args: RunArgs
    method: str


def setup_run(
    options: RunOptions,
    view: EngineView | None,
    *,
    n_steps: Any,
    batched: bool,
    d: int | None = None,
    dt: Any = None,
    dtype: Any = None,
    min_transient_steps: int | None = None,
) -> RunSetup:
    """The set-up every spectrum-like run makes: ``k`` defaulted
    (:func:`default_k` from ``view`` and ``options.resume``; ``d`` without a
    view), the renormalisation's QR method, the checked run sizes
    (:func:`run_args`). ``d``, ``dt``, ``dtype`` and ``min_transient_steps``
    default to the view's (a run without a view passes all four).

    Raises:
        TypeError / ValueError: as :func:`run_args`; no view and no ``d`` or
            ``min_transient_steps``.
    """
    if view is not None:
        d = int(view.z0.shape[0]) if d is None else d
        dt = view.dt if dt is None else dt
        dtype = view.z0.dtype if dtype is None else dtype
        if min_transient_steps is None:
            min_transient_steps = view.min_transient_steps
    if d is None or min_transient_steps is None:
        raise TypeError(
            "setup_run without a view needs d, dt, dtype and min_transient_steps"
        )
    k = options.k
    if k is None:
        k = d if view is None else default_k(view, k, options.resume)
    args = run_args(
        options,
        d=d,
        dt=dt,
        n_steps=n_steps,
        k=k,
        dtype=dtype,
        min_transient_steps=min_transient_steps,
    )
    if view is not None and emulated_float64(view.z0.dtype):
        _warn_constant_minus(view)
    if view is not None and view.check_steps is not None:
        # The global index after the run's last step: a resumed run goes on
        # from its checkpoint's counter.
        first = getattr(options.resume, "step", None)
        traced = first is None or validate.is_traced(first)
        first = 0 if traced else int(np.max(np.asarray(first)))
        blocks = args.n_blocks + args.n_transient_blocks
        view.check_steps(first + blocks * args.renorm_every)
    return RunSetup(args, options.renorm.method(batched=batched, d=d, k=args.k))


def _check_resume(resume: Any, d: int, k: int, dt: Any, t_tr: float) -> None:
    if t_tr > 0:
        raise ValueError(
            f"t_transient={t_tr} and resume are mutually exclusive: a resumed run "
            "continues a run whose transient is already over"
        )
    Y = jnp.asarray(resume.Y)
    if Y.ndim != 2 or Y.shape[0] != d:
        raise ValueError(
            f"resume checkpoint has a frame of shape {Y.shape}, but the state has "
            f"dimension d={d}; the shapes of a resumed run must match"
        )
    if Y.shape[1] != k:
        raise ValueError(
            f"resume checkpoint tracks k={Y.shape[1]} exponents (its tracked "
            f"dimension), but k={k} was requested; pass the same k (or omit k)"
        )
    if not (validate.is_traced(dt) or validate.is_traced(resume.dt)):
        if not np.isclose(float(resume.dt), float(dt), rtol=1e-12, atol=0.0):
            raise ValueError(
                f"resume checkpoint was made with dt={float(resume.dt)!r} "
                f"(resume.dt), but this run uses dt={float(dt)!r}; a resumed run "
                "must keep its step"
            )


def spectrum(
    problem: AbstractProblem,
    n_steps: Any,
    options: RunOptions,
    *,
    precision: Any = None,
) -> LyapunovResult:
    """Validate the run, start it (fresh or from ``options.resume``), run the
    kernel.

    ``precision`` is that of :func:`lyapax._engine.precision.resolve`.
    """
    view = problem.for_engine()
    view, sums = precision_view(view, precision)
    d = int(view.z0.shape[0])
    resume = options.resume
    args, method = setup_run(
        options,
        view,
        n_steps=n_steps,
        min_transient_steps=0 if resume is not None else None,
        batched=False,
    )
    dtype = view.z0.dtype
    if resume is None:
        z0, t0, step0 = view.z0, 0.0, 0
        start: Start = options.seed
        if sums is not None:  # precision="mixed": the sums in their own dtype
            start = fresh_frame(start, d=d, k=args.k, dtype=dtype, sums=sums)
    else:
        kind = view.checkpoint_type
        if kind is not None and not isinstance(resume, kind):
            raise TypeError(
                f"resume must be the {kind.__name__} of a previous result "
                f"(result.checkpoint); got {type(resume).__name__}"
            )
        _check_resume(resume, d, args.k, view.dt, args.t_transient)
        z0, step0 = view.resume_point(resume)
        z0 = jnp.asarray(z0, dtype)  # precision= may have cast the state
        start = (
            jnp.asarray(resume.Y, dtype=dtype),
            jnp.asarray(resume.cum_log_growth, dtype=sums or dtype),
        )
        t0 = resume.elapsed_time
    dynamic, static = split_static(view.step)
    begin = RunStart(dynamic, static, z0, start, step0, t0, view.dt)
    execution = Execution.of(
        options, "lyapunov_spectrum", dynamic, z0, start, step0, view.dt, t0
    )
    out, est = execution.run(begin, args, method)
    checkpoint = make_checkpoint(view, out, est.elapsed, view.dt)
    n_saved = args.n_saved
    trajectory = save_at = None
    if args.save_states:
        trajectory = keep_rows(out.saved, n_saved, axis=-2, cols=view.n_state)
        save_at = save_times(view.dt, args.decimate, t0, n_saved)
    # -- non-finite runs: read from the rows the run returns --
    nonfinite = finite.nonfinite_report(
        est.history,
        est.times,
        out.state,
        renorm_every=args.renorm_every,
        n_transient_blocks=args.n_transient_blocks,
        dt=view.dt,
        state_finite=est.state_finite,
    )
    finite.warn_or_raise(nonfinite, check_finite=options.check_finite)
    # -- end non-finite runs --
    return LyapunovResult(
        est.exponents,
        est.history,
        est.times,
        checkpoint,
        trajectory,
        save_at,
        est.stderr,
        nonfinite,
    )


#: A fresh run's seed, or a resumed run's ``(Y (d, k), cum_log_growth (k,))``.
Start = Seed | tuple[jax.Array, jax.Array]
#: The step counter at the start (a checkpoint's, traced, or 0).
StepCount = int | jax.Array
#: Elapsed model time at the start (a checkpoint's, or 0.0).
Time = float | jax.Array


class RunStart(NamedTuple):
    """Where a run starts: the step split by
    :func:`~lyapax._engine.tree.split_static` (``dynamic``, ``static``), the
    point ``z0 (d,)``, the frame's ``start``, the step counter ``step0``, the
    elapsed time ``t0`` and the step ``dt``."""

    dynamic: list[Any]
    static: Static
    z0: jax.Array
    start: Start
    step0: StepCount
    t0: Time
    dt: Scalar


def _start_frame(start: Start, z0: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
    """``(Y0 (d, k), cum0 (k,))``: a resumed run's ``start``, or a fresh
    frame drawn from the seed ``start``."""
    if isinstance(start, tuple):
        return start
    return fresh_frame(start, d=z0.shape[0], k=k, dtype=z0.dtype)


class RunEstimates(NamedTuple):
    """The estimates of one run as its result holds them: :class:`Estimates`'
    fields with ``history (n_blocks, k)`` and ``times (n_blocks,)`` cut to the
    run's rows (host NumPy arrays, traced arrays in a caller's trace), and
    ``state_finite``: whether the final state is finite (None when traced).
    A ``NamedTuple``, built on the host once per call (an ``equinox.Module``
    costs ~20 us to build)."""

    exponents: Any
    stderr: Any
    elapsed: Any
    history: Any
    times: Any
    state_finite: Any


class RunOutput(NamedTuple):
    """The kernel's output as a run's result reads it: the final carry's
    ``state``, ``Y``, ``cum`` and ``step`` (what :func:`make_checkpoint`
    reads) and the ``saved`` states buffer (or None), the carry's fields
    read once (:meth:`of`) from the
    :class:`~lyapax._engine.benettin.KernelOutput`. A ``NamedTuple``: its
    fields cost nothing to read on the host."""

    state: Any
    Y: Any
    cum: Any
    step: Any
    saved: Any

    @classmethod
    def of(cls, carry: BenettinState, saved: Any) -> RunOutput:
        """The record of a run that ended in ``carry`` with ``saved``."""
        state, Y, cum, step = read_fields(carry, "state", "Y", "cum", "step")
        return cls(state, Y, cum, step, saved)


def warn_traced_progress(caller: str) -> None:
    """A progress bar was asked for under a caller's trace: say it is off."""
    warn_at_caller(
        f"{caller}(progress=...) has no effect under jax.jit/jax.vmap/jax.grad: "
        "the run's loop is part of the caller's program and cannot report from "
        "it; call it outside the transformation for a progress bar"
    )


class Execution(NamedTuple):
    """How a run executes, chosen once by its entry point from the arguments
    it was called with (:meth:`of`) and handed to the engine.

    The loop, its transient rule and the record of results are the same
    either way (:func:`~lyapax._engine.benettin.run_benettin`,
    :class:`RunEstimates`). What differs is declared here:

    - ``in_trace=False``: the run is launched from the host. Its lengths are
      data and its buffers rounded up (runs of any length share one
      program), the rows are cut on the host, and a ``progress`` bar may
      run it in pieces.
    - ``in_trace=True``: the run is part of a caller's ``jit``/``vmap``/
      ``grad``. Its lengths are compiled in, so every loop is a ``lax.scan``
      that reverse mode differentiates; rows stay traced; no progress bar.

    A ``NamedTuple`` (built once per call, on the host).
    """

    in_trace: bool
    progress: Any = None
    static_every: bool = False
    caller: str = "lyapunov_spectrum"

    @classmethod
    def of(cls, options: RunOptions, caller: str, *arguments: Any) -> Execution:
        """The execution of a run called with ``arguments`` (and ``options``):
        in a caller's trace when one of them is traced or the call sits in a
        transformation (see :func:`~lyapax._engine.validate.under_transformation`)."""
        in_trace = validate.under_transformation(*arguments)
        return cls(in_trace, options.progress, options.renorm.static, caller)

    def run(
        self, run: RunStart, args: RunArgs, qr: str
    ) -> tuple[RunOutput, RunEstimates]:
        """The kernel's output and the estimates of ``run``."""
        Y0, cum0 = _start_frame(run.start, run.z0, args.k)
        if self.in_trace:
            if self.progress is not None:
                warn_traced_progress(self.caller)
            return _traced_run(run, args, qr, Y0, cum0)
        total = args.n_blocks + args.n_transient_blocks
        with progress.Bar(
            self.progress, total * args.renorm_every, self.caller, "step"
        ) as bar:
            # OpenBLAS's threads: held by the public entry points
            # (lyapax._engine.blas_threads.holds_one_blas_thread).
            return _compiled_run(run, args, qr, Y0, cum0, bar, self.static_every)


def _compiled_run(
    run: RunStart,
    args: RunArgs,
    qr: str,
    Y0: jax.Array,
    cum0: jax.Array,
    bar: progress.Bar,
    static_every: bool,
) -> tuple[RunOutput, RunEstimates]:
    """The run as three compiled programs: the initial frame (memoised, see
    :func:`~lyapax._engine.benettin.fresh_frame`) and the finishing program are
    cached by shape and shared by every step function, so a new step function
    compiles only its loop (folding them into the kernel would save their
    launches but cost each new closure ~0.4 s of compile). With an active
    progress ``bar`` the kernel runs in pieces (:func:`_run_in_pieces`)."""
    z0 = run.z0
    sizes = args.kernel_lengths(static_every=static_every)
    lengths = sizes.lengths
    step0 = np.int32(run.step0)
    kernel = partial(
        run_benettin,
        run.dynamic,
        static=run.static,
        qr=qr,
        capacity=sizes.capacity,
        save_capacity=sizes.save_capacity,
        static_every=sizes.static_every,
    )
    if not bar.active:
        out = kernel(z0, Y0, cum0, step0, lengths)
    else:
        steps = (args.n_blocks + args.n_transient_blocks) * args.renorm_every
        shapes = leaf_shapes(jax.tree.leaves((run.dynamic, z0, Y0)))
        key = (run.static, shapes, qr, static_every)
        rate = _STEP_SECONDS.get(key)
        if rate is None or rate * steps > PIECE_SECONDS:
            out = _run_in_pieces(kernel, (z0, Y0, cum0, step0), args, bar, key)
        else:  # a short run (timed before): one piece
            out = kernel(z0, Y0, cum0, step0, lengths)
            bar.to(steps)
    # Each record's fields read once (equinox's attribute reads cost ~0.3 us).
    carry, cum, saved = read_fields(out, "carry", "cum", "saved")
    final = RunOutput.of(carry, saved)
    scalars = np.array([run.dt, run.t0], dtype=z0.dtype)
    est = finish_program(cum, cum0, lengths, scalars, final.state)
    exponents, stderr, elapsed, rows, state_finite = read_fields(
        est, "exponents", "stderr", "elapsed", "rows", "state_finite"
    )
    history, times = split_rows(rows, args.n_blocks)
    return final, RunEstimates(
        exponents, stderr, elapsed, history, times, np.asarray(state_finite)
    )


#: Wall time aimed at per piece of a run with a progress bar (one bar update,
#: one program launch and one wait each); the first piece of a program not
#: timed before is a 64th of the run. A run predicted to take less than this
#: runs in one piece.
PIECE_SECONDS = 0.5

#: Seconds per step measured by the last pieced run of each program (its
#: step structure, shapes, QR method), at most :data:`_MAX_RATES` of them.
_STEP_SECONDS: dict[Any, float] = {}
_MAX_RATES = 256


def _run_in_pieces(
    kernel: Any, start: tuple, args: RunArgs, bar: Any, key: Any
) -> KernelOutput:
    """The kernel's output for the whole run, computed as consecutive pieces of
    whole blocks, each continuing the previous piece's carry (the same program
    and the same arithmetic as one call, so the numbers are identical), with
    the bar moved after each piece. Pieces are sized to take about
    :data:`PIECE_SECONDS`, from the time the previous one took (kept in
    :data:`_STEP_SECONDS` under ``key`` for the next run)."""
    every, decimate = args.renorm_every, args.decimate
    n_transient, total = (
        args.n_transient_blocks,
        args.n_transient_blocks + args.n_blocks,
    )
    cum_rows: Any = None
    saved: Any = None
    groups = every // decimate if args.save_states else 0
    rate = _STEP_SECONDS.get(key)
    piece = max(1, total // 64 if rate is None else int(PIECE_SECONDS / rate / every))
    carry, done, measured = start, 0, 0
    while done < total:
        m = min(piece, total - done)
        tr = max(0, min(m, n_transient - done))
        began = time.perf_counter()
        out = kernel(*carry, Lengths.pack(m - tr, tr, every, decimate))
        rows = np.asarray(out.cum)  # waits for the piece
        took = time.perf_counter() - began
        if cum_rows is None:
            cum_rows = np.zeros_like(rows)
            if groups:
                saved = np.zeros_like(np.asarray(out.saved))
        cum_rows[measured : measured + m - tr] = rows[: m - tr]
        if groups:
            lo, n = measured * groups, (m - tr) * groups
            saved[lo : lo + n] = np.asarray(out.saved)[:n]
        c = out.carry
        carry = (c.state, c.Y, c.cum, c.step)
        done, measured = done + m, measured + m - tr
        bar.to(done * every)
        piece = max(1, int(PIECE_SECONDS * m / max(took, 1e-9)))
        _STEP_SECONDS.pop(key, None)
        if len(_STEP_SECONDS) >= _MAX_RATES:
            _STEP_SECONDS.pop(next(iter(_STEP_SECONDS)))
        _STEP_SECONDS[key] = took / (m * every)
    return KernelOutput(out.carry, cum_rows, saved)


def _traced_run(
    run: RunStart, args: RunArgs, qr: str, Y0: jax.Array, cum0: jax.Array
) -> tuple[RunOutput, RunEstimates]:
    """The run inside a caller's trace (a user's ``jit``, ``vmap`` or ``grad``):
    lengths compiled in as constants, loops that reverse mode can differentiate."""
    sizes = args.kernel_lengths(traced=True)
    dynamic, z0, Y0, cum0 = as_run_time_values((run.dynamic, run.z0, Y0, cum0))
    out = run_benettin(
        dynamic,
        z0,
        Y0,
        cum0,
        jnp.asarray(run.step0, jnp.int32),
        static=run.static,
        qr=qr,
        static_lengths=sizes.lengths,
        capacity=sizes.capacity,
        save_capacity=sizes.save_capacity,
    )
    # Counts as traced values, like the compiled program's.
    counts = jnp.asarray([args.n_blocks, args.renorm_every], jnp.int32)
    est = finish(out.cum, cum0, counts[0], run.dt, counts[1], run.t0)
    history = keep_rows(est.history, args.n_blocks, axis=-2)
    times = keep_rows(est.times, args.n_blocks, axis=-1)
    return RunOutput.of(out.carry, out.saved), RunEstimates(
        est.exponents, est.stderr, est.elapsed, history, times, None
    )


def save_times(dt: Scalar, decimate: int, t0: Time, n_saved: int) -> Any:
    """Times ``(n_saved,)`` of the saved states (NumPy unless traced)."""
    if validate.is_traced((dt, t0)):
        return t0 + dt * decimate * jnp.arange(1, n_saved + 1, dtype=float)
    steps = np.arange(1, n_saved + 1, dtype=np.result_type(float))
    return np.asarray(t0) + np.asarray(dt) * decimate * steps
