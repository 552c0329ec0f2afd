"""Make pytest-benchmark measure JAX code correctly, in xdist workers too.

pytest-benchmark switches itself off in every xdist process and would let
each worker write ``--benchmark-json``/``--benchmark-save`` files of its own.
This module turns measuring back on in the workers, keeps their file output
off, and hands each result to the controller inside the test report (so the
results of a worker that later crashes are not lost).  The controller feeds
them back into its own pytest-benchmark session, which then writes
``--benchmark-json``/``--benchmark-save`` once and prints its usual table.

JAX specifics: JAX dispatches asynchronously, so every timed call is wrapped
in ``jax.block_until_ready``.  That waits only for the JAX arrays it finds in
the result: a result without any (``None``, a plain class holding arrays
that is not a registered pytree) makes the timing measure the dispatch only,
so the first result of each benchmark is checked, a
:class:`DispatchOnlyWarning` names the test, and
``extra_info["no_array_leaves"]`` records it.  ``benchmark(f, ...)`` makes
an untimed warm-up before pytest-benchmark's calibration and rounds: the
trace/lower and compile steps of a lowerable ``f``, then its first call
(together ``extra_info["first_call_s"]``), then the memory figures; the
timed calls themselves are split into dispatch and device time
(``measure.py``), the work per call from XLA's cost analysis with the
machine's peaks (``roofline.py``) and the counters (``counters.py``: JAX's
profiler counts the executable launches of the untimed first call); all
switched off by ``--jax-no-extras``, the peaks alone by ``--jax-no-peaks``.
No extra call.
``benchmark.pedantic`` adds no call before its rounds: its
``warmup_rounds`` (default 0) decide, so ``pedantic(f, rounds=1,
iterations=1)`` times one cold call, compilation included, and it calls the
target exactly as asked; its first call's duration and the memory figures
are read after the rounds, the dispatch/device split from its later rounds
(its counters have no launch count).

A benchmark that runs out of memory
(:func:`pytest_lyapax.measuring.measure.out_of_memory`)
is skipped with the error as the reason and recorded as an ``oom`` point;
larger sizes of its series on that backend are then skipped before they start
(``skipped_after_oom``).  Points travel to the controller like the records.

The pieces of pytest-benchmark used here that are not documented API are the
``config._benchmarksession`` object (its ``disabled``/``json``/``save``/...
attributes and ``benchmarks`` list) and ``BenchmarkFixture`` (its ``stats``,
``extra_info``, ``enabled``, ``has_error``); ``tests/test_plugin`` checks them.
"""

from __future__ import annotations

import functools
import json
import numbers
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from pytest_lyapax.measuring import counters, measure, recompiles, roofline
from pytest_lyapax.measuring.agreement import BENCHMARK_RESULT_ATTR
from pytest_lyapax.measuring.rounds import RoundsWatch
from pytest_lyapax.report.identity import bare_id, is_size, param_text
from pytest_lyapax.report.schema import STAT_FIELDS
from pytest_lyapax.report.stability import stability
from pytest_lyapax.report.stats import MIN_ROUNDS

RECORD_ATTR = "pytest_lyapax_benchmark"
POINT_ATTR = "pytest_lyapax_point"
# Per worker: (test, other parameters, label) -> smallest size that ran out of
# memory, and that test's id.
_OOM_KEY = pytest.StashKey[dict[tuple[str, str, str], tuple[int, str]]]()
# Per item: its out-of-memory point, until its report carries it.
_POINT_KEY = pytest.StashKey[dict[str, Any]]()
# Attributes of the fixture: whether the untimed extras are measured, and
# the machine's peaks (measured once per process, roofline.py).
_EXTRAS_ATTR = "_pytest_lyapax_extras"
_PEAKS_ATTR = "_pytest_lyapax_peaks"
# Attribute of the fixture: the RoundsWatch of its rounds (turns, observers).
_WATCH_ATTR = "_pytest_lyapax_watch"
# --benchmark-only, hidden from pytest-benchmark's start-up check (see below).
_ONLY_KEY = pytest.StashKey[bool]()
# The user's --benchmark-disable, before the plugin disabled it for start-up.
_USER_DISABLED_KEY = pytest.StashKey[bool]()
# pytest-benchmark's own default of --benchmark-min-rounds.
_BENCHMARK_DEFAULT_ROUNDS = 5


