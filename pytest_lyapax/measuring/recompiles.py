"""Compiles during a benchmark's rounds, and host arguments copied every call.

A jitted function is traced and compiled at its first call (the warm-up,
outside the rounds) and found in JAX's caches afterwards.  A benchmark whose
rounds compile again times the compiler: a callable that builds a new
``jax.jit(lambda ...)`` at each call, arguments whose shapes or dtypes
change between rounds, a static argument that changes.

:class:`CompileObserver` counts XLA's compiles (``jax.monitoring``'s
backend-compile events, through the process's one listener in
``measure.py``) from the first round to the last -- calibration and
pytest-benchmark's warm-up rounds included, the plugin's untimed warm-up
call and ``pedantic``'s first call not (they are the first compile) -- and
asks JAX why: while the rounds run it turns ``jax_explain_cache_misses`` on
(the previous value is restored at each pause) and captures the
"TRACING CACHE MISS" records JAX then logs (logger :data:`EXPLAIN_LOGGER`,
kept from the user's log while the plugin turned explaining on).
:func:`miss_reason` classifies each: a new function object, new shapes or
dtypes, a changed static argument, another argument structure, a changed
tracing context, else JAX's first line.

``extra_info["recompiles"]`` = ``{"count", "reasons", "kinds", "programs",
"policy"}``.  With compiles, ``--jax-recompile`` decides: ``warn`` (default,
a :class:`RecompileWarning` naming the test, the count and the reasons),
``fail`` (the test fails with that message) or ``ignore`` (recorded only).
The same policy covers arguments copied host to device at every call:
NumPy arrays of at least ``measure.HOST_COPY_MIN_BYTES`` among the arguments
on a non-CPU backend (``extra_info["transfers"]``, found from the argument
types, see ``measure.host_transfers``) give a :class:`HostTransferWarning`.
Both are ordinary warnings raised in the test, like ``DispatchOnlyWarning``:
a project with ``filterwarnings = error`` sees them fail the test.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_lyapax.measuring import measure
from pytest_lyapax.measuring.observer import RoundObserver
from pytest_lyapax.report.units import format_bytes

# Where JAX logs its explanations (jax/_src/interpreters/partial_eval.py,
# function ``explain``, jax 0.4.36 to 0.10 at least).
EXPLAIN_LOGGER = "jax._src.interpreters.partial_eval"
MISS_PREFIX = "TRACING CACHE MISS"
# Kinds of cache miss, as the reasons name them.
NEW_FUNCTION = "new function object"
NEW_TYPES = "new shapes or dtypes"
STATIC = "changed static argument"
STRUCTURE = "new argument structure"
CONTEXT = "changed tracing context"
KINDS = (NEW_FUNCTION, NEW_TYPES, STATIC, STRUCTURE, CONTEXT)
_HINTS = {
    NEW_FUNCTION: "a function built anew at each call (e.g. jax.jit(lambda ...) "
    "inside the benchmarked callable) is never found in JAX's caches",
    NEW_TYPES: "each new shape or dtype is traced and compiled once",
    STATIC: "each value of a static argument is compiled once",
}
_SHOWN_PROGRAMS = 5


class RecompileWarning(UserWarning):
    """XLA compiled during a benchmark's timed rounds: the timing includes
    the compiler."""


class HostTransferWarning(UserWarning):
    """A benchmark's NumPy arguments are copied to the device at every call."""


def _where(path: str) -> str:
    """``FILE:LINE`` shortened to the file's name."""
    head, _, line = path.rpartition(":")
    name = head.replace("\\", "/").rsplit("/", 1)[-1] if head else path
    return f"{name}:{line}" if head and line.isdigit() else name


_NEVER_SEEN = re.compile(
    r"never seen function:\s*\n\s*(\S+) id=\d+(?: defined at (\S+))?"
)
_FOR = re.compile(r"^\s*for (\S+)(?: defined at (\S+))?", re.MULTILINE)
_STATIC = re.compile(
    r"at input path (\S+), now .*?Static\(val=(.*?)\) and before .*?Static\(val=(.*?)\)"
)
_ITEM = re.compile(r"^\s*\* (.*)$", re.MULTILINE)


