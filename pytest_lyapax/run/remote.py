"""Backends on other hosts: probe, worker specs, code check, faults.

A backend bound to a host (``--jax-backend-host``, parsed in ``hosts.py``) is
probed there (``remoteprobe.py``) and gets an ordinary pytest-xdist worker
there, in the backend order like any other: a fresh interpreter started
through the host's gateway (``popen//via=...`` for ssh and socket hosts) with
``JAX_PLATFORMS`` set before anything is imported.  Results, statuses and
machine details travel back over xdist's own channel; the records are
labelled with the host (``extra_info.host``/``cpu``, the series key of
``identity.py``).

Alongside xdist's channel each worker gets a link channel (in
``workerinput``) over which it sends, right after collecting and before any
test runs, its code identity (``codeid.py``), and then a heartbeat.  The
controller acknowledges each remote test once it has handled the test's
last report, and the worker starts its next test only then, so a host that
dies loses at most the test it was running.  The controller compares every
remote identity with this checkout's; a
difference stops that backend (status ``mismatch``, exit code 4) unless
``--jax-allow-code-mismatch``.  A worker whose host goes quiet for longer
than ``--jax-backend-host-timeout`` has its connection cut, and a remote
worker that goes down is not restarted: its backend is ``crashed`` with the
reason and the run goes on with the other backends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest

from pytest_lyapax.backends import codeid
from pytest_lyapax.backends.hosts import typed_xdist_error
from pytest_lyapax.backends.labels import CRASHED, MISMATCH, UNAVAILABLE, Backend
from pytest_lyapax.backends.probe import ProbeResult
from pytest_lyapax.backends.remoteprobe import (
    describe_error,
    mismatch_reason,
    probe_hosts,
    within,
)
from pytest_lyapax.backends.remoteworker import ACK, BEAT_EVERY_S, LINK_KEY
from pytest_lyapax.measuring.benchmarks import RECORD_ATTR
from pytest_lyapax.run import _chdir_code
from pytest_lyapax.run.items import LABEL_ATTR
from pytest_lyapax.run.scheduling import worker_spec as local_worker_spec
from pytest_lyapax.run.session import LyapaxSession

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController

MISMATCH_EXIT = pytest.ExitCode.USAGE_ERROR


@dataclass
class RemoteState:
    """The remote hosts' part of the run (the controller's): each label not
    run for a code mismatch, as "label (host)", for the terminal summary's
    banner (views/runtext.py)."""

    mismatched: list[str] = field(default_factory=list)


STATE_KEY = pytest.StashKey[RemoteState]()


def state_of(stash: pytest.Stash) -> RemoteState:
    """The run's remote-host state (none mismatched where no host is used)."""
    return stash.setdefault(STATE_KEY, RemoteState())


def check_typed_xdist(config: pytest.Config, typed: Sequence[str]) -> None:
    """``--tx`` or ``-n N`` (N > 0) typed with ``--jax-backend`` is a usage error."""
    flags = [f for f in typed if f in ("--tx", "-n", "--numprocesses", "-d")]
    if "-n" in flags or "--numprocesses" in flags:
        if config.getoption("numprocesses", None) == 0 and "--tx" not in flags:
            return  # -n 0: run in this process (see runplan.why_not_xdist)
    if flags:
        raise typed_xdist_error(flags)


def probe_remote(session: LyapaxSession) -> dict[str, ProbeResult]:
    settings = session.settings
    targets = []
    for backend in settings.backends:
        if backend.host is not None:
            targets.append((backend, backend.host))
    if not targets:
        return {}
    return probe_hosts(targets, settings.host_timeout, settings.allow_code_mismatch)


def worker_spec(backend: Backend) -> str:
    """The ``--tx`` spec of a backend's worker, on this machine or its host."""
    host = backend.host
    if host is None:
        return local_worker_spec(backend)
    local = local_worker_spec(backend, environ=dict(host.env))
    return host.worker_spec(
        local, via=via_id(backend) if host.kind != "popen" else None
    )


def via_id(backend: Backend) -> str:
    return f"lyapax-{backend.label}"