class DispatchOnlyWarning(UserWarning):
    """A benchmarked call returned no JAX array: only its dispatch was timed."""


def benchmark_session(config: pytest.Config) -> Any | None:
    """pytest-benchmark's session object, or None when it is not loaded."""
    return getattr(config, "_benchmarksession", None)


def defer_benchmark_only(config: pytest.Config) -> None:
    """Hide ``--benchmark-only`` from pytest-benchmark's start-up check.

    pytest-benchmark refuses ``--benchmark-only`` when it believes xdist
    disables it; we re-enable it, so the flag is restored after start-up.
    """
    if getattr(config.option, "benchmark_only", False):
        config.stash[_ONLY_KEY] = True
        config.option.benchmark_only = False


def quiet_xdist_check(config: pytest.Config) -> None:
    """Keep pytest-benchmark from warning that xdist disables it.

    That warning is issued in pytest-benchmark's ``pytest_configure``, after
    pytest applied the ini ``filterwarnings``; with ``filterwarnings = error``
    it is an INTERNALERROR.  It is skipped when benchmarks are disabled, so
    they are disabled for its start-up (measuring is turned back on in the
    workers, see :func:`enable_in_worker`) and the user's choice is kept.
    """
    if _USER_DISABLED_KEY in config.stash or not hasattr(
        config.option, "benchmark_disable"
    ):
        return
    disabled = bool(config.option.benchmark_disable) and not bool(
        getattr(config.option, "benchmark_enable", False)
    )
    config.stash[_USER_DISABLED_KEY] = disabled
    config.option.benchmark_disable = True


def user_disabled(config: pytest.Config) -> bool:
    """Whether the user disabled benchmarks (``--benchmark-disable``)."""
    return config.stash.get(_USER_DISABLED_KEY, False)


def set_user_disabled(config: pytest.Config, disabled: bool) -> None:
    """A worker's copy of the controller's :func:`user_disabled`."""
    config.stash[_USER_DISABLED_KEY] = disabled


def _min_rounds_given(config: pytest.Config) -> bool:
    """Whether the user chose ``--benchmark-min-rounds`` (command line, ini
    ``addopts`` or ``PYTEST_ADDOPTS``), as opposed to pytest-benchmark's default."""
    import os

    sources = [str(a) for a in config.invocation_params.args]
    sources += [str(a) for a in config.getini("addopts") or []]
    sources.append(os.environ.get("PYTEST_ADDOPTS", ""))
    return any("--benchmark-min-rounds" in text for text in sources)


def raise_default_rounds(config: pytest.Config) -> None:
    """Give every benchmark at least :data:`~pytest_lyapax.report.stats.MIN_ROUNDS`
    rounds unless the user chose a number: pytest-benchmark's default of 5
    is too few for the noise test to decide anything."""
    bs = benchmark_session(config)
    if bs is None or _min_rounds_given(config):
        return
    if bs.options.get("min_rounds") == _BENCHMARK_DEFAULT_ROUNDS:
        bs.options["min_rounds"] = MIN_ROUNDS


def enable_in_worker(config: pytest.Config) -> None:
    """Turn pytest-benchmark back on in an xdist worker, without file output."""
    bs = benchmark_session(config)
    if bs is None:
        return
    bs.disabled = user_disabled(config)
    if config.stash.get(_ONLY_KEY, False):
        bs.only = True
    raise_default_rounds(config)
    # The controller writes every file and checks every comparison, once.
    bs.json = None
    bs.save = None
    bs.autosave = None
    bs.compare = None
    bs.compare_fail = []
    bs.compared_mapping = {}
    bs.histogram = False


