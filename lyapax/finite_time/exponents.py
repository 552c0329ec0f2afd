"""Finite-time Lyapunov exponents over consecutive windows of one Benettin run.

The engine records the accumulated ``log|diag R|`` after every
renormalisation; the exponents over a window of ``m`` renormalisation blocks
are the differences of that record ``m`` blocks apart, divided by the
window's duration. No second integration: the windows come out of the run
that also gives the long-time exponents. With ``state0_batch`` or
``params_batch`` the ensemble runs as one sweep program.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import numpy as np
from jaxtyping import Array, Float

from lyapax._engine import validate
from lyapax._engine.abstract import AbstractProblem
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.problem import as_problem, is_problem
from lyapax._engine.shapes import Scalar, StateLike, StepFn
from lyapax._internal.batching import host_array
from lyapax._internal.rows import ProblemFamily
from lyapax.core import lyapunov_spectrum
from lyapax.sweep import sweep_lyapunov_spectrum

__all__ = ["FiniteTimeResult", "finite_time_exponents"]


class FiniteTimeResult(NamedTuple):
    """Finite-time exponents over consecutive windows.

    ``times (n_windows,)``: end of each window (model time since the
    transient); ``exponents (n_windows, k)`` (an ensemble: ``(n, n_windows,
    k)``), columns ordered like ``lyapunov`` (the exponents of the whole run,
    ``(k,)`` or ``(n, k)``, descending); ``window``: the window's duration.
    """

    times: Float[Array, " n_windows"]
    exponents: Float[Array, "*batch n_windows k"]
    window: float
    lyapunov: Float[Array, "*batch k"]

    def samples(self) -> np.ndarray:
        """Every window of every member, ``(n_samples, k)``."""
        ex = np.asarray(self.exponents)
        return ex.reshape(-1, ex.shape[-1])

    def mean(self) -> np.ndarray:
        """Mean finite-time exponent over all windows (and members), ``(k,)``."""
        return self.samples().mean(axis=0)

    def std(self) -> np.ndarray:
        """Standard deviation (``ddof=1``) over all windows (and members), ``(k,)``."""
        return self.samples().std(axis=0, ddof=1)

    def histogram(
        self, column: int = 0, bins: Any = 50, density: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(values (n_bins,), edges (n_bins + 1,))`` of exponent ``column``
        (``numpy.histogram``; ``density=True`` integrates to 1), ready for
        ``plt.stairs(values, edges)``."""
        return np.histogram(self.samples()[:, column], bins=bins, density=density)


def window_blocks(window: Any, dt: Any, renorm_every: int) -> int:
    """Renormalisation blocks in one window of ``window`` time units.

    Raises:
        ValueError: ``window`` not positive, or not a whole multiple of the
            renormalisation interval ``dt * renorm_every``.
    """
    window = validate.positive_float(
        "window", window, allowed="a finite time > 0", why="(it sets the windows)"
    )
    interval = validate.concrete_float("dt", dt, why="for finite-time windows")
    interval *= renorm_every
    blocks = round(window / interval)
    if blocks < 1 or abs(blocks * interval - window) > 1e-9 * window:
        raise ValueError(
            f"window={window!r} must be a whole multiple of the renormalisation "
            f"interval dt * renorm_every = {interval!r}; e.g. window="
            f"{max(1, blocks) * interval!r}"
        )
    return blocks


def whole_windows(n_steps: Any, steps: int) -> None:
    """``n_steps`` must be whole windows of ``steps`` steps."""
    if isinstance(n_steps, int | np.integer) and n_steps % steps:
        raise ValueError(
            f"n_steps={n_steps} is not a whole number of windows of {steps} "
            f"steps (window / dt); pass n_steps={max(1, n_steps // steps) * steps}"
        )


