"""The regression gate's options, written once for the plugin and the CLI.

``pytest --jax-compare-fail=EXPR --jax-compare-allow-missing
--jax-compare-across-machines`` and ``pytest-lyapax compare --fail=EXPR
--allow-missing --across-machines`` are the same three options under two
prefixes: :func:`add_gate_options` declares them (names, defaults, help) on
either parser, :func:`parse_gates` reads the expressions and
:func:`refusal` words the refusal of a gate across machines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_lyapax.report.analysis import CompareThreshold, parse_threshold

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
