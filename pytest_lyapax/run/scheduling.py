"""One xdist worker per backend, and a scheduler that hands each its tests.

The controller starts one ``popen`` worker per runnable backend, each with its
own ``JAX_PLATFORMS`` (set by execnet before the worker imports anything).
Each worker keeps, at collection, only the items of its own backend (chosen
from the item's label, see ``items.py``), so the workers' collections differ
on purpose.  :class:`BackendScheduling` runs each worker's whole collection:

- **interleaved** (the default): every worker gets its tests at once, and
  the local workers take turns (``turns.py``): one runs a test, or a slice
  of a benchmark's rounds, while the others wait, so two backends never
  share cores and a load that comes and goes lands on the rounds of each;
- **sequential** (``--jax-sequential``): a backend's *phase* starts only
  when the previous backend's worker has finished.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_lyapax.backends.labels import CRASHED, GPU_MEMORY_ENV, Backend
from pytest_lyapax.run import chip
from pytest_lyapax.run.session import WORKERINPUT_KEY, LyapaxSession
from pytest_lyapax.run.turns import TurnServer
from pytest_lyapax.run.workerend import (
    EndingWorker,
    await_workers,
    describe,
    end_now,
)

if TYPE_CHECKING:
    from xdist.scheduler.protocol import Scheduling
    from xdist.workermanage import WorkerController


def worker_spec(backend: Backend, environ: dict[str, str] | None = None) -> str:
    """The ``--tx`` spec of a backend's worker.

    ``JAX_PLATFORMS`` is the only variable that tells a worker its backend;
    the label travels in ``workerinput`` (see :func:`assign_label`).  GPU
    workers also get :data:`GPU_MEMORY_ENV` unless the user set it, and
    every worker its label's own variables (``--jax-backend-env``).
    """
    environ = os.environ if environ is None else environ
    spec = f"popen//env:JAX_PLATFORMS={backend.platform}"
    chosen = dict(backend.env)
    if backend.expected == "gpu" and GPU_MEMORY_ENV not in {**environ, **chosen}:
        spec += f"//env:{GPU_MEMORY_ENV}=false"
    # The label's own variables (--jax-backend-env), set before JAX starts.
    return spec + "".join(f"//env:{k}={v}" for k, v in backend.env)


def assign_label(node: WorkerController | Any, order: Sequence[str]) -> str:
    """The backend of a worker being configured, from the position of its spec.

    ``--tx`` holds one spec per backend, in run order; xdist keeps those spec
    objects (``NodeManager.specs``) and gives a replacement worker the spec of
    the one it replaces, so the position identifies the backend even when two
    backends share a ``JAX_PLATFORMS`` value.
    """
    specs = node.nodemanager.specs
    for index, spec in enumerate(specs):
        if spec is node.gateway.spec and index < len(order):
            return order[index]
    raise RuntimeError(
        f"pytest-lyapax: xdist worker {node.gateway.id} has a spec that is not one "
        "of the plugin's (is --tx given somewhere the plugin cannot replace?)"
    )


def phase_keys(labels: Sequence[str]) -> list[str]:
    """A scheduling key per worker: its label, then ``label#2``, ``label#3``
    for the further processes of one backend (``--jax-processes``)."""
    seen: dict[str, int] = {}
    keys = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        keys.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return keys


def node_label(session: LyapaxSession, node: WorkerController | Any) -> str | None:
    """The backend label of an xdist worker, as assigned when it was configured."""
    return session.worker_labels.get(node)


class BackendScheduling:
    """xdist scheduler: each worker runs all it collected, all phases at once
    (``concurrent``) or one after another.

    Implements ``xdist.scheduler.protocol.Scheduling``.  ``order`` lists the
    labels of the workers in run order.  A worker that crashes in a test is
    replaced by xdist and its unfinished tests go to the replacement; a
    backend whose worker dies before it finishes collecting is given up
    (``dead``) so that the other backends still run.
    """

    def __init__(
        self,
        order: Sequence[str],
        label_of: Callable[[Any], str | None],
        log: Callable[..., None] | None = None,
        on_collection: Callable[[dict[str, list[str]]], None] | None = None,
        config: pytest.Config | None = None,
        concurrent: bool = False,
        chips: Mapping[str, str] | None = None,
    ) -> None:
        # As on xdist's own schedulers: plugins read it (pytest-rerunfailures'
        # pytest_handlecrashitem, when a worker crashes in a test).
        self.config = config
        self.order = list(order)
        self.label_of = label_of
        self.log = log or (lambda *args: None)
        self.on_collection = on_collection or (lambda collections: None)
        self.node2pending: dict[WorkerController, list[int]] = {}
        self.node2collection: dict[WorkerController, list[str]] = {}
        self.label2node: dict[str, WorkerController] = {}
        self.collections: dict[str, list[str]] = {}
        self.queue: list[str] = []
        self.concurrent = concurrent
        # label -> chip, for labels whose device admits one process at a
        # time: never two phases of one chip at once (chip.py).
        self.chips = dict(chips or {})
        # Phases started and not yet over (at most one unless concurrent).
        self.running: set[str] = set()
        self.started: set[WorkerController] = set()
        # Test ids left unfinished by a crashed worker, per label.
        self.orphans: dict[str, list[str]] = {}
        # Labels whose worker died before finishing its collection.
        self.dead: set[str] = set()
        # Set on a collection error: like pytest without xdist, run nothing.
        self.halted = False
        self._scheduled = False

    # -- the xdist Scheduling protocol -------------------------------------
    @property
    def nodes(self) -> list[WorkerController]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return all(
            label in self.collections or label in self.dead for label in self.order
        )

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or not self._scheduled:
            return False
        return not self.running and not self.queue and not self.orphans

    @property
    def has_pending(self) -> bool:
        return any(self.node2pending.values())

    def add_node(self, node: WorkerController) -> None:
        label = self.label_of(node)
        if label not in self.order:
            raise RuntimeError(f"pytest-lyapax: worker {node} has no backend label")
        self.node2pending[node] = []
        self.label2node[label] = node

    def add_node_collection(
        self, node: WorkerController, collection: Sequence[str]
    ) -> None:
        self.node2collection[node] = list(collection)
        self.collections.setdefault(self.label_of(node), list(collection))
        self.on_collection(self.collections)

    def mark_test_complete(
        self, node: WorkerController, item_index: int, duration: float = 0
    ) -> None:
        # The phase ends when the worker has finished (remove_node), not here:
        # its session teardown must not overlap the next backend's timings.
        self.node2pending[node].remove(item_index)

    def mark_test_pending(self, item: str) -> None:
        raise NotImplementedError("pytest-lyapax does not reschedule single tests")

    def remove_pending_tests_from_node(
        self, node: WorkerController, indices: Sequence[int]
    ) -> None:
        raise NotImplementedError("pytest-lyapax does not steal work between backends")

    def collected(self, node: WorkerController) -> bool:
        return node in self.node2collection

    def give_up(self, label: str) -> None:
        """Stop waiting for ``label``: its worker cannot even collect."""
        self.dead.add(label)
        self.orphans.pop(label, None)
        self.running.discard(label)
        self.schedule()

    def remove_node(self, node: WorkerController) -> str | None:
        pending = self.node2pending.pop(node)
        label = self.label_of(node)
        if self.label2node.get(label) is node:
            del self.label2node[label]
        if node not in self.node2collection:
            # Died before it finished collecting: a replacement would too.
            self.give_up(label)
            return None
        crashitem = None
        if pending:
            # The worker crashed: the first unfinished test is the one it died in.
            collection = self.node2collection[node]
            crashitem = collection[pending[0]]
            if pending[1:]:
                self.orphans[label] = [collection[i] for i in pending[1:]]
        if node in self.started and label in self.running and label not in self.orphans:
            self.running.discard(label)  # this backend's phase is over
            self._advance()
        return crashitem

    def schedule(self) -> None:
        if not self.collection_is_completed:
            return
        if self.halted:
            self._scheduled = True
            self.queue, self.orphans = [], {}
            self.running.clear()
            for node in self.node2pending:
                if node not in self.started:
                    self.started.add(node)
                    node.shutdown()
            return
        if not self._scheduled:
            self._scheduled = True
            self.queue = list(self.order)
        else:
            for label in sorted(self.running):
                self._start(label)  # a replacement worker may have arrived
        self._advance()

    # -- phases ---------------------------------------------------------------
    def _advance(self) -> None:
        waiting = []  # for their chip, held by a running phase
        while self.queue and (self.concurrent or not self.running):
            label = self.queue.pop(0)
            if label in self.dead:
                continue
            if self._chip_taken(label):
                waiting.append(label)
                continue
            self.running.add(label)
            self._start(label)
        self.queue[:0] = waiting

    def _chip_taken(self, label: str) -> bool:
        held = self.chips.get(label)
        return held is not None and any(
            self.chips.get(other) == held for other in self.running
        )

    def _start(self, label: str) -> None:
        """Send a running backend's tests to its worker, if that worker is ready."""
        node = self.label2node.get(label)
        if node is None or node not in self.node2collection or node in self.started:
            return  # wait for a replacement worker's collection
        collection = self.node2collection[node]
        if label in self.orphans:
            position = {nodeid: i for i, nodeid in enumerate(collection)}
            pending = [position[n] for n in self.orphans.pop(label) if n in position]
        else:
            pending = list(range(len(collection)))
        self.node2pending[node] = pending
        self.started.add(node)
        self.log("backend phase", label, len(pending), "tests")
        if pending:
            node.send_runtest_some(list(pending))
        # Without a shutdown the worker holds back its last test, waiting for more.
        node.shutdown()
        if not pending:
            self.running.discard(label)


