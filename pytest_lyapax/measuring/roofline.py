"""The work of a benchmarked call (XLA cost analysis) and the machine's peaks.

Work per call: the compiled program's ``cost_analysis()`` gives its FLOPs,
transcendental operations and bytes accessed.  A callable that has
``.lower`` (``jax.jit``, ``equinox.filter_jit``) reuses the program its
warm-up already compiled; any other callable is wrapped in ``jax.jit`` and
lowered and compiled once more with the call's arguments, outside every
timed region (when it cannot be traced, or the analysis is missing or empty,
the entry says ``"not available"`` and why -- never a guess).

XLA's cost analysis counts the body of a ``while`` loop once, whatever its
trip count (``lax.fori_loop``/``lax.scan`` with a known length included).
Where XLA knows every loop's trip count (``known_trip_count`` in the
optimised HLO), the work is scaled: each loop body is analysed as a program
of its own (the optimised HLO text with that body as entry, through
jaxlib's ``hlo_module_cost_analysis``) and, from the innermost loop out,
``scaled(C) = cost(C) + sum over loops w in C of (trips(w) * scaled(body(w))
- cost(body(w)))``; the loop conditions stay counted once (a compare per
trip).  The entry then says ``loop_scaled: true`` with the trip counts.
When a trip count is unknown (a loop whose length is a runtime value), a
loop sits in a computation other than the entry or a loop body, or those
jaxlib internals are missing, the numbers stay as XLA gives them,
``loop_scaled: false`` with ``loop_note`` saying why: then ``flops`` and
``bytes`` are a lower bound (one pass through each loop body), and so are
the achieved rates derived from them.

Peaks, measured once per worker process (a few seconds at most, no
benchmark is timed meanwhile): memory bandwidth from a triad ``a + s * b``
on arrays far larger than the caches (2**24 elements on a CPU, 2**26
elsewhere; 3 x itemsize bytes per element read or written; ``a`` donated,
so no call allocates), the arithmetic rate from ``(n, n) @ (n, n)`` matmuls (``2 n**3``
FLOPs; n = 256 and 1024 on a CPU, 1024 and 4096 elsewhere, the faster
counts) in the benchmarks' dtype (float64 when ``jax_enable_x64`` is on),
and the launch floor from an empty jitted call on a scalar.  Each is the best
of a few repetitions (the machine's capability, not its average).
Nothing here imports JAX at module level.
"""

from __future__ import annotations

import contextlib
import functools
import re
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

SOURCE = "xla cost analysis"
NOT_AVAILABLE = "not available"
_TRIP_COUNT = re.compile(r'known_trip_count"?\s*[:=]\s*\{\s*"?n"?\s*[:=]\s*"?(\d+)')
_WHILE = re.compile(r"\bwhile\(")
# A computation's first line in HLO text, and a while instruction.
_HEADER = re.compile(r"^(ENTRY )?%?([\w.\-]+) \(.*\{\s*$", re.M)
_WHILE_OP = re.compile(
    r"\bwhile\(.*?\), condition=%?[\w.\-]+, body=%?([\w.\-]+)(.*)$", re.M
)
# A plain call: newer XLA (jax >= 0.12 on CPU) wraps each while in a small
# computation the caller ``call``s once, so the loop belongs to that caller.
_CALL_OP = re.compile(r"\bcall\(.*?\), to_apply=%?([\w.\-]+)", re.M)
_COST_KEYS = {
    "flops": "flops",
    "transcendentals": "transcendentals",
    "bytes": "bytes accessed",
}
# Peak probes: elements of each triad array (CPU / other), matmul side, and
# repetitions (the best is kept).
_TRIAD_N = {"cpu": 1 << 24, "other": 1 << 26}
_MATMUL_N = {"cpu": (256, 1024), "other": (1024, 4096)}
_REPEATS = 5
_LAUNCH_CALLS = 200
_PEAKS_CACHE: dict[str, dict[str, Any]] = {}


def not_available(reason: str) -> dict[str, Any]:
    """A work entry that says why there is none."""
    return {"source": NOT_AVAILABLE, "reason": reason}


