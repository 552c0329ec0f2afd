"""Pure parsers for the plugin's options, and the one function that resolves them.

Every parser raises :class:`pytest.UsageError` with a message that names the
option, repeats the offending value and says what is allowed, so a mistake is
reported before any worker starts or anything is timed.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from pytest_lyapax.backends.hosts import bind_hosts, parse_host_bindings, parse_timeout
from pytest_lyapax.backends.labels import (
    DEFAULT_PLATFORMS,
    LABEL_ALIASES,
    LABEL_PATTERN,
    PLATFORM_BACKENDS,
    Backend,
)
from pytest_lyapax.measuring import compilecache
from pytest_lyapax.report.busy import WARN, parse_busy
from pytest_lyapax.report.gates import CompareThreshold, parse_gates, refusal
from pytest_lyapax.report.identity import machine_of
from pytest_lyapax.report.schema import ReportError, load_report
from pytest_lyapax.run import chip, devices, precision
from pytest_lyapax.run.ab import AB_OPTION, add_ab_twins

RESULTS_DIR = "results"  # under the report directory: recorded results' files

# Field metadata of a setting that stays in the controller; every other field
# of Settings travels to the workers (run/payload.py).
CONTROLLER_ONLY = "controller_only"


@dataclass(frozen=True)
class AgreeSettings:
    """Results compared across backends (``--jax-reference-backend``,
    ``--jax-agree-strict``, ``--jax-no-agree``; run/agreement.py)."""

    reference: str = ""  # the label the others are compared with
    strict: bool = False  # a disagreeing benchmark return value fails its test
    benchmarks: bool = True  # record benchmark return values
    store: Path | None = None  # where workers write recorded arrays' files


@dataclass(frozen=True)
class Settings:
    """Everything the command line and ini file asked of the plugin."""

    backends: tuple[Backend, ...] = ()
    sizes: tuple[int, ...] | None = None
    report_dir: Path | None = None
    compare_path: Path | None = None
    compare_data: Mapping[str, Any] | None = field(
        default=None, compare=False, metadata={CONTROLLER_ONLY: True}
    )
    compare_fail: tuple[CompareThreshold, ...] = ()
    compare_allow_missing: bool = False
    compare_across_machines: bool = False
    required: tuple[str, ...] = ()
    processes: int = 1  # fresh worker processes per backend (--jax-processes)
    extras: bool = True  # untimed compile/memory/split measurements (--jax-no-extras)
    peaks: bool = True  # the machine's measured peaks for the roofline (--jax-no-peaks)
    # Backends one after another, not interleaved (--jax-sequential, turns.py).
    sequential: bool = False
    # Platforms whose device admits one process at a time (--jax-exclusive,
    # chip.py).
    exclusive: frozenset[str] = chip.DEFAULT_EXCLUSIVE
    # Labels a jax_backend marker may name: built-in ones and every mapping.
    known_labels: tuple[str, ...] = ()
    # Backends on other hosts (--jax-backend-host): how long to wait for an
    # answer, and whether a code mismatch may run anyway.
    host_timeout: float = 60.0
    allow_code_mismatch: bool = False
    # Seconds per sized series and backend, and the first-call ceiling
    # (--jax-budget, --jax-max-call; None: off; see budget.py).
    budget_s: float | None = None
    max_call_s: float | None = None
    # What compiles during the timed rounds do (--jax-recompile, compiles.py).
    recompile: str = "warn"
    # What a timing verdict on a busy machine does (--jax-busy, report/busy.py).
    busy: str = WARN
    agree: AgreeSettings = AgreeSettings()
    # The other version of an A/B run (--jax-ab: a revision or a path; None: off).
    ab: str | None = None
    # JAX's persistent compilation cache of the workers (--jax-compile-cache;
    # None: off; measuring/compilecache.py).
    compile_cache: Path | None = None
    # Sizes chosen by the plugin (--jax-find-crossover, --jax-find-ceiling).
    find_crossover: bool = False
    find_ceiling: bool = False

    @property
    def active(self) -> bool:
        """The plugin does nothing unless backends were requested."""
        return bool(self.backends)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(b.label for b in self.backends)


def parse_platform_mappings(values: Sequence[str]) -> dict[str, str]:
    """Parse ``LABEL=PLATFORM`` entries (from ``--jax-backend-platform``).

    PLATFORM is a ``JAX_PLATFORMS`` value: one platform name or a comma list.
    """
    mapping: dict[str, str] = {}
    allowed = ", ".join(PLATFORM_BACKENDS)
    for raw in values:
        label, sep, platform = raw.partition("=")
        label, platform = label.strip().lower(), platform.strip().lower()
        if not sep or not label or not platform:
            raise pytest.UsageError(
                f"--jax-backend-platform: {raw!r} is not LABEL=PLATFORM; "
                "write it like --jax-backend-platform=cpu2=cpu"
            )
        if not LABEL_PATTERN.match(label):
            raise pytest.UsageError(
                f"--jax-backend-platform: label {label!r} in {raw!r} must start with "
                "a lowercase letter and use only a-z, 0-9 and _ (it becomes part "
                "of the test id)"
            )
        names = [p.strip() for p in platform.split(",")]
        bad = [p for p in names if p not in PLATFORM_BACKENDS]
        if bad:
            raise pytest.UsageError(
                f"--jax-backend-platform: unknown JAX platform {bad[0]!r} in {raw!r}; "
                f"a JAX_PLATFORMS value is a comma list of: {allowed}"
            )
        if label in mapping and mapping[label] != ",".join(names):
            raise pytest.UsageError(
                f"--jax-backend-platform: label {label!r} is mapped twice "
                f"({mapping[label]!r} and {','.join(names)!r}); give it once"
            )
        mapping[label] = ",".join(names)
    return mapping


def parse_backends(text: str, platforms: Mapping[str, str]) -> tuple[Backend, ...]:
    """Parse the ``--jax-backend`` list into backends, in run order.

    ``platforms`` holds the user's ``LABEL=PLATFORM`` mappings; they override
    the built-in ones and are the only way to introduce a new label.
    """
    known = {**DEFAULT_PLATFORMS, **platforms}
    allowed = ", ".join([*DEFAULT_PLATFORMS, *LABEL_ALIASES])
    entries = [e.strip().lower() for e in text.split(",")]
    if not any(entries):
        raise pytest.UsageError(
            f"--jax-backend: got an empty list; give comma-separated labels "
            f"from {allowed}, e.g. --jax-backend=cpu,gpu"
        )
    backends: list[Backend] = []
    for entry in entries:
        if not entry:
            raise pytest.UsageError(
                f"--jax-backend: empty entry in {text!r}; separate labels "
                "with single commas, e.g. --jax-backend=cpu,gpu"
            )
        label = LABEL_ALIASES.get(entry, entry)
        if label not in known:
            raise pytest.UsageError(
                f"--jax-backend: unknown backend {entry!r}; choose from {allowed}, "
                f"or define a label with --jax-backend-platform={entry}=PLATFORM"
            )
        if any(b.label == label for b in backends):
            raise pytest.UsageError(
                f"--jax-backend: backend {label!r} is listed twice in {text!r}"
            )
        backends.append(Backend(label, known[label]))
    return tuple(backends)


ENV_OPTION = "--jax-backend-env"
RERUN_OPTION = "--jax-rerun"
RERUN_SUFFIX = "_rerun"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_backend_envs(
    values: Sequence[str], backends: Sequence[Backend]
) -> tuple[Backend, ...]:
    """Attach ``LABEL:VAR=VALUE`` entries (``--jax-backend-env``) to their
    backends: variables set in that label's worker before JAX starts."""
    labels = [b.label for b in backends]
    envs: dict[str, dict[str, str]] = {}
    example = f"write it like {ENV_OPTION}=cpu32:JAX_ENABLE_X64=0"
    for raw in values:
        label, colon, assignment = raw.partition(":")
        name, equals, value = assignment.partition("=")
        label, name = label.strip().lower(), name.strip()
        if not colon or not equals or not label:
            raise pytest.UsageError(
                f"{ENV_OPTION}: {raw!r} is not LABEL:VAR=VALUE; {example}"
            )
        if label not in labels:
            raise pytest.UsageError(
                f"{ENV_OPTION}: backend {label!r} in {raw!r} is not requested; "
                f"add it to --jax-backend (requested: {', '.join(labels)}); a new "
                f"label also needs --jax-backend-platform={label}=PLATFORM"
            )
        if not _ENV_NAME.match(name):
            raise pytest.UsageError(
                f"{ENV_OPTION}: {name!r} in {raw!r} is not an environment variable "
                "name (letters, digits and _, not starting with a digit)"
            )
        if name == "JAX_PLATFORMS":
            raise pytest.UsageError(
                f"{ENV_OPTION}: {raw!r} sets JAX_PLATFORMS, which the label's "
                f"platform sets; use --jax-backend-platform={label}=PLATFORM"
            )
        if "//" in value or any(c in value for c in "\n\r\0"):
            raise pytest.UsageError(
                f"{ENV_OPTION}: the value in {raw!r} holds '//' or a line break, "
                "which a worker's spec cannot carry; give the value without them"
            )
        given = envs.setdefault(label, {})
        if name in given and given[name] != value:
            raise pytest.UsageError(
                f"{ENV_OPTION}: {name} is set twice for {label!r} "
                f"({given[name]!r} and {value!r}); give it once"
            )
        given[name] = value
    return tuple(
        replace(b, env=tuple(envs[b.label].items())) if b.label in envs else b
        for b in backends
    )


