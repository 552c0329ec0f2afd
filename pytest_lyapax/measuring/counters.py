"""Counters of a benchmarked call that noise cannot move.

``extra_info["counters"]`` holds, per benchmark, numbers that the compiled
programs fix, whatever else the machine is doing:

``flops``, ``bytes``  XLA's cost analysis of the compiled program (the
                      ``roofline`` entry's numbers, loop bodies counted once
                      per trip where XLA knows the trip counts); for a
                      host-side driver that ``jax.jit`` cannot trace, the
                      sum of the programs its first call compiled, each
                      counted once (``roofline.programs_note``).
``temp_bytes``        XLA's memory analysis: the program's temporary bytes
(``argument_bytes``,  (and its argument and output bytes); only for a
``output_bytes``)     callable that has ``.lower`` (``jax.jit``), whose
                      program is the one that runs.
``compiles``          how many programs XLA compiled (or loaded from the
                      persistent cache) during the warm-up: the explicit
                      lower/compile and the first call, counted from JAX's
                      ``backend_compile`` monitoring events.  It counts the
                      programs *this process* had not compiled before, so an
                      earlier test that compiled the same function leaves
                      fewer here.
``executions``        XLA executable launches during one call: the untimed
                      first call of ``benchmark(f)``'s warm-up, traced by
                      JAX's profiler (the PJRT client's ``Execute`` trace
                      events, host tracer only; started and stopped outside
                      the first call's timer).  No extra call: a callable
                      that launches something on its first call only would
                      have it counted.

A counter that cannot be known is ``{"unavailable": reason}``, never a
guess: flops and bytes when the cost analysis is missing, temp bytes of a
callable without ``.lower``, launches under ``pedantic`` (its first call
is a timed round: no tracer may slow it), launches when the profiler
cannot start (another trace is running) or names no launch this module
recognises (a PJRT client whose trace events are spelled otherwise).
Nothing here imports JAX at module level.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

UNAVAILABLE = "unavailable"
COUNTER_FIELDS = ("flops", "bytes", "temp_bytes", "compiles", "executions")
# One launch of a program by jaxlib's own PJRT client (CPU; checked with
# jax 0.10.2): the single-device path names the helper, the multi-device
# path one ``Execute (name)`` on the calling thread (the per-device copies
# are prefixed ``[i] `` and not counted).
_LAUNCH = re.compile(
    r"^\w*PjRt\w*Executable::(ExecuteHelperOnSingleDevice$|Execute \()"
)
# The PJRT C API wrapper of a plugin (the GPU plugins): its events are seen,
# but how many there are per launch has not been checked on a GPU.
_C_API = re.compile(r"^PjRtCApiLoadedExecutable::Execute")


def unavailable(reason: str) -> dict[str, str]:
    """A counter that cannot be known, and why."""
    return {UNAVAILABLE: reason}


def launches_in(names: Sequence[str]) -> Any:
    """How many executable launches a profiler trace's event names hold, or
    ``{"unavailable": reason}`` when it names none this module can count."""
    found = sum(1 for name in names if _LAUNCH.match(name))
    if found:
        return found
    wrapped = sum(1 for name in names if _C_API.match(name))
    if wrapped:
        return unavailable(
            f"the trace holds {wrapped} PJRT C API execute event(s) (a plugin "
            "backend); how many there are per launch is not checked for it"
        )
    return unavailable(
        "the profiler trace names no executable launch this plugin knows "
        "(a PJRT client with other event names)"
    )


class LaunchCount:
    """The XLA executable launches of the calls made inside :meth:`tracing`,
    counted from JAX's profiler (host tracer only): after it, ``value`` is
    the count or ``{"unavailable": reason}``."""

    def __init__(self) -> None:
        self.value: Any = unavailable("no call was traced")

    @contextlib.contextmanager
    def tracing(self) -> Iterator[None]:
        """Trace the calls inside; an error of theirs propagates."""
        try:
            from jax.profiler import ProfileData, ProfileOptions
            from jaxlib import _profiler  # type: ignore[attr-defined]  # no stubs
        except ImportError as exc:
            self.value = unavailable(f"JAX's profiler is missing: {exc}")
            yield
            return
        options = ProfileOptions()
        options.python_tracer_level = 0  # Python frames would only cost time
        options.host_tracer_level = 1
        try:
            session = _profiler.ProfilerSession(options)
        except Exception as exc:  # noqa: BLE001 - e.g. a trace of the user's runs
            self.value = unavailable(
                f"the profiler did not start: {type(exc).__name__}: {exc}"
            )
            yield
            return
        try:
            yield
        finally:
            try:
                raw = session.stop()
            except Exception as exc:  # noqa: BLE001 - another session is active
                raw = None
                self.value = unavailable(
                    f"the profiler did not trace: {type(exc).__name__}: {exc}"
                )
        if raw is None:
            return
        try:
            trace = ProfileData.from_serialized_xspace(raw)
            names = [
                event.name
                for plane in trace.planes
                for line in plane.lines
                for event in line.events
            ]
        except Exception as exc:  # noqa: BLE001 - an unreadable trace
            self.value = unavailable(
                f"the profiler trace is unreadable: {type(exc).__name__}"
            )
            return
        self.value = launches_in(names)


def _of_work(work: Mapping[str, Any], key: str) -> Any:
    value = work.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return unavailable(str(work.get("reason") or f"the cost analysis has no {key}"))


def _of_memory(memory: Mapping[str, Any], key: str, why: str) -> Any:
    value = memory.get(key)
    return (
        value
        if isinstance(value, int) and not isinstance(value, bool)
        else (unavailable(why))
    )


def counters(
    work: Mapping[str, Any],
    memory: Mapping[str, Any],
    compiles: Any,
    executions: Any,
    lowered: bool,
) -> dict[str, Any]:
    """The ``counters`` entry from the ``roofline`` work entry, the
    ``memory`` entry, the warm-up's compile count and the launch count
    (each a number or ``{"unavailable": reason}``); ``lowered``: whether
    the memory figures are of the program that runs (a ``.lower``-able
    callable)."""
    no_memory = (
        "XLA's memory analysis gave nothing for this program"
        if lowered
        else "the callable has no .lower (not jitted): its programs are not known"
    )
    return {
        "flops": _of_work(work, "flops"),
        "bytes": _of_work(work, "bytes"),
        "temp_bytes": _of_memory(memory, "temp_bytes", no_memory),
        "argument_bytes": _of_memory(memory, "argument_bytes", no_memory),
        "output_bytes": _of_memory(memory, "output_bytes", no_memory),
        "compiles": compiles,
        "executions": executions,
    }