def restore_benchmark_only(config: pytest.Config) -> None:
    """Give a non-worker process its ``--benchmark-only`` back (see above)."""
    bs = benchmark_session(config)
    if bs is not None and config.stash.get(_ONLY_KEY, False):
        bs.only = True
    raise_default_rounds(config)


# Leaves that are already on the host: nothing was left to wait for.
_HOST_LEAVES = (numbers.Number, str, bytes)


def has_device_work(result: Any) -> bool:
    """Whether ``jax.block_until_ready(result)`` had something to wait for.

    True when the result holds a JAX array among its pytree leaves, or only
    host values (numbers, NumPy arrays, strings: computed before returning).
    False for ``None``, empty containers and objects JAX cannot see into.
    """
    import jax
    import numpy as np

    leaves = jax.tree_util.tree_leaves(result)
    if any(isinstance(leaf, jax.Array) for leaf in leaves):
        return True
    return bool(leaves) and all(
        isinstance(leaf, _HOST_LEAVES + (np.ndarray, np.generic)) for leaf in leaves
    )


def _check_result(fixture: Any, result: Any) -> None:
    """Warn once per benchmark when its result gives ``block_until_ready``
    nothing to wait for, and record it in the report."""
    if getattr(fixture, "_pytest_lyapax_checked", False):
        return
    fixture._pytest_lyapax_checked = True
    if has_device_work(result):
        return
    fixture.extra_info["no_array_leaves"] = True
    fixture.extra_info["result_type"] = type(result).__qualname__
    warnings.warn(
        DispatchOnlyWarning(
            f"{getattr(fixture, 'fullname', fixture.name)}: the benchmarked call "
            f"returned {type(result).__qualname__}, which holds no JAX array, so "
            "jax.block_until_ready had nothing to wait for and only the dispatch "
            "was timed. Return the arrays (or a pytree of them), or register the "
            "class as a pytree (jax.tree_util.register_dataclass, equinox.Module)"
        ),
        stacklevel=2,
    )


def _blocking(
    fixture: Any,
    function: Callable[..., Any],
    first: dict[str, Any] | None = None,
    split: measure.SplitSamples | None = None,
) -> Callable[..., Any]:
    """``function`` blocked on its result; with ``first``, the first call's
    ``warmup`` entry is recorded into it (the clock is read around that call
    only); with ``split``, every later call appends its ``(dispatch, device)``
    seconds (three clock reads inside the timed call, about 0.2 us)."""
    import jax

    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        if first is not None and not first:
            with measure.first_call_recorder(first):
                result = jax.block_until_ready(function(*args, **kwargs))
        elif split is not None:
            start = time.perf_counter()
            out = function(*args, **kwargs)
            returned = time.perf_counter()
            result = jax.block_until_ready(out)
            split.add(returned - start, time.perf_counter() - returned)
        else:
            result = jax.block_until_ready(function(*args, **kwargs))
        _check_result(fixture, result)
        return result

    return call


def _warm_up(
    fixture: Any,
    function: Callable[..., Any],
    blocking: Callable[..., Any],
    args: Any,
    kwargs: Any,
) -> None:
    """The untimed calls before ``benchmark(f)``'s rounds (see the module doc)."""
    info = fixture.extra_info
    if not getattr(fixture, _EXTRAS_ATTR, True):
        start = time.perf_counter()
        blocking(*args, **kwargs)
        info["first_call_s"] = time.perf_counter() - start
        return
    _record_peaks(fixture)
    start = time.perf_counter()
    launches = counters.LaunchCount()
    warmup, compiled = measure.warm_up(
        function, blocking, args, kwargs, launches.tracing
    )
    info["first_call_s"] = time.perf_counter() - start
    info["warmup"] = warmup
    info["memory"] = measure.memory(compiled)
    info["roofline"] = roofline.cost_of_call(function, compiled, args, kwargs)
    info["counters"] = counters.counters(
        info["roofline"],
        info["memory"],
        warmup["compiles"],
        launches.value,
        lowered=compiled is not None,
    )
    del compiled
    info["args_on"] = measure.args_on(args, kwargs)


