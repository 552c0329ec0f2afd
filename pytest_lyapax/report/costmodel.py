"""A cost model per backend: ``t(n) = a + b * n**p`` fitted to a sized series.

``a`` is the fixed price of one call (dispatch, kernel launch, transfers),
``b * n**p`` the part that grows with the problem size ``n``.  The fit is
made on the median of each size's per-round samples (``stats.data``; the
median is not moved by a few slow rounds), minimising the squared *relative*
residuals (times span decades; a plain least-squares fit would only see the
largest sizes), with ``a >= 0`` and ``b >= 0``.  ``p`` is found on a grid
(:data:`P_GRID`, step 0.005), ``a`` and ``b`` in closed form for each ``p``.

Intervals come from a seeded bootstrap (:data:`BOOTSTRAP` resamples of each
size's rounds; the seed is derived from the series' name, so a report and a
summary regenerated from it give the same numbers): the 2.5 and 97.5
percentiles of the refitted ``a``, ``p`` and of the predicted crossover.

The model *does not fit* a series when some size's median is further from
the fitted curve than :data:`FIT_TOLERANCE` times that size's noise (the
bootstrap spread of its median, never below :data:`NOISE_FLOOR`), or when the
best exponent lies on the edge of the grid: then no number is reported, only
where and by how much it missed.  Fewer than :data:`MIN_SIZES` sizes: no fit.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pytest_lyapax.report.units import format_seconds

if TYPE_CHECKING:
    import numpy as np

    from pytest_lyapax.report.series import Point, SizedBenchmark

MIN_SIZES = 4
BOOTSTRAP = 200
SEED = 21
P_MAX = 4.0
P_STEP = 0.005
NOISE_FLOOR = 0.05  # relative: rounds of one process do not sample more
FIT_TOLERANCE = 3.0  # residual limit, in units of a size's noise
SEARCH_DECADES = 1.0  # a predicted crossover may lie this far outside the sizes
MODEL_TEXT = "t(n) = a + b*n^p"

# Series statuses.
FIT, NO_FIT, FEW_SIZES = "fit", "does-not-fit", "too-few-sizes"


def _p_grid() -> np.ndarray:
    import numpy as np

    return np.round(np.arange(0.0, P_MAX + P_STEP / 2, P_STEP), 6)


def _solve(sizes: np.ndarray, medians: np.ndarray) -> tuple[np.ndarray, ...]:
    """Best ``(a, b, p, cost)`` for each row of ``medians`` (shape (R, k)).

    For every ``p`` on the grid the relative least-squares problem
    ``sum((1 - (a + b n^p) / m)^2)`` is linear in ``a, b``; the bounds
    ``a, b >= 0`` are met by also trying each one set to zero.
    """
    import numpy as np

    grid = _p_grid()
    powers = sizes[None, :] ** grid[:, None]  # (P, k)
    inv = 1.0 / medians  # (R, k): the weight of a
    # einsum, not @: a threaded BLAS call costs more than these small sums.
    su = np.einsum("rk,pk->rp", inv, powers)  # (R, P) sums of u = n^p / m
    suu = np.einsum("rk,pk->rp", inv * inv, powers * powers)
    suv = np.einsum("rk,pk->rp", inv * inv, powers)
    sv = np.broadcast_to(inv.sum(-1)[:, None], su.shape)
    svv = np.broadcast_to((inv * inv).sum(-1)[:, None], su.shape)
    det = svv * suu - suv * suv
    with np.errstate(divide="ignore", invalid="ignore"):
        a2 = (sv * suu - su * suv) / det
        b2 = (su * svv - sv * suv) / det
    b1 = su / suu  # a = 0
    a0 = sv / svv  # b = 0 (no growth: p is then meaningless)
    k = float(sizes.size)

    def cost(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # sum((1 - a v - b u)^2), expanded into the sums already at hand
        return k - 2 * a * sv - 2 * b * su + a * a * svv + b * b * suu + 2 * a * b * suv

    both_ok = np.isfinite(a2) & np.isfinite(b2) & (a2 >= 0) & (b2 >= 0)
    with np.errstate(over="ignore", invalid="ignore"):
        c2 = np.where(
            both_ok, cost(np.where(both_ok, a2, 0), np.where(both_ok, b2, 0)), np.inf
        )
        c1 = cost(np.zeros_like(b1), b1)
    c2 = np.where(np.isfinite(c2), c2, np.inf)
    c1 = np.where(np.isfinite(c1), c1, np.inf)
    a = np.where(c2 <= c1, a2, 0.0)
    b = np.where(c2 <= c1, b2, b1)
    c = np.minimum(c2, c1)
    best = np.argmin(c, axis=1)
    rows = np.arange(medians.shape[0])
    a, b, c = a[rows, best], b[rows, best], c[rows, best]
    p = grid[best]
    a0, sv0, svv0 = a0[:, 0], sv[:, 0], svv[:, 0]
    flat = k - 2 * a0 * sv0 + a0 * a0 * svv0
    flat_better = flat <= c + 1e-12 * k
    a = np.where(flat_better, a0, a)
    b = np.where(flat_better, 0.0, b)
    p = np.where(flat_better, np.nan, p)
    return a, b, p, np.where(flat_better, flat, c)


@dataclass(frozen=True)
class SeriesFit:
    """The model fitted to one backend's series (``status`` says whether it fits)."""

    label: str
    status: str
    sizes: tuple[int, ...] = ()
    a: float | None = None  # seconds per call
    b: float | None = None  # seconds / n^p
    p: float | None = None
    a_interval: tuple[float, float] | None = None
    p_interval: tuple[float, float] | None = None
    worst_size: int | None = None
    worst_ratio: float | None = None  # measured median / fitted value there
    noise: float | None = None  # relative noise allowed at the worst size
    # Bootstrap replicates of (a, b, p), kept for the crossover intervals.
    replicates: tuple[tuple[float, float, float], ...] = field(default=(), repr=False)

    @property
    def fits(self) -> bool:
        return self.status == FIT

    def predict(self, n: float) -> float:
        assert self.a is not None and self.b is not None
        return self.a + self.b * n ** (self.p or 0.0)

    def describe(self) -> str:
        """The fit in words, e.g. ``gpu: fixed 0.41 ms per call, grows like n^1.9``."""
        if self.status == FEW_SIZES:
            return (
                f"{self.label}: {len(self.sizes)} size(s) measured; the cost model "
                f"needs {MIN_SIZES}"
            )
        if self.status == NO_FIT:
            assert self.worst_ratio is not None and self.noise is not None
            return (
                f"{self.label}: {MODEL_TEXT} does not fit (at n={self.worst_size} the "
                f"median is {self.worst_ratio:.3g}x the best fit, noise there "
                f"+-{self.noise:.0%}); no fixed cost or exponent is given"
            )
        fixed = f"fixed {format_seconds(self.a)} per call"
        if self.a_interval:
            lo, hi = self.a_interval
            fixed += f" [{format_seconds(lo)}, {format_seconds(hi)}]"
        if self.p is None:
            return f"{self.label}: {fixed}, no growth with n in the measured range"
        grows = f"grows like n^{self.p:.2f}"
        if self.p_interval:
            grows += f" [{self.p_interval[0]:.2f}, {self.p_interval[1]:.2f}]"
        return f"{self.label}: {fixed}, {grows}"

    def to_json(self) -> dict[str, Any]:
        return {
            "series": self.label,
            "status": self.status,
            "sizes": list(self.sizes),
            "a_s": self.a,
            "b": self.b,
            "p": self.p,
            "a_interval_s": list(self.a_interval) if self.a_interval else None,
            "p_interval": list(self.p_interval) if self.p_interval else None,
            "worst_size": self.worst_size,
            "worst_ratio": self.worst_ratio,
            "noise": self.noise,
            "summary": self.describe(),
        }


