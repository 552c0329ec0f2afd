"""The worker's end of the link to the controller (see ``remote.py``).

In every worker of a run that has a backend on another host, the controller
puts a channel into ``workerinput``; the worker sends its code identity over
it right after collecting (before any test runs) and, on a remote host, a
heartbeat every :data:`BEAT_EVERY_S` seconds from a thread, joined at the
end of the worker's ``pytest_unconfigure`` (or ending with the main thread,
should the hooks be cut short).

A remote worker also waits, after each test, until the controller
acknowledges that test's last report (``{"ack": nodeid}``, sent once the
controller has handled it) before it starts the next test.  A host's own
relay (the gateway process that forwards the worker's messages) can die with
messages it has not forwarded yet; with the wait, what a host loses when it
dies is at most the test it was running, never one that had finished.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from pytest_lyapax.backends import codeid

LINK_KEY = "pytest_lyapax_link"
BEAT_EVERY_S = 2.0
ACK = "ack"  # the key of the controller's acknowledgement of a test


class WorkerLink:
    """In every worker of a run with remote backends: sends the code identity
    after collection and, on a remote host, a heartbeat, and waits for each
    test's acknowledgement before the next."""

    def __init__(self, config: pytest.Config, link: dict[str, Any]) -> None:
        self.config = config
        self.channel = link["channel"]
        self.stop = threading.Event()
        # Longest wait for an acknowledgement (0: none asked, a local worker).
        # A controller that does not answer in time is cut off by its own
        # watchdog; the worker goes on rather than hang.
        self.ack_s = float(link.get("ack_s") or 0.0)
        self.acked: set[str] = set()
        self.arrived = threading.Condition()
        if self.ack_s > 0:
            self.channel.setcallback(self._receive)
        every = float(link.get("beat_s") or 0.0)
        self.beat: threading.Thread | None = None
        if every > 0:
            self.beat = threading.Thread(
                target=self._beat, args=(every,), name="pytest-lyapax-beat"
            )
            self.beat.start()

    def _send(self, data: dict[str, Any]) -> bool:
        try:
            self.channel.send(json.dumps(data))
        except Exception:  # noqa: BLE001 - the controller is gone; xdist reports it
            return False
        return True

    def _beat(self, every: float) -> None:
        while not self.stop.wait(every) and threading.main_thread().is_alive():
            if not self._send({"beat": time.time()}):
                return

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        items = session.items
        paths = {item.path for item in items}
        modules = {
            id(m): m
            for item in items
            if (m := getattr(item, "module", None)) is not None
        }
        identity = codeid.code_identity(
            self.config.rootpath, paths, list(modules.values())
        )
        self._send({"identity": identity})

    def _receive(self, message: Any) -> None:
        try:
            data = json.loads(message)
        except (TypeError, ValueError):
            return
        if isinstance(data, dict) and isinstance(data.get(ACK), str):
            with self.arrived:
                self.acked.add(data[ACK])
                self.arrived.notify_all()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        # trylast: after xdist has sent the test's last event.
        if self.ack_s <= 0:
            return
        with self.arrived:
            self.arrived.wait_for(lambda: nodeid in self.acked, timeout=self.ack_s)
            self.acked.discard(nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        # trylast: the controller hears from the host while the worker's
        # other end-of-run hooks run.
        self.stop.set()
        if self.beat is not None:
            self.beat.join()


def worker_link(config: pytest.Config, session: object) -> WorkerLink | None:
    """The link's worker end where the controller sent a channel (None: no
    backend on another host); ``session`` is the run's, unused here."""
    link = getattr(config, "workerinput", {}).get(LINK_KEY)
    if isinstance(link, dict) and link.get("channel") is not None:
        return WorkerLink(config, link)
    return None