class RemoteHooks:
    """The controller's hooks for runs with at least one backend on a host."""

    def __init__(self, config: pytest.Config, session: LyapaxSession) -> None:
        self.config = config
        self.session = session
        self.state = state_of(session.stash)  # the report reads it (output.py)
        self.hosts = {
            b.label: b.host for b in session.settings.backends if b.host is not None
        }
        self.timeout = session.settings.host_timeout
        self.spec_labels: dict[int, str] = {}
        self.masters: dict[str, Any] = {}
        self.identities: dict[Any, dict[str, Any]] = {}
        self.waiting: set[Any] = set()  # configured nodes that have not collected
        self.last_seen: dict[Any, float] = {}
        self.links: dict[Any, Any] = {}  # remote node -> its link channel
        self.severed: dict[Any, str] = {}
        self.checked = False
        self.down: set[Any] = set()
        self.stop = threading.Event()
        self.watchdog: threading.Thread | None = None

    # -- set-up -------------------------------------------------------------
    def _xdist_hooks(self) -> Any:
        return self.config.pluginmanager.getplugin("pytest-lyapax-xdist")

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_setupnodes(self, config: pytest.Config, specs: list[Any]) -> None:
        order = self._xdist_hooks().order
        group = config.pluginmanager.getplugin("dsession").nodemanager.group
        failed: dict[str, str] = {}
        for spec, label in zip(specs, order, strict=False):
            self.spec_labels[id(spec)] = label
            host = self.hosts.get(label)
            if host is None or host.kind == "popen":
                continue
            if label not in self.masters and label not in failed:
                gid = via_id(self.session.backend(label))
                connect = partial(group.makegateway, f"{host.connect_spec()}//id={gid}")
                try:
                    self.masters[label] = within(self.timeout, "connect", connect)
                except Exception as exc:  # noqa: BLE001 - the backend is given up
                    failed[label] = describe_error(exc)
            if label in failed:
                self._lost_before_start(label, spec, failed[label])

    def _lost_before_start(self, label: str, spec: Any, why: str) -> None:
        """The host answered its probe but not now: its worker runs here and
        skips every test of the backend (``unavailable``), nothing is lost."""
        state = self.session.states[label]
        if state.status != UNAVAILABLE:
            state.status = UNAVAILABLE
            state.reason = (
                f"host {self.hosts[label].where} answered its probe, then not "
                f"when its worker was started: {why}"
            )
        spec.via = None
        spec.python = None
        spec.nice = None
        spec.dont_write_bytecode = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_newgateway(self, gateway: Any) -> None:
        label = self.spec_labels.get(id(gateway.spec))
        host = self.hosts.get(label) if label else None
        if host is None or self.session.states[label].status == UNAVAILABLE:
            return
        if host.chdir:
            channel = gateway.remote_exec(_chdir_code)
            channel.send(host.chdir)
            channel.receive(timeout=self.timeout)
        _own_sys_path(gateway)

    @pytest.hookimpl(trylast=True, optionalhook=True)
    def pytest_configure_node(self, node: WorkerController) -> None:
        channel = node.gateway.newchannel()
        channel.setcallback(lambda message, n=node: self._message(n, message))
        remote = self._is_remote(node)
        node.workerinput[LINK_KEY] = {
            "channel": channel,
            "beat_s": BEAT_EVERY_S if remote else 0.0,
            "ack_s": self.timeout if remote else 0.0,
        }
        self.waiting.add(node)
        if remote:
            self.links[node] = channel
            self.last_seen[node] = time.monotonic()
            if self.watchdog is None:
                # Not a daemon: joined at the end of the session (or ends
                # with the main thread, should the hooks be cut short).
                self.watchdog = threading.Thread(
                    target=self._watch, name="pytest-lyapax-hosts"
                )
                self.watchdog.start()

    def _is_remote(self, node: Any) -> bool:
        label = self.session.worker_labels.get(node)
        return label in self.hosts and self.session.states[label].status != UNAVAILABLE

    # -- messages and the watchdog ------------------------------------------
    def _message(self, node: Any, message: Any) -> None:
        # Runs in execnet's receiver thread, before xdist's events of the same
        # worker that follow it are handled.
        if node in self.last_seen:
            self.last_seen[node] = time.monotonic()
        try:
            data = json.loads(message)
        except (TypeError, ValueError):
            return
        if isinstance(data, dict) and isinstance(data.get("identity"), dict):
            self.identities[node] = data["identity"]

    def _watch(self) -> None:
        while not self.stop.wait(1.0) and threading.main_thread().is_alive():
            now = time.monotonic()
            for node, seen in list(self.last_seen.items()):
                if node in self.severed or now - seen <= self.timeout:
                    continue
                label = self.session.worker_labels.get(node, "")
                self.severed[node] = (
                    f"no answer from host {self.hosts[label].where} for "
                    f"{self.timeout:g} s (--jax-backend-host-timeout)"
                )
                self._sever(node, label)

    def _sever(self, node: Any, label: str) -> None:
        """Cut a quiet host's connection, so xdist sees its worker go down."""
        gateway = self.masters.get(label) or node.gateway
        io = getattr(gateway, "_io", None)
        for name in ("kill", "close_read", "close_write"):
            try:
                getattr(io, name)()
            except Exception:  # noqa: BLE001, S112 - best effort on a dead link
                continue

    def _forget_dead_gateways(self, node: Any) -> None:
        """Make terminating a lost host's gateways at the end harmless: execnet
        would try to send a kill over the closed connection and raise."""
        label = self.session.worker_labels.get(node, "")
        for gateway in (node.gateway, self.masters.get(label)):
            io = getattr(gateway, "_io", None)
            kill = getattr(io, "kill", None)
            if kill is not None and not getattr(kill, "_lyapax_safe", False):
                io.kill = _quiet(kill)

    def _connection_lost(self, label: str) -> bool:
        master = self.masters.get(label)
        if master is None:
            return False
        try:
            master.join(timeout=1.0)  # returns at once once the link is down
        except Exception:  # noqa: BLE001 - a broken link is a lost one
            return True
        return not master.hasreceiver()

    # -- the code check, before any test runs -------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Any) -> None:
        self.waiting.discard(node)
        if not self.waiting:
            self._check_code()

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        self.last_seen.pop(node, None)
        self.waiting.discard(node)
        if error is not None and self._is_remote(node):
            self._forget_dead_gateways(node)
        if node not in self.identities:
            self.down.add(node)  # before collecting: xdist reports the crash
        if not self.waiting:
            self._check_code()

    @pytest.hookimpl(wrapper=True, optionalhook=True)
    def pytest_xdist_make_scheduler(self) -> Any:
        """Install the no-restart rule for remote workers, over the one the
        plugin's scheduler set (``scheduling._no_replacement_for_dead_backends``)."""
        scheduler = yield
        dsession = self.config.pluginmanager.getplugin("dsession")
        clone = getattr(dsession, "_clone_node", None)
        if clone is not None:
            dsession._clone_node = self._no_restart(dsession, clone)
        return scheduler

    def _no_restart(self, dsession: Any, clone: Any) -> Any:

        def clone_unless_remote(node: WorkerController) -> Any:
            if not self._is_remote(node):
                return clone(node)
            scheduler = self._xdist_hooks().scheduler
            phase = scheduler.label_of(node) if scheduler is not None else None
            if phase is not None:
                scheduler.give_up(phase)
            if not [n for n in dsession._active_nodes if n is not node]:
                dsession.triggershutdown()
            return None

        return clone_unless_remote

    def _check_code(self) -> None:
        if self.checked:
            return
        self.checked = True
        files: set[str] = set()
        packages: set[str] = set()
        for identity in self.identities.values():
            files.update(identity.get("files") or {})
            packages.update(identity.get("packages") or {})
        reference = codeid.reference_identity(self.config.rootpath, files, packages)
        nodes = [n for n in self.session.worker_labels if n not in self.down]
        for node in [n for n in nodes if self._is_remote(n)]:
            label = self.session.worker_labels[node]
            state = self.session.states[label]
            identity = self.identities.get(node)
            where = state.info.get("host") or self.hosts[label].where
            if identity is None:
                diffs = [f"its worker on {where} sent no code identity"]
            else:
                diffs = codeid.differences(reference, identity, str(where))
                state.info["code"] = _summary(identity)
            if not diffs:
                continue
            if self.session.settings.allow_code_mismatch:
                known = state.info.setdefault("code_differences", [])
                known.extend(d for d in diffs if d not in known)
                continue
            state.status, state.reason = MISMATCH, mismatch_reason(diffs)
            self._stop_backend(node)

    def _stop_backend(self, node: Any) -> None:
        hooks = self._xdist_hooks()
        phase = hooks.node_phases.get(node)
        if hooks.scheduler is not None and phase is not None:
            hooks.scheduler.give_up(phase)
        self.last_seen.pop(node, None)
        node.shutdown()

    # -- results ------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Any:
        label = getattr(report, LABEL_ATTR, None)
        raw = getattr(report, RECORD_ATTR, None)
        if raw and label in self.hosts:
            info = self.session.states[label].info
            record = json.loads(raw)
            extra = record.setdefault("extra_info", {})
            for key in ("host", "cpu", "gateway"):
                if info.get(key):
                    extra[key] = info[key]
            setattr(report, RECORD_ATTR, json.dumps(record))
        result = yield
        # Every plugin has handled the report: a remote worker waiting for
        # its test's last one may start the next test (remoteworker.py).
        channel = self.links.get(getattr(report, "node", None))
        if channel is not None and report.when == "teardown":
            try:
                channel.send(json.dumps({ACK: report.nodeid}))
            except Exception:  # noqa: BLE001, S110 - the host is gone; xdist says so
                pass
        return result

    def _stop_watching(self) -> None:
        self.stop.set()
        if self.watchdog is not None:
            self.watchdog.join()  # within a second: it checks every second

    def pytest_unconfigure(self) -> None:
        self._stop_watching()  # also when the session never finished

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # tryfirst: the reasons must be in place before the report is written.
        self._stop_watching()
        for node, why in self.severed.items():
            state = self.session.states.get(self.session.worker_labels.get(node, ""))
            if state is not None and state.status == CRASHED:
                state.crashes.insert(0, why)
                state.reason = "; ".join(state.crashes)
        for label, state in self.session.states.items():
            if label in self.hosts and state.status == CRASHED:
                done = self.session.finished[label]
                expected = self.session.expected[label]
                what = (
                    f"the connection to host {self.hosts[label].where} was lost"
                    if self._connection_lost(label)
                    else f"its worker on host {self.hosts[label].where} went down"
                )
                note = (
                    f"{what} mid-run; {done} of its {expected} tests finished, the "
                    "others were not run (a remote worker is not restarted)"
                )
                if note not in state.crashes:
                    state.crashes.append(note)
                    state.reason = "; ".join(state.crashes)
        # The terminal summary's banner (views/explain.py, the run's facts).
        self.state.mismatched = [
            f"{label} ({self.hosts[label].where})"
            for label, s in self.session.states.items()
            if label in self.hosts and s.status == MISMATCH
        ]
        mismatched = any(s.status == MISMATCH for s in self.session.states.values())
        if mismatched and session.exitstatus in (
            pytest.ExitCode.OK,
            pytest.ExitCode.TESTS_FAILED,
            pytest.ExitCode.NO_TESTS_COLLECTED,
        ):
            session.exitstatus = MISMATCH_EXIT