def _first_analysis(raw: Any) -> Mapping[str, Any] | None:
    """``cost_analysis()`` is a dict (a list of one per program in older JAX)."""
    if isinstance(raw, Sequence) and not isinstance(raw, str | bytes):
        raw = raw[0] if raw else None
    return raw if isinstance(raw, Mapping) else None


def loops_of(hlo_text: str) -> dict[str, Any]:
    """The ``while`` loops of an optimised HLO text: how many, and the trip
    counts XLA knows (in the order they appear)."""
    return {
        "while_loops": len(_WHILE.findall(hlo_text)),
        "trip_counts": [int(n) for n in _TRIP_COUNT.findall(hlo_text)],
    }


def _computations(text: str) -> tuple[str | None, dict[str, tuple[int, int]]]:
    """The entry's name and each computation's text span."""
    heads = list(_HEADER.finditer(text))
    spans, entry = {}, None
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        spans[head.group(2)] = (head.start(), end)
        if head.group(1):
            entry = head.group(2)
    return entry, spans


def _with_entry(text: str, name: str) -> str:
    """The module text with computation ``name`` as its entry."""
    first = text.index("\n")
    # Only the name: the entry layout and schedule belong to the old entry.
    header = text[:first].split(",", 1)[0]
    rest = text[first:].replace("\nENTRY %", "\n%")
    rest = rest.replace(f"\n%{name} (", f"\nENTRY %{name} (", 1)
    return header + rest


def _scaled(text: str, whole: Mapping[str, Any]) -> tuple[dict[str, float] | None, str]:
    """The entry's costs with every loop body counted once per trip, or None
    and why not (see the module doc)."""
    import jax
    from jax._src.lib import xla_client

    entry, spans = _computations(text)

    def holder(at: int) -> str:
        where = [c for c, (a, b) in spans.items() if a <= at < b]
        return where[0] if where else "?"

    found: list[tuple[str, str, int]] = []
    for match in _WHILE_OP.finditer(text):
        trips = _TRIP_COUNT.search(match.group(2))
        if trips is None:
            return None, "a loop's trip count is not known at compile time"
        found.append((holder(match.start()), match.group(1), int(trips.group(1))))
    bodies = {body for _, body, _ in found}
    # A computation run once by a ``call`` counts as part of its caller.
    caller = {m.group(1): holder(m.start()) for m in _CALL_OP.finditer(text)}

    def owner(name: str) -> str:
        seen = set()
        while name != entry and name not in bodies and name in caller:
            if name in seen:
                break
            seen.add(name)
            name = caller[name]
        return name

    loops: dict[str, list[tuple[str, int]]] = {}
    for where, body, count in found:
        loops.setdefault(owner(where), []).append((body, count))
    if any(c != entry and c not in bodies for c in loops):
        return None, "a loop sits outside the entry and the loop bodies"
    from jaxlib import _hlo  # type: ignore[attr-defined]  # no stubs

    client = jax.devices()[0].client
    analyse = xla_client._xla.hlo_module_cost_analysis

    def cost(name: str) -> dict[str, float]:
        raw = analyse(client, _hlo.hlo_module_from_text(_with_entry(text, name)))
        return {k: float(raw.get(v, 0.0) or 0.0) for k, v in _COST_KEYS.items()}

    def scaled(name: str, own: dict[str, float]) -> dict[str, float]:
        out = dict(own)
        for body, trips in loops.get(name, []):
            once = cost(body)
            inner = scaled(body, once)
            for key in out:
                out[key] += trips * inner[key] - once[key]
        return out

    assert entry is not None
    whole_costs = {k: float(whole.get(v, 0.0) or 0.0) for k, v in _COST_KEYS.items()}
    return scaled(entry, whole_costs), ""