def _seed(name: str) -> int:
    return SEED * 1_000_003 + zlib.crc32(name.encode())


def _interval(values: np.ndarray) -> tuple[float, float] | None:
    import numpy as np

    values = values[np.isfinite(values)]
    if values.size < BOOTSTRAP // 2:
        return None
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def fit_series(label: str, points: Sequence[Point], name: str = "") -> SeriesFit:
    """Fit the model to one series; ``name`` (the benchmark) seeds the bootstrap.

    The result depends on its arguments only, so it is remembered: the JSON,
    the figure, the terminal and the summaries of one run fit each series once.
    """
    ordered = sorted((p for p in points if p.median > 0), key=lambda p: p.size)
    return _fit(label, tuple(ordered), name)


@functools.lru_cache(maxsize=256)
def _fit(label: str, points: tuple[Point, ...], name: str) -> SeriesFit:
    import numpy as np

    sizes = tuple(p.size for p in points)
    if len(points) < MIN_SIZES:
        return SeriesFit(label, FEW_SIZES, sizes)
    n = np.array(sizes, dtype=float)
    medians = np.array([p.median for p in points])
    a, b, p, _ = (x[0] for x in _solve(n, medians[None, :]))
    rng = np.random.default_rng(_seed(f"{name}|{label}"))
    boot = np.empty((BOOTSTRAP, len(points)))
    have_samples = all(len(pt.samples) >= 2 for pt in points)
    for j, pt in enumerate(points):
        if have_samples:
            data = np.asarray(pt.samples, dtype=float)
            picks = rng.integers(0, data.size, size=(BOOTSTRAP, data.size))
            boot[:, j] = np.median(data[picks], axis=1)
        else:
            boot[:, j] = pt.median
    spread = np.std(np.log(np.maximum(boot, 1e-300)), axis=0)
    noise = np.sqrt(spread**2 + NOISE_FLOOR**2)
    fitted = a + b * n ** (0.0 if np.isnan(p) else p)
    log_ratio = np.log(medians / fitted)
    worst = int(np.argmax(np.abs(log_ratio) / noise))
    edge = not np.isnan(p) and p >= P_MAX - P_STEP / 2
    common: dict[str, Any] = {
        "worst_size": sizes[worst],
        "worst_ratio": float(math.exp(log_ratio[worst])),
        "noise": float(noise[worst]),
    }
    if edge or abs(log_ratio[worst]) > FIT_TOLERANCE * noise[worst]:
        return SeriesFit(label, NO_FIT, sizes, **common)
    a_intv = p_intv = None
    replicates: tuple[tuple[float, float, float], ...] = ()
    if have_samples:
        ba, bb, bp, _ = _solve(n, boot)
        a_intv = _interval(ba)
        p_intv = None if np.isnan(p) else _interval(bp)
        replicates = tuple(
            (float(x), float(y), float(z)) for x, y, z in zip(ba, bb, bp, strict=True)
        )
    return SeriesFit(
        label,
        FIT,
        sizes,
        float(a),
        float(b),
        None if np.isnan(p) else float(p),
        a_intv,
        p_intv,
        replicates=replicates,
        **common,
    )