def windows_of(history: Any, times: Any, blocks: int, window: float):
    """``(end times (n_windows,), exponents (..., n_windows, k))`` from running
    estimates ``history (..., n_blocks, k)`` at ``times (..., n_blocks)``
    (elapsed time from 0): the accumulated growth is ``history * times``.
    The rows of a multi-process ensemble are gathered from every process
    first (a collective: every process calls this)."""
    history, times = np.asarray(host_array(history)), np.asarray(host_array(times))
    n_blocks = history.shape[-2]
    if n_blocks % blocks:
        raise ValueError(
            f"the run has {n_blocks} renormalisation blocks, not a whole number "
            f"of windows of {blocks} blocks; make n_steps a multiple of "
            f"{blocks} * renorm_every"
        )
    ends = np.arange(blocks - 1, n_blocks, blocks)
    cum = history[..., ends, :] * times[..., ends, None]
    zero = np.zeros_like(cum[..., :1, :])
    growth = np.diff(np.concatenate([zero, cum], axis=-2), axis=-2)
    return np.asarray(times)[(0,) * (times.ndim - 1)][ends], growth / window


@holds_one_blas_thread
def finite_time_exponents(
    step_fn_or_problem: AbstractProblem | StepFn,
    state0: StateLike | int | None = None,
    dt: Scalar | None = None,
    n_steps: int | None = None,
    window: float | None = None,
    k: int | None = None,
    renorm_every: int = 1,
    t_transient: float = 0.0,
    seed: int = 0,
    *,
    state0_batch: Any = None,
    params_batch: Any = None,
    batch_size: int | None = None,
    qr: str = "auto",
) -> FiniteTimeResult:
    """Lyapunov exponents over consecutive windows of ``window`` time units.

    Call forms as :func:`lyapax.lyapunov_spectrum`: ``(problem, n_steps,
    window=...)`` or ``(step_fn, state0, dt, n_steps, window)`` (maps:
    ``dt=1``). The tangent frame runs on from window to window (it is not
    restarted), so after the transient each window's exponents are the growth
    rates of the aligned frame, and their mean over the run is the run's
    exponents. Arguments not listed here mean what they mean in
    :func:`lyapax.lyapunov_spectrum`.

    Args:
        window: window duration (model time), a positive multiple of
            ``dt * renorm_every``; ``n_steps`` must be whole windows.
        state0_batch: ``(n, d)`` initial states of an ensemble.
        params_batch: a parameter batch for ``step_fn(x, params)`` or a
            :func:`lyapax.sweep.problem_family`. Either makes an ensemble,
            which runs as one
            :func:`lyapax.sweep.sweep_lyapunov_spectrum` program
            (``batch_size`` chunks it).

    Returns:
        :class:`FiniteTimeResult` with ``times (n_windows,)`` and ``exponents
        (n_windows, k)`` (``(n, n_windows, k)`` for an ensemble).

    Raises:
        ValueError: ``window`` not a multiple of the renormalisation interval,
            ``n_steps`` not whole windows, and the checks of
            ``lyapunov_spectrum``. TypeError: missing arguments.
    """
    if window is None:
        raise TypeError("finite_time_exponents requires window= (in time units)")
    ensemble = state0_batch is not None or params_batch is not None
    run: dict[str, Any] = dict(
        k=k, renorm_every=renorm_every, t_transient=t_transient, seed=seed
    )
    run["qr"] = qr
    if not ensemble:
        obj = step_fn_or_problem
        if is_problem(obj):
            step_dt = as_problem(obj).for_engine().dt
            steps = state0 if n_steps is None else n_steps
        else:
            step_dt, steps = validate.positive_dt(dt), n_steps
        blocks = window_blocks(window, step_dt, renorm_every)
        whole_windows(steps, blocks * renorm_every)
        result = lyapunov_spectrum(obj, state0, dt, n_steps, **run)
    else:
        if isinstance(step_fn_or_problem, ProblemFamily) or is_problem(
            step_fn_or_problem
        ):
            if state0 is not None and n_steps is None:
                n_steps, state0 = cast(Any, state0), None
        if n_steps is None:
            raise TypeError("finite_time_exponents requires n_steps")
        result = sweep_lyapunov_spectrum(
            step_fn_or_problem,
            state0,
            params_batch,
            dt,
            n_steps,
            state0_batch=state0_batch,
            batch_size=batch_size,
            **run,
        )
        view_dt = np.asarray(host_array(result.checkpoint.dt)).reshape(-1)[0]
        blocks = window_blocks(window, view_dt, renorm_every)
    times, exponents = windows_of(result.history, result.times, blocks, float(window))
    # An ensemble's rows from every process, like the windows (NumPy).
    lyap = host_array(result.exponents) if ensemble else result.exponents
    return FiniteTimeResult(times, exponents, float(window), lyap)