def _quiet(kill: Any) -> Any:
    def safe_kill() -> None:
        try:
            kill()
        except OSError:
            pass  # the connection is gone already

    safe_kill._lyapax_safe = True  # type: ignore[attr-defined]
    return safe_kill


def _summary(identity: dict[str, Any]) -> dict[str, Any]:
    return {
        "commit": identity.get("commit"),
        "dirty": identity.get("dirty"),
        "files": len(identity.get("files") or {}),
        "packages": identity.get("packages") or {},
    }


def _own_sys_path(gateway: Any) -> None:
    """A remote worker keeps its own ``sys.path`` (plus its working directory)
    and its own temporary directory.

    xdist hands every ``popen`` worker the controller's ``sys.path`` and a
    basetemp under the controller's, both meaningless on another host or in
    another environment; its worker takes its own when the fourth item of
    its start message is None (xdist 3.x ``WorkerController.setup``).
    """
    original = gateway.remote_exec

    def remote_exec(source: Any, **kwargs: Any) -> Any:
        channel = original(source, **kwargs)
        if getattr(source, "__name__", "") != "xdist.remote":
            return channel
        send = channel.send

        def first_send(item: Any) -> None:
            del channel.send  # back to the class's method
            workerinput, args, options, _ = item
            options = {k: v for k, v in options.items() if k != "basetemp"}
            send((workerinput, args, options, None))

        channel.send = first_send
        return channel

    gateway.remote_exec = remote_exec
