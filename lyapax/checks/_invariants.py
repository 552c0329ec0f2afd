"""Invariants a Lyapunov spectrum must satisfy, checked along the run itself.

:func:`check_invariants` continues a finished run from its checkpoint for a
window of steps in a loop of its own (the engine's compiled kernel is not
touched, so a run that is not checked pays nothing). Along that window it
pushes the run's own frame through the step's tangents exactly as the engine
does (re-orthonormalised every step), and compares with references that do
not use the step's derivative rules: central finite differences of the
*state update* and of the vector field. A ``stop_gradient``, a wrong
``custom_jvp`` or a fused tangent that disagrees with the state update shows
up as a failed check.

Checks (each a :class:`Check`):

* ``tangents`` (every problem): the window's exponents from the step's
  tangents against those from finite differences of the step on the same
  frames (an identity; tolerance from the difference step);
* ``continuous_qr`` (flows with a known vector field ``f``): each exponent
  against ``<q_i^T Df q_i>`` on the same frames (trapezoidal time average;
  they agree up to the integrator's error, a relative tolerance);
* ``sum_rule`` (full spectra): the sum of the window's exponents against the
  time average of ``tr Df`` (exact from ``d`` difference pairs for small
  ``d``, Hutchinson's estimate with its standard error for larger ``d``), or
  of ``ln|det DPhi| / dt`` of the step for maps and steps without ``f``;
* ``zero_exponent`` (autonomous flows on a bounded attractor): the run's
  exponent nearest zero against zero within a few standard errors, next to
  the growth rate of ``|f(x(t))|`` (the flow direction) over the window; a
  window over which ``|f|`` changes steadily (a fixed point, a linear flow)
  is reported as not applicable.

Finite differences assume a smooth step: a map with a kink (the tent map)
can fail ``tangents`` on a step that lands within ``h ~ 1e-5`` of it.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine import validate
from lyapax._engine.abstract import declares_step_index
from lyapax._engine.benettin import renormalise, tangent_step
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.precision import growth_log
from lyapax._engine.problem import as_problem
from lyapax._engine.tree import merge_static, split_static
from lyapax._engine.warn import warn_at_caller

__all__ = ["Check", "InvariantReport", "check_invariants"]

#: Largest ``d`` for the exact trace / log-determinant (``2 d`` evaluations a
#: step); above it the trace is Hutchinson's estimate.
EXACT_MAX_D = 64
#: Standard errors within which a check passes.
N_SIGMA = 4.0


class Check(NamedTuple):
    """One invariant: ``value`` against ``expected`` (scalars or ``(k,)``).

    ``passed`` is None when the check does not apply (``note`` says why).
    ``tolerance`` is the largest accepted ``|value - expected|``.
    """

    name: str
    value: Any
    expected: Any
    stderr: Any
    tolerance: Any
    passed: bool | None
    note: str = ""


class InvariantReport(NamedTuple):
    """Checks of one run (see the module docstring).

    Attributes:
        checks: every :class:`Check`, applicable or not.
        window_steps: steps of the checking window.
        window_exponents: ``(k,)`` exponents of the window from the step's
            tangents (descending).
    """

    checks: tuple[Check, ...]
    window_steps: int
    window_exponents: np.ndarray

    def __getitem__(self, name: Any) -> Any:
        if isinstance(name, str):
            for check in self.checks:
                if check.name == name:
                    return check
            raise KeyError(f"no check named {name!r}; have {self.names}")
        return tuple.__getitem__(self, name)

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.checks]

    @property
    def failed(self) -> list[str]:
        """Names of the checks that failed."""
        return [c.name for c in self.checks if c.passed is False]

    @property
    def passed(self) -> bool:
        """Every applicable check passed."""
        return not self.failed

    def __str__(self) -> str:
        lines = [f"invariant checks over {self.window_steps} steps:"]
        for c in self.checks:
            verdict = {True: "pass", False: "FAIL", None: "n/a"}[c.passed]
            if c.passed is None:
                lines.append(f"  {c.name:14s} {verdict:4s}  {c.note}")
                continue
            value = np.array2string(np.asarray(c.value), precision=6)
            expected = np.array2string(np.asarray(c.expected), precision=6)
            lines.append(
                f"  {c.name:14s} {verdict:4s}  value {value}  expected {expected}"
                f"  tolerance {np.max(np.asarray(c.tolerance)):.2g}"
            )
        return "\n".join(lines)


def _fd_jvp(f: Any, x: jax.Array, V: jax.Array, h: jax.Array) -> jax.Array:
    """Central differences ``(f(x + h v) - f(x - h v)) / 2h`` for the columns
    ``v`` of ``V (d, c)``; ``(d, c)``. Independent of ``f``'s JVP rules."""

    def one(v):
        return (f(x + h * v) - f(x - h * v)) / (2.0 * h)

    return jax.vmap(one, in_axes=1, out_axes=1)(V)