def _record_peaks(fixture: Any) -> None:
    """The process's peaks into the record (measured before its first
    benchmark's warm-up, untimed), unless ``--jax-no-peaks``."""
    if getattr(fixture, _PEAKS_ATTR, True):
        fixture.extra_info["peaks"] = roofline.peaks_once()


def _record_split(fixture: Any, split: measure.SplitSamples) -> None:
    """``time_split`` from the timed calls' own clock reads (none: no entry)."""
    if split.calls:
        fixture.extra_info["time_split"] = measure.time_split(split)


def _finish_rounds(fixture: Any) -> None:
    """Let the rounds' watch write its entries (turns, observers)."""
    watch: RoundsWatch | None = getattr(fixture, _WATCH_ATTR, None)
    metadata = getattr(fixture, "stats", None)
    stats = getattr(metadata, "stats", None)
    if watch is not None and stats is not None:
        watch.finish(
            fixture.extra_info,
            list(getattr(stats, "data", ())),
            iterations=int(getattr(metadata, "iterations", 1)),
            test=str(getattr(fixture, "fullname", fixture.name)),
        )


def _abandon_rounds(fixture: Any) -> None:
    """Stop the rounds' observers after a round raised."""
    watch: RoundsWatch | None = getattr(fixture, _WATCH_ATTR, None)
    if watch is not None:
        watch.close()


def _record_transfers(fixture: Any, args: Any, kwargs: Any) -> None:
    """``extra_info["transfers"]``: NumPy arguments copied at every call
    (from their types; the rounds' compile observer warns about them)."""
    transfers = measure.host_transfers(args, kwargs)
    if transfers is not None:
        fixture.extra_info["transfers"] = transfers


def _after_pedantic(
    fixture: Any, target: Callable[..., Any], args: Any, kwargs: Any, first: Any
) -> None:
    """What ``pedantic`` can record after its rounds without calling the
    target again (it calls exactly what was asked): its first call, memory,
    and (when the arguments are known: no ``setup``) the program's bytes and
    where the arguments live.  Its dispatch/device split is recorded from its
    rounds by the caller."""
    info = fixture.extra_info
    if first:
        info["warmup"] = first
    compiled = None
    lower = getattr(target, "lower", None)
    if args is not None and callable(lower):
        try:
            compiled = lower(*args, **kwargs).compile()
        except Exception:  # noqa: BLE001 - then the program's bytes stay unknown
            compiled = None
    info["memory"] = measure.memory(compiled)
    if args is None:
        info["roofline"] = roofline.not_available(
            "pedantic with setup: the arguments are not known"
        )
    elif compiled is None:
        # Tracing a plain callable with jax.jit would run its Python once more,
        # and pedantic calls exactly what was asked.
        info["roofline"] = roofline.not_available(
            "pedantic with a callable that has no .lower (not jitted): lowering "
            "it would call it again"
        )
    else:
        _record_peaks(fixture)
        info["roofline"] = roofline.cost_of_call(target, compiled, args, kwargs)
    compiles = (first or {}).get("compiles")
    info["counters"] = counters.counters(
        info["roofline"],
        info["memory"],
        compiles
        if isinstance(compiles, int)
        else counters.unavailable("pedantic's first call was not recorded"),
        counters.unavailable(
            "pedantic's first call is a timed round (no tracer may slow it), "
            "and it calls the target exactly as asked (no extra call)"
        ),
        lowered=compiled is not None,
    )
    del compiled
    if args is not None:
        info["args_on"] = measure.args_on(args, kwargs)


