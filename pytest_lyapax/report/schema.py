"""The report format: its key, its version and the one loader that checks it.

A report is pytest-benchmark's JSON (``machine_info``, ``commit_info``,
``benchmarks``, ``datetime``, ``version``) with the plugin's own entry under
:data:`REPORT_KEY`.  Reports are read from disk by the plugin
(``--jax-compare``) and by the ``pytest-lyapax`` command line; both go through
:func:`load_report`, so both accept and refuse exactly the same files.

Schema history: 1 -- backends, run order, crossovers; 2 -- adds the noise
test, the comparison with a saved run (machine match, gates) and, per
benchmark, ``extra_info.jaxlib_version`` and ``extra_info.no_array_leaves``;
3 -- adds, per benchmark, the untimed measurements of ``measure.py``:
``extra_info.warmup`` (``kind`` "compile" or "first_call", ``first_call_s``,
``trace_lower_s``, ``compile_s``, ``cache {enabled, hit}``),
``extra_info.memory`` (``device_peak_bytes``, ``argument_bytes``,
``output_bytes``, ``temp_bytes``, ``host_peak_rss_bytes``; null where not
known), ``extra_info.time_split`` (``dispatch_s``, ``device_s``, ``calls``)
and ``extra_info.args_on`` ("host", "device", "mixed", "none"), drops the
clamped ``extra_info.compile_s`` (first call minus median) of versions 1-2,
and adds ``points``: out-of-memory points (``fullname``, ``backend``,
``size``, ``status`` "oom" or "skipped_after_oom", ``message``); 4 -- adds
the ``over_budget`` point status (``--jax-budget``, ``--jax-max-call``): a
size predicted not to fit, never timed, with ``predicted_s`` (seconds per
call), ``predicted_interval_s`` ([low, high]), ``rule`` ("cost model" or
"scaled"), ``basis`` (in words) and ``budget_s`` (null: stopped by the
first-call ceiling); 5 -- adds ``agreement``: per test and non-reference
backend, its results compared with the reference backend's (``test``,
``reference``, ``backend``, ``agree``, ``failed``, and ``names``: per
recorded name its ``kind`` "result" or "benchmark", ``agree``, ``problem``,
``max_abs``, ``max_rel`` and the disagreeing ``leaves`` with the worst
element; see ``report/agreement.py``), and ``results``: per test and
backend the recorded entries themselves (``test``, ``backend``,
``tolerance``, ``entries``), read by ``pytest-lyapax agree``.
Readers accept every version up to :data:`SCHEMA_VERSION`; every field
added after version 1 may be absent.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_lyapax.report import search

REPORT_KEY = "pytest_lyapax"
SCHEMA_VERSION = 5
MAX_FILE_BYTES = 512 * 1024 * 1024

# The statistics pytest-benchmark stores per benchmark, in its own order.
STAT_FIELDS = (
    "min",
    "max",
    "mean",
    "stddev",
    "rounds",
    "median",
    "iqr",
    "q1",
    "q3",
    "iqr_outliers",
    "stddev_outliers",
    "outliers",
    "ld15iqr",
    "hd15iqr",
    "ops",
    "total",
)
# Those that are durations in seconds (larger means slower or noisier): the
# only ones a regression gate may compare.
TIME_FIELDS = ("min", "max", "mean", "stddev", "median", "iqr")
PLOT_STATS = ("median", "q1", "q3")


class ReportError(ValueError):
    """A report that cannot be used; the message names the file and the problem."""


def _seconds_ok(value: object) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and value >= 0
    )


def _count_ok(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value >= 0


def _maybe(check: Any) -> Any:
    return lambda value: value is None or check(value)


def _one_of(*allowed: object) -> Any:
    return lambda value: isinstance(value, str) and value in allowed


def _is(kind: type) -> Any:
    return lambda value: isinstance(value, kind)


# Schema 3: the fields of each measurement object in extra_info, and their checks.
_MEASUREMENTS: dict[str, dict[str, Any]] = {
    "warmup": {
        "kind": _one_of("compile", "first_call"),
        "first_call_s": _seconds_ok,
        "trace_lower_s": _maybe(_seconds_ok),
        "compile_s": _maybe(_seconds_ok),
        "cache": lambda value: (
            isinstance(value, dict)
            and isinstance(value.get("enabled"), bool)
            and _maybe(_is(bool))(value.get("hit"))
        ),
    },
    "memory": {
        name: _maybe(_count_ok)
        for name in (
            "device_peak_bytes",
            "argument_bytes",
            "output_bytes",
            "temp_bytes",
            "host_peak_rss_bytes",
        )
    },
    "time_split": {
        "dispatch_s": _seconds_ok,
        "device_s": _seconds_ok,
        "calls": lambda value: _count_ok(value) and value > 0,
    },
}
_POINT_FIELDS: dict[str, Any] = {
    "fullname": _is(str),
    "backend": _is(str),
    "size": _maybe(lambda value: _count_ok(value) and value > 0),
    "status": _one_of("oom", "skipped_after_oom", "over_budget"),
    "message": _is(str),
}
# Schema 5: an entry of the ``agreement`` section.
_AGREEMENT_FIELDS: dict[str, Any] = {
    "test": _is(str),
    "reference": _is(str),
    "backend": _is(str),
    "agree": _is(bool),
    "names": _is(list),
}
# An entry of the ``scaling`` section (--jax-devices, report/devices.py).
_SCALING_FIELDS: dict[str, Any] = {
    "test": _is(str),
    "backend": _is(str),
    "scaling": _one_of("strong", "weak"),
    "devices": lambda value: _count_ok(value) and value > 0,
    "size": _maybe(lambda value: _count_ok(value) and value > 0),
    "median_s": _seconds_ok,
    "speedup": _maybe(_seconds_ok),
    "efficiency": _maybe(_seconds_ok),
    "on": _is(str),
}
_DETERMINISM_FIELDS: dict[str, Any] = {
    "test": _is(str),
    "backend": _is(str),
    "rerun": _is(str),
    "identical": _is(bool),
    "names": _is(list),
}
# An entry of the ``ab`` section's comparisons (--jax-ab, report/ab.py).
_AB_FIELDS: dict[str, Any] = {
    "benchmark": _is(str),
    "size": _maybe(_count_ok),
    "backend": _is(str),
    "b_label": _is(str),
    "ratio": _maybe(_seconds_ok),
    "interval": _maybe(
        lambda value: (
            isinstance(value, list) and len(value) == 2 and all(map(_seconds_ok, value))
        )
    ),
    "verdict": _one_of("faster", "slower", "noise", "few-rounds"),
    "unreliable": _is(str),
    "counters": lambda value: (
        isinstance(value, dict)
        and isinstance(value.get("a"), dict)
        and isinstance(value.get("b"), dict)
    ),
}
# Schema 4: the prediction an over_budget point carries.
_PREDICTION_FIELDS: dict[str, Any] = {
    "predicted_s": _seconds_ok,
    "predicted_interval_s": lambda value: (
        isinstance(value, list) and len(value) == 2 and all(map(_seconds_ok, value))
    ),
    "rule": _one_of("cost model", "scaled"),
}


def _check_fields(value: object, fields: dict[str, Any], what: str) -> None:
    """``value`` must be an object holding every field, each passing its check."""
    if not isinstance(value, dict):
        raise ReportError(f"{what} is not an object")
    for name, check in fields.items():
        if name not in value:
            raise ReportError(f"{what} has no {name!r}")
        if not check(value[name]):
            raise ReportError(f"{what} has a malformed {name!r} ({value[name]!r})")


def _check_measurements(info: dict[str, Any], where: str) -> None:
    """Validate the schema-3 measurement fields of one ``extra_info``."""
    for key, fields in _MEASUREMENTS.items():
        if key in info:
            _check_fields(info[key], fields, f"{where}: extra_info.{key}")
    if "args_on" in info and not _one_of("host", "device", "mixed", "none")(
        info["args_on"]
    ):
        raise ReportError(
            f"{where}: extra_info.args_on is {info['args_on']!r}; expected one of "
            "'host', 'device', 'mixed', 'none'"
        )


def _listed(key: object, name: str, what: str) -> list[tuple[Any, str]]:
    """The entries of the report section ``name`` (a list, when present),
    each with the words that name it in an error."""
    entries = key.get(name) if isinstance(key, dict) else None
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ReportError(f"{what}: '{REPORT_KEY}.{name}' is not a list")
    return [(e, f"{what}: {REPORT_KEY}.{name} #{i}") for i, e in enumerate(entries)]


def _check_ab(ab: object, what: str) -> None:
    """The ``ab`` section (--jax-ab), when present: an object whose
    ``comparisons`` list holds well-formed entries."""
    if ab is None:
        return
    where = f"{what}: '{REPORT_KEY}.ab'"
    if not isinstance(ab, dict) or not isinstance(ab.get("comparisons"), list):
        raise ReportError(f"{where} is not an object with a 'comparisons' list")
    for i, entry in enumerate(ab["comparisons"]):
        _check_fields(entry, _AB_FIELDS, f"{what}: {REPORT_KEY}.ab.comparisons #{i}")


def check_report(data: object, what: str) -> list[dict[str, Any]]:
    """Validate an untrusted report; return its benchmarks or raise ReportError.

    A report is a JSON object with a ``benchmarks`` list whose entries have a
    string ``fullname``, numeric (finite, non-negative) time statistics and,
    if present, a ``stats.data`` list of such numbers (the per-call round
    times) and well-formed schema-3 measurements (``warmup``, ``memory``,
    ``time_split``, ``args_on``); its :data:`REPORT_KEY` entry, if any, must
    carry a schema version this reader knows, and its ``points``, if any,
    must be well formed.
    """
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise ReportError(
            f"{what} is not a pytest-benchmark report (no 'benchmarks' list)"
        )
    key = data.get(REPORT_KEY)
    if key is not None:
        schema = key.get("schema", 0) if isinstance(key, dict) else None
        if not isinstance(schema, int) or isinstance(schema, bool) or schema < 0:
            raise ReportError(f"{what}: its '{REPORT_KEY}' entry is malformed")
        if schema > SCHEMA_VERSION:
            raise ReportError(
                f"{what}: written by a newer pytest-lyapax (report schema {schema}); "
                f"this one reads schema {SCHEMA_VERSION} and older: upgrade lyapax"
            )
        for entry, where in _listed(key, "agreement", what):
            _check_fields(entry, _AGREEMENT_FIELDS, where)
        for entry, where in _listed(key, "determinism", what):
            _check_fields(entry, _DETERMINISM_FIELDS, where)
        _check_ab(key.get("ab") if isinstance(key, dict) else None, what)
        for entry, where in _listed(key, "scaling", what):
            _check_fields(entry, _SCALING_FIELDS, where)
        wrong = search.malformed(key) if isinstance(key, dict) else None
        if wrong is not None:
            raise ReportError(f"{what}: {REPORT_KEY}: {wrong}")
        for point, where in _listed(key, "points", what):
            _check_fields(point, _POINT_FIELDS, where)
            if point["status"] == "over_budget":
                _check_fields(point, _PREDICTION_FIELDS, where)
    benches = data["benchmarks"]
    for i, bench in enumerate(benches):
        if not isinstance(bench, dict) or not isinstance(bench.get("fullname"), str):
            raise ReportError(f"{what}: benchmark #{i} has no 'fullname' string")
        stats = bench.get("stats")
        if not isinstance(stats, dict):
            raise ReportError(f"{what}: {bench['fullname']} has no 'stats' object")
        if bench.get("extra_info") is not None and not isinstance(
            bench["extra_info"], dict
        ):
            raise ReportError(f"{what}: {bench['fullname']} has a malformed extra_info")
        if bench.get("extra_info"):
            _check_measurements(bench["extra_info"], f"{what}: {bench['fullname']}")
        for name in (*TIME_FIELDS, "q1", "q3"):
            if name in stats and not _seconds_ok(stats[name]):
                raise ReportError(
                    f"{what}: {bench['fullname']} has a non-numeric or negative "
                    f"stats.{name} ({stats[name]!r}); expected seconds as a number"
                )
        samples = stats.get("data")
        if samples is not None and (
            not isinstance(samples, list) or not all(map(_seconds_ok, samples))
        ):
            raise ReportError(
                f"{what}: {bench['fullname']} has a stats.data that is not a list "
                "of non-negative numbers (per-call round times in seconds)"
            )
    return benches


@dataclass
class Report:
    """One loaded, validated report."""

    path: Path
    data: dict[str, Any]
    benchmarks: list[dict[str, Any]]

    @property
    def key(self) -> dict[str, Any]:
        value = self.data.get(REPORT_KEY)
        return value if isinstance(value, dict) else {}

    @property
    def machine_info(self) -> dict[str, Any]:
        info = self.data.get("machine_info")
        return info if isinstance(info, dict) else {}

    @property
    def when(self) -> dt.datetime:
        """Commit time if known, else the run's datetime (for ordering runs)."""
        commit = self.data.get("commit_info")
        for value in (
            commit.get("time") if isinstance(commit, dict) else None,
            self.data.get("datetime"),
        ):
            if isinstance(value, str):
                try:
                    when = dt.datetime.fromisoformat(value)
                except ValueError:
                    continue
                return when if when.tzinfo else when.replace(tzinfo=dt.UTC)
        return dt.datetime.min.replace(tzinfo=dt.UTC)

    def backends(self) -> list[dict[str, Any]]:
        entries = self.key.get("backends")
        if not isinstance(entries, list):
            return []
        return [e for e in entries if isinstance(e, dict) and "label" in e]


def load_report(path: Path, *, need_plot_stats: bool = False) -> Report:
    """Read and validate one report file; raise ReportError saying what is wrong.

    ``need_plot_stats`` also requires median and quartiles of every benchmark
    (what the figures draw).
    """
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ReportError(
                f"{path}: {size / 1e6:.0f} MB is larger than the "
                f"{MAX_FILE_BYTES / 1e6:.0f} MB this tool reads"
            )
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not a text file") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ReportError(
            f"{path}: not valid JSON ({exc}); a truncated or partly written file?"
        ) from None
    benches = check_report(data, str(path))
    if need_plot_stats:
        for bench in benches:
            missing = [k for k in PLOT_STATS if k not in bench["stats"]]
            if missing:
                raise ReportError(
                    f"{path}: {bench['fullname']} has no stats.{missing[0]}"
                )
    return Report(path, data, benches)