def add_reruns(
    values: Sequence[str], backends: Sequence[Backend]
) -> tuple[Backend, ...]:
    """Add a second run of each label named in ``values`` (``--jax-rerun``,
    comma lists): a label ``LABEL_rerun`` with the same platform, host and
    variables, right after ``LABEL`` in the run order."""
    labels = [b.label for b in backends]
    chosen: list[str] = []
    for raw in values:
        for entry in raw.split(","):
            label = entry.strip().lower()
            if label not in labels:
                raise pytest.UsageError(
                    f"{RERUN_OPTION}: {entry.strip()!r} is not a requested backend; "
                    f"choose from {', '.join(labels)}"
                )
            twin = label + RERUN_SUFFIX
            if twin in labels:
                raise pytest.UsageError(
                    f"{RERUN_OPTION}={label}: the label {twin!r} it would add is "
                    "already requested; rename that backend"
                )
            if label not in chosen:
                chosen.append(label)
    out: list[Backend] = []
    for b in backends:
        out.append(b)
        if b.label in chosen:
            out.append(replace(b, label=b.label + RERUN_SUFFIX, rerun_of=b.label))
    return tuple(out)


def parse_sizes(
    text: str, option: str = "--jax-sizes", noun: str = "size", example: str = ""
) -> tuple[int, ...]:
    """Parse a comma-separated list of distinct positive integer sizes (or
    other ``noun``: device counts, ``--jax-devices``)."""
    sizes: list[int] = []
    for entry in text.split(","):
        entry = entry.strip()
        try:
            size = int(entry)
        except ValueError:
            size = 0
        if size <= 0:
            raise pytest.UsageError(
                f"{option}: {entry!r} is not a positive integer; give a comma-"
                f"separated list of {noun}s, e.g. {option}={example or '20,50,100'}"
            )
        if size in sizes:
            raise pytest.UsageError(f"{option}: {noun} {size} is listed twice")
        sizes.append(size)
    return tuple(sizes)


