"""Turns between the local workers of one run, so that backends never share cores.

With rounds interleaved (the default), every local backend's worker runs at
the same time, but only the one that holds the *turn* runs anything: a test
(set-up, call, teardown) is run holding it, and a benchmark gives it away
between two rounds once it has held it for a slice
(:attr:`~pytest_lyapax.measuring.rounds.Turns.slice_s`).  The turns are
handed out first come, first served by a small server in the controller
(:class:`TurnServer`, a thread listening on a unix socket in a private
temporary folder, mode 0700: no IP socket is needed, so the turns work in
sandboxes that allow none, not even loopback), so two
workers that both want to run alternate, and a worker that is alone never
waits.  Each grant carries a number that grows by one per turn across the
whole run: the rounds of two backends run in neighbouring turns were taken
under the same conditions of the machine, and ``report/stats.py`` compares
them as pairs.

The protocol, one byte per message: the worker first sends ``n`` and its
rank (one byte: its place in the run order), then ``h`` (hold) and ``r``
(release), each ``h`` after ``p`` and the number of tests the worker has
started (4 bytes); the server answers ``h`` with ``g`` and the turn's number
(8 bytes, big-endian) once it is that worker's turn.  Among the workers
waiting, the one furthest behind in its tests goes first: the backends stay
on the same test, so the rounds of a test on each backend alternate turn by
turn instead of drifting apart in time; among equals, the one that had
fewer turns on its test, then the first in run order.  A worker ahead in
its tests also waits, at most :data:`LAGGARD_WAIT_S`, for one behind it that
is between two tests (its report is on the way, or the machine paused it):
otherwise a moment's delay would let the later backend run ahead and its
results arrive before the reference's.  ``e`` says that a worker has ended
a test (its reports are sent), and no turn is granted until the controller
has received the reports of every test ended so far (:meth:`TurnServer.reported`,
at most :data:`REPORT_WAIT_S`): the reports of two backends' runs of a test
then reach the controller in the order the tests ran, whatever the delays of
their ways there.  ``d`` says that a worker has run its last test, so that no
one waits for it.  The first turn waits
until every expected worker asks (at most :data:`FIRST_TURN_WAIT_S`) and
goes to the lowest rank, so the first backend's test runs first and the
backends' tests then alternate in run order.  A worker whose
connection closes (it ended, or crashed) gives up its place and its turn.
Workers on other hosts (``--jax-backend-host``) share no cores with the
local ones and take no turns.
"""

from __future__ import annotations

import os
import selectors
import shutil
import socket
import struct
import tempfile
import threading
import time
from collections import deque

from pytest_lyapax.measuring.rounds import Turns

HOLD, RELEASE, GRANT, RANK, PROGRESS, DONE = b"h", b"r", b"g", b"n", b"p", b"d"
ENDED = b"e"
FIRST_TURN_WAIT_S = 10.0
LAGGARD_WAIT_S = 1.0
REPORT_WAIT_S = 5.0
_PROGRESS = struct.Struct(">I")
# The bytes after each message's first byte.
_ARGUMENT_BYTES = {
    RANK[0]: 1,
    PROGRESS[0]: _PROGRESS.size,
    HOLD[0]: 0,
    RELEASE[0]: 0,
    DONE[0]: 0,
    ENDED[0]: 0,
}
_TICKET = struct.Struct(">Q")
# The longest path a unix socket may have (sun_path is 108 bytes on Linux,
# 104 on macOS, with its terminating NUL).
_UNIX_PATH_MAX = 100


def _private_listener() -> tuple[socket.socket, str]:
    """A listening unix socket in a new folder only this user can enter.

    Raises OSError when none can be made (no unix sockets on this system, no
    writable temporary folder).  A temporary folder whose path is too long for
    a unix socket is replaced by one under ``/tmp``.
    """
    if not hasattr(socket, "AF_UNIX"):
        raise OSError("this system has no unix sockets")
    folder = tempfile.mkdtemp(prefix="lyapax-turns-")  # mode 0700
    if len(os.path.join(folder, "turns")) > _UNIX_PATH_MAX:
        shutil.rmtree(folder, ignore_errors=True)
        folder = tempfile.mkdtemp(prefix="lyapax-turns-", dir="/tmp")
    path = os.path.join(folder, "turns")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen()
    except OSError:
        listener.close()
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return listener, path


