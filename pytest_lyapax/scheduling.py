"""One xdist worker per backend, and a scheduler that runs them one after another.

The controller starts one ``popen`` worker per runnable backend, each with its
own ``JAX_PLATFORMS`` (set by execnet before the worker imports anything).
:class:`BackendScheduling` sends every test to the worker of the backend named
in its id, and starts a backend's *phase* only when the previous backend's
tests have all finished, so timings of different backends never share cores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from .backends import CRASHED, Backend
from .session import LABEL_ENV, WORKERINPUT_KEY, LyapaxSession


def worker_spec(backend: Backend) -> str:
    """The ``--tx`` spec of a backend's worker."""
    return (
        f"popen//env:JAX_PLATFORMS={backend.platform}//env:{LABEL_ENV}={backend.label}"
    )


def node_label(node: Any) -> str | None:
    """The backend label of an xdist worker, read from its spec environment."""
    return node.gateway.spec.env.get(LABEL_ENV)


class BackendScheduling:
    """xdist scheduler: route tests by backend label, one backend phase at a time.

    ``route`` maps a test id to the label of the worker that must run it;
    ``order`` lists the labels of the workers in run order.  A worker that
    crashes is replaced by xdist; its unfinished tests go to the replacement.
    """

    def __init__(
        self,
        order: Sequence[str],
        route: Callable[[str], str],
        log: Callable[..., None] | None = None,
    ) -> None:
        self.order = list(order)
        self.route = route
        self.log = log or (lambda *args: None)
        self.node2pending: dict[Any, list[int]] = {}
        self.node2collection: dict[Any, list[str]] = {}
        self.label2node: dict[str, Any] = {}
        self.collections: dict[str, list[str]] = {}
        self.queue: list[str] = []
        self.current: str | None = None
        self.started: set[Any] = set()
        # Test ids left unfinished by a crashed worker, per label.
        self.orphans: dict[str, list[str]] = {}
        self._scheduled = False

    # -- the xdist Scheduling protocol -------------------------------------
    @property
    def nodes(self) -> list[Any]:
        return list(self.node2pending)

    @property
    def collection_is_completed(self) -> bool:
        return all(label in self.collections for label in self.order)

    @property
    def tests_finished(self) -> bool:
        if not self.collection_is_completed or not self._scheduled:
            return False
        return self.current is None and not self.queue and not self.orphans

    @property
    def has_pending(self) -> bool:
        return any(self.node2pending.values())

    def add_node(self, node: Any) -> None:
        label = node_label(node)
        if label not in self.order:
            raise RuntimeError(f"pytest-lyapax: worker {node} has no backend label")
        self.node2pending[node] = []
        self.label2node[label] = node

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        self.node2collection[node] = list(collection)
        self.collections.setdefault(node_label(node), list(collection))

    def mark_test_complete(
        self, node: Any, item_index: int, duration: float = 0
    ) -> None:
        # The phase ends when the worker has finished (remove_node), not here:
        # its session teardown must not overlap the next backend's timings.
        self.node2pending[node].remove(item_index)

    def mark_test_pending(self, item: str) -> None:
        raise NotImplementedError("pytest-lyapax does not reschedule single tests")

    def remove_pending_tests_from_node(self, node: Any, indices: Sequence[int]) -> None:
        raise NotImplementedError("pytest-lyapax does not steal work between backends")

    def remove_node(self, node: Any) -> str | None:
        pending = self.node2pending.pop(node)
        label = node_label(node)
        if self.label2node.get(label) is node:
            del self.label2node[label]
        crashitem = None
        if pending:
            # The worker crashed: the first unfinished test is the one it died in.
            collection = self.node2collection[node]
            crashitem = collection[pending[0]]
            if pending[1:]:
                self.orphans[label] = [collection[i] for i in pending[1:]]
        if node in self.started and label == self.current and label not in self.orphans:
            self.current = None  # this backend's phase is over
            self._advance()
        return crashitem

    def schedule(self) -> None:
        if not self.collection_is_completed:
            return
        if not self._scheduled:
            self._scheduled = True
            self.queue = list(self.order)
        elif self.current is not None:
            self._start_current()  # a replacement worker may have arrived
        self._advance()

    # -- phases ---------------------------------------------------------------
    def indices_for(self, label: str, collection: Sequence[str]) -> list[int]:
        return [i for i, nodeid in enumerate(collection) if self.route(nodeid) == label]

    def _advance(self) -> None:
        while self.current is None and self.queue:
            self.current = self.queue.pop(0)
            self._start_current()

    def _start_current(self) -> None:
        """Send the current backend's tests to its worker, if that worker is ready."""
        label = self.current
        assert label is not None
        node = self.label2node.get(label)
        if node is None or node not in self.node2collection or node in self.started:
            return  # wait for a replacement worker's collection
        collection = self.node2collection[node]
        if label in self.orphans:
            position = {nodeid: i for i, nodeid in enumerate(collection)}
            pending = [position[n] for n in self.orphans.pop(label) if n in position]
        else:
            pending = self.indices_for(label, collection)
        self.node2pending[node] = pending
        self.started.add(node)
        self.log("backend phase", label, len(pending), "tests")
        if pending:
            node.send_runtest_some(list(pending))
        # Without a shutdown the worker holds back its last test, waiting for more.
        node.shutdown()
        if not pending:
            self.current = None


class XdistHooks:
    """The controller's xdist hooks; registered only when xdist is in use."""

    def __init__(self, session: LyapaxSession, order: Sequence[str]) -> None:
        self.session = session
        self.order = list(order)

    def route(self, nodeid: str) -> str:
        """Tests of other (unavailable) backends and unlabelled tests go first."""
        label = self.session.label_of(nodeid)
        return label if label in self.order else self.order[0]

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        return BackendScheduling(self.order, self.route, log=log)

    @pytest.hookimpl
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT_KEY] = self.session.worker_payload(
            node_label(node)
        )

    @pytest.hookimpl
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        if error is None:
            return
        label = node_label(node)
        state = self.session.states.get(label)
        if state is not None:
            state.status = CRASHED
            state.crashes.append(f"worker {node.gateway.id} went down: {error}")
            state.reason = "; ".join(state.crashes)
