"""A time budget per sized series and backend (``--jax-budget``, ``--jax-max-call``).

The sizes of a series (one test function with its other parameters, on one
backend) run in ascending order in their backend's worker.  Compile time and
run time are budgeted apart, each against ``--jax-budget``: a size's *run
time* is its wall time less the compile part of its warm-up (trace, lower
and XLA compile, as recorded; else the first call less the median call), so
a minute-long first compile never makes a 2 ms series look expensive, and a
series of long compiles stops on its own account.  A size loaded from the
persistent compilation cache (``--jax-compile-cache``) costs its loading.

Before a size starts, :func:`check` predicts its run time -- the warm-up
call plus the calibration call plus the timed rounds -- from the sizes of
that series already measured in this worker, and its compile time as the
largest compile of the series so far; it skips the size when either does not
fit in what is left of its account.  Until two sizes are measured nothing is
predicted: a size axis is never extrapolated from one size, the next size
runs and its own first call is judged (``--jax-max-call``).  A skipped size
is recorded as an :data:`OVER_BUDGET` point (predicted seconds per call,
their interval, the rule used) and is never timed.  The budget decides only
before a size starts: a running size is never cut short.

The prediction of the seconds per call at size ``n``:

``cost model``  with :data:`~pytest_lyapax.report.costmodel.MIN_SIZES` or more sizes
                measured and the model fitting them, ``t(n) = a + b n^p``
                (``costmodel.py``; ``a`` is the flat, launch-bound region
                before the growth); its interval is the 2.5-97.5 percentile
                range of the bootstrap refits' predictions.
``scaled``      otherwise: the last size's median ``t`` scaled by the size
                ratio ``r``: ``t r^q`` with ``q`` the local exponent between
                the last two sizes (clamped to [0, 4]; 0 where the series is
                flat), the interval ``[t r^max(q - 0.5, 0), t r^max(q + 1, 2)]``:
                the decision, made on the upper end, assumes growth one power
                faster than seen, and at least quadratic.  The one-size form
                ``t r^1.5`` in ``[t r, t r^2]`` only describes a size not run
                because ``--jax-max-call`` stopped the series after one size.

``--jax-max-call``: a first call whose own time (less its compile part) is
longer than the ceiling stops that series' larger sizes on that backend
(same point, reason "first call took ...").
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_lyapax.measuring.measure import OVER_BUDGET
from pytest_lyapax.report.details import first_call_s, warmup_of
from pytest_lyapax.report.identity import is_size
from pytest_lyapax.report.units import format_seconds

COST_MODEL, SCALED = "cost model", "scaled"
# Growth exponents (central, low, high) assumed from a single measured size.
ONE_SIZE_EXPONENTS = (1.5, 1.0, 2.0)
MAX_EXPONENT = 4.0

_DURATION = re.compile(
    r"^\s*(?P<value>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>[a-z]*)\s*$"
)
_DURATION_UNITS = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
DURATION_FORMS = "a number with a unit (ms, s, min, h), e.g. 90s or 2min, or none"


def parse_duration(text: str, option: str) -> float | None:
    """Parse ``--jax-budget``/``--jax-max-call``: seconds, or None for ``none``.

    Raises ``pytest.UsageError`` naming the option, the text and the forms
    allowed, for a bare number (90 could be seconds or minutes), a negative
    or zero value, or an unknown unit.
    """
    raw = text.strip().lower()
    if raw == "none":
        return None
    match = _DURATION.match(raw)
    negative = raw.startswith("-")
    if negative or match is None or match["unit"] not in _DURATION_UNITS:
        if match is not None and not match["unit"]:
            problem = "has no unit"
        elif negative:
            problem = "is negative"
        else:
            problem = "is not a duration"
        raise pytest.UsageError(
            f"{option}: {text!r} {problem}; give {DURATION_FORMS} (off)"
        )
    value = float(match["value"]) * _DURATION_UNITS[match["unit"]]
    if value <= 0:
        raise pytest.UsageError(
            f"{option}: {text!r} is not positive; give {DURATION_FORMS} (off)"
        )
    return value


def format_duration(seconds: float) -> str:
    """A duration for people: ``3.1 min`` above two minutes, else ``12.5 s``."""
    if seconds >= 7200:
        return f"{seconds / 3600:.2g} h"
    if seconds >= 120:
        return f"{seconds / 60:.2g} min"
    return format_seconds(seconds)


@dataclass(frozen=True)
class Prediction:
    """Seconds per call predicted at ``size``: value, interval, rule, source."""

    size: int
    per_call_s: float
    interval_s: tuple[float, float]
    rule: str  # COST_MODEL or SCALED
    basis: str  # in words, e.g. "from sizes 1, 2, 4"

    def text(self) -> str:
        lo, hi = self.interval_s
        return (
            f"predicted {format_duration(self.per_call_s)} per call "
            f"[{format_duration(lo)}, {format_duration(hi)}]"
        )


@dataclass
class _Measured:
    size: int
    median: float
    samples: tuple[float, ...]
    first_call_s: float  # the first call's own time, its compile part apart
    compile_s: float = 0.0  # the warm-up's trace, lower and compile


@dataclass
class Series:
    """One series on one backend in one worker: what ran, what it cost."""

    measured: list[_Measured] = field(default_factory=list)
    spent_s: float = 0.0  # run time: wall time less the compile parts
    compile_spent_s: float = 0.0
    stopped: str = ""  # why larger sizes are not run (--jax-max-call)
    stopped_at: int = 0


def _scaled(measured: Sequence[_Measured], size: int) -> Prediction:
    last = measured[-1]
    ratio = size / last.size
    if len(measured) >= 2 and measured[-2].median > 0 and last.median > 0:
        prev = measured[-2]
        q = math.log(last.median / prev.median) / math.log(last.size / prev.size)
        q = min(max(q, 0.0), MAX_EXPONENT)
        low, high = max(q - 0.5, 0.0), max(q + 1.0, 2.0)
    else:
        q, low, high = ONE_SIZE_EXPONENTS
    return Prediction(
        size,
        last.median * ratio**q,
        (last.median * ratio**low, last.median * ratio**high),
        SCALED,
        f"scaled from size {last.size} by (n/{last.size})^{q:.2g}",
    )


def predict(measured: Sequence[_Measured], size: int, name: str = "") -> Prediction:
    """Seconds per call at ``size`` from the measured (smaller) sizes."""
    from pytest_lyapax.report import costmodel
    from pytest_lyapax.report.series import Point

    if len(measured) >= costmodel.MIN_SIZES:
        points = [
            Point(m.size, m.median, m.median, m.median, m.samples) for m in measured
        ]
        fit = costmodel.fit_series("budget", points, name)
        if fit.fits and fit.replicates:
            import numpy as np

            reps = np.array(fit.replicates)
            p = np.nan_to_num(reps[:, 2], nan=0.0)
            values = reps[:, 0] + reps[:, 1] * float(size) ** p
            lo, hi = np.percentile(values[np.isfinite(values)], [2.5, 97.5])
            central = fit.predict(size)
            sizes = ", ".join(str(m.size) for m in measured)
            return Prediction(
                size,
                central,
                (min(float(lo), central), max(float(hi), central)),
                COST_MODEL,
                f"{costmodel.MODEL_TEXT} fitted to sizes {sizes}",
            )
    return _scaled(measured, size)


def size_cost(per_call_s: float, compile_s: float, options: Mapping[str, Any]) -> float:
    """Seconds one size takes at ``per_call_s``: the warm-up (a call plus
    ``compile_s``), pytest-benchmark's calibration call and its rounds
    (``min_rounds`` at least, ``max_time`` at least)."""
    rounds = int(options.get("min_rounds") or 1)
    max_time = float(options.get("max_time") or 0.0)
    return compile_s + 2 * per_call_s + max(rounds * per_call_s, max_time)


@dataclass(frozen=True)
class Limits:
    """The budget and ceiling of a run, in seconds (None: off)."""

    budget_s: float | None = None
    max_call_s: float | None = None

    @property
    def active(self) -> bool:
        return self.budget_s is not None or self.max_call_s is not None


_SERIES_KEY = pytest.StashKey[dict[tuple[str, str, str], Series]]()
# When the item started, less the seconds its worker had waited for turns.
_START_KEY = pytest.StashKey[float]()


def skip_over_budget(
    item: pytest.Item, label: str | None, limits: Limits, waited_s: float = 0.0
) -> None:
    """Skip (before set-up) a sized benchmark predicted not to fit, recording
    its over-budget point (see :func:`check`).  Also notes when the item
    starts, for its series' spent time (see :func:`observe`); ``waited_s``:
    the seconds this worker has waited for its turns so far (``turns.py``),
    which are not the series' own time."""
    item.stash[_START_KEY] = time.perf_counter() - waited_s
    if label is None or not limits.active:
        return
    point = check(item, label, limits)
    if point is not None:
        from pytest_lyapax.measuring.points import set_point

        set_point(item, point)
        raise pytest.skip.Exception(point["message"], _use_item_location=True)


