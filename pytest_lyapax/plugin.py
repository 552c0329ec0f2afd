"""pytest-lyapax entry point: options, markers, fixtures and the role set-up.

``pytest --jax-backend=cpu,gpu`` runs every test once per backend, each
backend in its own pytest-xdist worker whose ``JAX_PLATFORMS`` is set before
JAX is imported, one backend after another; benchmarks are measured with
pytest-benchmark and merged into one report.  Without ``--jax-backend`` (or the
``jax_backend`` ini key) the plugin stays out of the way.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pytest_lyapax.measuring.agreement import ResultsRecorder, recorder_for
from pytest_lyapax.report import busy
from pytest_lyapax.report.gates import add_gate_options
from pytest_lyapax.run import ab, agreement
from pytest_lyapax.run.items import item_label
from pytest_lyapax.run.options import (
    informational,
    read_settings,
    validate_marker_sizes,
)
from pytest_lyapax.run.session import WORKERINPUT_KEY, get_session

# Only the hooks pytest needs from the start live here.  An active run's
# role (controller, worker, in-process) registers its own hook object from
# ``runplan`` (run/roles.py), imported with the xdist scheduling, report and
# benchmark code only by active runs: pytest imports this module at every
# start, also where the plugin is unused.

SIZES_KEY = pytest.StashKey["tuple[int, ...] | None"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lyapax", "per-backend JAX performance testing")
    group.addoption(
        "--jax-backend",
        dest="jax_backend",
        metavar="LIST",
        default=None,
        help="Run every test once per JAX backend, each in its own worker process, "
        "in this order: comma-separated labels from cpu, gpu (=cuda), tpu, rocm "
        "or labels defined with --jax-backend-platform. Ini: jax_backend.",
    )
    group.addoption(
        "--jax-backend-platform",
        dest="jax_backend_platform",
        action="append",
        default=[],
        metavar="LABEL=PLATFORM",
        help="Run backend LABEL with JAX_PLATFORMS=PLATFORM (repeatable), e.g. "
        "cpu2=cpu (needs --jax-backend). Ini: jax_backend_platform (one mapping "
        "per line).",
    )
    group.addoption(
        "--jax-backend-env",
        dest="jax_backend_env",
        action="append",
        default=[],
        metavar="LABEL:VAR=VALUE",
        help="Set VAR=VALUE in backend LABEL's worker before JAX starts "
        "(repeatable): an execution variant, e.g. with "
        "--jax-backend-platform=cpu32=cpu, cpu32:JAX_ENABLE_X64=0. Ini: "
        "jax_backend_env (one entry per line).",
    )
    group.addoption(
        "--jax-rerun",
        dest="jax_rerun",
        action="append",
        default=[],
        metavar="LABEL",
        help="Run backend LABEL a second time, as the label LABEL_rerun (same "
        "platform, host and variables; comma list or repeatable): its recorded "
        "results are compared with LABEL's bit for bit (run-to-run "
        "determinism), and its timings are an A/A run.",
    )
    group.addoption(
        "--jax-ab",
        dest="jax_ab",
        default=None,
        metavar="REV",
        help="A/B: run every backend LABEL also as LABEL_b on another version of "
        "the code under test, a git revision (checked out into a temporary git "
        "worktree) or the path of another checkout; rounds interleaved, each "
        "benchmark's B/A time ratio judged and reported.",
    )
    group.addoption(
        "--jax-devices",
        dest="jax_devices",
        default=None,
        metavar="LIST",
        help="Device counts (e.g. 1,2,4): each local CPU/GPU backend LABEL also "
        "runs as LABEL_<p>dev with p devices (CPU: the host platform split "
        "before JAX starts), for the tests marked jax_devices; the report "
        "gains a device scaling table. Ini: jax_devices.",
    )
    group.addoption(
        "--jax-sizes",
        dest="jax_sizes",
        metavar="LIST",
        default=None,
        help="Comma-separated problem sizes replacing the defaults of every test "
        "that uses the jax_size fixture.",
    )
    group.addoption(
        "--jax-report-dir",
        dest="jax_report_dir",
        metavar="DIR",
        default=None,
        help="Where benchmark.json, crossover.png and runs/NNNN.json are written "
        "when the run measured something. Default: lyapax-report/ under the "
        "rootdir (needs --jax-backend). Ini: jax_report_dir.",
    )
    group.addoption(
        "--jax-compare",
        dest="jax_compare",
        metavar="PATH",
        default=None,
        help="Compare this run with a saved benchmark.json, per backend and size "
        "(needs --jax-backend).",
    )
    add_gate_options(
        group.addoption, "--jax-compare-", "jax_compare_", " (needs --jax-backend)"
    )
    group.addoption(
        "--jax-processes",
        dest="jax_processes",
        metavar="N",
        default=None,
        help="Run each backend's phase in N fresh worker processes, in turn "
        "(cpu, gpu, cpu, gpu, ...), and pool their rounds, so the noise test "
        "sees the spread between processes too; every test runs N times per "
        "backend (needs --jax-backend).",
    )
    group.addoption(
        "--jax-require",
        dest="jax_require",
        metavar="LIST",
        default=None,
        help="Stop with a usage error (exit code 4) unless these requested "
        "backends (comma-separated, or 'all') are available, e.g. "
        "--jax-require=gpu for a GPU CI job (needs --jax-backend).",
    )
    group.addoption(
        "--jax-backend-host",
        dest="jax_backend_host",
        action="append",
        default=[],
        metavar="LABEL=SPEC",
        help="Run backend LABEL on another host, through an execnet gateway spec "
        "(repeatable): ssh=USER@HOST//python=PATH//chdir=CHECKOUT, "
        "socket=HOST:PORT//chdir=CHECKOUT or popen//python=PATH; the host must "
        "hold the same code (checked before tests run; needs --jax-backend). "
        "Ini: jax_backend_host (one binding per line).",
    )
    group.addoption(
        "--jax-backend-host-timeout",
        dest="jax_backend_host_timeout",
        metavar="SECONDS",
        default=None,
        help="How long a backend host may take to answer (connect, start, and "
        "between heartbeats of a running worker) before it is unavailable or "
        "crashed; default 60 (needs --jax-backend). Ini: jax_backend_host_timeout.",
    )
    group.addoption(
        "--jax-allow-code-mismatch",
        dest="jax_allow_code_mismatch",
        action="store_true",
        default=False,
        help="Run a backend host whose code (commit, test files, packages under "
        "test, jax/jaxlib/pytest-benchmark/pytest_lyapax versions) differs from "
        "this checkout anyway; the differences are reported (needs --jax-backend).",
    )
    group.addoption(
        "--jax-sequential",
        dest="jax_sequential",
        action="store_true",
        default=False,
        help="Run the backends one after another instead of interleaving their "
        "tests and benchmark rounds (for a device whose memory one worker must "
        "own); the report says which mode measured (needs --jax-backend).",
    )
    group.addoption(
        "--jax-no-extras",
        dest="jax_no_extras",
        action="store_true",
        default=False,
        help="Measure only the timed rounds and the first call: no compile/lower "
        "split, memory figures, dispatch/device split, counters, machine state "
        "or stability judgement (needs --jax-backend).",
    )
    group.addoption(
        "--jax-no-peaks",
        dest="jax_no_peaks",
        action="store_true",
        default=False,
        help="Do not measure each backend's peaks (bandwidth, FLOP/s, launch "
        "floor; a few seconds per worker): the roofline then gives the work per "
        "call only (needs --jax-backend).",
    )
    group.addoption(
        "--jax-budget",
        dest="jax_budget",
        metavar="DURATION",
        default=None,
        help="Time budget per sized series and backend, e.g. 90s or 2min "
        "(units ms, s, min, h; 'none' = off): a size whose predicted warm-up "
        "and rounds do not fit in what is left is not run and is reported as "
        "over_budget with its predicted time (needs --jax-backend). Ini: jax_budget.",
    )
    group.addoption(
        "--jax-max-call",
        dest="jax_max_call",
        metavar="DURATION",
        default=None,
        help="A first (warm-up) call longer than this, e.g. 30s, stops the "
        "larger sizes of its series on that backend ('none' = off; needs "
        "--jax-backend). Ini: jax_max_call.",
    )
    group.addoption(
        "--jax-recompile",
        dest="jax_recompile",
        metavar="warn|fail|ignore",
        default=None,
        help="What XLA compiles during a benchmark's timed rounds (and NumPy "
        "arguments copied to a non-CPU device at every call) do: warn (default; "
        "a RecompileWarning naming the test, the count and JAX's reasons), fail "
        "the test, or ignore; always recorded in extra_info.recompiles (needs "
        "--jax-backend).",
    )
    group.addoption(
        "--jax-busy",
        dest="jax_busy",
        metavar="warn|fail|ignore",
        default=None,
        help=busy.HELP + " (needs --jax-backend).",
    )
    agreement.add_options(group)
    parser.addini("jax_backend", "Default for --jax-backend.", default="")
    parser.addini("jax_budget", "Default for --jax-budget.", default="")
    parser.addini("jax_max_call", "Default for --jax-max-call.", default="")
    parser.addini(
        "jax_backend_host",
        "LABEL=SPEC host bindings, one per line (see --jax-backend-host).",
        type="linelist",
        default=[],
    )
    parser.addini(
        "jax_backend_host_timeout",
        "Seconds a backend host may take to answer (see --jax-backend-host-timeout).",
        default="",
    )
    parser.addini(
        "jax_backend_platform",
        "LABEL=PLATFORM mappings, one per line (see --jax-backend-platform).",
        type="linelist",
        default=[],
    )
    parser.addini(
        "jax_backend_env",
        "LABEL:VAR=VALUE entries, one per line (see --jax-backend-env).",
        type="linelist",
        default=[],
    )
    parser.addini(
        "jax_devices",
        "Device counts, e.g. 1,2,4 (see --jax-devices).",
        default="",
    )
    parser.addini(
        "jax_report_dir",
        "Report directory, relative to the ini file (see --jax-report-dir).",
        default="",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests() -> None:
    # A worker of an A/B run (--jax-ab) imports its side's code: the path
    # must be in place before any conftest imports the code under test.
    if os.environ.get(ab.ROOT_ENV):
        ab.enter_from_environment()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "jax_backend(*labels): run this test only on these of the requested "
        "JAX backends (default: all of them); the others skip it",
    )
    config.addinivalue_line(
        "markers",
        "jax_sizes(*sizes, label=None): default problem sizes for the jax_size "
        "fixture (overridden by --jax-sizes); label names the size axis",
    )
    config.addinivalue_line(
        "markers",
        "jax_devices(*counts, scaling='strong'): run this test once per device "
        "count given by --jax-devices, on the workers of that many devices "
        "(jax_mesh fixture); scaling='weak' when the test scales its size with "
        "the count",
    )
    config.addinivalue_line("markers", agreement.marker_line())
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        if WORKERINPUT_KEY in workerinput:
            from pytest_lyapax.run import runplan

            session = runplan.configure_worker(config, workerinput[WORKERINPUT_KEY])
            config.stash[SIZES_KEY] = session.settings.sizes
            agreement.register(config)
        return
    settings = read_settings(config, check_paths=not informational(config))
    config.stash[SIZES_KEY] = settings.sizes
    if settings.active:
        from pytest_lyapax.run import runplan

        runplan.configure_controller(config, settings)
        agreement.register(config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # The backend axis is parametrized by the hooks of an active run
    # (run/roles.py); the size axis exists with or without --jax-backend.
    if "jax_size" not in metafunc.fixturenames:
        return
    sizes = metafunc.config.stash.get(SIZES_KEY, None)
    if sizes is None:
        where = metafunc.definition.nodeid
        marker = metafunc.definition.get_closest_marker("jax_sizes")
        if marker is None:
            raise pytest.Collector.CollectError(
                f"{where} uses the jax_size fixture but declares no sizes: add "
                "@pytest.mark.jax_sizes(20, 50, ...) or pass --jax-sizes=LIST"
            )
        try:
            sizes = validate_marker_sizes(marker.args, where)
        except ValueError as exc:
            raise pytest.Collector.CollectError(str(exc)) from None
    metafunc.parametrize("jax_size", sizes, indirect=True, ids=[str(s) for s in sizes])


@pytest.fixture
def jax_backend(request: pytest.FixtureRequest) -> str:
    """Label of the JAX backend this test runs on, e.g. ``"cpu"`` or ``"gpu"``.

    With ``--jax-backend`` every test runs once per listed backend, in that
    backend's own process; the fixture fails the test if JAX in this process
    is not on the requested backend (a silent fallback): at set-up when JAX
    is already imported, else at teardown if the test imported it.  Without
    it, it returns ``jax.default_backend()`` of the current process.
    """
    session = get_session(request.config)
    if session is None:
        import jax

        return jax.default_backend()
    label = getattr(request, "param", None) or item_label(request.node)
    if label is None:
        label = session.own_label
    if label is None:
        import jax

        return jax.default_backend()
    from pytest_lyapax.run import runplan

    runplan.check_process_backend(session, label, request.addfinalizer)
    return label


@pytest.fixture
def jax_results(request: pytest.FixtureRequest) -> ResultsRecorder:
    """Record results of this test to compare across backends:
    ``jax_results.record(name, value, stderr=None)`` (see ``docs/pytest_lyapax.md``).
    """
    return recorder_for(request.node)


@pytest.fixture
def jax_mesh(request: pytest.FixtureRequest) -> Any:
    """A 1-D ``jax.sharding.Mesh`` (axis ``"devices"``) of this worker's
    device count (``@pytest.mark.jax_devices``, ``--jax-devices``); without
    an active run, of every device of this process."""
    from pytest_lyapax.run import devices

    session = get_session(request.config)
    label = item_label(request.node)
    backend = session.backend(label) if session and label in session.states else None
    return devices.mesh(backend)


@pytest.fixture
def jax_size(request: pytest.FixtureRequest) -> int:
    """Problem size of this test instance.

    Declared with ``@pytest.mark.jax_sizes(20, 50, ...)`` and overridden for
    every such test by ``--jax-sizes``; recorded as ``extra_info["size"]``.
    """
    return request.param