@dataclass(frozen=True)
class ModelCrossover:
    """Where the fitted curves of two backends cross (None: they do not, or
    one of them does not fit; ``reason`` then says which)."""

    reference: str
    other: str
    size: float | None = None
    winner: str | None = None  # faster above ``size``
    interval: tuple[float, float] | None = None
    found_in: float | None = None  # fraction of bootstrap pairs that cross
    measured: tuple[float, ...] = ()  # the sign changes of the medians
    reason: str = ""
    measured_range: tuple[int, int] | None = None

    @property
    def extrapolated(self) -> bool:
        if self.size is None or self.measured_range is None:
            return False
        return not self.measured_range[0] <= self.size <= self.measured_range[1]

    def describe(self) -> str:
        measured = (
            "measured medians cross at n ~ "
            + ", ".join(f"{s:.3g}" for s in self.measured)
            if self.measured
            else "measured medians do not cross"
        )
        if self.size is None:
            return f"{self.other} vs {self.reference}: {self.reason}; {measured}"
        text = f"{self.winner} faster from n ~ {self.size:.3g}"
        if self.interval:
            text += f" [{self.interval[0]:.3g}, {self.interval[1]:.3g}]"
        if self.found_in is not None and self.found_in < 0.95:
            text += f" (the resampled fits cross in {self.found_in:.0%})"
        if self.extrapolated:
            text += " (extrapolated beyond the measured sizes)"
        return f"{text}; {measured}"

    def to_json(self) -> dict[str, Any]:
        return {
            "reference": self.reference,
            "other": self.other,
            "predicted": self.size,
            "winner": self.winner,
            "interval": list(self.interval) if self.interval else None,
            "found_in": self.found_in,
            "extrapolated": self.extrapolated,
            "measured": list(self.measured),
            "reason": self.reason or None,
            "summary": self.describe(),
        }


def _search_grid(lo: int, hi: int) -> np.ndarray:
    import numpy as np

    return np.logspace(
        math.log10(lo) - SEARCH_DECADES, math.log10(hi) + SEARCH_DECADES, 400
    )


