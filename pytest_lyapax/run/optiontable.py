"""The plugin's options, declared once: the table ``pytest_addoption`` walks.

Every command-line option of the ``lyapax`` group and every ini key is one
row here, in the order ``pytest --help`` lists them; :func:`declare` adds
them to pytest's parser and :func:`~pytest_lyapax.run.options.read_settings`
reads them into the one ``Settings`` object.  The compare gates are a table
of their own (:data:`pytest_lyapax.report.gates.GATE_OPTIONS`), shared with
the ``pytest-lyapax`` command line's argparse; this table holds their place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest

from pytest_lyapax.report import busy
from pytest_lyapax.report.gates import add_gate_options

GROUP = ("lyapax", "per-backend JAX performance testing")
# What an option holds when not given, by its argparse action.
_DEFAULTS: dict[str, Any] = {"store": None, "append": [], "store_true": False}


@dataclass(frozen=True)
class Option:
    """One command-line option; its ``dest`` is the flag with ``_`` for ``-``
    (``--jax-backend`` -> ``jax_backend``), its default set by ``action``
    (None, an empty list, or False)."""

    flag: str
    help: str
    metavar: str | None = None
    action: str = "store"  # store | append | store_true

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    def declare(self, group: Any) -> None:
        extra: dict[str, Any] = {}
        if self.action != "store":
            extra["action"] = self.action
        if self.metavar is not None:
            extra["metavar"] = self.metavar
        group.addoption(
            self.flag,
            dest=self.dest,
            default=_DEFAULTS[self.action],
            help=self.help,
            **extra,
        )


@dataclass(frozen=True)
class GateOptions:
    """The place of the compare gates (``--jax-compare-fail`` ...) in the table."""

    prefix: str = "--jax-compare-"
    note: str = " (needs --jax-backend)"

    def declare(self, group: Any) -> None:
        dest_prefix = self.prefix[2:].replace("-", "_")
        add_gate_options(group.addoption, self.prefix, dest_prefix, self.note)


@dataclass(frozen=True)
class IniKey:
    """One ini key: a string (default "") or, for ``linelist``, a list."""

    name: str
    help: str
    type: Literal["linelist"] | None = None

    def declare(self, parser: pytest.Parser) -> None:
        if self.type is None:
            parser.addini(self.name, self.help, default="")
        else:
            parser.addini(self.name, self.help, type=self.type, default=[])


GATES = GateOptions()

OPTIONS: tuple[Option | GateOptions, ...] = (
    Option(
        "--jax-backend",
        "Run every test once per JAX backend, each in its own worker process, "
        "in this order: comma-separated labels from cpu, gpu (=cuda), tpu, rocm "
        "or labels defined with --jax-backend-platform; auto: cpu and every "
        "other platform a probe finds on this machine. Ini: jax_backend.",
        metavar="LIST",
    ),
    Option(
        "--jax-backend-platform",
        "Run backend LABEL with JAX_PLATFORMS=PLATFORM (repeatable), e.g. "
        "cpu2=cpu (needs --jax-backend). Ini: jax_backend_platform (one mapping "
        "per line).",
        metavar="LABEL=PLATFORM",
        action="append",
    ),
    Option(
        "--jax-backend-env",
        "Set VAR=VALUE in backend LABEL's worker before JAX starts "
        "(repeatable): an execution variant, e.g. with "
        "--jax-backend-platform=cpu32=cpu, cpu32:JAX_ENABLE_X64=0. Ini: "
        "jax_backend_env (one entry per line).",
        metavar="LABEL:VAR=VALUE",
        action="append",
    ),
    Option(
        "--jax-rerun",
        "Run backend LABEL a second time, as the label LABEL_rerun (same "
        "platform, host and variables; comma list or repeatable): its recorded "
        "results are compared with LABEL's bit for bit (run-to-run "
        "determinism), and its timings are an A/A run.",
        metavar="LABEL",
        action="append",
    ),
    Option(
        "--jax-ab",
        "A/B: run every backend LABEL also as LABEL_b on another version of "
        "the code under test, a git revision (checked out into a temporary git "
        "worktree) or the path of another checkout; rounds interleaved, each "
        "benchmark's B/A time ratio judged and reported.",
        metavar="REV",
    ),
    Option(
        "--jax-devices",
        "Device counts (e.g. 1,2,4): each local CPU/GPU backend LABEL also "
        "runs as LABEL_<p>dev with p devices (CPU: the host platform split "
        "before JAX starts), for the tests marked jax_devices; the report "
        "gains a device scaling table. Ini: jax_devices.",
        metavar="LIST",
    ),
    Option(
        "--jax-precision",
        "Float dtype of each backend's worker, set before JAX starts: "
        "float32 (every label), tpu:float32 (one label), native (float64 "
        "where the platform has it natively, float32 on a TPU) or "
        "float64,float32 (every label at both: twin labels LABEL_float32); "
        "recorded with the matmul precision in extra_info['precision']. "
        "Without --jax-backend: float32 or float64 sets this process's JAX "
        "(and a plain xdist run's workers'). Ini: jax_precision (with "
        "--jax-backend only).",
        metavar="LIST",
    ),
    Option(
        "--jax-sizes",
        "Comma-separated problem sizes replacing the defaults of every test "
        "that uses the jax_size fixture.",
        metavar="LIST",
    ),
    Option(
        "--jax-report-dir",
        "Where benchmark.json, crossover.png and runs/NNNN.json are written "
        "when the run measured something. Default: lyapax-report/ under the "
        "rootdir (needs --jax-backend). Ini: jax_report_dir.",
        metavar="DIR",
    ),
    Option(
        "--jax-compile-cache",
        "JAX's persistent compilation cache for the workers: a folder, or "
        "'none' (off). Default: JAX_COMPILATION_CACHE_DIR if set, else "
        "compile-cache/ in the report folder; a second run loads the programs "
        "the first compiled (needs --jax-backend). Ini: jax_compile_cache.",
        metavar="DIR|none",
    ),
    Option(
        "--jax-compare",
        "Compare this run with a saved benchmark.json, per backend and size "
        "(needs --jax-backend).",
        metavar="PATH",
    ),
    GATES,
    Option(
        "--jax-processes",
        "Run each backend's phase in N fresh worker processes, in turn "
        "(cpu, gpu, cpu, gpu, ...), and pool their rounds, so the noise test "
        "sees the spread between processes too; every test runs N times per "
        "backend (needs --jax-backend).",
        metavar="N",
    ),
    Option(
        "--jax-require",
        "Stop with a usage error (exit code 4) unless these requested "
        "backends (comma-separated, or 'all') are available, e.g. "
        "--jax-require=gpu for a GPU CI job (needs --jax-backend).",
        metavar="LIST",
    ),
    Option(
        "--jax-backend-host",
        "Run backend LABEL on another host, through an execnet gateway spec "
        "(repeatable): ssh=USER@HOST//python=PATH//chdir=CHECKOUT, "
        "socket=HOST:PORT//chdir=CHECKOUT or popen//python=PATH; the host must "
        "hold the same code (checked before tests run; needs --jax-backend). "
        "Ini: jax_backend_host (one binding per line).",
        metavar="LABEL=SPEC",
        action="append",
    ),
    Option(
        "--jax-backend-host-timeout",
        "How long a backend host may take to answer (connect, start, and "
        "between heartbeats of a running worker) before it is unavailable or "
        "crashed; default 60 (needs --jax-backend). Ini: jax_backend_host_timeout.",
        metavar="SECONDS",
    ),
    Option(
        "--jax-allow-code-mismatch",
        "Run a backend host whose code (commit, test files, packages under "
        "test, jax/jaxlib/pytest-benchmark/pytest_lyapax versions) differs from "
        "this checkout anyway; the differences are reported (needs --jax-backend).",
        action="store_true",
    ),
    Option(
        "--jax-sequential",
        "Run the backends one after another instead of interleaving their "
        "tests and benchmark rounds (for a device whose memory one worker must "
        "own); the report says which mode measured (needs --jax-backend).",
        action="store_true",
    ),
    Option(
        "--jax-exclusive",
        "Labels whose device admits one process at a time (comma-separated, "
        "or none; default: every label on the tpu platform): a label and its "
        "twins (--jax-rerun, --jax-ab, --jax-devices) take the device one "
        "after another, each worker ending before the next opens it (needs "
        "--jax-backend). Ini: jax_exclusive.",
        metavar="LIST",
    ),
    Option(
        "--jax-no-extras",
        "Measure only the timed rounds and the first call: no compile/lower "
        "split, memory figures, dispatch/device split, counters, machine state "
        "or stability judgement (needs --jax-backend).",
        action="store_true",
    ),
    Option(
        "--jax-no-peaks",
        "Do not measure each backend's peaks (bandwidth, FLOP/s, launch "
        "floor; a few seconds per worker): the roofline then gives the work per "
        "call only (needs --jax-backend).",
        action="store_true",
    ),
    Option(
        "--jax-budget",
        "Time budget per sized series and backend, e.g. 90s or 2min "
        "(units ms, s, min, h; 'none' = off): a size whose predicted warm-up "
        "and rounds do not fit in what is left is not run and is reported as "
        "over_budget with its predicted time (needs --jax-backend). Ini: jax_budget.",
        metavar="DURATION",
    ),
    Option(
        "--jax-max-call",
        "A first (warm-up) call longer than this, e.g. 30s, stops the "
        "larger sizes of its series on that backend ('none' = off; needs "
        "--jax-backend). Ini: jax_max_call.",
        metavar="DURATION",
    ),
    Option(
        "--jax-find-crossover",
        "After the marked sizes, add sizes until the crossing of the first two "
        "backends' medians is bracketed within +-25 %%, or shown absent within "
        "the bounds of @pytest.mark.jax_sizes(..., search=(lo, hi)) (default: "
        "the marked range / 16 ... * 16); within --jax-budget. Starts from the "
        "bracket of the saved run (--jax-compare, else the report folder's); "
        "a verdict taken on a busy machine is measured again, not read. Ini: "
        "jax_find_crossover.",
        action="store_true",
    ),
    Option(
        "--jax-find-ceiling",
        "Per backend, the largest size whose call fits in memory: doubling, "
        "then bisection, from the largest marked size; predicted from the "
        "compiled program's memory analysis, confirmed by a real call.",
        action="store_true",
    ),
    Option(
        "--jax-recompile",
        "What XLA compiles during a benchmark's timed rounds (and NumPy "
        "arguments copied to a non-CPU device at every call) do: warn (default; "
        "a RecompileWarning naming the test, the count and JAX's reasons), fail "
        "the test, or ignore; always recorded in extra_info.recompiles (needs "
        "--jax-backend).",
        metavar="warn|fail|ignore",
    ),
    Option(
        "--jax-busy", busy.HELP + " (needs --jax-backend).", metavar="warn|fail|ignore"
    ),
    Option(
        "--jax-reference-backend",
        "Compare every backend's recorded results (jax_results.record, "
        "benchmark return values) with this backend's; default: the first "
        "label of --jax-backend.",
        metavar="LABEL",
    ),
    Option(
        "--jax-agree-strict",
        "A benchmark's return value that disagrees across backends fails "
        "its test (default: a warning in the summary).",
        action="store_true",
    ),
    Option(
        "--jax-no-agree",
        "Record and compare no benchmark return values (results recorded "
        "with jax_results are still compared).",
        action="store_true",
    ),
)

INI_KEYS: tuple[IniKey, ...] = (
    IniKey("jax_backend", "Default for --jax-backend."),
    IniKey("jax_budget", "Default for --jax-budget."),
    IniKey("jax_max_call", "Default for --jax-max-call."),
    IniKey("jax_find_crossover", "true: as --jax-find-crossover."),
    IniKey(
        "jax_backend_host",
        "LABEL=SPEC host bindings, one per line (see --jax-backend-host).",
        type="linelist",
    ),
    IniKey(
        "jax_backend_host_timeout",
        "Seconds a backend host may take to answer (see --jax-backend-host-timeout).",
    ),
    IniKey(
        "jax_backend_platform",
        "LABEL=PLATFORM mappings, one per line (see --jax-backend-platform).",
        type="linelist",
    ),
    IniKey(
        "jax_backend_env",
        "LABEL:VAR=VALUE entries, one per line (see --jax-backend-env).",
        type="linelist",
    ),
    IniKey("jax_devices", "Device counts, e.g. 1,2,4 (see --jax-devices)."),
    IniKey("jax_precision", "Precisions, e.g. native (see --jax-precision)."),
    IniKey("jax_exclusive", "Default for --jax-exclusive."),
    IniKey(
        "jax_compile_cache",
        "Compile cache folder, relative to the ini file, or none "
        "(see --jax-compile-cache).",
    ),
    IniKey(
        "jax_report_dir",
        "Report directory, relative to the ini file (see --jax-report-dir).",
    ),
)


def declare(parser: pytest.Parser) -> None:
    """Add every option and ini key of the table to pytest's parser."""
    group = parser.getgroup(*GROUP)
    for option in OPTIONS:
        option.declare(group)
    for key in INI_KEYS:
        key.declare(parser)
