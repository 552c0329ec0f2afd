"""Deciding how a run executes: which process plays which role, with which workers.

Called from ``pytest_configure``.  The controller probes the requested
backends, starts one xdist worker per runnable backend (or falls back to
running in this process) and registers the hooks its role needs; a worker
reads what the controller decided from ``workerinput``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

import pytest

from pytest_lyapax.backends import remoteworker
from pytest_lyapax.backends.labels import RUNNABLE, UNAVAILABLE
from pytest_lyapax.backends.probe import probe_backends, tpu_hints
from pytest_lyapax.measuring import benchmarks, compilecache
from pytest_lyapax.run import (
    ab,
    agreement,
    chip,
    devices,
    precision,
    remote,
    roles,
    search,
    stopsignal,
)
from pytest_lyapax.run.collector import ResultCollector
from pytest_lyapax.run.options import NOTES_KEY, PROBED_KEY, Settings, informational
from pytest_lyapax.run.scheduling import XdistHooks
from pytest_lyapax.run.session import (
    COLLECT,
    CONTROLLER,
    INPROCESS,
    STASH_KEY,
    WORKER,
    BackendState,
    LyapaxSession,
    check_required,
)


class PerBackendTests:
    """Registered only while the plugin is active: puts every test on the
    per-backend axis by making it depend on ``jax_backend``."""

    @pytest.fixture(autouse=True)
    def _pytest_lyapax_every_test(self, jax_backend: str) -> None:
        """Parametrizes every test by backend and checks the process's backend."""


_XDIST_FLAGS = ("-n", "--numprocesses", "--dist", "--tx", "-d", "--maxprocesses")


def _xdist_flags_on_command_line(config: pytest.Config) -> list[str]:
    """xdist options the user typed (as opposed to ini addopts or PYTEST_ADDOPTS)."""
    found = []
    for arg in config.invocation_params.args:
        arg = str(arg)
        for flag in _XDIST_FLAGS:
            if (
                arg == flag
                or arg.startswith(flag + "=")
                or (flag == "-n" and arg.startswith("-n") and not arg.startswith("--"))
            ):
                found.append(flag)
    return found