def _fd_step(x: jax.Array) -> jax.Array:
    eps = jnp.finfo(x.dtype).eps
    return eps ** (1.0 / 3.0) * jnp.maximum(1.0, jnp.max(jnp.abs(x)))


class _Sums(eqx.Module):
    """The sums over the checking window, one field per quantity (a new
    check adds a field and the line of :func:`_window` that sums it)."""

    log_t: Any  # (k,) log|diag R| of the step's tangents
    log_fd: Any  # (k,) the same from differences of the state update
    qjq: Any  # (k,) sum of q_i^T Df q_i
    tr: Any  # sum of tr Df (or its estimate)
    tr_var: Any  # sum of the estimate's variance (Hutchinson)
    logdet: Any  # sum of ln|det DPhi|
    lf: Any  # sums of l_n = ln|Phi(x_n) - x_n| (flow direction), n l_n, l_n^2
    lf_n: Any
    lf_sq: Any

    @classmethod
    def zeros(cls, k: int, dtype: Any) -> _Sums:
        zero_k, zero = jnp.zeros(k, dtype), jnp.zeros((), dtype)
        return cls(
            log_t=zero_k,
            log_fd=zero_k,
            qjq=zero_k,
            tr=zero,
            tr_var=zero,
            logdet=zero,
            lf=zero,
            lf_n=zero,
            lf_sq=zero,
        )


class _RhsTerms(NamedTuple):
    """``q_i^T Df q_i (k,)``, ``tr Df`` and its variance at one point."""

    qjq: Any
    tr: Any
    tr_var: Any


class _WindowOut(eqx.Module):
    """What :func:`_window` returns: the window's :class:`_Sums` and the
    vector-field terms at its first and last points."""

    sums: _Sums
    first: _RhsTerms
    last: _RhsTerms