def cost_of_compiled(compiled: Any) -> dict[str, Any]:
    """The ``roofline`` work entry of a compiled program (``jax.stages.Compiled``,
    or equinox's wrapper of one)."""
    if not hasattr(compiled, "cost_analysis") and hasattr(compiled, "compiled"):
        compiled = compiled.compiled  # equinox.filter_jit(...).lower(...).compile()
    try:
        analysis = _first_analysis(compiled.cost_analysis())
    except Exception as exc:  # noqa: BLE001 - a backend without the analysis
        return not_available(f"cost_analysis() failed: {type(exc).__name__}: {exc}")
    if not analysis:
        return not_available("the backend's cost analysis is empty")
    flops = analysis.get("flops")
    nbytes = analysis.get("bytes accessed")
    if not isinstance(flops, int | float) or not isinstance(nbytes, int | float):
        return not_available("the cost analysis has no flops or bytes accessed")
    if flops < 0 or nbytes <= 0:
        return not_available(
            f"the cost analysis gave flops={flops}, bytes accessed={nbytes}"
        )
    entry: dict[str, Any] = {
        "source": SOURCE,
        "flops": float(flops),
        "transcendentals": float(analysis.get("transcendentals", 0.0) or 0.0),
        "bytes": float(nbytes),
        "loop_scaled": False,
    }
    try:
        text = compiled.as_text()
        entry.update(loops_of(text))
    except Exception as exc:  # noqa: BLE001 - then the loops stay unknown
        entry.update(while_loops=None, trip_counts=[])
        entry["loop_note"] = f"no HLO text: {type(exc).__name__}: {exc}"[:300]
        return entry
    if not entry["while_loops"]:
        return entry
    try:
        scaled, why = _scaled(text, analysis)
    except Exception as exc:  # noqa: BLE001 - jaxlib internals: keep XLA's numbers
        scaled, why = None, f"scaling failed: {type(exc).__name__}: {exc}"[:300]
    if scaled is None:
        entry["loop_note"] = f"loop bodies counted once: {why}"
    else:
        entry.update(scaled, loop_scaled=True)
    return entry


class _Program:
    """A compiled XLA executable seen as a ``jax.stages.Compiled`` (its cost
    analysis and HLO text), for :func:`cost_of_compiled`."""

    def __init__(self, executable: Any) -> None:
        self.executable = executable

    def cost_analysis(self) -> Any:
        return self.executable.cost_analysis()

    def as_text(self) -> str:
        return str(self.executable.get_hlo_text())


@contextlib.contextmanager
def programs_compiled(into: list[Any]) -> Iterator[None]:
    """Collect into ``into`` the executables JAX compiles (or loads from its
    persistent cache) inside the block: the programs a host-side driver
    (a callable ``jax.jit`` cannot trace) launches.  JAX has no public hook
    for them; its compiler's ``compile_or_get_cached`` is wrapped for the
    block, and where that is missing nothing is collected."""
    try:
        from jax._src import compiler
    except ImportError:
        yield
        return
    original = getattr(compiler, "compile_or_get_cached", None)
    if original is None:
        yield
        return

    def collect(*args: Any, **kwargs: Any) -> Any:
        executable = original(*args, **kwargs)
        into.append(executable)
        return executable

    compiler.compile_or_get_cached = collect
    try:
        yield
    finally:
        compiler.compile_or_get_cached = original


def cost_of_programs(programs: Sequence[Any], why: str) -> dict[str, Any]:
    """The work entry of a call made of several programs (``programs``:
    executables collected by :func:`programs_compiled`): their costs summed,
    each program counted once; ``why``: why the call is not one program."""
    entries = [cost_of_compiled(_Program(p)) for p in programs]
    known = [e for e in entries if e.get("source") == SOURCE]
    if not known:
        return not_available(f"{why}; and no program it compiled has a cost analysis")
    entry: dict[str, Any] = {
        "source": SOURCE,
        "flops": sum(e["flops"] for e in known),
        "transcendentals": sum(e["transcendentals"] for e in known),
        "bytes": sum(e["bytes"] for e in known),
        "loop_scaled": all(e.get("loop_scaled") for e in known),
        "programs": len(programs),
        "programs_note": (
            f"the sum of the {len(programs)} program(s) its first call compiled, "
            f"each counted once ({why})"
        ),
    }
    notes = [e["loop_note"] for e in known if e.get("loop_note")]
    if notes:
        entry["loop_note"] = notes[0]
    return entry


