"""pytest-lyapax entry point: options, markers, fixtures and run set-up.

``pytest --jax-backend=cpu,gpu`` runs every test once per backend, each
backend in its own pytest-xdist worker whose ``JAX_PLATFORMS`` is set before
JAX is imported, one backend after another; benchmarks are measured with
pytest-benchmark and merged into one report.  Without ``--jax-backend`` (or the
``jax_backend`` ini key) the plugin stays out of the way.
"""

from __future__ import annotations

import pytest

from pytest_lyapax.run.items import (
    LABEL_ATTR,
    count_copies,
    item_label,
    marker_labels,
    per_backend_items,
)
from pytest_lyapax.run.options import (
    informational,
    read_settings,
    validate_marker_sizes,
)
from pytest_lyapax.run.session import INPROCESS, WORKER, WORKERINPUT_KEY, get_session

# ``runplan`` (and with it the xdist scheduling, report and figure code) and
# ``benchmarks`` are imported inside the hooks that only active runs reach:
# pytest imports this module at every start, also where the plugin is unused.

SIZES_KEY = pytest.StashKey["tuple[int, ...] | None"]()
# Why an item without a line number is skipped (see _has_line).
SKIP_KEY = pytest.StashKey[str]()


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
    group.addoption(
        "--jax-compare-fail",
        dest="jax_compare_fail",
        action="append",
        default=[],
        metavar="EXPR",
        help="Fail the session when a benchmark is slower than in --jax-compare "
        "by more than EXPR: FIELD:PERCENT%% or FIELD:TIME with a unit (s, ms, us, "
        "ns), e.g. median:25%% or median:25ms; repeatable (each is a gate); also "
        "fails when nothing could be compared or a saved benchmark is missing. "
        "Refused (usage error) against a run of another host or device "
        "(needs --jax-backend).",
    )
    group.addoption(
        "--jax-compare-allow-missing",
        dest="jax_compare_allow_missing",
        action="store_true",
        default=False,
        help="With --jax-compare-fail: do not fail when saved benchmarks are "
        "missing from this run or nothing matched (needs --jax-backend).",
    )
    group.addoption(
        "--jax-compare-across-machines",
        dest="jax_compare_across_machines",
        action="store_true",
        default=False,
        help="With --jax-compare-fail: gate even when the saved run was measured "
        "on another host or device (the differences are still reported; needs "
        "--jax-backend).",
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
        "--jax-no-extras",
        dest="jax_no_extras",
        action="store_true",
        default=False,
        help="Measure only the timed rounds and the first call: no compile/lower "
        "split, memory figures or dispatch/device split (needs --jax-backend).",
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
        "jax_report_dir",
        "Report directory, relative to the ini file (see --jax-report-dir).",
        default="",
    )


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
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        if WORKERINPUT_KEY in workerinput:
            from pytest_lyapax.run import runplan

            session = runplan.configure_worker(config, workerinput[WORKERINPUT_KEY])
            config.stash[SIZES_KEY] = session.settings.sizes
        return
    settings = read_settings(config, check_paths=not informational(config))
    config.stash[SIZES_KEY] = settings.sizes
    if settings.active:
        from pytest_lyapax.run import runplan

        runplan.configure_controller(config, settings)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    session = get_session(metafunc.config)
    if session is not None and "jax_backend" in metafunc.fixturenames:
        where = metafunc.definition.nodeid
        try:
            marker_labels(metafunc.definition, session.settings.known_labels)
        except ValueError as exc:
            raise pytest.Collector.CollectError(f"{where}: {exc}") from None
        # Every requested label, also those a marker excludes: those items
        # are skipped with a reason, so each backend reports every test.
        labels = list(session.labels)
        metafunc.parametrize("jax_backend", labels, indirect=True, ids=labels)
    if "jax_size" in metafunc.fixturenames:
        where = metafunc.definition.nodeid
        sizes = metafunc.config.stash.get(SIZES_KEY, None)
        if sizes is None:
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
        metafunc.parametrize(
            "jax_size", sizes, indirect=True, ids=[str(s) for s in sizes]
        )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    # tryfirst: -k, -m and --lf must see the per-backend copies of the items.
    session = get_session(config)
    if session is None:
        return
    collected = len(items)
    items[:] = per_backend_items(items, session.labels, session.settings.known_labels)
    count_copies(config, len(items) - collected)
    if session.role in (WORKER, INPROCESS) and session.limits.active:
        # The budget predicts a size from the smaller ones: they run first.
        from pytest_lyapax.run.budget import ascending_sizes

        ascending_sizes(items)
    for item in items:
        label = item_label(item)
        reason = None
        if session.role in (WORKER, INPROCESS):
            reason = session.skip_reason(label)
        wanted = marker_labels(item, session.settings.known_labels)
        if reason is None and wanted and label not in wanted:
            reason = (
                f"marked jax_backend({', '.join(sorted(wanted))}): not run on "
                f"backend {label!r}"
            )
        if reason is not None and _has_line(item):
            item.add_marker(pytest.mark.skip(reason=reason))
        elif reason is not None:
            # pytest reports a skip marker at the item's line and fails
            # (INTERNALERROR) for an item without one (pytest-mypy's, a
            # custom collector's): skipped at set-up instead.
            item.stash[SKIP_KEY] = reason


