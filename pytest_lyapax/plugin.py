"""pytest-lyapax entry point: options, markers, fixtures and the role set-up.

``pytest --jax-backend=cpu,gpu`` runs every test once per backend, each
backend in its own pytest-xdist worker whose ``JAX_PLATFORMS`` is set before
JAX is imported, their rounds interleaved (``--jax-sequential``: one backend
after another); benchmarks are measured with
pytest-benchmark and merged into one report.  Without ``--jax-backend`` (or the
``jax_backend`` ini key) the plugin stays out of the way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pytest

from pytest_lyapax.measuring.agreement import ResultsRecorder, recorder_for
from pytest_lyapax.run import ab, agreement, optiontable, sandbox, search
from pytest_lyapax.run.items import item_label
from pytest_lyapax.run.options import (
    backends_requested,
    informational,
    process_precision,
    read_settings,
    validate_marker_sizes,
)
from pytest_lyapax.run.precision import PRECISION_OPTION, set_process_dtype
from pytest_lyapax.run.session import WORKERINPUT_KEY, get_session

if TYPE_CHECKING:
    from pytest_lyapax.backends.labels import Backend

# Only the hooks pytest needs from the start live here.  An active run's
# role (controller, worker, in-process) registers its hook objects from the
# table in ``runplan`` (run/runplan.HOOKS_OF_ROLE), imported with the xdist
# scheduling, report and benchmark code only by active runs: pytest imports
# this module at every start, also where the plugin is unused.

SIZES_KEY = pytest.StashKey["tuple[int, ...] | None"]()
# The dtype --jax-precision asks of this process in a run without backends.
DTYPE_KEY = pytest.StashKey[str]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_lyapax import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    optiontable.declare(parser)


# The default implementations of the plugin's own hooks (hookspecs.py):
# trylast, so that a conftest's implementation is asked first.


@pytest.hookimpl(trylast=True)
def pytest_lyapax_select_backends(backends: Sequence[Backend]) -> list[str]:
    return [b.label for b in backends]


@pytest.hookimpl(trylast=True)
def pytest_lyapax_machine_info() -> dict[str, Any]:
    from pytest_lyapax.measuring.fixture import device_info

    return device_info()


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests() -> None:
    # A worker of an A/B run (--jax-ab) imports its side's code: the path
    # must be in place before any conftest imports the code under test.
    if os.environ.get(ab.ROOT_ENV):
        ab.enter_from_environment()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # Before any plugin's pytest_configure: one that needs an IP socket is
    # dropped where the machine allows none (run/sandbox.py).
    if backends_requested(config):
        sandbox.drop_plugins_needing_ip(config)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "jax_backend(*labels): run this test only on these of the requested "
        "JAX backends (default: all of them); the others skip it",
    )
    config.addinivalue_line(
        "markers",
        "jax_sizes(*sizes, label=None, search=None): default problem sizes for "
        "the jax_size fixture (overridden by --jax-sizes); label names the size "
        "axis; search=(lo, hi) bounds --jax-find-crossover",
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
        else:  # a worker of a plain pytest-xdist run
            _hold_process_dtype(config)
        return
    settings = read_settings(config, check_paths=not informational(config))
    config.stash[SIZES_KEY] = settings.sizes
    if settings.active:
        from pytest_lyapax.run import runplan

        runplan.configure_controller(config, settings)
    elif not informational(config):
        _hold_process_dtype(config)


def _hold_process_dtype(config: pytest.Config) -> None:
    # --jax-precision without --jax-backend (run/precision.py).
    dtype = process_precision(config)
    if dtype is not None:
        config.stash[DTYPE_KEY] = dtype
        set_process_dtype(dtype)


def _restore_process_dtype(config: pytest.Config) -> None:
    # The dtype --jax-precision asked, again: the user's code may flip x64.
    dtype = config.stash.get(DTYPE_KEY, None)
    if dtype is not None:
        set_process_dtype(dtype)


@pytest.hookimpl(tryfirst=True)
def pytest_collectstart(collector: pytest.Collector) -> None:
    # A module that enables x64 when imported does not set the dtype of
    # the modules collected after it.
    _restore_process_dtype(collector.config)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config) -> None:
    # The last module collected may have enabled x64 when imported: the
    # suite's own hooks that read the dtype after collection see the run's.
    _restore_process_dtype(config)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before the test's fixtures: a previous test's flag does not carry over.
    _restore_process_dtype(item.config)


def pytest_report_header(config: pytest.Config) -> str | None:
    dtype = config.stash.get(DTYPE_KEY, None)
    if dtype is None:
        return None
    return (
        f"pytest-lyapax: the tests compute in {dtype} ({PRECISION_OPTION} "
        "without --jax-backend)"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # The backend axis is parametrized by the hooks of an active run
    # (run/roles.py); the size axis exists with or without --jax-backend.
    search.check_marker(metafunc)
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
def jax_precision() -> str:
    """The float dtype this test's JAX computes in: ``"float64"`` (x64 on)
    or ``"float32"``; set per backend by ``--jax-precision``."""
    from pytest_lyapax.measuring.precision import in_force

    return in_force().dtype


@pytest.fixture
def jax_tolerance() -> Any:
    """``rtol`` and ``atol`` fitting this backend's effective precision (its
    dtype and the matmul precision in force: a TPU's default float32 matmul
    passes are bfloat16), also ``eps``, ``dtype``, ``matmul``, ``effective``."""
    from pytest_lyapax.measuring.precision import JaxTolerance, in_force

    return JaxTolerance.of(in_force())


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
