"""The regression gate: its limits, and its options written once for the
plugin and the CLI.

A limit (:class:`CompareThreshold`, read by :func:`parse_threshold`) decides
whether a benchmark regressed against a saved run.

``pytest --jax-compare-fail=EXPR --jax-compare-allow-missing
--jax-compare-across-machines`` and ``pytest-lyapax compare --fail=EXPR
--allow-missing --across-machines`` are the same three options under two
prefixes: :func:`add_gate_options` declares them (names, defaults, help) on
either parser, :func:`parse_gates` reads the expressions and
:func:`refusal` words the refusal of a gate across machines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_lyapax.report import counters
from pytest_lyapax.report.schema import TIME_FIELDS
from pytest_lyapax.report.units import format_seconds

_UNITS = {"%": None, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_THRESHOLD = re.compile(
    r"^(?P<field>[a-z]+):(?P<value>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
    r"(?P<unit>%|s|ms|us|ns)?$"
)


@dataclass(frozen=True)
class CompareThreshold:
    """A regression limit: ``median:25%`` (relative) or ``median:25ms``
    (absolute) on a time statistic, or ``flops:5%`` / ``compiles:1`` on an
    exact counter (:data:`~pytest_lyapax.report.counters.GATED`)."""

    field: str
    limit: float  # percent if relative, else seconds (a count for a counter)
    relative: bool

    @property
    def counter(self) -> bool:
        """Whether this gate reads an exact counter, not a time: no noise
        test applies and a busy machine does not excuse it."""
        return self.field in counters.GATED

    def excess(self, saved: float, now: float) -> float:
        """Return the change from ``saved`` to ``now``: percent if relative,
        else seconds (or counts)."""
        if self.relative:
            if saved > 0:
                return (now / saved - 1.0) * 100.0
            # A counter may be 0 (no temporary bytes): 0 -> 0 is no change.
            return 0.0 if self.counter and now == saved else float("inf")
        return now - saved

    def exceeded(self, saved: float, now: float) -> bool:
        """Whether ``now`` is slower (a counter: larger) than ``saved`` by
        more than the limit."""
        if self.counter and self.relative and saved > 0:
            # Growth against the allowed growth: exactly 5 % passes flops:5%.
            return now - saved > saved * self.limit / 100.0
        return self.excess(saved, now) > self.limit

    def format_change(self, change: float) -> str:
        """A change as this threshold measures it, in readable units."""
        if self.relative:
            return f"{change:+.1f}%"
        if self.counter:
            return f"{change:+.0f}"
        sign = "+" if change >= 0 else "-"
        return sign + format_seconds(abs(change))

    def __str__(self) -> str:
        if self.relative:
            return f"{self.field}:{self.limit:g}%"
        if self.counter:
            return f"{self.field}:{self.limit:g}"
        return f"{self.field}:{format_seconds(self.limit).replace(' ', '')}"


def _counter_threshold(
    text: str, name: str, value: str, unit: str | None
) -> CompareThreshold:
    """A gate on a counter: a percent, or a bare count for ``compiles``."""
    if unit == "%":
        return CompareThreshold(name, float(value), relative=True)
    counted = name in counters.COUNTED
    if unit is None and counted and value.isdigit():
        return CompareThreshold(name, float(value), relative=False)
    forms = f"{name}:{value}%" + (f" or a whole count, {name}:1" if counted else "")
    raise ValueError(
        f"cannot read {text!r}: the counter {name} takes a percent ({forms})"
    )


def parse_threshold(text: str) -> CompareThreshold:
    """Parse ``FIELD:N%`` (relative) or ``FIELD:N`` with a unit s, ms, us or
    ns on a time statistic, or ``COUNTER:N%`` on a counter (``compiles``
    also a whole count, ``compiles:1``).

    A bare time is refused: ``median:25`` could mean 25 % or 25 s.  Raises
    ValueError naming the text and the allowed forms.
    """
    text = text.strip()
    match = _THRESHOLD.match(text)
    fields = ", ".join(TIME_FIELDS)
    if not match or match["field"] not in (*TIME_FIELDS, *counters.GATED):
        raise ValueError(
            f"cannot read {text!r}; write FIELD:PERCENT% or FIELD:TIME with a unit "
            f"(s, ms, us, ns), FIELD one of {fields}, e.g. median:25% or median:25ms;"
            f" or COUNTER:PERCENT%, COUNTER one of {', '.join(counters.GATED)} "
            "(compiles also a whole count), e.g. flops:5% or compiles:1"
        )
    value, unit = match["value"], match["unit"]
    if match["field"] in counters.GATED:
        return _counter_threshold(text, match["field"], value, unit)
    if unit is None:
        raise ValueError(
            f"{text!r} has no unit: write {match['field']}:{value}% for a relative "
            f"limit, or {match['field']}:{value}ms / {match['field']}:{value}s for "
            "an absolute one"
        )
    scale = _UNITS[unit]
    return CompareThreshold(
        field=match["field"],
        limit=float(value) if scale is None else float(value) * scale,
        relative=scale is None,
    )


# ``%%``: argparse (and pytest's parser, built on it) formats help with ``%``.
EXPRESSION = (
    "FIELD:PERCENT%% or FIELD:TIME with a unit (s, ms, us, ns), e.g. median:25%% "
    "or median:25ms; or COUNTER:PERCENT%% on an exact counter per call, COUNTER "
    "one of flops, bytes, temp, compiles (compiles also a whole count, "
    "compiles:1), e.g. flops:5%%"
)


@dataclass(frozen=True)
class GateOption:
    """One gate option: its name after the prefix and its help text.

    ``{fail}`` and ``{across}`` in ``help`` stand for the prefixed names of
    the other options, so each parser's help names its own spelling.
    """

    stem: str
    help: str
    repeatable: bool = False


GATE_OPTIONS = (
    GateOption(
        "fail",
        "Fail when a benchmark is slower than in the saved run by more than "
        f"EXPR: {EXPRESSION}; repeatable (each is a gate); also fails when "
        "nothing could be compared, a saved benchmark is missing or a counter "
        "is unavailable on either side. A counter gate compares exact counts "
        "(XLA's cost and memory analysis, compile events): no noise test, and "
        "a busy machine never excuses it. Refused "
        "(usage error) against a run of another host or device unless {across}",
        repeatable=True,
    ),
    GateOption(
        "allow-missing",
        "With {fail}: do not fail when saved benchmarks are missing from this "
        "run, nothing matched or a gated counter is unavailable (reported as "
        "not comparable)",
    ),
    GateOption(
        "across-machines",
        "With {fail}: gate even when the saved run was measured on another "
        "host or device (the differences are still reported)",
    ),
)


def add_gate_options(
    add: Callable[..., Any], prefix: str, dest_prefix: str = "", note: str = ""
) -> None:
    """Declare the gate options through ``add`` (``argparse``'s
    ``add_argument`` or a pytest group's ``addoption``).

    Each is named ``prefix + stem`` (``--jax-compare-fail``, ``--fail``)
    and stored in ``dest_prefix + stem`` with ``_`` for ``-``; ``note`` is
    added to every help text, before its full stop, e.g.
    ``" (needs --jax-backend)"``.
    """
    names = {"fail": prefix + "fail", "across": prefix + "across-machines"}
    for option in GATE_OPTIONS:
        kind: dict[str, Any] = (
            {"action": "append", "default": [], "metavar": "EXPR"}
            if option.repeatable
            else {"action": "store_true", "default": False}
        )
        add(
            prefix + option.stem,
            dest=dest_prefix + option.stem.replace("-", "_"),
            help=option.help.format(**names) + note + ".",
            **kind,
        )


def parse_gates(texts: Sequence[str], option: str) -> tuple[CompareThreshold, ...]:
    """Parse each gate expression (``FIELD:N%`` or ``FIELD:N`` with a time
    unit, ``COUNTER:N%``, ``compiles:N``); raises ``ValueError`` naming
    ``option`` and the expression."""
    try:
        return tuple(parse_threshold(text) for text in texts)
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from None


def refusal(why: str, across: str) -> str:
    """Why a gate between runs of different machines is refused, and how to
    gate anyway (``across``: that parser's across-machines option)."""
    return (
        f"{why}; a gate across machines compares the machines, not the code: "
        f"compare runs of one machine, or pass {across} to gate anyway"
    )