@partial(
    jax.jit,
    static_argnames=("static", "rhs_static", "indexed", "trace", "n_probes", "logdet"),
)
def _window(
    dynamic,
    rhs_dynamic,
    z0,
    Q0,
    step0,
    n_steps,
    key,
    *,
    static,
    rhs_static,
    indexed: bool,
    trace: str,
    n_probes: int,
    logdet: bool,
):
    step = merge_static(dynamic, static)
    rhs = None if rhs_static is None else merge_static(rhs_dynamic, rhs_static)
    d, k = Q0.shape
    dtype = z0.dtype

    def primal(i):
        return (lambda x: step(x, i)) if indexed else step

    def rhs_terms(z, Q, key):
        """``q_i^T Df q_i (k,)``, ``tr Df`` and its variance at ``z``."""
        if rhs is None:
            return _RhsTerms(
                jnp.zeros(k, dtype), jnp.zeros((), dtype), jnp.zeros((), dtype)
            )
        h = _fd_step(z)
        JQ = _fd_jvp(rhs, z, Q, h)
        qjq = jnp.sum(Q * JQ, axis=0)
        if trace == "exact":
            tr = jnp.trace(_fd_jvp(rhs, z, jnp.eye(d, dtype=dtype), h))
            return _RhsTerms(qjq, tr, jnp.zeros((), dtype))
        if trace == "hutchinson":
            V = jax.random.rademacher(key, (d, n_probes), dtype=dtype)
            samples = jnp.sum(V * _fd_jvp(rhs, z, V, h), axis=0)
            mean = jnp.mean(samples)
            var = jnp.var(samples, ddof=1) / n_probes
            return _RhsTerms(qjq, mean, var)
        return _RhsTerms(qjq, jnp.zeros((), dtype), jnp.zeros((), dtype))

    def body(n, carry):
        z, Q, sums, key = carry
        i = step0 + n
        key, sub = jax.random.split(key)
        qjq, tr, tr_var = rhs_terms(z, Q, sub)
        f = primal(i)
        h = _fd_step(z)
        Y_fd = _fd_jvp(f, z, Q, h)
        ld = jnp.zeros((), dtype)
        if logdet:
            J = _fd_jvp(f, z, jnp.eye(d, dtype=dtype), h)
            ld = jnp.linalg.slogdet(J)[1]
        # The engine's step and renormalisation (LAPACK's QR, its sign rule).
        z_new, Y = tangent_step(step, z, Q, i)
        Q_new, growth = renormalise(Y, "lapack")
        _, R_fd = jnp.linalg.qr(Y_fd)
        lf = growth_log(jnp.linalg.norm(z_new - z))
        sums = _Sums(
            log_t=sums.log_t + growth,
            log_fd=sums.log_fd + growth_log(jnp.abs(jnp.diagonal(R_fd))),
            qjq=sums.qjq + qjq,
            tr=sums.tr + tr,
            tr_var=sums.tr_var + tr_var,
            logdet=sums.logdet + ld,
            lf=sums.lf + lf,
            lf_n=sums.lf_n + n * lf,
            lf_sq=sums.lf_sq + lf * lf,
        )
        return z_new, Q_new, sums, key

    sums0 = _Sums.zeros(k, dtype)
    first = rhs_terms(z0, Q0, jax.random.fold_in(key, 1))
    z, Q, sums, key = jax.lax.fori_loop(0, n_steps, body, (z0, Q0, sums0, key))
    last = rhs_terms(z, Q, jax.random.fold_in(key, 2))
    return _WindowOut(sums, first, last)


#: The default window is the run's length divided by this (at least
#: ``MIN_WINDOW`` steps, at most ``MAX_WINDOW``): a checked step costs ~5x a
#: run's step (two finite-difference frames and a QR per step), so checking a
#: sixteenth of the run adds ~30% to it (``benchmarks/self_checks.py``).
WINDOW_FRACTION = 16
MIN_WINDOW, MAX_WINDOW = 10, 1000