def validate_marker_sizes(args: Sequence[object], where: str) -> tuple[int, ...]:
    """Check the sizes given to ``@pytest.mark.jax_sizes`` (raises ValueError)."""
    if not args:
        raise ValueError(f"{where}: @pytest.mark.jax_sizes() needs at least one size")
    sizes: list[int] = []
    for arg in args:
        if isinstance(arg, bool) or not isinstance(arg, int) or arg <= 0:
            raise ValueError(
                f"{where}: @pytest.mark.jax_sizes takes positive integers, got {arg!r}"
            )
        if arg in sizes:
            raise ValueError(f"{where}: @pytest.mark.jax_sizes lists {arg} twice")
        sizes.append(arg)
    return tuple(sizes)


def parse_compare_fail(texts: Sequence[str]) -> tuple[CompareThreshold, ...]:
    """Parse each ``--jax-compare-fail`` (see :func:`gates.parse_gates`);
    a bad expression is a usage error."""
    try:
        return parse_gates(texts, "--jax-compare-fail")
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def check_report_dir(path: Path, option: str = "--jax-report-dir") -> Path:
    """Check that reports could be written to ``path``, without creating it.

    The directory itself is made only when a run has something to write, so
    that running a project's suite that has no benchmarks leaves it clean.
    """
    if path.exists() and not path.is_dir():
        problem = "it exists and is not a directory"
    else:
        existing = next(p for p in (path, *path.parents) if p.exists())
        if not existing.is_dir():
            problem = f"{str(existing)!r} is not a directory"
        elif not os.access(existing, os.W_OK | os.X_OK):
            problem = f"{str(existing)!r} is not writable"
        else:
            return path
    raise pytest.UsageError(
        f"{option}: cannot write reports to {str(path)!r} ({problem}); give a "
        "writable directory"
    )