def benchmark_options(config: pytest.Config) -> dict[str, Any]:
    """pytest-benchmark's options of this run (rounds, max time); {} if none."""
    bs = getattr(config, "_benchmarksession", None)
    return dict(getattr(bs, "options", None) or {})


def series_state(config: pytest.Config) -> dict[tuple[str, str, str], Series]:
    """The series this worker measured so far (see :func:`observe`)."""
    return config.stash.setdefault(_SERIES_KEY, {})


def check(item: pytest.Item, label: str, limits: Limits) -> dict[str, Any] | None:
    """Before a sized benchmark starts: the over-budget point and skip reason
    (``point["message"]``) when it does not fit, else None (run it)."""
    from pytest_lyapax.measuring.points import series_of

    key, size = series_of(item, label)
    if not is_size(size):
        return None
    series = series_state(item.config).setdefault(key, Series())
    options = benchmark_options(item.config)
    point = decide(series, size, limits, options, label, key[0])
    return None if point is None else {"fullname": item.nodeid, **point}


def decide(
    series: Series,
    size: int,
    limits: Limits,
    options: Mapping[str, Any],
    label: str,
    name: str = "",
) -> dict[str, Any] | None:
    """The over-budget point of ``size`` in ``series`` (without its test id),
    or None: run it (the module's rule)."""
    smaller = [m for m in series.measured if m.size < size]
    stopped = bool(series.stopped) and size > series.stopped_at
    if not smaller or (len(smaller) < 2 and not stopped):
        return None  # never extrapolated from one size: it runs
    prediction = predict(smaller, size, name)
    lo, hi = prediction.interval_s
    if stopped:
        reason = series.stopped
    elif limits.budget_s is not None:
        reason = _over_budget(series, smaller, hi, limits.budget_s, label, options)
        if not reason:
            return None
    else:
        return None
    return {
        "backend": label,
        "size": size,
        "status": OVER_BUDGET,
        "message": f"{prediction.text()}, not run: {reason}",
        "predicted_s": prediction.per_call_s,
        "predicted_interval_s": [lo, hi],
        "rule": prediction.rule,
        "basis": prediction.basis,
        "budget_s": limits.budget_s,
    }