def _window_steps(result: Any, dt: float, n_steps: Any) -> int:
    if n_steps is not None:
        return validate.as_int("n_steps", n_steps, minimum=1)
    times = np.asarray(result.times)
    block = float(times[1] - times[0]) if times.size > 1 else float(times[0])
    run_steps = max(1, round((float(times[-1] - times[0]) + block) / dt))
    window = max(MIN_WINDOW, run_steps // WINDOW_FRACTION)
    return int(min(window, MAX_WINDOW, run_steps))


@holds_one_blas_thread
def check_invariants(
    problem: Any,
    result: Any,
    n_steps: int | None = None,
    *,
    rhs: Any = None,
    autonomous: bool | None = None,
    n_probes: int = 16,
    seed: int = 0,
    rtol: float = 1e-3,
    warn: bool = True,
) -> InvariantReport:
    """Check a run against the invariants every Lyapunov spectrum obeys.

    The run is continued from ``result.checkpoint`` for ``n_steps`` steps (by
    default a sixteenth of the run, at least 10 and at most 1000 steps) in a
    loop of its own; see the module docstring for the checks and what each
    compares. A run that is not checked pays nothing: the engine is unchanged.

    Args:
        problem: the problem ``result`` was computed for (ODE, map, network,
            delay problem).
        result: its :class:`lyapax.LyapunovResult`.
        n_steps: steps of the checking window.
        rhs: the vector field ``f(z (d,)) -> (d,)`` of a flow, when the
            problem's step does not carry it (``ode_problem`` and network
            problems do); None for maps.
        autonomous: whether the flow is autonomous (then one exponent must
            be zero). Default: True for flows with a known ``f``.
        n_probes: Hutchinson probes per step when ``d > EXACT_MAX_D``.
        seed: seed of the probes.
        rtol: relative tolerance of the checks whose reference differs from
            the step by the integrator's error (``continuous_qr``,
            ``sum_rule`` with ``f``).
        warn: emit a ``UserWarning`` naming each failed check.

    Returns:
        :class:`InvariantReport`.

    Raises:
        TypeError: ``problem`` is not a problem, ``rhs`` not callable.
        ValueError: a result of another problem (its checkpoint does not fit),
            of a sweep (check one row), or of a non-finite run; a driven
            problem whose inputs end before the checking window does.
    """
    problem = as_problem(problem)
    view = problem.for_engine()
    if rhs is not None and not callable(rhs):
        raise TypeError(f"rhs must be a callable f(z) -> z; got {type(rhs).__name__}")
    checkpoint = getattr(result, "checkpoint", None)
    if checkpoint is None or not hasattr(checkpoint, "Y"):
        raise TypeError(
            "result must be the LyapunovResult of lyapunov_spectrum(problem, ...); "
            f"got {type(result).__name__}"
        )
    if np.ndim(checkpoint.Y) != 2:
        raise ValueError(
            f"result holds a batch of runs (frame of shape {np.shape(checkpoint.Y)}):"
            " check one row, e.g. jax.tree.map(lambda x: x[i], result)"
        )
    if getattr(result, "nonfinite", None) is not None:
        raise ValueError(
            f"result is a non-finite run ({result.nonfinite}); there is nothing "
            "to check: reduce dt or fix the model first"
        )
    z0, step0 = view.resume_point(checkpoint)
    Q0 = jnp.asarray(checkpoint.Y, dtype=z0.dtype)
    d, k = Q0.shape
    if d != z0.shape[0]:
        raise ValueError(
            f"result.checkpoint has a frame of dimension {d}, but the problem's "
            f"phase space has dimension {z0.shape[0]}: a result of another problem"
        )
    dt = float(np.asarray(view.dt))
    steps = _window_steps(result, dt, n_steps)
    if view.check_steps is not None:
        # The window continues the run's global step counter.
        view.check_steps(int(np.asarray(step0)) + steps)
    rhs = rhs if rhs is not None else view.step.vector_field()
    indexed = declares_step_index(view.step)
    full = k == d
    trace = "none"
    if rhs is not None and full:
        trace = "exact" if d <= EXACT_MAX_D else "hutchinson"
    logdet = full and rhs is None and d <= EXACT_MAX_D
    dynamic, static = split_static(view.step)
    rhs_dynamic, rhs_static = (None, None) if rhs is None else split_static(rhs)
    out = _window(
        dynamic,
        rhs_dynamic,
        z0,
        Q0,
        jnp.asarray(step0, jnp.int32),
        jnp.asarray(steps, jnp.int32),
        jax.random.PRNGKey(seed),
        static=static,
        rhs_static=rhs_static,
        indexed=indexed,
        trace=trace,
        n_probes=int(n_probes),
        logdet=logdet,
    )
    out = jax.tree.map(np.asarray, out)
    T = steps * dt
    sums = out.sums
    lam_t = sums.log_t / T
    order = np.argsort(-lam_t)
    lam_t = lam_t[order]
    window = _Window(
        out=out,
        order=order,
        lam_t=lam_t,
        d=d,
        dt=dt,
        T=T,
        steps=steps,
        rtol=rtol,
        rhs=rhs,
        trace=trace,
        full=full,
        logdet=logdet,
    )
    if autonomous is None:
        autonomous = rhs is not None and not indexed
    checks = [
        _tangent_check(lam_t, sums.log_fd[order] / T, z0, T, steps),
        _continuous_check(window),
        _sum_check(window),
        _zero_check(window, autonomous, result),
    ]
    report = InvariantReport(tuple(checks), steps, lam_t)
    if warn and report.failed:
        details = "; ".join(
            f"{c.name}: value {np.round(np.asarray(c.value), 6)} vs expected "
            f"{np.round(np.asarray(c.expected), 6)} (tolerance "
            f"{np.max(np.asarray(c.tolerance)):.2g})"
            + (f" - {c.note}" if c.note else "")
            for c in checks
            if c.passed is False
        )
        warn_at_caller(
            f"invariant check(s) failed: {', '.join(report.failed)}. {details}"
        )
    return report


def _tangent_check(lam_t, lam_fd, z0, T, steps) -> Check:
    # Differences with step h ~ eps^(1/3) carry a relative error ~ eps^(2/3)
    # per step in each growth factor: their mean drifts by at most that / dt.
    eps = np.finfo(np.asarray(z0).dtype).eps
    tol = 1e3 * eps ** (2.0 / 3.0) * steps / T * (1.0 + np.abs(lam_fd))
    tol = np.maximum(tol, 1e-6 * (1.0 + np.abs(lam_fd)))
    return _agreement(
        "tangents",
        lam_t,
        lam_fd,
        tol,
        "the step's tangents disagree with its state update (a stop_gradient, a "
        "custom_jvp or a tangent_step that is not the derivative of the step)",
    )


def _agreement(name: str, value, expected, tol, failure: str) -> Check:
    """``value`` equals ``expected`` entrywise to ``tol`` (exact references:
    zero stderr); ``failure`` is the note when it does not."""
    passed = bool(np.all(np.abs(value - expected) <= tol))
    stderr = np.zeros_like(expected)
    return Check(name, value, expected, stderr, tol, passed, "" if passed else failure)


def _trapezoid(total, first, last, dt):
    return dt * (total - 0.5 * first + 0.5 * last)


class _Window(NamedTuple):
    """The checked window as the checks read it: :func:`_window`'s output
    (on the host), the order of the exponents and the window's exponents
    ``lam_t`` (descending), the sizes and the settings of the check."""

    out: _WindowOut
    order: np.ndarray
    lam_t: np.ndarray
    d: int
    dt: float
    T: float
    steps: int
    rtol: float
    rhs: Any
    trace: str
    full: bool
    logdet: bool


def _continuous_check(w: _Window) -> Check:
    rhs, out, order, lam_t, dt, T, rtol = (
        w.rhs, w.out, w.order, w.lam_t, w.dt, w.T, w.rtol
    )  # fmt: skip
    if rhs is None:
        return Check("continuous_qr", None, None, None, None, None, "no vector field")
    sums = out.sums
    qjq = _trapezoid(sums.qjq, out.first.qjq, out.last.qjq, dt)[order] / T
    return _agreement(
        "continuous_qr",
        lam_t,
        qjq,
        rtol * (1.0 + np.abs(qjq)),
        "the exponents of the step differ from <q_i^T Df q_i> of the vector "
        "field on the same frames: the step does not integrate f (or dt is too "
        "large for this tolerance)",
    )


def _sum_check(w: _Window) -> Check:
    full, rhs, trace, out, lam_t, d = w.full, w.rhs, w.trace, w.out, w.lam_t, w.d
    dt, T, steps, rtol, logdet = w.dt, w.T, w.steps, w.rtol, w.logdet
    if not full:
        return Check(
            "sum_rule", None, None, None, None, None,
            f"partial spectrum (k={lam_t.size} < d={d})",
        )  # fmt: skip
    value = float(np.sum(lam_t))
    sums = out.sums
    if rhs is not None:
        expected = float(_trapezoid(sums.tr, out.first.tr, out.last.tr, dt)) / T
        stderr = float(np.sqrt(sums.tr_var)) * dt / T
        tol = N_SIGMA * stderr + rtol * (1.0 + abs(expected))
        note = f"tr Df ({trace})"
    elif logdet:
        expected = float(sums.logdet) / T
        stderr = 0.0
        # Both sums round at the run's dtype: a relative floor of 1e-6, or
        # 1000 units of the last place where that is more (float32: 1.2e-4).
        eps = float(np.finfo(np.asarray(sums.logdet).dtype).eps)
        floor = max(1e-6, 1e3 * eps)
        tol = floor * (1.0 + abs(expected)) + 1e3 * np.finfo(float).eps ** (2 / 3) * (
            steps / T
        )
        note = "ln|det DPhi| / dt of the step"
    else:
        return Check(
            "sum_rule", value, None, None, None, None,
            f"d={d} > {EXACT_MAX_D} without a vector field (ln|det| needs the "
            "full Jacobian); pass rhs= for a flow",
        )  # fmt: skip
    passed = abs(value - expected) <= tol
    if not passed:
        note += ": the sum of the exponents is not the mean phase-space contraction"
    return Check("sum_rule", value, expected, stderr, tol, bool(passed), note)


def _flow_growth(sums: _Sums, n: int, dt: float) -> tuple[float, float]:
    """Least-squares growth rate of ``ln|f(x(t))|`` over the window and the
    rate its residual scatter could fake (``sqrt(12) s / T``)."""
    steps = np.arange(n, dtype=float)
    sn, snn = steps.sum(), (steps**2).sum()
    sl, snl, sll = float(sums.lf), float(sums.lf_n), float(sums.lf_sq)
    b = (n * snl - sn * sl) / max(n * snn - sn**2, 1e-300)
    a = (sl - b * sn) / n
    resid = max(sll - a * sl - b * snl, 0.0) / n
    return b / dt, float(np.sqrt(12.0 * resid)) / (n * dt)


def _zero_check(w: _Window, autonomous: bool, result: Any) -> Check:
    out, steps, dt = w.out, w.steps, w.dt
    if not autonomous:
        return Check(
            "zero_exponent", None, None, None, None, None,
            "not an autonomous flow (pass autonomous=True to check)",
        )  # fmt: skip
    growth, growth_err = _flow_growth(out.sums, steps, dt)
    if not np.isfinite(growth) or abs(growth) > 10.0 * growth_err + 1e-12:
        return Check(
            "zero_exponent", None, None, None, None, None,
            f"|f(x(t))| changes steadily at rate {growth:.3g}: the orbit is not on "
            "a bounded attractor (a fixed point, a linear flow), which has no "
            "zero exponent",
        )  # fmt: skip
    lam = np.asarray(result.exponents)
    se = np.asarray(result.stderr) if result.stderr is not None else np.zeros_like(lam)
    se = np.where(np.isfinite(se), se, 0.0)
    i = int(np.argmin(np.abs(lam)))
    tol = N_SIGMA * max(float(se[i]), 1e-12) + 1e-9
    passed = abs(float(lam[i])) <= tol
    note = (
        f"exponent {i} is nearest zero; |f(x(t))| grows at {growth:.3g} +- "
        f"{growth_err:.2g} over the window"
    )
    if not passed:
        note = (
            f"no exponent within {N_SIGMA:g} stderr of 0 ({note}): an autonomous "
            "flow has one along f; is the system forced (time-dependent)?"
        )
    return Check("zero_exponent", float(lam[i]), 0.0, float(se[i]), tol, passed, note)
