"""Diagnostics of a Lyapunov run: convergence drift and Kaplan-Yorke dimension."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from lyapax._engine import validate

__all__ = ["ConvergenceDrift", "convergence_drift", "kaplan_yorke_dimension"]


class ConvergenceDrift(NamedTuple):
    """How far each running estimate moved over the final window of a run.

    ``absolute (k,)``: max ``|estimate - final estimate|`` over the window;
    ``relative (k,)``: ``absolute / max(|final|, 1e-12)``;
    ``converged``: True when every ``absolute <= tol``; ``None`` without ``tol``.
    """

    absolute: Float[Array, " k"]
    relative: Float[Array, " k"]
    converged: bool | None


def convergence_drift(
    result: Any, window: float = 0.1, tol: float | None = None
) -> ConvergenceDrift:
    """Drift of the running estimates over the last ``window`` fraction of a run.

    Args:
        result: a ``LyapunovResult`` (anything with a ``history (n, k)``).
        window: fraction of the renormalisations, in (0, 1].
        tol: absolute tolerance (units of the exponents, 1/time) for
            ``converged``; without it ``converged`` is ``None``.

    Raises:
        ValueError: ``window`` outside (0, 1], ``tol`` <= 0, or a history of
            fewer than 2 rows (no drift to measure).
    """
    if not 0.0 < float(window) <= 1.0:
        raise ValueError(f"window must be in (0, 1]; got window={window!r}")
    if tol is not None:
        tol = validate.positive_float("tol", tol, why="(a tolerance)")
    history = jnp.asarray(result.history)
    n = history.shape[0]
    if n < 2:
        raise ValueError(
            f"convergence_drift needs a history of at least 2 renormalisations; "
            f"got {n} (use more n_steps or a smaller renorm_every)"
        )
    start = min(n - 1, int(np.floor(n * (1.0 - float(window)))))
    tail = history[start:]
    final = history[-1]
    absolute = jnp.max(jnp.abs(tail - final), axis=0)
    relative = absolute / jnp.maximum(jnp.abs(final), 1e-12)
    converged = None if tol is None else bool(jnp.all(absolute <= float(tol)))
    return ConvergenceDrift(absolute, relative, converged)


def kaplan_yorke_dimension(
    exponents: Float[ArrayLike, " k"] | Sequence[float], d_total: int | None = None
) -> float:
    """Kaplan-Yorke (Lyapunov) dimension ``j + S_j / |lambda_{j+1}|``.

    ``j`` is the largest index whose cumulative sum ``S_j`` of the descending
    exponents is non-negative. Returns 0 when ``lambda_1 < 0``.

    Args:
        exponents: ``(k,)`` exponents, any order.
        d_total: phase-space dimension when ``exponents`` is a partial spectrum.

    Raises:
        ValueError: the cumulative sum never turns negative but ``d_total`` says
            more (unknown) exponents exist, so the dimension cannot be located.
    """
    lam = np.sort(np.asarray(exponents, dtype=float).ravel())[::-1]
    if lam.size == 0:
        raise ValueError("exponents must not be empty")
    if d_total is not None and int(d_total) < lam.size:
        raise ValueError(
            f"d_total={d_total} is smaller than the number of exponents ({lam.size})"
        )
    sums = np.cumsum(lam)
    if sums[0] < 0:
        return 0.0
    nonneg = np.flatnonzero(sums >= 0)
    j = int(nonneg[-1]) + 1  # number of exponents in the non-negative sum
    if j == lam.size:
        if d_total is not None and int(d_total) > lam.size:
            raise ValueError(
                f"the cumulative sum of the {lam.size} exponents given never turns "
                f"negative, but d_total={d_total} says more exist; compute more "
                "exponents (larger k): the Kaplan-Yorke dimension lies beyond the "
                "tracked exponents"
            )
        return float(lam.size)
    return float(j + sums[j - 1] / abs(lam[j]))