@functools.cache
def jax_fixture_class() -> type:
    """A ``BenchmarkFixture`` subclass that blocks on results and compiles first."""
    from pytest_benchmark.fixture import BenchmarkFixture

    class JaxBenchmarkFixture(BenchmarkFixture):  # type: ignore[misc]
        """``benchmark`` for JAX: every timed call blocked; ``benchmark(f)``
        compiles with an untimed first call, ``pedantic`` does not."""

        def __call__(self, function_to_benchmark: Callable[..., Any], *args, **kwargs):
            blocking = _blocking(self, function_to_benchmark)
            split: measure.SplitSamples | None = None
            if self.enabled and not getattr(self, "_mode", None):
                _record_transfers(self, args, kwargs)
                _warm_up(self, function_to_benchmark, blocking, args, kwargs)
                if getattr(self, _EXTRAS_ATTR, True):
                    split = measure.SplitSamples()
                    blocking = _blocking(self, function_to_benchmark, split=split)
            try:
                result = super().__call__(blocking, *args, **kwargs)
            except BaseException:
                _abandon_rounds(self)
                raise
            _finish_rounds(self)
            if split is not None:
                _record_split(self, split)
            if self.enabled:  # --benchmark-disable: nothing measured, nothing kept
                setattr(self, BENCHMARK_RESULT_ATTR, result)  # compared across backends
            return result

        def pedantic(
            self, target, args=(), kwargs=None, setup=None, teardown=None, **rest
        ):
            # No warm-up call here: pedantic's own warmup_rounds decide.
            extras = self.enabled and getattr(self, _EXTRAS_ATTR, True)
            first: dict[str, Any] | None = {} if extras else None
            split = measure.SplitSamples() if extras else None
            if self.enabled and setup is None:
                _record_transfers(self, tuple(args or ()), dict(kwargs or {}))
            try:
                result = super().pedantic(
                    _blocking(self, target, first, split),
                    args,
                    kwargs,
                    setup,
                    teardown,
                    **rest,
                )
            except BaseException:
                _abandon_rounds(self)
                raise
            _finish_rounds(self)
            if extras:
                if split is not None:
                    _record_split(self, split)
                known = setup is None
                _after_pedantic(
                    self,
                    target,
                    tuple(args or ()) if known else None,
                    dict(kwargs or {}),
                    first,
                )
            if self.enabled:  # --benchmark-disable: nothing measured, nothing kept
                setattr(self, BENCHMARK_RESULT_ATTR, result)  # compared across backends
            return result

        def _make_runner(self, function_to_benchmark, args, kwargs):
            runner = super()._make_runner(function_to_benchmark, args, kwargs)
            watch = getattr(self, _WATCH_ATTR, None)
            return runner if watch is None else watch.wrap(runner)

    return JaxBenchmarkFixture


def device_info() -> dict[str, Any]:
    """Backend, device kind and versions of the JAX in this process."""
    import jax
    import jaxlib

    devices = jax.devices()
    return {
        "jax_backend": jax.default_backend(),
        "device": devices[0].device_kind,
        "device_count": len(devices),
        "jax_version": jax.__version__,
        "jaxlib_version": getattr(jaxlib, "__version__", None),
    }


def machine_info(config: pytest.Config, backend: Any) -> dict[str, Any]:
    """The description of this process's machine recorded with a benchmark
    on ``backend`` (a ``Backend`` or None): the ``pytest_lyapax_machine_info``
    hook's (by default :func:`device_info`), as changed by every
    ``pytest_lyapax_update_machine_info`` (hookspecs.py)."""
    hook = config.hook
    info = dict(hook.pytest_lyapax_machine_info(config=config, backend=backend))
    hook.pytest_lyapax_update_machine_info(
        config=config, backend=backend, machine_info=info
    )
    return info