def _last_crossing(
    grid: np.ndarray, ref: np.ndarray, other: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the last size where ``log(ref/other)`` changes sign (NaN: none),
    and whether ``other`` is faster above it."""
    import numpy as np

    d = np.log(ref) - np.log(other)
    change = np.sign(d[:, 1:]) * np.sign(d[:, :-1]) < 0
    any_change = change.any(axis=1)
    last = change.shape[1] - 1 - np.argmax(change[:, ::-1], axis=1)
    rows = np.arange(d.shape[0])
    d0, d1 = d[rows, last], d[rows, last + 1]
    x0, x1 = np.log(grid[last]), np.log(grid[last + 1])
    with np.errstate(divide="ignore", invalid="ignore"):
        at = np.exp(x0 + (x1 - x0) * d0 / (d0 - d1))
    return np.where(any_change, at, np.nan), d1 > 0


def _curves(fit: SeriesFit, grid: np.ndarray) -> np.ndarray:
    import numpy as np

    reps = np.array(fit.replicates).reshape(-1, 3)
    p = np.nan_to_num(reps[:, 2:3])
    return reps[:, :1] + reps[:, 1:2] * grid[None, :] ** p


def model_crossover(
    ref: SeriesFit,
    other: SeriesFit,
    measured: Sequence[float] = (),
    within_noise: bool = False,
) -> ModelCrossover:
    """Where the two fitted curves cross (the last crossing in the range
    searched: the measured sizes and :data:`SEARCH_DECADES` either side).

    ``within_noise``: the noise test found no difference at any measured size;
    then no side is predicted faster, whatever the fitted curves do.
    """
    import numpy as np

    base: dict[str, Any] = {"measured": tuple(measured)}
    bad = [
        f"{f.label} ({'too few sizes' if f.status == FEW_SIZES else 'does not fit'})"
        for f in (ref, other)
        if not f.fits
    ]
    if bad:
        return ModelCrossover(
            ref.label,
            other.label,
            reason=f"no predicted crossover: no cost model for {', '.join(bad)}",
            **base,
        )
    lo = min(ref.sizes[0], other.sizes[0])
    hi = max(ref.sizes[-1], other.sizes[-1])
    if within_noise:
        return ModelCrossover(
            ref.label,
            other.label,
            reason="no predicted crossover: the noise test finds no difference "
            "at any measured size",
            measured_range=(lo, hi),
            **base,
        )
    grid = _search_grid(lo, hi)
    best = (
        np.array([[ref.predict(x) for x in grid]]),
        np.array([[other.predict(x) for x in grid]]),
    )
    at, other_wins = _last_crossing(grid, *best)
    if np.isnan(at[0]):
        faster = other.label if best[1][0, -1] < best[0][0, -1] else ref.label
        return ModelCrossover(
            ref.label,
            other.label,
            reason=f"the fitted curves do not cross between n ~ {grid[0]:.3g} and "
            f"{grid[-1]:.3g} ({faster} faster throughout)",
            measured_range=(lo, hi),
            **base,
        )
    interval = found = None
    if ref.replicates and other.replicates:
        boot, _ = _last_crossing(grid, _curves(ref, grid), _curves(other, grid))
        found = float(np.isfinite(boot).mean())
        interval = _interval(boot)
    return ModelCrossover(
        ref.label,
        other.label,
        float(at[0]),
        other.label if other_wins[0] else ref.label,
        interval,
        found,
        measured_range=(lo, hi),
        **base,
    )


@dataclass(frozen=True)
class BenchmarkModel:
    """The cost model of one sized benchmark: a fit per series and, against the
    first series, the predicted crossovers."""

    key: str
    name: str
    fits: tuple[SeriesFit, ...]
    crossovers: tuple[ModelCrossover, ...]

    def lines(self) -> list[str]:
        """The model in words, one line per backend and per crossover."""
        if all(f.status == FEW_SIZES for f in self.fits):
            most = max(len(f.sizes) for f in self.fits)
            return [f"needs {MIN_SIZES} sizes per backend ({most} measured)"]
        return [f.describe() for f in self.fits] + [
            c.describe() for c in self.crossovers
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.key,
            "name": self.name,
            "model": MODEL_TEXT,
            "series": [f.to_json() for f in self.fits],
            "crossovers": [c.to_json() for c in self.crossovers],
        }


def benchmark_model(bench: SizedBenchmark) -> BenchmarkModel:
    """Fit every series of ``bench`` and predict crossovers against the first."""
    from pytest_lyapax.report.crossover import crossovers

    fits = tuple(
        fit_series(label, points, bench.key) for label, points in bench.series.items()
    )
    measured = {c.other: c for c in crossovers(bench)}
    pairs = tuple(
        model_crossover(
            fits[0],
            f,
            tuple(x.size for x in measured[f.label].crossings)
            if f.label in measured
            else (),
            within_noise=f.label in measured
            and measured[f.label].kind == "within-noise",
        )
        for f in fits[1:]
    )
    return BenchmarkModel(bench.key, bench.name, fits, pairs)


def cost_models(benches: Sequence[SizedBenchmark]) -> list[BenchmarkModel]:
    """:func:`benchmark_model` for each sized benchmark."""
    return [benchmark_model(b) for b in benches]


def by_key(models: Sequence[BenchmarkModel]) -> Mapping[str, BenchmarkModel]:
    """The models by benchmark key (what the figure looks them up by)."""
    return {m.key: m for m in models}