class TurnServer:
    """Hands out turns, first come first served, to the workers that connect.

    Runs in a daemon thread of the controller; :meth:`close` stops it and
    removes its socket's folder.  ``expected``: how many workers will ask for
    turns (see the first turn).  Raises OSError when its socket cannot be made
    (the caller then runs the backends one after another).
    """

    def __init__(self, expected: int = 1) -> None:
        self.expected = expected  # workers that will ask for turns
        self._ranks: dict[socket.socket, int] = {}
        self._progress: dict[socket.socket, int] = {}
        # Turns each worker had on its current test.
        self._granted: dict[socket.socket, int] = {}
        self._unread: dict[socket.socket, bytes] = {}
        self._asked: dict[socket.socket, float] = {}  # when each waiting one asked
        self._done: set[socket.socket] = set()
        self._first_asked: float | None = None
        # Tests ended by the workers of each rank, and their reports that the
        # controller has received (written by the controller's main thread).
        self._ended: dict[int, int] = {}
        self._reported: dict[int, int] = {}
        self._reports_awaited_since: float | None = None
        self._report_lock = threading.Lock()
        self._listener, self._path = _private_listener()
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        # Written to by reported(), so that a grant waiting for a report
        # goes out as soon as it arrives.
        self._wake_read, self._wake_write = socket.socketpair()
        self._wake_read.setblocking(False)
        self._selector.register(self._wake_read, selectors.EVENT_READ)
        self._queue: deque[socket.socket] = deque()
        self._holder: socket.socket | None = None
        self._timeout = 0.2  # shorter while a grant waits for a laggard
        self.ticket = 0  # turns granted so far
        self._closed = threading.Event()
        self._thread = threading.Thread(
            target=self._serve, name="pytest-lyapax-turns", daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> str:
        """The path of the server's unix socket, which a :class:`TurnClient`
        connects to."""
        return self._path

    def _serve(self) -> None:
        while not self._closed.is_set():
            for key, _ in self._selector.select(timeout=self._timeout):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self._listener:
                    self._accept()
                elif sock is self._wake_read:
                    self._drain_wake()
                else:
                    self._read(sock)
            self._grant()

    def reported(self, rank: int) -> None:
        """The controller received the last report of a test run by the worker
        of ``rank`` (called from the controller's main thread)."""
        with self._report_lock:
            self._reported[rank] = self._reported.get(rank, 0) + 1
        try:
            self._wake_write.send(b"x")
        except OSError:
            pass  # closed, or already full of wake-ups

    def _drain_wake(self) -> None:
        try:
            while self._wake_read.recv(4096):
                pass
        except OSError:
            pass

    def _reports_missing(self) -> bool:
        """Whether a test has ended whose reports the controller still awaits
        (for at most REPORT_WAIT_S: a report lost with its worker is not
        awaited forever)."""
        missing = any(
            self._reported.get(rank, 0) < ended for rank, ended in self._ended.items()
        )
        if not missing:
            self._reports_awaited_since = None
            return False
        now = time.monotonic()
        if self._reports_awaited_since is None:
            self._reports_awaited_since = now
        if now - self._reports_awaited_since < REPORT_WAIT_S:
            return True
        with self._report_lock:  # give up on those
            for rank, ended in self._ended.items():
                self._reported[rank] = max(self._reported.get(rank, 0), ended)
        self._reports_awaited_since = None
        return False

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        conn.setblocking(True)
        self._selector.register(conn, selectors.EVENT_READ)

    def _read(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(64)
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        buffer = self._unread.pop(conn, b"") + data
        while buffer:
            size = _ARGUMENT_BYTES.get(buffer[0])
            if size is None:  # not our protocol: forget this connection
                self._drop(conn)
                return
            if len(buffer) < 1 + size:
                self._unread[conn] = buffer
                break
            kind, argument, buffer = buffer[0], buffer[1 : 1 + size], buffer[1 + size :]
            if kind == RANK[0]:
                self._ranks[conn] = argument[0]
            elif kind == PROGRESS[0]:
                progress = _PROGRESS.unpack(argument)[0]
                if progress != self._progress.get(conn):
                    self._granted[conn] = 0  # turns are counted per test
                self._progress[conn] = progress
            elif kind == HOLD[0]:
                if conn is not self._holder and conn not in self._queue:
                    self._queue.append(conn)
                    self._asked[conn] = time.monotonic()
            elif kind == DONE[0]:
                self._done.add(conn)
            elif kind == ENDED[0]:
                rank = self._ranks.get(conn, 255)
                self._ended[rank] = self._ended.get(rank, 0) + 1
            elif conn is self._holder:  # RELEASE
                self._holder = None

    def _drop(self, conn: socket.socket) -> None:
        self._selector.unregister(conn)
        self._ranks.pop(conn, None)
        self._progress.pop(conn, None)
        self._granted.pop(conn, None)
        self._unread.pop(conn, None)
        self._asked.pop(conn, None)
        self._done.discard(conn)
        if conn in self._queue:
            self._queue.remove(conn)
        if conn is self._holder:
            self._holder = None
        conn.close()

    def _priority(self, conn: socket.socket) -> tuple[int, int, int]:
        # The worker furthest behind in its tests first, so that the backends
        # stay on the same test; among equals the one that had fewer turns on
        # it (so they alternate), then the run order.
        return (
            self._progress.get(conn, 0),
            self._granted.get(conn, 0),
            self._ranks.get(conn, 255),
        )

    def _grant(self) -> None:
        if self.ticket == 0 and self._queue:
            # The first turn: wait for every worker, then the lowest rank.
            now = time.monotonic()
            if self._first_asked is None:
                self._first_asked = now
            waited = now - self._first_asked
            if len(self._queue) < self.expected and waited < FIRST_TURN_WAIT_S:
                return
        self._timeout = 0.2
        if self._holder is None and self._queue and self._reports_missing():
            return  # reported() wakes the server
        while self._holder is None and self._queue:
            conn = min(self._queue, key=self._priority)
            wait = self._laggard_wait(conn)
            if wait > 0:
                self._timeout = min(wait, 0.2)
                return
            self._queue.remove(conn)
            self._asked.pop(conn, None)
            self.ticket += 1
            try:
                conn.sendall(GRANT + _TICKET.pack(self.ticket))
            except OSError:
                self._drop(conn)
                continue
            self._holder = conn
            self._granted[conn] = self._granted.get(conn, 0) + 1

    def _laggard_wait(self, conn: socket.socket) -> float:
        """Seconds ``conn`` should still wait for a worker behind it in its
        tests that is between two tests (0: grant now)."""
        progress = self._progress.get(conn, 0)
        between = set(self._ranks) - set(self._queue) - self._done - {conn}
        behind = any(self._progress.get(other, 0) < progress for other in between)
        if not behind:
            return 0.0
        return self._asked.get(conn, 0.0) + LAGGARD_WAIT_S - time.monotonic()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=2.0)
        for key in list(self._selector.get_map().values()):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            sock.close()
        self._selector.close()
        self._wake_read.close()
        self._wake_write.close()
        shutil.rmtree(os.path.dirname(self._path), ignore_errors=True)


class TurnClient(Turns):
    """A worker's side: :meth:`hold` waits for the turn, :meth:`release` gives it.

    If the server cannot be reached (the controller is gone), the worker
    goes on without turns rather than hang.
    """

    def __init__(self, address: str, rank: int = 0) -> None:
        self.rank = min(max(rank, 0), 255)
        self._address = address  # the server's unix socket
        self._sock: socket.socket | None = None
        self._held = False
        self._broken = False
        self.ticket = 0
        self.waited_s = 0.0
        self.turns = 0  # turns held by this worker
        self.progress = 0  # the index of the test this worker is at

    @property
    def mode(self) -> str:
        return "interleaved"

    @property
    def held(self) -> bool:
        return self._held

    def _connection(self) -> socket.socket | None:
        if self._sock is None and not self._broken:
            try:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            except (OSError, AttributeError):
                self._broken = True
                return None
            try:
                sock.settimeout(10.0)
                sock.connect(self._address)
            except OSError:
                self._broken = True
                sock.close()
                return None
            sock.settimeout(None)  # a turn may take as long as another's test
            try:
                sock.sendall(RANK + bytes([self.rank]))
            except OSError:
                self._broken = True
                sock.close()
                return None
            self._sock = sock
        return self._sock

    def hold(self) -> None:
        if self._held:
            return
        sock = self._connection()
        if sock is None:
            return
        start = time.perf_counter()
        try:
            sock.sendall(PROGRESS + _PROGRESS.pack(self.progress) + HOLD)
            answer = _receive(sock, 1 + _TICKET.size)
        except OSError:
            answer = b""
        self.waited_s += time.perf_counter() - start
        if len(answer) != 1 + _TICKET.size or answer[:1] != GRANT:
            self._give_up()
            return
        self.ticket = _TICKET.unpack(answer[1:])[0]
        self.turns += 1
        self._held = True

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        if self._sock is not None:
            try:
                self._sock.sendall(RELEASE)
            except OSError:
                self._give_up()

    def ended(self) -> None:
        """This worker ended a test, and its reports are on their way."""
        if self._sock is not None:
            try:
                self._sock.sendall(ENDED)
            except OSError:
                self._give_up()

    def finish(self) -> None:
        if self._sock is not None:
            try:
                self._sock.sendall(DONE)
            except OSError:
                self._give_up()

    def _give_up(self) -> None:
        self._broken = True
        self._held = False
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        self.release()
        self._give_up()


def _receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data
