"""The largest Lyapunov exponent of a measured scalar series.

Both estimators embed the series (:func:`delay_embedding`), pair each
reference vector with its nearest neighbour(s) at least a Theiler window
apart in time, follow the pairs for ``horizon`` samples and average the log
of their separation, giving a divergence curve ``S(t)``; on its linear region
``S`` grows at the largest exponent (:func:`linear_region` finds and fits
it). Rosenstein et al. (1993) use the single nearest neighbour of every
point and average ``ln d``; Kantz (1994) averages the distance over a
neighbourhood before taking the log.

Units: the exponent is per unit of time when ``dt`` is the sampling
interval (per sample with the default ``dt=1``).

.. warning:: An exponent is a rate (1/time), a dimension is a number without
   units: never compare one with the other. The standard Lorenz system
   (sigma=10, rho=28, beta=8/3) has lambda_1 = 0.906 per time unit and a
   Kaplan-Yorke dimension of 2.06; a "largest exponent" reference near 2 for
   it (nolds' own Lorenz test of ``lyap_r`` accepts 2.4 +- 0.5) is
   dimension-sized, not lambda_1. Check what a reference value is, and that
   both sides are per time unit (not per sample), before comparing.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from lyapax._engine import validate
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.warn import warn_at_caller
from lyapax.indicators._embedding import as_series, embed, embedding_size
from lyapax.indicators._linear_fit import LinearFit, LinearRegionOptions, linear_region
from lyapax.indicators._neighbours import (
    chunk_rows,
    divergence_curve,
    nearest_neighbours,
)

__all__ = [
    "DivergenceResult",
    "NoLinearRegionWarning",
    "lyapunov_kantz",
    "lyapunov_rosenstein",
    "mean_period",
]


class NoLinearRegionWarning(UserWarning):
    """The divergence curve has no linear region: no exponent was fitted."""


class DivergenceResult(NamedTuple):
    """A divergence curve of a measured series and its fitted exponent.

    ``exponent``: the slope of the linear region (per unit time; ``nan``
    when ``fit.found`` is False); ``times (horizon + 1,)``: ``k * dt``;
    ``divergence (horizon + 1,)``: the mean log separation ``S(k)``;
    ``counts (horizon + 1,)``: references averaged at each ``k``; ``fit``:
    the :class:`LinearFit` (region, residual, verdict); ``method``:
    ``"rosenstein"`` or ``"kantz"``; ``dimension``, ``lag``, ``theiler``
    (samples), ``dt``: the settings used. Refit with another region:
    ``linear_region(result.times, result.divergence, (t0, t1))``.
    """

    exponent: float
    times: np.ndarray
    divergence: np.ndarray
    counts: np.ndarray
    fit: LinearFit
    method: str
    dimension: int
    lag: int
    theiler: int
    dt: float


def mean_period(series: Float[ArrayLike, " n"]) -> float:
    """Mean period of a series in samples: the reciprocal of the mean
    frequency of its power spectrum (the mean removed), as Rosenstein et al.
    choose their Theiler window."""
    x = np.asarray(as_series("series", series, minimum=4), dtype=float)
    power = np.abs(np.fft.rfft(x - x.mean()))[1:] ** 2
    freq = np.fft.rfftfreq(x.size)[1:]
    if not power.sum() > 0:
        return 1.0
    return float(1.0 / (np.sum(freq * power) / np.sum(power)))


class _Settings(NamedTuple):
    dimension: int
    lag: int
    n_vectors: int
    horizon: int
    theiler: int
    dt: float
    fit: LinearRegionOptions


def _settings(x: Any, args: tuple, n_neighbours: int) -> _Settings:
    """Every option ``args = (dimension, lag, horizon, theiler, dt, fit)``
    checked against the series, once, before any work."""
    dimension, lag, horizon, theiler, dt, fit = args
    dimension, lag, n_vectors = embedding_size(x.shape[0], dimension, lag)
    horizon = validate.as_int("horizon", horizon, minimum=1)
    if theiler is None:
        theiler = int(round(mean_period(x)))
    theiler = validate.as_int("theiler", theiler, minimum=0)
    dt = validate.positive_float(
        "dt",
        dt,
        allowed="a finite sampling interval > 0",
        why="(the sampling interval)",
    )
    n_candidates = n_vectors - horizon
    # A reference needs n_neighbours candidates outside its Theiler window.
    needed = 2 * theiler + 1 + n_neighbours
    if n_candidates < needed:
        raise ValueError(
            f"horizon={horizon} is too long for this series: {x.shape[0]} "
            f"samples embed (dimension={dimension}, lag={lag}) into {n_vectors} "
            f"vectors, leaving {n_candidates} that can be followed for {horizon} "
            f"samples; with theiler={theiler} at least {needed} are needed. Use "
            "a shorter horizon or theiler, or a longer series"
        )
    return _Settings(
        dimension, lag, n_vectors, horizon, theiler, dt, LinearRegionOptions.of(fit)
    )


def _estimate(
    series, method, n_neighbours, radius, n_reference, args
) -> DivergenceResult:
    x = as_series("series", series, minimum=4)
    s = _settings(x, args, n_neighbours)
    X = embed(x, s.dimension, s.lag, s.n_vectors)
    n_candidates = s.n_vectors - s.horizon
    if n_reference is None:
        refs = jnp.arange(n_candidates)
    else:
        count = min(n_reference, n_candidates)
        refs = jnp.asarray(np.linspace(0, n_candidates - 1, count).round().astype(int))
    chunk = chunk_rows(n_candidates, int(refs.shape[0]))
    idx, dist = nearest_neighbours(
        X, refs, jnp.asarray(s.theiler), n_candidates, n_neighbours, chunk
    )
    usable = jnp.isfinite(dist) & (dist > 0)
    if radius is not None:
        usable = usable & (dist <= radius)
    curve, counts = divergence_curve(X, refs, idx, usable, s.horizon)
    times = np.arange(s.horizon + 1) * s.dt
    curve, counts = np.asarray(curve), np.asarray(counts)
    fitted = linear_region(times, curve, s.fit)
    if not fitted.found:
        warn_at_caller(
            f"{method}: {fitted.reason}; no exponent fitted (exponent=nan). "
            "Look at result.times and result.divergence, or pass fit=(t0, t1) "
            "to fit a stretch of your choice",
            NoLinearRegionWarning,
        )
    return DivergenceResult(
        fitted.slope,
        times,
        curve,
        counts,
        fitted,
        method,
        s.dimension,
        s.lag,
        s.theiler,
        s.dt,
    )


@holds_one_blas_thread
def lyapunov_rosenstein(
    series: Float[ArrayLike, " n"],
    dimension: int,
    lag: int = 1,
    horizon: int = 20,
    theiler: int | None = None,
    dt: float = 1.0,
    fit: Any = None,
) -> DivergenceResult:
    """Largest Lyapunov exponent of a scalar series (Rosenstein et al. 1993).

    Every delay vector is paired with its nearest neighbour more than
    ``theiler`` samples away in time; ``S(k) = <ln d_i(k)>`` over the pairs
    (``k = 0..horizon``), and the exponent is the slope of the linear region
    of ``S(k dt)``.

    Args:
        series: ``(n,)`` samples of one observable (NumPy or JAX); float64
            recommended.
        dimension, lag: the delay embedding (:func:`delay_embedding`).
        horizon: samples each pair is followed for; the curve has
            ``horizon + 1`` points.
        theiler: least separation in time of a pair, in samples (default:
            the mean period, :func:`mean_period`).
        dt: sampling interval; the exponent is per unit of its time.
        fit: how the linear region is found (:func:`linear_region`): ``None``,
            :class:`LinearRegionOptions`, a dict of its fields, or a ``(t0,
            t1)`` time range.

    Returns:
        :class:`DivergenceResult`.

    Raises:
        ValueError / TypeError: ``series`` not a finite real 1-D array;
            ``dimension``, ``lag`` < 1; the series too short for the
            embedding; ``horizon`` (with ``theiler``) too long for the series;
            bad ``dt`` or ``fit``.

    Warns:
        NoLinearRegionWarning: no linear region (noise, a regular signal, or
            too little data); ``exponent`` is then ``nan``.

    .. warning:: An exponent is a rate (per unit time; per sample with
       ``dt=1``), a dimension a pure number: do not compare one with the
       other. The standard Lorenz system (sigma=10, rho=28, beta=8/3) has
       lambda_1 = 0.906 per time unit and a Kaplan-Yorke dimension of 2.06;
       a "largest exponent" reference near 2 for it (nolds' own Lorenz test
       of ``lyap_r`` accepts 2.4 +- 0.5) is dimension-sized, not lambda_1.

    Rosenstein, Collins & De Luca, Physica D 65, 117 (1993).
    """
    args = (dimension, lag, horizon, theiler, dt, fit)
    return _estimate(series, "rosenstein", 1, None, None, args)


@holds_one_blas_thread
def lyapunov_kantz(
    series: Float[ArrayLike, " n"],
    dimension: int,
    lag: int = 1,
    horizon: int = 20,
    theiler: int | None = None,
    dt: float = 1.0,
    fit: Any = None,
    *,
    n_neighbours: int = 3,
    radius: float | None = None,
    n_reference: int | None = None,
) -> DivergenceResult:
    """Largest Lyapunov exponent of a scalar series (Kantz 1994).

    Each reference vector's neighbourhood ``U_i`` holds its ``n_neighbours``
    nearest delay vectors more than ``theiler`` samples away (only those
    within ``radius``, if given); ``S(k) = <ln mean_{j in U_i} |X_{i+k} -
    X_{j+k}|>_i`` and the exponent is the slope of its linear region. The
    mean inside the log makes the curve less noisy than Rosenstein's.

    Args:
        n_neighbours: size of each neighbourhood (>= 1).
        radius: if given, neighbours farther than this (embedding units) are
            left out; references with none are skipped (``counts``).
        n_reference: use this many evenly spaced reference points (default:
            all), a cheaper curve for long series.

    Every other argument, the result and the errors are those of
    :func:`lyapunov_rosenstein`.

    Kantz, Phys. Lett. A 185, 77 (1994).
    """
    n_neighbours = validate.as_int("n_neighbours", n_neighbours, minimum=1)
    if n_reference is not None:
        n_reference = validate.as_int("n_reference", n_reference, minimum=1)
    if radius is not None:
        radius = validate.positive_float(
            "radius", radius, allowed="a finite distance > 0", why="(a distance)"
        )
    args = (dimension, lag, horizon, theiler, dt, fit)
    return _estimate(series, "kantz", n_neighbours, radius, n_reference, args)
