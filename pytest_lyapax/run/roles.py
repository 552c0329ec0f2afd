"""The hooks of an active run, one object per role of the process.

As pytest-xdist registers its ``DSession`` in the controller and its
``WorkerInteractor`` in a worker, :mod:`~pytest_lyapax.run.runplan` registers
one of these objects once it knows the process's role (see
:mod:`~pytest_lyapax.run.session`), so no hook has to ask which role it is in:

``PerBackendCollection``  controller and ``collect``: every test copied once
                          per backend; nothing runs in this process.
``WorkerHooks``           an xdist worker: its own backend's copies, measured.
``InProcessHooks``        no xdist: this process's backend runs, the others skip.

Without ``--jax-backend`` none is registered and the plugin stays inert.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Generator, Sequence
from typing import Any

import pytest

from pytest_lyapax.measuring import benchmarks, compilecache, fixture, points
from pytest_lyapax.measuring.observers import observers_for
from pytest_lyapax.measuring.rounds import RoundsWatch
from pytest_lyapax.run import budget, chip, devices
from pytest_lyapax.run.items import (
    LABEL_ATTR,
    count_copies,
    item_label,
    marker_labels,
    per_backend_items,
)
from pytest_lyapax.run.session import (
    LyapaxSession,
    check_required,
    mark_inprocess_states,
)

# Why an item without a line number is skipped at set-up (see _has_line).
SKIP_KEY = pytest.StashKey[str]()
PLUGIN_NAME = "pytest-lyapax-role"


class PerBackendCollection:
    """Collection of an active run: one copy of every test per backend."""

    # Whether this process runs the tests it collects (worker, in-process).
    runs_tests = False

    def __init__(self, config: pytest.Config, session: LyapaxSession) -> None:
        self.config = config
        self.session = session

    # tryfirst: the backend axis is parametrized before the plugin's jax_size,
    # so ids read ``test[cpu-20]`` whatever order the plugins were loaded in.
    @pytest.hookimpl(tryfirst=True)
    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        if "jax_backend" not in metafunc.fixturenames:
            return
        where = metafunc.definition.nodeid
        try:
            marker_labels(metafunc.definition, self.session.settings.known_labels)
            devices.marker_of(metafunc.definition)
        except ValueError as exc:
            raise pytest.Collector.CollectError(f"{where}: {exc}") from None
        # Every requested label, also those a marker excludes: those items
        # are skipped with a reason, so each backend reports every test.
        labels = list(self.session.labels)
        metafunc.parametrize("jax_backend", labels, indirect=True, ids=labels)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # tryfirst: -k, -m and --lf must see the per-backend copies of the items.
        session = self.session
        collected = len(items)
        items[:] = per_backend_items(
            items, session.labels, session.settings.known_labels
        )
        count_copies(self.config, len(items) - collected)
        _deselect_other_counts(self.config, session, items)
        if self.runs_tests and session.limits.active:
            # The budget predicts a size from the smaller ones: they run first.
            budget.ascending_sizes(items)
        for item in items:
            label = item_label(item)
            reason = session.skip_reason(label) if self.runs_tests else None
            wanted = marker_labels(item, session.settings.known_labels)
            if reason is None and wanted and session.marked_as(label) not in wanted:
                reason = (
                    f"marked jax_backend({', '.join(sorted(wanted))}): not run on "
                    f"backend {label!r}"
                )
            if reason is None and label in session.states:
                reason = devices.unrun_reason(item, session.backend(label))
            if reason is not None and _has_line(item):
                item.add_marker(pytest.mark.skip(reason=reason))
            elif reason is not None:
                # pytest reports a skip marker at the item's line and fails
                # (INTERNALERROR) for an item without one (pytest-mypy's, a
                # custom collector's): skipped at set-up instead.
                item.stash[SKIP_KEY] = reason


def _deselect_other_counts(
    config: pytest.Config, session: LyapaxSession, items: list[pytest.Item]
) -> None:
    """Keep each test's copies for its device counts only (--jax-devices):
    a marked test leaves the plain labels that are split, an unmarked one
    the device-count labels."""
    split = {b.devices_of for b in session.settings.backends if b.devices}
    # A twin (B of an A/B run, a rerun) of a split label is split as well.
    split |= {
        b.label
        for b in session.settings.backends
        if not b.devices and {b.ab_of, b.rerun_of} & split
    }
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        label = item_label(item)
        state = session.states.get(label) if label is not None else None
        try:
            keep = state is None or devices.runs_on(
                item, state.backend, state.backend.label in split
            )
        except ValueError as exc:  # a copied item's marker (functions: above)
            raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        (kept if keep else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _has_line(item: pytest.Item) -> bool:
    try:
        return item.reportinfo()[1] is not None
    except Exception:  # noqa: BLE001 - a plugin's reportinfo; skip at set-up
        return False


class _TestRunner(PerBackendCollection):
    """The tests of a process that runs them: skipped, measured, labelled."""

    runs_tests = True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, Any, Any]:
        skip_reason = item.stash.get(SKIP_KEY, None)
        if skip_reason is not None:
            pytest.skip(skip_reason)
        measured = "benchmark" in getattr(item, "fixturenames", ())
        if measured:
            points.skip_after_oom(item, item_label(item))
            budget.skip_over_budget(
                item, item_label(item), self.session.limits, self.session.turns.waited_s
            )
        result = yield
        if measured:
            settings = self.session.settings
            watch = RoundsWatch(self.session.turns, observers_for(settings))
            label = item_label(item)
            state = self.session.states.get(label) if label else None
            backend = state.backend if state else None
            fixture.instrument(
                item,
                label,
                settings.extras,
                settings.peaks,
                watch,
                env=backend.env if backend else (),
                describe=lambda: fixture.machine_info(self.config, backend),
            )
            if state is not None and state.backend.devices:
                devices.record(item, state.backend)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, Any, Any]:
        try:
            return (yield)
        except Exception as exc:
            reason = points.oom_reason(item, item_label(item), exc)
            if reason is None:
                raise
            # Drop the frames (and the device buffers they hold) before going on.
            exc.__traceback__ = None
        # Out of the except block, so the skip does not keep the error alive;
        # then free what reference cycles still hold for the next, smaller test.
        gc.collect()
        raise pytest.skip.Exception(reason, _use_item_location=True)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        label = item_label(item)
        # Travels with the report to the controller (xdist serialises every
        # attribute), so results are attributed without parsing test ids.
        setattr(report, LABEL_ATTR, label)
        point = points.pop_point(item)
        if point is not None:
            setattr(report, points.POINT_ATTR, point)
        if call.when == "call":
            record = benchmarks.record_of(item)
            if record is not None:
                setattr(report, benchmarks.RECORD_ATTR, benchmarks.encode(record))
            limits = self.session.limits
            if label is not None:  # also without a budget: the time left reads it
                budget.observe(item, label, record, limits, self.session.turns.waited_s)
        return report


class WorkerHooks(_TestRunner):
    """An xdist worker: runs exactly the copies of its own backend."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, Any]:
        # Each test runs holding the turn (turns.py): while it runs, the other
        # local backends wait, so they never share cores with its rounds.
        turns = self.session.turns
        turns.progress += 1
        held = chip.state_of(self.session.stash)
        if held.lock is not None and held.handle is None:
            # Before the turn: the wait for the chip is no other backend's.
            take_chip(self.session)
        turns.hold()
        try:
            return (yield)
        finally:
            turns.ended()  # after the test's reports went out (turns.py)
            turns.release()
            if nextitem is None:
                turns.finish()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # Each worker keeps exactly the items of its backend; the scheduler
        # runs a worker's whole collection (see scheduling.py).  Not earlier:
        # --lf/--ff (a wrapper of pytest_collection_modifyitems) must choose
        # among every backend's copies, as a run without workers does.
        session.items[:] = [
            item for item in session.items if self.session.runs_here(item_label(item))
        ]
        if session.items and chip.state_of(self.session.stash).lock is None:
            # Start JAX now (if the tests may use it): all workers collect at
            # the same time, before any backend's phase begins, so no later
            # backend pays its start-up (~1 s) while an earlier one waits, and
            # nothing is being timed yet.
            start_jax(session.items)

    def pytest_sessionstart(self) -> None:
        benchmarks.enable_in_worker(self.config)
        session = self.session
        own = session.states.get(session.own_label or "")
        if own is not None and own.backend.host is None:
            # Before the first compile; a remote host keeps its own cache.
            self.config.add_cleanup(compilecache.use(session.settings.compile_cache))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        # trylast: after pytest has torn down the session-scoped fixtures.
        self.session.turns.release()
        release_worker_memory()