def _over_budget(
    series: Series,
    smaller: Sequence[_Measured],
    per_call_s: float,
    budget_s: float,
    label: str,
    options: Mapping[str, Any],
) -> str:
    """Why a size whose calls may take ``per_call_s`` does not fit ("": it
    fits): its run time, or its compile (the largest of the series so far),
    each against its own account."""
    cost = size_cost(per_call_s, 0.0, options)
    left = budget_s - series.spent_s
    each = f"budget {format_duration(budget_s)} per series on backend {label!r}"
    if cost > left:
        return (
            f"{each} ({format_duration(max(left, 0.0))} left, this size would run "
            f"for up to {format_duration(cost)}; --jax-budget=none runs it)"
        )
    compile_s = max(m.compile_s for m in smaller)
    left = budget_s - series.compile_spent_s
    if compile_s > left:
        return (
            f"compile {each} ({format_duration(max(left, 0.0))} left, its compiles "
            f"took up to {format_duration(compile_s)}; a second run loads them "
            "from --jax-compile-cache; --jax-budget=none runs it)"
        )
    return ""


def compile_part(record: Mapping[str, Any]) -> float | None:
    """Seconds of the record's warm-up spent tracing, lowering and compiling
    (or loading from the persistent cache); None where not recorded."""
    w = warmup_of(record)
    total = first_call_s(record)
    if w is None or total is None:
        return None
    if w.kind == "compile" and w.first_call_s is not None:
        return max(0.0, total - w.first_call_s)
    if w.compile_s is None and w.trace_lower_s is None:
        return None
    return min(total, (w.compile_s or 0.0) + (w.trace_lower_s or 0.0))


