"""The worker's end of the link to the controller (see ``remote.py``).

In every worker of a run that has a backend on another host, the controller
puts a channel into ``workerinput``; the worker sends its code identity over
it right after collecting (before any test runs) and, on a remote host, a
heartbeat every :data:`BEAT_EVERY_S` seconds from a daemon thread.
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


class WorkerLink:
    """In every worker of a run with remote backends: sends the code identity
    after collection and, on a remote host, a heartbeat."""

    def __init__(self, config: pytest.Config, link: dict[str, Any]) -> None:
        self.config = config
        self.channel = link["channel"]
        self.stop = threading.Event()
        every = float(link.get("beat_s") or 0.0)
        if every > 0:
            threading.Thread(
                target=self._beat, args=(every,), name="pytest-lyapax-beat", daemon=True
            ).start()

    def _send(self, data: dict[str, Any]) -> bool:
        try:
            self.channel.send(json.dumps(data))
        except Exception:  # noqa: BLE001 - the controller is gone; xdist reports it
            return False
        return True

    def _beat(self, every: float) -> None:
        while not self.stop.wait(every):
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

    def pytest_unconfigure(self) -> None:
        self.stop.set()


def configure_worker_link(config: pytest.Config) -> None:
    link = getattr(config, "workerinput", {}).get(LINK_KEY)
    if isinstance(link, dict) and link.get("channel") is not None:
        config.pluginmanager.register(WorkerLink(config, link), "pytest-lyapax-link")
