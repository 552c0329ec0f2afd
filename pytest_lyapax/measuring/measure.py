"""Untimed measurements around a benchmark, and out-of-memory points.

Everything here but ``time_split`` runs outside pytest-benchmark's timed
rounds, and none of it makes an extra call; it lands in the benchmark's
``extra_info`` (the report schema, version 3, names them):

``warmup``      what the first call cost.  A callable that can be lowered
                (``jax.jit`` objects, anything with ``.lower``) is traced and
                lowered, then compiled, through ``jax.stages``, each timed
                (``kind: "compile"``); any other callable gets its first call
                timed as *first-call overhead* (``kind: "first_call"``), with
                the tracing, lowering and XLA compilation time that JAX itself
                reported during that call (``jax.monitoring``).  The persistent
                compilation cache is recorded: enabled, whether it was hit,
                the programs looked up in it and found (``lookups``, ``hits``);
                ``compiles`` counts the programs XLA compiled meanwhile.
``memory``      the device's peak bytes in use (``Device.memory_stats()``, on
                GPU/TPU; a high-water mark of the worker process), the
                compiled program's argument/output/temporary bytes
                (``Compiled.memory_analysis()``, lowerable callables only) and
                the worker's peak resident memory.
``time_split``  medians over the timed calls themselves (three clock reads
                in each, about 0.2 us): the host time until the call
                returns (dispatch) and the rest until ``block_until_ready``
                (device work and synchronisation).
``args_on``     where the arguments live: ``host`` (NumPy arrays: a GPU call
                copies them in every time), ``device`` (``jax.Array``),
                ``mixed`` or ``none`` (no array argument).

A benchmark that fails with an out-of-memory error is not a crash but a
measurement: :func:`out_of_memory` recognises the error, and the plugin
records it as an ``oom`` point and skips the larger sizes of the series on
that backend (``skipped_after_oom``).  Nothing here imports JAX at module
level (the controller never starts a JAX backend).
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

OOM, SKIPPED_AFTER_OOM = "oom", "skipped_after_oom"
OVER_BUDGET = "over_budget"  # budget.py: predicted not to fit, never timed
POINT_STATUSES = (OOM, SKIPPED_AFTER_OOM, OVER_BUDGET)
WARMUP_KINDS = ("compile", "first_call")
ARGS_ON = ("host", "device", "mixed", "none")
# JAX's own compile events (jax._src.dispatch, jax._src.compiler).
_TRACE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
)
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
_CACHE_LOOKUP_EVENT = "/jax/compilation_cache/compile_requests_use_cache"


class _JaxEvents:
    """Sums JAX's monitoring events while :meth:`recording` is active.

    JAX offers no way to remove a listener in every version, so one is
    registered per process, on first use, and ignores events when idle.
    """

    def __init__(self) -> None:
        self.active = False
        self.durations: dict[str, float] = {}
        self.counts: Counter[str] = Counter()
        self.registered = False
        # Told of each XLA compile outside a warm-up recording (the name of
        # the program): compiles.py counts those made during the rounds.
        self.compile_sinks: list[Callable[[str], None]] = []

    def register(self) -> None:
        """Register the listeners (once per process)."""
        if not self.registered:
            import jax

            jax.monitoring.register_event_duration_secs_listener(self._on_duration)
            jax.monitoring.register_event_listener(self._on_event)
            self.registered = True

    def _on_duration(self, event: str, duration_secs: float, **info: str | int) -> None:
        if self.active:
            self.durations[event] = self.durations.get(event, 0.0) + duration_secs
            self.counts[event] += 1  # one per program: the compile count
        elif event == _COMPILE_EVENT:
            for sink in self.compile_sinks:
                sink(str(info.get("fun_name", "?")))

    def _on_event(self, event: str, **_: str | int) -> None:
        if self.active:
            self.counts[event] += 1

    @contextlib.contextmanager
    def recording(self) -> Iterator[_JaxEvents]:
        self.register()
        self.durations.clear()
        self.counts.clear()
        self.active = True
        try:
            yield self
        finally:
            self.active = False

    @property
    def trace_lower_s(self) -> float:
        return float(sum(self.durations.get(e, 0.0) for e in _TRACE_EVENTS))

    @property
    def compile_s(self) -> float:
        return float(self.durations.get(_COMPILE_EVENT, 0.0))

    @property
    def compiled(self) -> bool:
        return _COMPILE_EVENT in self.durations

    @property
    def compiles(self) -> int:
        """Programs XLA compiled (or loaded from the persistent cache)."""
        return self.counts[_COMPILE_EVENT]

    @property
    def cache_hits(self) -> int:
        return self.counts[_CACHE_HIT_EVENT]

    @property
    def cache_lookups(self) -> int:
        """Programs looked up in the persistent cache (hits and misses)."""
        return self.counts[_CACHE_LOOKUP_EVENT]


_EVENTS = _JaxEvents()


@contextlib.contextmanager
def compiles_outside_warm_up(sink: Callable[[str], None]) -> Iterator[None]:
    """Tell ``sink`` the program name of every XLA compile made inside,
    except during a warm-up recording (:func:`warm_up`,
    :func:`first_call_recorder`: those compiles are the warm-up's)."""
    _EVENTS.register()
    _EVENTS.compile_sinks.append(sink)
    try:
        yield
    finally:
        _EVENTS.compile_sinks.remove(sink)


def warming_up() -> bool:
    """Whether a warm-up recording is under way (its first call runs)."""
    return _EVENTS.active


def _cache_state(events: _JaxEvents) -> dict[str, Any]:
    """Whether the persistent compilation cache is on and was hit (None: on,
    but nothing was compiled or looked up, or off), and how many programs
    were looked up in it and found (``lookups``, ``hits``)."""
    import jax

    enabled = bool(getattr(jax.config, "jax_enable_compilation_cache", False)) and bool(
        getattr(jax.config, "jax_compilation_cache_dir", None)
    )
    hit: bool | None = None
    if enabled and events.cache_hits:
        hit = True
    elif enabled and events.compiled:
        hit = False
    return {
        "enabled": enabled,
        "hit": hit,
        "lookups": events.cache_lookups,
        "hits": events.cache_hits,
    }


def warm_up(
    function: Callable[..., Any],
    call: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    around_call: Callable[[], contextlib.AbstractContextManager[Any]] = (
        contextlib.nullcontext
    ),
) -> tuple[dict[str, Any], Any]:
    """Make the untimed first call of ``function`` (through ``call``, which
    blocks on the result, inside ``around_call()``, outside its timer);
    return the ``warmup`` entry and the compiled program (None unless
    ``function`` could be lowered).

    A ``.lower`` that fails (not a ``jax.jit`` object after all, arguments it
    cannot trace) falls back to timing the first call; an error of the call
    itself propagates.
    """
    compiled = None
    kind, trace_lower_s, compile_s = "first_call", None, None
    with _EVENTS.recording() as events:
        lower = getattr(function, "lower", None)
        if callable(lower):
            try:
                start = time.perf_counter()
                lowered = lower(*args, **kwargs)
                lowered_at = time.perf_counter()
                compiled = lowered.compile()
                compile_s = time.perf_counter() - lowered_at
                trace_lower_s = lowered_at - start
                kind = "compile"
            except Exception:  # noqa: BLE001 - then the first call is timed instead
                compiled = None
        with around_call():
            start = time.perf_counter()
            call(*args, **kwargs)
            first_call_s = time.perf_counter() - start
    if kind == "first_call":
        # What JAX measured itself during the call (0.0: nothing compiled).
        trace_lower_s, compile_s = events.trace_lower_s, events.compile_s
    warmup = {
        "kind": kind,
        "first_call_s": first_call_s,
        "trace_lower_s": trace_lower_s,
        "compile_s": compile_s,
        "cache": _cache_state(events),
        "compiles": events.compiles,
    }
    return warmup, compiled


@contextlib.contextmanager
def first_call_recorder(into: dict[str, Any]) -> Iterator[None]:
    """Record a ``first_call`` warm-up entry for the call made inside (used
    by ``pedantic``, whose first round is its first call)."""
    with _EVENTS.recording() as events:
        start = time.perf_counter()
        yield
        first_call_s = time.perf_counter() - start
    into.update(
        kind="first_call",
        first_call_s=first_call_s,
        trace_lower_s=events.trace_lower_s,
        compile_s=events.compile_s,
        cache=_cache_state(events),
        compiles=events.compiles,
    )


def _program_bytes(compiled: Any) -> dict[str, int | None]:
    empty: dict[str, int | None] = {
        "argument_bytes": None,
        "output_bytes": None,
        "temp_bytes": None,
    }
    if compiled is None:
        return empty
    try:
        stats = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - a backend without the analysis
        return empty
    if stats is None:
        return empty
    out = dict(empty)
    for key, attr in (
        ("argument_bytes", "argument_size_in_bytes"),
        ("output_bytes", "output_size_in_bytes"),
        ("temp_bytes", "temp_size_in_bytes"),
    ):
        value = getattr(stats, attr, None)
        out[key] = int(value) if isinstance(value, int) and value >= 0 else None
    return out


def _device_peak_bytes() -> int | None:
    """The largest ``peak_bytes_in_use`` of this process's devices (None where
    the backend does not report it, as the CPU does not)."""
    import jax

    peaks = []
    for device in jax.local_devices():
        try:
            stats = device.memory_stats()
        except Exception:  # noqa: BLE001 - not every backend implements it
            stats = None
        value = (stats or {}).get("peak_bytes_in_use")
        if isinstance(value, int) and value >= 0:
            peaks.append(value)
    return max(peaks) if peaks else None


def host_peak_rss_bytes() -> int | None:
    """Peak resident memory of this process (None where unknown)."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) * (1 if sys.platform == "darwin" else 1024)


def memory(compiled: Any = None) -> dict[str, int | None]:
    """The ``memory`` entry, read now (after the warm-up call)."""
    return {
        "device_peak_bytes": _device_peak_bytes(),
        **_program_bytes(compiled),
        "host_peak_rss_bytes": host_peak_rss_bytes(),
    }


#: The dispatch/device split keeps the last this many timed calls (a fast
#: benchmark makes hundreds of thousands); every call is counted.
MAX_SPLIT_SAMPLES = 10_000


class SplitSamples:
    """``(dispatch, device)`` seconds of the timed calls: ``add`` one call;
    the last :data:`MAX_SPLIT_SAMPLES` are kept, ``calls`` counts all."""

    def __init__(self) -> None:
        self.samples: deque[tuple[float, float]] = deque(maxlen=MAX_SPLIT_SAMPLES)
        self.calls = 0

    def add(self, dispatch: float, device: float) -> None:
        self.samples.append((dispatch, device))
        self.calls += 1


def time_split(split: SplitSamples) -> dict[str, Any]:
    """The ``time_split`` entry: medians of the kept calls' dispatch and
    device seconds, and how many calls were timed."""
    return {
        "dispatch_s": statistics.median(s[0] for s in split.samples),
        "device_s": statistics.median(s[1] for s in split.samples),
        "calls": split.calls,
    }


def args_on(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """Where the array arguments live: ``host``, ``device``, ``mixed`` or ``none``.

    NumPy arrays are on the host (a call on a GPU copies them to the device
    every time); ``jax.Array`` values are already on a device.  Scalars do
    not count.
    """
    import jax
    import numpy as np

    leaves = jax.tree_util.tree_leaves((tuple(args), dict(kwargs)))
    on_device = any(isinstance(leaf, jax.Array) for leaf in leaves)
    on_host = any(
        isinstance(leaf, np.ndarray) and not isinstance(leaf, jax.Array)
        for leaf in leaves
    )
    if on_device and on_host:
        return "mixed"
    return "device" if on_device else "host" if on_host else "none"


#: NumPy argument bytes from which the copy at every call on a non-CPU
#: backend is warned about (``compiles.py``): below, it costs about a launch.
HOST_COPY_MIN_BYTES = 64 * 1024


def host_transfers(
    args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The ``transfers`` entry: the NumPy (host) arrays among the arguments,
    which every call copies to the device (None: there are none).

    Found from the arguments' types: ``jax.transfer_guard("log")`` reports
    the copies through JAX's C++ logging, which Python cannot capture, and
    ``"disallow"`` would stop the benchmark.
    """
    import jax
    import numpy as np

    leaves = jax.tree_util.tree_leaves((tuple(args), dict(kwargs)))
    host = [
        leaf
        for leaf in leaves
        if isinstance(leaf, np.ndarray) and not isinstance(leaf, jax.Array)
    ]
    if not host:
        return None
    platform = jax.default_backend()
    return {
        "host_arrays": len(host),
        "host_bytes": sum(int(a.nbytes) for a in host),
        "platform": platform,
        # On the CPU a call may use the NumPy buffer in place.
        "copied_every_call": platform != "cpu",
        "found_by": "argument types (NumPy arrays)",
    }


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says the backend ran out of memory: jaxlib's
    ``RESOURCE_EXHAUSTED`` runtime error, or Python's ``MemoryError``."""
    if isinstance(exc, MemoryError):
        return True
    jax = sys.modules.get("jax")
    runtime_error = getattr(getattr(jax, "errors", None), "JaxRuntimeError", None)
    return (
        isinstance(runtime_error, type)
        and isinstance(exc, runtime_error)
        and "RESOURCE_EXHAUSTED" in str(exc)
    )


def short_message(exc: BaseException, limit: int = 300) -> str:
    """The first line of an error, at most ``limit`` characters."""
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."