def observe(
    item: pytest.Item,
    label: str,
    record: dict[str, Any] | None,
    limits: Limits,
    waited_s: float = 0.0,
) -> None:
    """After a sized benchmark ran: add its wall time (set-up to the end of
    its call, less the time waited for turns: ``waited_s`` as in
    :func:`skip_over_budget`) to its series, and its timing to the series'
    measured sizes."""
    from pytest_lyapax.measuring.points import series_of

    start = item.stash.get(_START_KEY, None)
    key, size = series_of(item, label)
    if start is None or not is_size(size):
        return
    series = series_state(item.config).setdefault(key, Series())
    wall_s = time.perf_counter() - waited_s - start
    stats = (record or {}).get("stats") or {}
    median = stats.get("median")
    if record is None or not isinstance(median, int | float) or median <= 0:
        series.spent_s += wall_s
        return
    first = first_call_s(record)
    first_s = first if first is not None else float(median)
    compile_s = compile_part(record)
    if compile_s is None:
        compile_s = max(0.0, first_s - float(median))
    compile_s = min(compile_s, first_s)
    series.spent_s += max(wall_s - compile_s, 0.0)
    series.compile_spent_s += compile_s
    own_s = first_s - compile_s
    samples = tuple(float(x) for x in stats.get("data") or ())
    series.measured.append(_Measured(size, float(median), samples, own_s, compile_s))
    series.measured.sort(key=lambda m: m.size)
    if limits.max_call_s is not None and own_s > limits.max_call_s:
        series.stopped = (
            f"first call took {format_duration(own_s)} (its compile of "
            f"{format_duration(compile_s)} apart) at size {size} on backend "
            f"{label!r}, above --jax-max-call {format_duration(limits.max_call_s)}"
        )
        series.stopped_at = size


def _size_of(item: pytest.Item) -> Any:
    return getattr(getattr(item, "callspec", None), "params", {}).get("jax_size")


def ascending_sizes(items: list[pytest.Item]) -> None:
    """Reorder, in place, each series' sized items so that its sizes ascend,
    within the positions those items already hold (nothing else moves)."""
    from pytest_lyapax.measuring.points import series_of
    from pytest_lyapax.run.items import item_label

    slots: dict[tuple[str, str, str], list[int]] = {}
    for index, item in enumerate(items):
        size = _size_of(item)
        if is_size(size) and "benchmark" in getattr(item, "fixturenames", ()):
            key, _ = series_of(item, item_label(item) or "")
            slots.setdefault(key, []).append(index)
    for positions in slots.values():
        ordered = sorted((items[i] for i in positions), key=_size_of)
        for index, item in zip(positions, ordered, strict=True):
            items[index] = item