def cost_of_call(
    function: Callable[..., Any],
    compiled: Any,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    programs: Sequence[Any] = (),
) -> dict[str, Any]:
    """The work entry of ``function(*args, **kwargs)``: from ``compiled`` (its
    warm-up's program) when given, else from ``jax.jit(function)`` lowered and
    compiled here (untimed), else, for a host-side driver that ``jax.jit``
    cannot trace, from the ``programs`` its first call compiled."""
    if compiled is not None:
        return cost_of_compiled(compiled)
    import jax

    try:
        compiled = jax.jit(function).lower(*args, **kwargs).compile()
    except Exception as exc:  # noqa: BLE001 - not traceable: say so
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        why = f"the callable cannot be lowered with jax.jit: {type(exc).__name__}"
        if programs:
            return cost_of_programs(programs, why)
        return not_available(f"{why}: {first}")
    return cost_of_compiled(compiled)


def _best_time(call: Callable[[], Any], repeats: int) -> float:
    import jax

    jax.block_until_ready(call())  # compile and touch the memory first
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        best = min(best, time.perf_counter() - start)
    return best


def measure_peaks() -> dict[str, Any]:
    """This process's default backend's peaks (see the module doc); each
    probe that fails is reported by its error instead of a number."""
    import jax
    import jax.numpy as jnp

    kind = "cpu" if jax.default_backend() == "cpu" else "other"
    dtype = jnp.result_type(float)
    peaks: dict[str, Any] = {"dtype": str(dtype)}
    started = time.perf_counter()
    try:
        n = _TRIAD_N[kind]
        a = jnp.ones(n, dtype)
        b = jnp.full(n, 2.0, dtype)
        # The result replaces ``a`` (donated): a fresh output buffer per call
        # would time the allocator's page faults, not the memory.
        triad = jax.jit(lambda a, b: a + 3.0 * b, donate_argnums=0)
        arrays = [a]

        def step() -> Any:
            arrays[0] = triad(arrays[0], b)
            return arrays[0]

        seconds = _best_time(step, _REPEATS)
        peaks["bandwidth_bytes_per_s"] = 3 * n * dtype.itemsize / seconds
        peaks["triad_flops_per_s"] = 2 * n / seconds
        a = b = arrays = None  # free the probe's memory before the benchmarks
    except Exception as exc:  # noqa: BLE001 - the other probes still count
        peaks["bandwidth_error"] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        matmul = jax.jit(lambda x: x @ x)
        rates = []
        for n in _MATMUL_N[kind]:  # in cache and out of it: the faster counts
            m = jnp.ones((n, n), dtype) / n
            seconds = _best_time(functools.partial(matmul, m), _REPEATS)
            rates.append(2 * n**3 / seconds)
        peaks["flops_per_s"] = max(rates)
        m = None
    except Exception as exc:  # noqa: BLE001
        peaks["flops_error"] = f"{type(exc).__name__}: {exc}"[:300]
    try:
        x = jnp.zeros((), dtype)
        empty = jax.jit(lambda x: x)
        jax.block_until_ready(empty(x))
        times = []
        for _ in range(_LAUNCH_CALLS):
            start = time.perf_counter()
            jax.block_until_ready(empty(x))
            times.append(time.perf_counter() - start)
        peaks["launch_s"] = statistics.median(times)
    except Exception as exc:  # noqa: BLE001
        peaks["launch_error"] = f"{type(exc).__name__}: {exc}"[:300]
    peaks["probe_s"] = time.perf_counter() - started
    return peaks


def peaks_once() -> dict[str, Any]:
    """:func:`measure_peaks`, measured on the first call in this process."""
    import jax

    key = f"{jax.default_backend()}:{jax.numpy.result_type(float)}"
    if key not in _PEAKS_CACHE:
        from pytest_lyapax.measuring.machine import MachineObserver

        # The machine's state while the peaks were measured: peaks taken on
        # a busy machine make every explanation read from them unreliable.
        watch = MachineObserver()
        watch.start()
        peaks = measure_peaks()
        watch.stop()
        peaks["machine_state"] = watch.state()
        _PEAKS_CACHE[key] = peaks
    return dict(_PEAKS_CACHE[key])
