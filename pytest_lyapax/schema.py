"""The report format: its key, its version and the one loader that checks it.

A report is pytest-benchmark's JSON (``machine_info``, ``commit_info``,
``benchmarks``, ``datetime``, ``version``) with the plugin's own entry under
:data:`REPORT_KEY`.  Reports are read from disk by the plugin
(``--jax-compare``) and by the ``pytest-lyapax`` command line; both go through
:func:`load_report`, so both accept and refuse exactly the same files.

Schema history: 1 -- backends, run order, crossovers; 2 -- adds the noise
test, the comparison with a saved run (machine match, gates) and, per
benchmark, ``extra_info.jaxlib_version`` and ``extra_info.no_array_leaves``.
Readers accept every version up to :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPORT_KEY = "pytest_lyapax"
SCHEMA_VERSION = 2
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


def check_report(data: object, what: str) -> list[dict[str, Any]]:
    """Validate an untrusted report; return its benchmarks or raise ReportError.

    A report is a JSON object with a ``benchmarks`` list whose entries have a
    string ``fullname``, numeric (finite, non-negative) time statistics and,
    if present, a ``stats.data`` list of such numbers (the per-call round
    times); its :data:`REPORT_KEY` entry, if any, must carry a schema version
    this reader knows.
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