def instrument(
    item: pytest.Item,
    label: str | None,
    extras: bool = True,
    peaks: bool = True,
    watch: RoundsWatch | None = None,
    env: Sequence[tuple[str, str]] = (),
    describe: Callable[[], Mapping[str, Any]] = device_info,
) -> None:
    """Make the item's ``benchmark`` JAX-aware and label it (after fixture
    setup); ``extras=False`` (``--jax-no-extras``) measures the first call
    only, ``peaks=False`` (``--jax-no-peaks``) leaves the machine's peaks out;
    ``watch`` sees every round (turns between backends, observers); ``env``:
    the label's own variables (``--jax-backend-env``), part of its series;
    ``describe``: the machine's description, added to ``extra_info``."""
    funcargs = getattr(item, "funcargs", None) or {}
    fixture = funcargs.get("benchmark")
    if fixture is None:
        return
    from pytest_benchmark.fixture import BenchmarkFixture

    if type(fixture) is BenchmarkFixture:
        fixture.__class__ = jax_fixture_class()
    setattr(fixture, _EXTRAS_ATTR, extras)
    setattr(fixture, _PEAKS_ATTR, peaks)
    setattr(fixture, _WATCH_ATTR, watch)
    params = getattr(getattr(item, "callspec", None), "params", {})
    marker = item.get_closest_marker("jax_sizes")
    info = fixture.extra_info
    info.setdefault("backend", label)
    if env:
        info.setdefault("backend_env", dict(env))
    info.update({k: v for k, v in describe().items() if k not in info})
    info.setdefault("size", params.get("jax_size"))
    if marker is not None and marker.kwargs.get("label"):
        info.setdefault("size_label", str(marker.kwargs["label"]))


def record_of(item: pytest.Item) -> dict[str, Any] | None:
    """The finished benchmark of an item as a pytest-benchmark JSON entry."""
    fixture = (getattr(item, "funcargs", None) or {}).get("benchmark")
    stats = getattr(fixture, "stats", None)
    if fixture is None or stats is None or not stats or fixture.has_error:
        return None
    return stats.as_dict(include_data=True)


def series_of(item: pytest.Item, label: str) -> tuple[tuple[str, str, str], Any]:
    """The item's series (test id, other parameters, label) and its size."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    key = (bare_id(item.nodeid), param_text(params), label)
    return key, params.get("jax_size")


def set_point(item: pytest.Item, point: dict[str, Any]) -> None:
    """Attach a point (out of memory, over budget) to the item's next report."""
    item.stash[_POINT_KEY] = point


def _point(item: pytest.Item, label: str, size: Any, status: str, message: str):
    item.stash[_POINT_KEY] = {
        "fullname": item.nodeid,
        "backend": label,
        "size": size if is_size(size) else None,
        "status": status,
        "message": message,
    }


def skip_after_oom(item: pytest.Item, label: str | None) -> None:
    """Skip (before set-up) a benchmark larger than a size of its series that
    ran out of memory on this backend in this worker."""
    if label is None or "benchmark" not in getattr(item, "fixturenames", ()):
        return
    key, size = series_of(item, label)
    seen = item.config.stash.get(_OOM_KEY, {}).get(key)
    if seen is None or not is_size(size) or size <= seen[0]:
        return
    reason = (
        f"skipped after out of memory: {seen[1]} ran out of memory at size "
        f"{seen[0]} on backend {label!r}"
    )
    _point(item, label, size, measure.SKIPPED_AFTER_OOM, reason)
    raise pytest.skip.Exception(reason, _use_item_location=True)


def oom_reason(item: pytest.Item, label: str | None, exc: BaseException) -> str | None:
    """If a benchmark's error says it ran out of memory: record the point,
    remember the size for its series, and return the skip reason."""
    if label is None or "benchmark" not in getattr(item, "fixturenames", ()):
        return None
    if not measure.out_of_memory(exc):
        return None
    key, size = series_of(item, label)
    message = measure.short_message(exc)
    if is_size(size):
        seen = item.config.stash.setdefault(_OOM_KEY, {})
        if key not in seen or size < seen[key][0]:
            seen[key] = (size, item.nodeid)
    _point(item, label, size, measure.OOM, message)
    at = f" at size {size}" if size is not None else ""
    return f"out of memory on backend {label!r}{at}: {message}"


