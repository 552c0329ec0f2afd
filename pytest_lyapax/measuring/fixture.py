"""The per-backend ``benchmark`` fixture: JAX code measured correctly.

JAX dispatches asynchronously, so every timed call is wrapped in
``jax.block_until_ready``.  That waits only for the JAX arrays it finds in
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

:func:`instrument` turns an item's pytest-benchmark ``BenchmarkFixture``
into this fixture and labels it with its backend and size.  The pieces of
``BenchmarkFixture`` used here that are not documented API (its ``stats``,
``extra_info``, ``enabled``, ``has_error``, ``_make_runner``,
``_calibrate_timer``, ``_max_time``, ``_min_rounds``) are checked
by ``tests/test_plugin``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import numbers
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest

from pytest_lyapax.measuring import ceiling, counters, measure, roofline
from pytest_lyapax.measuring.agreement import BENCHMARK_RESULT_ATTR
from pytest_lyapax.measuring.precision import in_force
from pytest_lyapax.measuring.rounds import RoundsWatch

_EXTRAS_ATTR = "_pytest_lyapax_extras"
_PEAKS_ATTR = "_pytest_lyapax_peaks"
# Attribute of the fixture: the RoundsWatch of its rounds (turns, observers).
_WATCH_ATTR = "_pytest_lyapax_watch"


class DispatchOnlyWarning(UserWarning):
    """A benchmarked call returned no JAX array: only its dispatch was timed."""


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
    if ceiling.active():  # a ceiling search's size: predicted to fit first
        ceiling.check_fits(function, args, kwargs)
    if not getattr(fixture, _EXTRAS_ATTR, True):
        start = time.perf_counter()
        blocking(*args, **kwargs)
        info["first_call_s"] = time.perf_counter() - start
        return
    _record_peaks(fixture)
    start = time.perf_counter()
    launches = counters.LaunchCount()
    programs: list[Any] = []  # what a host-side driver's first call compiled

    @contextlib.contextmanager
    def watched() -> Iterator[None]:
        with launches.tracing(), roofline.programs_compiled(programs):
            yield

    warmup, compiled = measure.warm_up(function, blocking, args, kwargs, watched)
    info["first_call_s"] = time.perf_counter() - start
    info["warmup"] = warmup
    info["memory"] = measure.memory(compiled)
    info["roofline"] = roofline.cost_of_call(function, compiled, args, kwargs, programs)
    del programs[:]
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


def _planned_rounds(fixture: Any, duration: float, iterations: int) -> int:
    """The rounds pytest-benchmark runs after a calibration of ``duration``
    seconds a round of ``iterations`` calls (its own rule: ``max_time /
    duration``, at least ``min_rounds``; its warm-up rounds first, if any)."""
    max_time = float(getattr(fixture, "_max_time", 0.0) or 0.0)
    rounds = int(getattr(fixture, "_min_rounds", 1) or 1)
    if duration > 0 and math.isfinite(duration):
        rounds = max(math.ceil(max_time / duration), rounds)
    warmup = int(getattr(fixture, "_warmup", 0) or 0)
    if warmup:
        rounds += min(rounds, max(1, warmup // max(iterations, 1)))
    return rounds


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
            watch: RoundsWatch | None = getattr(self, _WATCH_ATTR, None)
            rounds, warmup = rest.get("rounds", 1), rest.get("warmup_rounds", 0)
            if (
                watch is not None
                and isinstance(rounds, int)
                and isinstance(warmup, int)
            ):
                watch.plan(rounds + warmup)
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

        def _calibrate_timer(self, runner):
            calibrated = super()._calibrate_timer(runner)
            watch: RoundsWatch | None = getattr(self, _WATCH_ATTR, None)
            if watch is not None:
                watch.plan(_planned_rounds(self, calibrated[0], calibrated[1]))
            return calibrated

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
    info.setdefault("precision", in_force().to_json())
    info.setdefault("size", params.get("jax_size"))
    if marker is not None and marker.kwargs.get("label"):
        info.setdefault("size_label", str(marker.kwargs["label"]))