def why_not_xdist(config: pytest.Config) -> str | None:
    """Why this run cannot use one xdist worker per backend (None if it can)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return "pytest-xdist is not active (disabled with -p no:xdist or not installed)"
    typed = _xdist_flags_on_command_line(config)
    if config.getoption("numprocesses", None) == 0 and (
        "-n" in typed or "--numprocesses" in typed
    ):
        # Only when typed: "-n 0" in a project's addopts is overridden.
        return "-n 0 on the command line asks for no worker processes"
    if config.getoption("usepdb", False):
        return "--pdb runs the tests in this process"
    return None


def configure_worker(config: pytest.Config, payload: str) -> LyapaxSession:
    """Set up an xdist worker from what its controller sent."""
    session = LyapaxSession.for_worker(payload)
    config.stash[STASH_KEY] = session
    benchmarks.defer_benchmark_only(config)
    benchmarks.quiet_xdist_check(config)
    # The option itself arrived as the controller left it (disabled).
    benchmarks.set_user_disabled(config, session.benchmark_disabled)
    register(config, session)
    return session


def _spec(session: LyapaxSession, label: str, other: ab.OtherVersion | None) -> str:
    """A worker's ``--tx`` spec; in an A/B (--jax-ab) it also names where
    the worker imports the code under test from."""
    spec = remote.worker_spec(session.backend(label))
    if other is not None:
        spec += other.spec_env(bool(session.backend(label).ab_of))
    return spec


def _other_version(
    config: pytest.Config, session: LyapaxSession
) -> ab.OtherVersion | None:
    """B of an A/B run (--jax-ab), checked out and importable, removed when
    the session ends; None without the option."""
    value = session.settings.ab
    firsts = [b for b in session.settings.backends if b.ab_of]
    if not value or not firsts:
        return None
    other = ab.other_version(value, config.rootpath, config.invocation_params.dir)
    config.add_cleanup(other.remove)
    given = [config.invocation_params.dir / arg.split("::")[0] for arg in config.args]
    ab.refuse_tests_inside_the_code(other, given)
    env = {"JAX_PLATFORMS": firsts[0].platform, **dict(firsts[0].env)}
    ab.preflight(other, env)
    ab.state_of(session.stash).sides = other.to_json()
    return other


def _start_workers(
    config: pytest.Config,
    session: LyapaxSession,
    other: ab.OtherVersion | None = None,
) -> None:
    opt = config.option
    if opt.tx or opt.numprocesses is not None or opt.dist != "no":
        # A note, not a warning: projects with ``filterwarnings = error`` and
        # ``addopts = -n auto`` would otherwise fail before running anything.
        where = (
            "the command line"
            if _xdist_flags_on_command_line(config)
            else "addopts/PYTEST_ADDOPTS"
        )
        session.notes.append(
            f"-n/--dist/--tx from {where} replaced by one xdist worker per backend"
        )
    # This runs in our tryfirst pytest_configure: after xdist's
    # pytest_cmdline_main turned -n into --tx, and before xdist's own
    # pytest_configure reads tx/dist to create its session.  Both orders are
    # what make replacing the options here work.
    # One worker per backend and process, in run order: with --jax-processes
    # the backends take turns (cpu, gpu, cpu, gpu, ...), so a drift of the
    # machine's state over the run reaches every backend alike.
    phases = worker_phases(session)
    opt.tx = [_spec(session, label, other) for label in phases]
    opt.dist = "load"  # any mode other than "no"; our scheduler replaces it
    opt.numprocesses = None
    if opt.maxworkerrestart is None:
        # Replace crashed workers, but do not loop forever on one that
        # cannot even collect.
        opt.maxworkerrestart = str(4 * len(phases))
    benchmarks.defer_benchmark_only(config)
    benchmarks.quiet_xdist_check(config)
    session.benchmark_disabled = benchmarks.user_disabled(config)


def configure_controller(config: pytest.Config, settings: Settings) -> LyapaxSession:
    """Set up the main process of an active run and decide its role."""
    states = {b.label: BackendState(b) for b in settings.backends}
    session = LyapaxSession(settings, COLLECT, states)
    early: list[str] = config.stash.get(NOTES_KEY, [])  # before the session
    session.notes.extend(early)
    config.stash[STASH_KEY] = session
    if informational(config):
        register(config, session)
        return session
    remote.check_typed_xdist(config, _xdist_flags_on_command_line(config))
    stopsignal.install(config)  # a run ended by SIGTERM still writes its report
    reason = why_not_xdist(config)
    session.notes.append(compilecache.describe(settings.compile_cache))
    session.stash[compilecache.REPORT_EXISTED] = compilecache.was_there(
        settings.report_dir
    )
    if reason is None:
        other = _other_version(config, session)
        local = [b for b in settings.backends if b.host is None]
        known = config.stash.get(PROBED_KEY, {})  # by --jax-backend=auto
        probed = probe_backends(local, exclusive=settings.exclusive, known=known)
        hints = tpu_hints(local, probed)
        for label, hint in hints.items():
            probed[label] = replace(
                probed[label], reason=f"{probed[label].reason}; {hint}"
            )
        results = {**probed, **remote.probe_remote(session)}
        for label, result in results.items():
            state = states[label]
            state.status, state.reason = result.status, result.reason
            state.info = result.info
            missing = devices.missing_devices(state.backend, result.info)
            if result.status in RUNNABLE and missing:
                state.status, state.reason = UNAVAILABLE, missing
            refusal = precision.refused(state.backend, result.info)
            if result.status in RUNNABLE and refusal:
                raise pytest.UsageError(refusal)
        check_required(session)
        order = [label for label, state in states.items() if state.runnable]
        if order:
            session.role = CONTROLLER
            _start_workers(config, session, other)
        else:
            session.role = INPROCESS  # nothing can run: every backend is skipped
    else:
        _refuse_without_workers(settings, reason)
        # Which backend this process runs is settled at session start
        # (roles.InProcessHooks), after every pytest_configure.
        session.role = INPROCESS
        session.pending_detection = reason
        if settings.processes > 1:
            session.notes.append(
                f"--jax-processes={settings.processes} needs xdist workers; this "
                "run measures in this one process"
            )
    register(config, session)
    return session


def worker_phases(session: LyapaxSession) -> list[str]:
    """The label of each xdist worker, in start order: one per runnable
    backend and process (``--jax-processes``: cpu, gpu, cpu, gpu, ...)."""
    order = session.order
    return [label for _ in range(session.settings.processes) for label in order]


# -- the hook objects of each role --------------------------------------------
Make = Callable[[pytest.Config, LyapaxSession], object | None]


@dataclass(frozen=True)
class Hooks:
    """One hook object a role registers: its plugin name (tests look it up)
    and what makes it, or None where this run does not need it."""

    name: str
    make: Make


def _xdist(config: pytest.Config, session: LyapaxSession) -> object:
    return XdistHooks(config, session, worker_phases(session))


def _remote(config: pytest.Config, session: LyapaxSession) -> object | None:
    hosts = any(b.host for b in session.settings.backends)
    return remote.RemoteHooks(config, session) if hosts else None


def _progress(config: pytest.Config, session: LyapaxSession) -> object:
    from pytest_lyapax.run.progress import BackendProgress

    return BackendProgress(config, session)


def _ab_side(config: pytest.Config, session: LyapaxSession) -> object | None:
    return ab.SideCheck() if os.environ.get(ab.ROOT_ENV) else None


def _time_left(config: pytest.Config, session: LyapaxSession) -> object:
    from pytest_lyapax.run.timeleft import WorkerTimeLeft

    return WorkerTimeLeft(config, session.own_label, session.settings.budget_s)


PER_BACKEND = Hooks("pytest-lyapax-per-backend", lambda config, s: PerBackendTests())
RESULTS = Hooks("pytest-lyapax-results", ResultCollector)
AGREE = Hooks("pytest-lyapax-agree", agreement.controller_hooks)
SEARCH = Hooks("pytest-lyapax-search", search.controller_hooks)
SEARCH_WORKER = Hooks("pytest-lyapax-search-worker", search.worker_hooks)

# Registered in this order (pluggy calls the later ones first), once the
# process's role is decided (session.py names the roles).
HOOKS_OF_ROLE: dict[str, tuple[Hooks, ...]] = {
    CONTROLLER: (
        PER_BACKEND,
        Hooks("pytest-lyapax-xdist", _xdist),
        Hooks("pytest-lyapax-remote", _remote),
        Hooks(roles.PLUGIN_NAME, roles.PerBackendCollection),
        RESULTS,
        Hooks("pytest-lyapax-progress", _progress),
        AGREE,
        SEARCH,
    ),
    WORKER: (
        PER_BACKEND,
        Hooks(roles.PLUGIN_NAME, roles.WorkerHooks),
        Hooks("pytest-lyapax-link", remoteworker.worker_link),
        Hooks("pytest-lyapax-ab-side", _ab_side),
        Hooks("pytest-lyapax-time-left", _time_left),
        Hooks("pytest-lyapax-agree-worker", agreement.worker_hooks),
        SEARCH_WORKER,
    ),
    INPROCESS: (
        PER_BACKEND,
        Hooks(roles.PLUGIN_NAME, roles.InProcessHooks),
        RESULTS,
        AGREE,
        SEARCH,
        SEARCH_WORKER,
    ),
    COLLECT: (PER_BACKEND, Hooks(roles.PLUGIN_NAME, roles.PerBackendCollection), AGREE),
}


def register(config: pytest.Config, session: LyapaxSession) -> None:
    """Register the hook objects of ``session.role`` (decided, never changed
    after), in the order of :data:`HOOKS_OF_ROLE`."""
    for hooks in HOOKS_OF_ROLE[session.role]:
        plugin = hooks.make(config, session)
        if plugin is not None:
            config.pluginmanager.register(plugin, hooks.name)


def check_process_backend(
    session: LyapaxSession,
    label: str,
    defer: Callable[[Callable[[], None]], None],
) -> None:
    """Fail the test if JAX in this process is not on ``label``'s backend.

    Checked now when JAX is already imported (test modules usually import it
    at collection).  Otherwise nothing can have run on a wrong backend yet:
    the check is handed to ``defer`` (the test's ``addfinalizer``) and runs
    after the test if it imported JAX, so tests that never use JAX do not
    make their worker start it (~0.5 s of CPU per worker).
    """

    held = chip.state_of(session.stash).error
    if held and label == session.own_label:
        # Its device is held by another process (chip.py).
        pytest.skip(f"backend {label!r} unavailable: {held}")

    def check_if_imported() -> None:
        if "jax" in sys.modules:
            _check_jax_backend(session, label)

    if "jax" in sys.modules:
        _check_jax_backend(session, label)
    else:
        defer(check_if_imported)


def _check_jax_backend(session: LyapaxSession, label: str) -> None:
    import jax

    backend = session.backend(label)
    actual = jax.default_backend()
    if actual != backend.expected:
        first = backend.platform.split(",")[0]
        env = os.environ.get("JAX_PLATFORMS")
        pytest.fail(
            f"silent JAX fallback: backend {label!r} runs with JAX_PLATFORMS={env!r} "
            f"and must be on {backend.expected!r}, but jax.default_backend() is "
            f"{actual!r}; its timings would be mislabelled. Map {label!r} to a "
            f"single platform, e.g. --jax-backend-platform={label}={first}",
            pytrace=False,
        )


def _refuse_without_workers(settings: Settings, reason: str) -> None:
    """A usage error for each option that needs every backend in a worker
    process of its own, in a run that has none (``reason``: why)."""
    backends = settings.backends
    split = [b.devices for b in backends if b.devices]
    # A precision alone (--jax-precision) is set in this process instead
    # (session.mark_inprocess_states): x64 is a flag JAX reads at any time.
    variants = [
        b.label
        for b in backends
        if any(not (b.precision and k == precision.X64_ENV) for k, _ in b.env)
    ]
    reruns = [b.rerun_of for b in backends if b.rerun_of]
    # A variant's variables could not be set before this process's JAX
    # started, as each label's worker's are.
    needs = (
        (split, lambda: f"{devices.DEVICES_OPTION}={split[0]} needs each device count"),
        (
            variants,
            lambda: f"--jax-backend-env (for {variants[0]!r}) needs each backend",
        ),
        (
            [b for b in backends if b.ab_of],
            lambda: f"{ab.AB_OPTION}={settings.ab} needs each backend",
        ),
        (reruns, lambda: f"--jax-rerun={reruns[0]} needs each backend"),
    )
    for found, what in needs:
        if found:
            raise pytest.UsageError(
                f"{what()} in its own worker process, and this run has none: {reason}"
            )