def pop_point(item: pytest.Item) -> str | None:
    """The item's out-of-memory point, encoded for its report, once."""
    point = item.stash.get(_POINT_KEY, None)
    if point is None:
        return None
    del item.stash[_POINT_KEY]
    return json.dumps(point)


def fold_process(into: dict[str, Any], other: dict[str, Any]) -> None:
    """Add another worker process's rounds of the same benchmark to ``into``.

    With ``--jax-processes`` each backend's tests run in several fresh
    processes; their per-call round times are pooled and every statistic is
    recomputed from the pool (pytest-benchmark's own ``Stats``), so the
    medians, quartiles and the noise test include the spread between
    processes.  ``extra_info`` keeps each process's median and round count.
    """
    from pytest_benchmark.stats import Stats

    info = into.setdefault("extra_info", {})
    if "process_medians" not in info:
        info["process_medians"] = [into["stats"]["median"]]
        info["process_rounds"] = [into["stats"]["rounds"]]
    info["process_medians"].append(other["stats"]["median"])
    info["process_rounds"].append(other["stats"]["rounds"])
    info["processes"] = len(info["process_medians"])
    # Turn numbers are global to the run, so the processes' turns pool too.
    other_turns = (other.get("extra_info") or {}).get("turns")
    if isinstance(info.get("turns"), list) and isinstance(other_turns, list):
        info["turns"] = [*info["turns"], *other_turns]
    else:
        info.pop("turns", None)
    pooled = Stats()
    data = [*into["stats"].get("data", []), *other["stats"].get("data", [])]
    for value in data:
        pooled.update(value)
    stats = {name: getattr(pooled, name) for name in STAT_FIELDS}
    stats["data"] = data
    stats["iterations"] = into["stats"].get("iterations", 1)
    into["stats"].clear()
    into["stats"].update(stats)
    if "stability" in info:  # judged again on the pooled rounds
        info["stability"] = stability(data, stats["iterations"])
    theirs = (other.get("extra_info") or {}).get("recompiles")
    if isinstance(info.get("recompiles"), dict) and isinstance(theirs, dict):
        info["recompiles"] = recompiles.pooled(info["recompiles"], theirs)


def encode(record: dict[str, Any]) -> str:
    return json.dumps(record, default=repr)


class RecordedBenchmark:
    """A benchmark measured in a worker, as pytest-benchmark's controller sees it.

    It offers the parts of ``pytest_benchmark.stats.Metadata`` that the
    controller's pytest-benchmark session uses to save, compare and display.
    """

    has_error = False

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.name = record["name"]
        self.fullname = record["fullname"]
        self.group = record.get("group")
        self.param = record.get("param")
        self.params = record.get("params")
        self.extra_info = record.get("extra_info", {})
        self.options = record.get("options", {})
        self.iterations = record["stats"].get("iterations", 1)

    def __bool__(self) -> bool:
        return bool(self.record["stats"].get("rounds"))

    def __getitem__(self, key: str) -> Any:
        stats = self.record["stats"]
        return stats[key] if key in stats else getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except AttributeError:
            return default

    def as_dict(
        self,
        include_data: bool = True,
        flat: bool = False,
        stats: bool = True,
        cprofile: Any = None,
    ) -> dict[str, Any]:
        result = {
            k: self.record.get(k)
            for k in ("group", "name", "fullname", "params", "param", "extra_info")
        }
        result["options"] = dict(self.options)
        if "cprofile" in self.record:
            result["cprofile"] = self.record["cprofile"]
        if stats:
            values = {k: self.record["stats"][k] for k in STAT_FIELDS}
            if include_data and "data" in self.record["stats"]:
                values["data"] = list(self.record["stats"]["data"])
            values["iterations"] = self.iterations
            if flat:
                result.update(values)
            else:
                result["stats"] = values
        return result


def hand_to_benchmark_session(config: pytest.Config, record: dict[str, Any]) -> None:
    """Add a worker's result to the controller's pytest-benchmark session."""
    bs = benchmark_session(config)
    if bs is not None:
        bs.benchmarks.append(RecordedBenchmark(record))