def load_compare_file(path: Path) -> dict[str, Any]:
    """Read a saved ``benchmark.json`` to compare this run against (the
    same loader and checks as the ``pytest-lyapax`` command line)."""
    try:
        return load_report(path).data
    except ReportError as exc:
        raise pytest.UsageError(
            f"--jax-compare: {exc}; give a benchmark.json written by an earlier "
            "pytest-lyapax run"
        ) from None


def check_same_host(data: Mapping[str, Any], option: str) -> None:
    """Refuse a gate against a run saved on another host (usage error).

    The device of each backend is only known once it ran; that part of the
    check is made when the run ends (``report.check_regressions``).
    """
    here = platform.node()
    hosts = {
        machine_of(b, data.get("machine_info")).host for b in data.get("benchmarks", [])
    } - {"", here}
    if hosts:
        why = (
            f"{option}: the saved run was measured on host {sorted(hosts)[0]!r}, "
            f"this run is on {here!r}"
        )
        raise pytest.UsageError(refusal(why, "--jax-compare-across-machines"))


# Command-line options that mean nothing unless backends are requested.
NEED_BACKEND = {
    "jax_backend_platform": "--jax-backend-platform",
    "jax_backend_env": ENV_OPTION,
    "jax_report_dir": "--jax-report-dir",
    "jax_compile_cache": "--jax-compile-cache",
    "jax_compare": "--jax-compare",
    "jax_compare_fail": "--jax-compare-fail",
    "jax_compare_allow_missing": "--jax-compare-allow-missing",
    "jax_compare_across_machines": "--jax-compare-across-machines",
    "jax_require": "--jax-require",
    "jax_processes": "--jax-processes",
    "jax_backend_host": "--jax-backend-host",
    "jax_backend_host_timeout": "--jax-backend-host-timeout",
    "jax_allow_code_mismatch": "--jax-allow-code-mismatch",
    "jax_no_extras": "--jax-no-extras",
    "jax_no_peaks": "--jax-no-peaks",
    "jax_sequential": "--jax-sequential",
    "jax_exclusive": chip.EXCLUSIVE_OPTION,
    "jax_budget": "--jax-budget",
    "jax_max_call": "--jax-max-call",
    "jax_recompile": "--jax-recompile",
    "jax_busy": "--jax-busy",
    "jax_rerun": RERUN_OPTION,
    "jax_ab": AB_OPTION,
    "jax_devices": devices.DEVICES_OPTION,
    "jax_find_crossover": "--jax-find-crossover",
    "jax_find_ceiling": "--jax-find-ceiling",
}