class XdistHooks:
    """The controller's xdist hooks; registered only when xdist is in use.

    Registered from our ``pytest_configure``; xdist's own ``pytest_configure``
    runs after it (ours is ``tryfirst``) and reads ``config.option.tx`` and
    ``dist`` to create its session, which is why ``runplan._start_workers``
    can replace them there.
    """

    def __init__(
        self, config: pytest.Config, session: LyapaxSession, specs: Sequence[str]
    ) -> None:
        self.session_config = config
        self.session = session
        # The backend label of each --tx spec, and each one's phase key (the
        # scheduler's unit: one phase per worker process).
        self.order = list(specs)
        self.phases = phase_keys(self.order)
        self.label_of_phase = dict(zip(self.phases, self.order, strict=True))
        self.node_phases: dict[Any, str] = {}
        self.scheduler: BackendScheduling | None = None
        self.pytest_session: pytest.Session | None = None
        # The execnet group of the workers' gateways, awaited at the end, and
        # the workers that ended their session or went down (workerend.py).
        self.group: Any = None
        self.finished: set[Any] = set()
        self.errored: set[Any] = set()
        # Turns between the local workers (turns.py), unless --jax-sequential
        # or a single worker.
        # The labels that share a device one process at a time (chip.py),
        # and the folder of their chips' locks.
        self.chips = chip.chips_of(
            [session.backend(label) for label in dict.fromkeys(self.order)],
            session.settings.exclusive,
        )
        self.chip_locks = chip.ChipLocks() if self.chips else None
        self.turns: TurnServer | None = None
        if len(self.order) > 1 and not session.settings.sequential:
            local = [
                label
                for label in self.order
                if not session.backend(label).host  # hosts take no turns
            ]
            # A chip's labels run one after another: one of them at a time
            # asks for turns.
            shared = [label for label in local if label in self.chips]
            at_once = len(local) - len(shared) + len({self.chips[s] for s in shared})
            try:
                self.turns = TurnServer(expected=at_once)
            except OSError as error:
                # No unix socket here: the backends run one after another.
                session.notes.append(
                    f"rounds not interleaved: the turns' unix socket cannot be "
                    f"made ({error}); the backends run one after another, as "
                    f"with --jax-sequential"
                )
                session.settings = replace(session.settings, sequential=True)

    def _count_collected(self, collections: dict[str, list[str]]) -> None:
        # xdist sets testscollected to the last worker's count; the workers'
        # collections are disjoint here, so the run's total is their sum.
        expected: dict[str, int] = {}
        for phase, collection in collections.items():
            label = self.label_of_phase[phase]
            expected[label] = expected.get(label, 0) + len(collection)
            self.session.test_labels.update(dict.fromkeys(collection, label))
        for label, count in expected.items():
            self.session.expected[label] = count  # (Counter.update would add)
        if self.pytest_session is not None:
            self.pytest_session.testscollected = sum(map(len, collections.values()))

    @pytest.hookimpl
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.pytest_session = session

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        # tryfirst: before xdist's own sessionfinish, which would send every
        # worker its exit now and kill it 10 s later; the workers finish on
        # their own while the controller writes its summary (workerend.py).
        nodemanager = getattr(self._dsession(), "nodemanager", None)
        if getattr(nodemanager, "teardown_nodes", None) is not None:
            self.group = nodemanager.group
            nodemanager.teardown_nodes = lambda: None

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        # trylast: the controller's last word; no worker outlives the run.
        if self.turns is not None:
            self.turns.close()
        if self.chip_locks is not None:
            self.chip_locks.remove()
        if self.group is None:
            nodemanager = getattr(self._dsession(), "nodemanager", None)
            self.group = getattr(nodemanager, "group", None)
        if self.group is None:
            return  # xdist never started its workers
        by_gateway = {node.gateway: node for node in self.session.worker_labels}
        # A host whose worker went down is reported already (remote.py).
        lost = {node.gateway.spec.via for node in self.errored}
        await_workers(
            self.group,
            [
                self._ending(gateway, by_gateway.get(gateway), gateway.id in lost)
                for gateway in self.group
            ],
            self._say,
        )

    def _dsession(self) -> Any:
        return self.session_config.pluginmanager.getplugin("dsession")

    def _ending(
        self, gateway: Any, node: WorkerController | None, lost: bool
    ) -> EndingWorker:
        if node is None:  # the gateway to a host, its workers' way there
            return EndingWorker(gateway, describe(gateway, None), gone=lost)
        return EndingWorker(
            gateway,
            describe(gateway, self._label(node)),
            channel=getattr(node, "channel", None),
            finished=node in self.finished,
            gone=node in self.errored,
        )

    def _say(self, line: str) -> None:
        reporter = self.session_config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line, red=True)
        else:
            print(line, file=sys.stderr)

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(
        self, config: pytest.Config, log: Any
    ) -> Scheduling:
        self.scheduler = BackendScheduling(
            self.phases,
            self._phase,
            log=log,
            on_collection=self._count_collected,
            config=config,
            concurrent=self.turns is not None,
            chips={
                phase: self.chips[label]
                for phase, label in self.label_of_phase.items()
                if label in self.chips
            },
        )
        _no_replacement_for_dead_backends(config, self.scheduler)
        return self.scheduler

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # A test's last report is in: the next turn may go (turns.py).
        node = getattr(report, "node", None)  # set by xdist on the controller
        if self.turns is None or report.when != "teardown" or node is None:
            return
        phase = self.node_phases.get(node)
        if phase is not None:
            self.turns.reported(self.phases.index(phase))

    @pytest.hookimpl
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        config = self.session_config
        if report.failed and not config.getoption("continue_on_collection_errors"):
            self.session.collection_errors += 1
            if self.scheduler is not None:
                self.scheduler.halted = True

    def _label(self, node: WorkerController | Any) -> str | None:
        return node_label(self.session, node)

    def _phase(self, node: WorkerController | Any) -> str | None:
        return self.node_phases.get(node)

    @pytest.hookimpl
    def pytest_configure_node(self, node: WorkerController) -> None:
        # The one place a worker's backend is decided and sent to it.
        label = assign_label(node, self.order)
        self.node_phases[node] = assign_label(node, self.phases)
        self.session.worker_labels[node] = label
        # Workers on other hosts share no cores with these: no turns for them.
        local = getattr(node.gateway.spec, "via", None) is None
        turns = self.turns.address if self.turns is not None and local else None
        rank = self.phases.index(self.node_phases[node])
        lock = None
        if label in self.chips and self.chip_locks is not None:
            # The lock file is on this machine: a worker on another host
            # ("") only defers and retries its device's opening.
            lock = self.chip_locks.path(self.chips[label]) if local else ""
        node.workerinput[WORKERINPUT_KEY] = self.session.worker_payload(
            label, turns, rank, lock
        )

    @pytest.hookimpl
    def pytest_testnodedown(self, node: WorkerController, error: object) -> None:
        label, phase = self._label(node), self._phase(node)
        (self.finished if error is None else self.errored).add(node)
        if label in self.chips:
            # Its process ends now, releasing the device, before the
            # scheduler starts the next phase on it (chip.py).
            line = end_now(self._ending(node.gateway, node, error is not None))
            if line:
                self._say(line)
        if error is None:
            scheduler = self.scheduler
            if scheduler is not None and node not in scheduler.started and phase:
                # It finished before its phase began (its own usage error, or
                # a stop requested elsewhere): nothing will run there.
                scheduler.give_up(phase)
            return
        state = self.session.states.get(label)
        if state is None:
            return
        state.status = CRASHED
        if self.scheduler is not None and not self.scheduler.collected(node):
            message = f"its worker crashed before it finished collecting ({error})"
            if message not in state.crashes:
                state.crashes.append(message)
            if phase is not None:
                self.scheduler.give_up(phase)
        else:
            state.crashes.append(f"worker {node.gateway.id} went down: {error}")
        state.reason = "; ".join(state.crashes)


def _no_replacement_for_dead_backends(
    config: pytest.Config, scheduler: BackendScheduling
) -> None:
    """Keep xdist from restarting a worker that died while collecting.

    xdist replaces every crashed worker until ``--max-worker-restart`` is
    reached and then shuts all workers down -- also those of healthy
    backends.  A worker that cannot collect would crash again, so its
    backend is given up instead (xdist 3.x: ``DSession._clone_node``,
    checked by a test).
    """
    dsession = config.pluginmanager.getplugin("dsession")
    clone = getattr(dsession, "_clone_node", None)
    if clone is None:
        return

    def clone_unless_dead(node: WorkerController) -> WorkerController | None:
        if scheduler.label_of(node) not in scheduler.dead:
            return clone(node)
        if not [n for n in dsession._active_nodes if n is not node]:
            dsession.triggershutdown()  # nothing left: end the run normally
        return None

    dsession._clone_node = clone_unless_dead