def _has_line(item: pytest.Item) -> bool:
    try:
        return item.reportinfo()[1] is not None
    except Exception:  # noqa: BLE001 - a plugin's reportinfo; skip at set-up
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    lsession = get_session(session.config)
    if lsession is not None and lsession.role == WORKER:
        # Each worker keeps exactly the items of its backend; the scheduler
        # runs a worker's whole collection (see scheduling.py).  Not earlier:
        # --lf/--ff (a wrapper of pytest_collection_modifyitems) must choose
        # among every backend's copies, as a run without workers does.
        session.items[:] = [
            item for item in session.items if lsession.runs_here(item_label(item))
        ]
    if lsession is not None and lsession.role == WORKER and session.items:
        # Start JAX now (if the tests may use it): all workers collect at the
        # same time, before any backend's phase begins, so no later backend
        # pays its start-up (~1 s) while an earlier one waits, and nothing is
        # being timed yet.
        from pytest_lyapax.run import runplan

        runplan.start_jax(session.items)


def pytest_sessionstart(session: pytest.Session) -> None:
    lsession = get_session(session.config)
    if lsession is None:
        return
    from pytest_lyapax.measuring import benchmarks
    from pytest_lyapax.run import runplan

    if lsession.role == WORKER:
        benchmarks.enable_in_worker(session.config)
    elif lsession.role == INPROCESS:
        benchmarks.raise_default_rounds(session.config)
        runplan.settle_inprocess_backend(lsession)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    # trylast: after pytest has torn down the session-scoped fixtures.
    lsession = get_session(session.config)
    if lsession is not None and lsession.role == WORKER:
        from pytest_lyapax.run import runplan

        runplan.release_worker_memory()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    skip_reason = item.stash.get(SKIP_KEY, None)
    if skip_reason is not None:
        pytest.skip(skip_reason)
    session = get_session(item.config)
    measured = session is not None and "benchmark" in getattr(item, "fixturenames", ())
    if measured:
        from pytest_lyapax.measuring import benchmarks

        benchmarks.skip_after_oom(item, item_label(item))
        if session.limits.active:
            from pytest_lyapax.run import budget

            budget.skip_over_budget(item, item_label(item), session.limits)
    result = yield
    # Without --jax-backend the plugin is inert: pytest-benchmark's own
    # fixture, untouched.
    if measured:
        assert session is not None
        benchmarks.instrument(
            item, item_label(item), session.settings.extras, session.settings.peaks
        )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    reason = None
    try:
        return (yield)
    except Exception as exc:
        if get_session(item.config) is None:
            raise
        from pytest_lyapax.measuring import benchmarks

        reason = benchmarks.oom_reason(item, item_label(item), exc)
        if reason is None:
            raise
        # Drop the frames (and the device buffers they hold) before going on.
        exc.__traceback__ = None
    # Out of the except block, so the skip does not keep the error alive;
    # then free what reference cycles still hold for the next, smaller test.
    import gc

    gc.collect()
    raise pytest.skip.Exception(reason, _use_item_location=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if get_session(item.config) is not None:
        # Travels with the report to the controller (xdist serialises every
        # attribute), so results are attributed without parsing test ids.
        setattr(report, LABEL_ATTR, item_label(item))
        from pytest_lyapax.measuring import benchmarks

        point = benchmarks.pop_point(item)
        if point is not None:
            setattr(report, benchmarks.POINT_ATTR, point)
        if call.when == "call":
            record = benchmarks.record_of(item)
            if record is not None:
                setattr(report, benchmarks.RECORD_ATTR, benchmarks.encode(record))
            limits = get_session(item.config).limits  # type: ignore[union-attr]
            label = item_label(item)
            if limits.active and label is not None:
                from pytest_lyapax.run import budget

                budget.observe(item, label, record, limits)
    return report


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
def jax_size(request: pytest.FixtureRequest) -> int:
    """Problem size of this test instance.

    Declared with ``@pytest.mark.jax_sizes(20, 50, ...)`` and overridden for
    every such test by ``--jax-sizes``; recorded as ``extra_info["size"]``.
    """
    return request.param
