"""Make pytest-benchmark's session measure in xdist workers, and write once.

pytest-benchmark switches itself off in every xdist process and would let
each worker write ``--benchmark-json``/``--benchmark-save`` files of its own.
This module turns measuring back on in the workers, keeps their file output
off, and hands each result to the controller inside the test report (so the
results of a worker that later crashes are not lost).  The controller feeds
them back into its own pytest-benchmark session, which then writes
``--benchmark-json``/``--benchmark-save`` once and prints its usual table.
What is timed, and how, is the fixture's (``fixture.py``); the points of
sizes without a timing are ``points.py``'s.

The pieces of pytest-benchmark used here that are not documented API are the
``config._benchmarksession`` object (its ``disabled``/``json``/``save``/...
attributes and ``benchmarks`` list) and ``pytest_benchmark.stats.Stats``;
``tests/test_plugin`` checks them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_lyapax.measuring import recompiles
from pytest_lyapax.report.schema import STAT_FIELDS
from pytest_lyapax.report.stability import stability
from pytest_lyapax.report.stats import MIN_ROUNDS

RECORD_ATTR = "pytest_lyapax_benchmark"
# --benchmark-only, hidden from pytest-benchmark's start-up check (see below).
_ONLY_KEY = pytest.StashKey[bool]()
# The user's --benchmark-disable, before the plugin disabled it for start-up.
_USER_DISABLED_KEY = pytest.StashKey[bool]()
# pytest-benchmark's own default of --benchmark-min-rounds.
_BENCHMARK_DEFAULT_ROUNDS = 5


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


def record_of(item: pytest.Item) -> dict[str, Any] | None:
    """The finished benchmark of an item as a pytest-benchmark JSON entry."""
    fixture = (getattr(item, "funcargs", None) or {}).get("benchmark")
    stats = getattr(fixture, "stats", None)
    if fixture is None or stats is None or not stats or fixture.has_error:
        return None
    return stats.as_dict(include_data=True)


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