def miss_reason(message: str) -> tuple[str, str]:
    """The kind of a "TRACING CACHE MISS" explanation (one of :data:`KINDS`,
    or JAX's first line when none fits) and an example of it in a line."""
    never = _NEVER_SEEN.search(message)
    if never:
        where = f" defined at {_where(never.group(2))}" if never.group(2) else ""
        return NEW_FUNCTION, f"{never.group(1)}{where}"
    named = _FOR.search(message)
    function = named.group(1) if named else "the function"
    items = _ITEM.findall(message)
    first = items[0].strip() if items else ""
    if "different input types" in message:
        return NEW_TYPES, f"{function} {first}".strip()
    if "different input pytree" in message:
        static = _STATIC.search(message)
        if static:
            path, now, before = static.groups()
            return (
                STATIC,
                f"{function} at input path {path}: now {now}, before {before}",
            )
        return STRUCTURE, f"{function} {first}".strip()
    if "Tracing context doesn't match" in message:
        return CONTEXT, f"{function} {first}".strip()
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return (lines[1] if len(lines) > 1 else lines[0] if lines else "unexplained"), ""


class _MissHandler(logging.Handler):
    """Passes JAX's cache-miss explanations made outside a warm-up on."""

    def __init__(self, sink: Callable[[str], None]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        if measure.warming_up():
            return
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is no explanation
            return
        if message.startswith(MISS_PREFIX):
            self.sink(message)


@contextlib.contextmanager
def explained_misses(sink: Callable[[str], None]) -> Iterator[None]:
    """While inside: JAX explains its tracing-cache misses and ``sink``
    receives each explanation; the previous ``jax_explain_cache_misses``,
    and the logger's level and propagation, are restored after.  When the
    plugin (not the user) turned explaining on, the explanations stay out
    of the user's log."""
    import jax

    logger = logging.getLogger(EXPLAIN_LOGGER)
    previous = bool(getattr(jax.config, "jax_explain_cache_misses", False))
    level, propagate = logger.level, logger.propagate
    handler = _MissHandler(sink)
    logger.addHandler(handler)
    if not previous:
        logger.propagate = False
        if logger.getEffectiveLevel() > logging.WARNING:
            logger.setLevel(logging.WARNING)  # JAX logs them as warnings
        jax.config.update("jax_explain_cache_misses", True)
    try:
        yield
    finally:
        if not previous:
            jax.config.update("jax_explain_cache_misses", previous)
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


class CompileObserver(RoundObserver):
    """Counts XLA compiles during the rounds and collects JAX's reasons;
    writes ``extra_info["recompiles"]`` and applies the policy."""

    key = "recompiles"

    def __init__(self, policy: str = "warn") -> None:
        self.policy = policy
        self.count = 0
        self.programs: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self.examples: dict[str, str] = {}
        self._stack: contextlib.ExitStack | None = None

    def _compiled(self, program: str) -> None:
        self.count += 1
        self.programs[program] += 1

    def _missed(self, message: str) -> None:
        kind, example = miss_reason(message)
        self.kinds[kind] += 1
        self.examples.setdefault(kind, example)

    def start(self) -> None:
        if self._stack is not None:
            return
        stack = contextlib.ExitStack()
        stack.enter_context(measure.compiles_outside_warm_up(self._compiled))
        stack.enter_context(explained_misses(self._missed))
        self._stack = stack

    def stop(self) -> None:
        if self._stack is not None:
            stack, self._stack = self._stack, None
            stack.close()

    def reasons(self) -> list[str]:
        """One line per kind of miss, in order of first appearance."""
        out = []
        for kind, n in self.kinds.items():
            example = self.examples.get(kind)
            text = f"{kind} ({n}x)"
            if example:
                text += f", e.g. {example}"
            out.append(text)
        if self.count and not out:
            compiled = ", ".join(
                f"{name} {n}x" for name, n in self.programs.most_common(_SHOWN_PROGRAMS)
            )
            out.append(f"no explanation from JAX; programs compiled: {compiled}")
        return out

    def record(self, extra_info: dict[str, Any], data: Sequence[float]) -> None:
        self.stop()
        reasons = self.reasons() if self.count else []
        extra_info[self.key] = {
            "count": self.count,
            "reasons": reasons,
            "kinds": dict(self.kinds),
            "programs": dict(self.programs.most_common(_SHOWN_PROGRAMS)),
            "policy": self.policy,
        }
        if self.policy == "ignore":
            return
        test = self.test or "a benchmark"
        problems: list[tuple[type[UserWarning], str]] = []
        if self.count:
            hints = [_HINTS[kind] for kind in self.kinds if kind in _HINTS]
            text = compile_message(test, self.count, len(data), reasons + hints)
            problems.append((RecompileWarning, text))
        copy = copy_message(test, extra_info)
        if copy is not None:
            problems.append((HostTransferWarning, copy))
        if not problems:
            return
        if self.policy == "fail":
            text = "\n".join(message for _, message in problems)
            pytest.fail(f"{text}\n(--jax-recompile=fail)", pytrace=False)
        for category, message in problems:
            warnings.warn(category(message), stacklevel=_user_level())


def _user_level() -> int:
    """The ``stacklevel`` of the first frame outside the plugin and
    pytest-benchmark, seen from the caller of ``warnings.warn``: the
    warning then points at the test."""
    import pytest_benchmark

    own = tuple(
        str(Path(module.__file__ or "").resolve().parent)
        for module in (pytest_benchmark, sys.modules["pytest_lyapax"])
    )
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(own):
        frame, level = frame.f_back, level + 1
    return level


def compile_message(test: str, count: int, rounds: int, reasons: Sequence[str]) -> str:
    """The warning or failure text of compiles during the rounds."""
    because = "; ".join(reasons) if reasons else "JAX gave no reason"
    return (
        f"{test}: {count} XLA compile(s) during its rounds ({rounds} timed), so the "
        f"timings include the compiler. Why: {because}. Compile once outside the "
        "timed call: build the jax.jit function once, keep shapes, dtypes and "
        "static arguments fixed (extra_info['recompiles'])"
    )


def copy_message(test: str, extra_info: Mapping[str, Any]) -> str | None:
    """The warning text of host arguments copied at every call on a non-CPU
    backend (None: no such copy, or too small to matter)."""
    transfers = extra_info.get("transfers")
    if not isinstance(transfers, Mapping) or not transfers.get("copied_every_call"):
        return None
    size = transfers.get("host_bytes")
    if not isinstance(size, int) or size < measure.HOST_COPY_MIN_BYTES:
        return None
    return (
        f"{test}: {transfers.get('host_arrays')} NumPy argument(s), "
        f"{format_bytes(size)}, are copied host to device at every call on "
        f"{transfers.get('platform')}, inside the timing; pass jax.device_put(x) "
        "to time the computation alone (found from the argument types)"
    )


def pooled(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    """Two processes' ``recompiles`` entries of one benchmark as one
    (``--jax-processes``): counts added, reasons and programs merged."""

    def counts(entry: Mapping[str, Any], key: str) -> Counter[str]:
        value = entry.get(key)
        return Counter(
            {str(k): int(v) for k, v in value.items() if isinstance(v, int)}
            if isinstance(value, Mapping)
            else {}
        )

    def listed(entry: Mapping[str, Any]) -> list[str]:
        value = entry.get("reasons")
        return [str(r) for r in value] if isinstance(value, list) else []

    count = sum(int(e.get("count") or 0) for e in (mine, theirs))
    return {
        **mine,
        "count": count,
        "reasons": list(dict.fromkeys(listed(mine) + listed(theirs))),
        "kinds": dict(counts(mine, "kinds") + counts(theirs, "kinds")),
        "programs": dict(counts(mine, "programs") + counts(theirs, "programs")),
    }