def parse_processes(text: str) -> int:
    """Parse ``--jax-processes``: a positive number of worker processes."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise pytest.UsageError(
            f"--jax-processes: {text!r} is not a positive integer; give the number "
            "of fresh processes per backend, e.g. --jax-processes=3"
        )
    return value


POLICIES = ("warn", "fail", "ignore")


def parse_policy(text: str, option: str) -> str:
    """Parse a ``warn|fail|ignore`` option such as ``--jax-recompile``."""
    value = text.strip().lower()
    if value not in POLICIES:
        raise pytest.UsageError(
            f"{option}: {text!r} is not one of {', '.join(POLICIES)}; write it "
            f"like {option}=fail"
        )
    return value


def parse_required(text: str, backends: Sequence[Backend]) -> tuple[str, ...]:
    """Parse ``--jax-require``: labels (or ``all``) that must be available."""
    labels = [b.label for b in backends]
    entries = [
        LABEL_ALIASES.get(e.strip().lower(), e.strip().lower()) for e in text.split(",")
    ]
    if entries == ["all"]:
        return tuple(labels)
    bad = [e for e in entries if e not in labels]
    if bad or not all(entries):
        raise pytest.UsageError(
            f"--jax-require: {text!r} must name requested backends (from "
            f"{', '.join(labels)}) or be 'all'"
        )
    return tuple(dict.fromkeys(entries))


SELECT_HOOK = "pytest_lyapax_select_backends"


def select_backends(
    config: pytest.Config, backends: tuple[Backend, ...]
) -> tuple[Backend, ...]:
    """The backends that run, in run order, as the ``pytest_lyapax_select_backends``
    hook chose them (by default all, in the order requested; hookspecs.py).

    Raises:
        pytest.UsageError: the hook returned no label, a label twice or one
            that was not requested.
    """
    chosen = config.hook.pytest_lyapax_select_backends(config=config, backends=backends)
    by_label = {b.label: b for b in backends}
    labels = [] if isinstance(chosen, str) else list(chosen or ())
    if not labels or len(set(labels)) != len(labels) or set(labels) - set(by_label):
        raise pytest.UsageError(
            f"{SELECT_HOOK} returned {chosen!r}; return a non-empty list of the "
            f"requested labels ({', '.join(by_label)}), each at most once"
        )
    return tuple(by_label[label] for label in labels)


def informational(config: pytest.Config) -> bool:
    """Runs that only list things (help, collect-only, ...) probe and time nothing."""
    option = config.option
    names = ("help", "version", "collectonly", "showfixtures", "markers")
    return any(getattr(option, name, False) for name in names) or bool(
        getattr(option, "show_fixtures_per_test", False)
    )


AUTO = "auto"
# Lines for the report header found before the run's session exists.
NOTES_KEY = pytest.StashKey[list[str]]()
# The probes --jax-backend=auto ran, by platform and variables: not repeated.
PROBED_KEY = pytest.StashKey[dict[tuple[str, tuple[tuple[str, str], ...]], Any]]()


def auto_backends(config: pytest.Config) -> tuple[Backend, ...]:
    """``--jax-backend=auto``: the CPU, then every platform of
    :data:`~pytest_lyapax.backends.probe.AUTO_CANDIDATES` whose probe ran
    on this machine, or met its chip held by another process (probed again
    when the run starts); those that did not are not requested."""
    from pytest_lyapax.backends import chiplock, probe

    found = probe.discover()
    backends = [Backend("cpu", "cpu")]
    absent, held = [], []
    probed = {}
    for candidate in probe.AUTO_CANDIDATES:
        result = found[candidate.label]
        if result.status == probe.OK:
            backends.append(candidate)
            probed[(candidate.platform, candidate.env)] = result
        elif chiplock.is_lock_error(result.reason or ""):
            # On this machine, but another process (often one still ending)
            # held its chip: requested, and probed again when the run starts.
            backends.append(candidate)
            held.append(candidate.label)
        else:
            absent.append(candidate.label)
    config.stash[PROBED_KEY] = probed
    line = f"--jax-backend=auto: {','.join(b.label for b in backends)}"
    if held:
        line += f" ({', '.join(held)}: held by another process, probed again)"
    if absent:
        line += f" (not on this machine: {', '.join(absent)})"
    config.stash.setdefault(NOTES_KEY, []).append(line)
    return tuple(backends)


def backends_requested(config: pytest.Config) -> bool:
    """Whether --jax-backend (or its ini key) was given, read before the run
    is configured."""
    text = config.getoption("jax_backend")
    if text is None:
        text = str(config.getini("jax_backend") or "").strip()
    return bool(text)


def process_precision(config: pytest.Config) -> str | None:
    """The dtype the command line's ``--jax-precision`` asks of this process
    in a run without backends (run/precision.py, process_dtype), or None:
    not given, or the run requests backends (each label's worker takes it
    then).  The ini key ``jax_precision`` is a default for labels only."""
    text = config.getoption("jax_precision")
    if text is None or backends_requested(config):
        return None
    return precision.process_dtype(text)


def read_settings(config: pytest.Config, *, check_paths: bool = True) -> Settings:
    """Resolve command line, ini file and defaults into :class:`Settings`.

    ``check_paths=False`` skips reading the compare file and checking the
    report directory, for processes that only need the backend list.
    """
    invocation_dir = config.invocation_params.dir
    ini_dir = config.inipath.parent if config.inipath else config.rootpath

    mappings = list(config.getini("jax_backend_platform") or [])
    mappings += config.getoption("jax_backend_platform") or []
    platforms = parse_platform_mappings(mappings)

    text = config.getoption("jax_backend")
    if text is None:
        text = str(config.getini("jax_backend") or "").strip() or None
    if text is not None and text.strip().lower() == AUTO:
        backends = auto_backends(config)
    else:
        backends = parse_backends(text, platforms) if text is not None else ()
    host_lines = list(config.getini("jax_backend_host") or [])
    host_lines += config.getoption("jax_backend_host") or []
    ab = config.getoption("jax_ab")
    if backends:
        backends = bind_hosts(backends, parse_host_bindings(host_lines))
        backends = select_backends(config, backends)
        env_lines = list(config.getini("jax_backend_env") or [])
        env_lines += config.getoption("jax_backend_env") or []
        backends = parse_backend_envs(env_lines, backends)
        precision_text = config.getoption("jax_precision")
        where = precision.PRECISION_OPTION
        if precision_text is None:
            precision_text = str(config.getini("jax_precision") or "").strip() or None
            where = "jax_precision (ini)"
        backends = precision.add_precisions(
            precision_text,
            backends,
            where,
            env_wins=where != precision.PRECISION_OPTION,
        )
        counts_text = config.getoption("jax_devices")
        where = devices.DEVICES_OPTION
        if counts_text is None:
            counts_text = str(config.getini("jax_devices") or "").strip() or None
            where = "jax_devices (ini)"
        if counts_text is not None:
            counts = parse_sizes(counts_text, where, "device count", "1,2,4")
            backends = devices.add_device_labels(counts, backends)
        backends = add_reruns(config.getoption("jax_rerun") or [], backends)
        backends = add_ab_twins(ab, backends)
    timeout_text = config.getoption("jax_backend_host_timeout")
    if timeout_text is None:
        timeout_text = str(config.getini("jax_backend_host_timeout") or "").strip()
    host_timeout = (
        parse_timeout(timeout_text, "--jax-backend-host-timeout")
        if timeout_text
        else Settings.host_timeout
    )
    if not backends:
        given = [
            flag
            for dest, flag in NEED_BACKEND.items()
            if config.getoption(dest) not in (None, [], False)
        ]
        if given:
            raise pytest.UsageError(
                f"{given[0]} needs --jax-backend=LIST (or the jax_backend ini key); "
                "without it pytest-lyapax is off"
            )

    exclusive = chip.DEFAULT_EXCLUSIVE
    exclusive_text = config.getoption("jax_exclusive")
    where = chip.EXCLUSIVE_OPTION
    if exclusive_text is None:
        exclusive_text = str(config.getini("jax_exclusive") or "").strip() or None
        where = "jax_exclusive (ini)"
    if exclusive_text is not None and backends:
        exclusive = chip.parse_exclusive(exclusive_text, backends, where)

    budget_s, max_call_s = read_limits(config)

    sizes_text = config.getoption("jax_sizes")
    sizes = parse_sizes(sizes_text) if sizes_text is not None else None

    compare_fail = parse_compare_fail(config.getoption("jax_compare_fail") or [])
    compare_text = config.getoption("jax_compare")
    across = bool(config.getoption("jax_compare_across_machines"))
    if compare_fail and compare_text is None:
        raise pytest.UsageError(
            "--jax-compare-fail needs a saved run to compare with: add "
            "--jax-compare=PATH/benchmark.json"
        )
    busy_text = config.getoption("jax_busy")
    try:
        busy = parse_busy(busy_text, "--jax-busy") if busy_text is not None else WARN
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    processes_text = config.getoption("jax_processes")
    processes = parse_processes(processes_text) if processes_text is not None else 1
    recompile_text = config.getoption("jax_recompile")
    recompile = (
        parse_policy(recompile_text, "--jax-recompile")
        if recompile_text is not None
        else "warn"
    )
    required_text = config.getoption("jax_require")
    required = parse_required(required_text, backends) if required_text else ()

    report_dir = compare_path = compare_data = compile_cache = None
    if backends:
        cli_dir = config.getoption("jax_report_dir")
        ini_value = str(config.getini("jax_report_dir") or "").strip()
        if cli_dir is not None:
            if not cli_dir.strip():
                raise pytest.UsageError(
                    "--jax-report-dir: got an empty path; give a directory, e.g. "
                    "--jax-report-dir=lyapax-report"
                )
            report_dir = invocation_dir / cli_dir
        elif ini_value:
            report_dir = ini_dir / ini_value
        else:
            report_dir = config.rootpath / "lyapax-report"
        report_dir = report_dir.resolve()
        compile_cache = read_compile_cache(config, report_dir)
        if compare_text is not None:
            compare_path = invocation_dir / compare_text
        if check_paths:
            option = "--jax-report-dir" if cli_dir is not None else "jax_report_dir"
            check_report_dir(report_dir, option)
            if compare_path is not None:
                compare_data = load_compare_file(compare_path)
                if compare_fail and not across:
                    check_same_host(compare_data, "--jax-compare-fail")
    return Settings(
        backends=backends,
        sizes=sizes,
        report_dir=report_dir,
        compare_path=compare_path,
        compare_data=compare_data,
        compare_fail=compare_fail,
        compare_allow_missing=bool(config.getoption("jax_compare_allow_missing")),
        compare_across_machines=across,
        required=required,
        processes=processes,
        extras=not bool(config.getoption("jax_no_extras")),
        peaks=not bool(config.getoption("jax_no_peaks")),
        sequential=bool(config.getoption("jax_sequential")),
        exclusive=exclusive,
        known_labels=tuple(dict.fromkeys([*DEFAULT_PLATFORMS, *platforms])),
        host_timeout=host_timeout,
        allow_code_mismatch=bool(config.getoption("jax_allow_code_mismatch")),
        budget_s=budget_s,
        max_call_s=max_call_s,
        recompile=recompile,
        busy=busy,
        agree=AgreeSettings(
            reference=config.getoption("jax_reference_backend")
            or (backends[0].label if backends else ""),
            strict=bool(config.getoption("jax_agree_strict")),
            benchmarks=not config.getoption("jax_no_agree"),
            store=None if report_dir is None else report_dir / RESULTS_DIR,
        ),
        ab=ab,
        compile_cache=compile_cache,
        find_crossover=bool(config.getoption("jax_find_crossover"))
        or str(config.getini("jax_find_crossover")).strip().lower() in _TRUE,
        find_ceiling=bool(config.getoption("jax_find_ceiling")),
    )


_TRUE = ("1", "true", "yes", "on")


def read_compile_cache(config: pytest.Config, report_dir: Path) -> Path | None:
    """``--jax-compile-cache`` (relative to where pytest was started), the
    ``jax_compile_cache`` ini key (relative to the ini file), the
    ``JAX_COMPILATION_CACHE_DIR`` of this environment, or the report folder's
    ``compile-cache``; None for ``none``."""
    text = config.getoption("jax_compile_cache")
    base, where = config.invocation_params.dir, compilecache.OPTION
    if text is None:
        text = str(config.getini("jax_compile_cache") or "").strip() or None
        base = config.inipath.parent if config.inipath else config.rootpath
        where = "jax_compile_cache (ini)"
    if text is None:
        from_env = os.environ.get(compilecache.ENV, "").strip()
        if from_env:
            return Path(from_env).resolve()
        return report_dir / compilecache.FOLDER
    if not text.strip():
        raise pytest.UsageError(
            f"{where}: got an empty path; give a folder, e.g. "
            f"{compilecache.OPTION}=.jax-cache, or none (off)"
        )
    if text.strip().lower() == "none":
        return None
    return (base / text.strip()).resolve()


def read_limits(config: pytest.Config) -> tuple[float | None, float | None]:
    """``--jax-budget`` and ``--jax-max-call`` (command line over ini), in
    seconds; None where off (``none`` or not given)."""
    from pytest_lyapax.run.budget import parse_duration

    limits = []
    for dest, flag in (
        ("jax_budget", "--jax-budget"),
        ("jax_max_call", "--jax-max-call"),
    ):
        text = config.getoption(dest)
        where = flag
        if text is None:
            text = str(config.getini(dest) or "").strip() or None
            where = dest
        limits.append(parse_duration(text, where) if text is not None else None)
    return limits[0], limits[1]