class InProcessHooks(_TestRunner):
    """A run without xdist workers: this process's backend, the others skip."""

    def pytest_sessionstart(self) -> None:
        benchmarks.raise_default_rounds(self.config)
        session = self.session
        self.config.add_cleanup(compilecache.use(session.settings.compile_cache))
        # Which backend this process runs is settled now, after every
        # pytest_configure (conftests may still configure JAX).
        if session.pending_detection:
            mark_inprocess_states(session, session.pending_detection)
            session.pending_detection = ""
            check_required(session)


def start_jax(items: Sequence[pytest.Item]) -> None:
    """Start this process's JAX backend if the collected tests may use it.

    That is when the test modules imported JAX, or when a test uses the
    ``benchmark`` fixture (whose set-up reads the JAX device in any case:
    better now, while all workers collect, than inside the backend's phase).
    A suite that does neither is not made to start it.  Failures are left to
    the per-test check (``runplan.check_process_backend``), which reports
    them.
    """
    benchmarked = any("benchmark" in getattr(i, "fixturenames", ()) for i in items)
    if "jax" not in sys.modules and not benchmarked:
        return
    try:
        import jax

        jax.devices()
    except Exception:  # noqa: BLE001, S110 - reported by the first test instead
        pass


def take_chip(session: LyapaxSession) -> None:
    """Take this worker's chip (chip.py): its lock, once the previous holder
    has ended, then the device itself; why it could not goes to
    the chip state's ``error`` (chip.state_of) and its tests skip with it."""
    state = chip.state_of(session.stash)
    assert state.lock is not None
    state.handle = chip.take(state.lock) if state.lock else True
    if state.handle is None:
        state.handle = False  # tried: not again for every test
        state.error = (
            f"another worker of this run held its chip for {chip.CHIP_WAIT_S:g} s"
        )
        return
    state.error = chip.open_device()


def release_worker_memory() -> None:
    """Free JAX's compiled programs and buffers in a finishing worker.

    Done before the worker reports that it finished (and the next backend
    starts timing): left to interpreter exit, this can take seconds, during
    which execnet may interrupt the worker.

    Then freezes the garbage collector's view of what is left (libraries,
    the collected tests): after its last test a worker only shuts down, and
    pytest's final ``gc.collect()`` passes (five at unconfigure) would
    otherwise rescan JAX's large heap each time, ~0.1 s apiece on a 2-core
    machine, while the controller waits for the worker to exit.  Garbage
    made after this point is still collected.
    """
    if "jax" in sys.modules:
        import jax

        jax.clear_caches()
    gc.collect()
    gc.freeze()
