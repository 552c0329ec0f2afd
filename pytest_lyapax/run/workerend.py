"""The end of a run with workers: each finishes its own end, then exits.

A worker that has reported the end of its session (xdist's
``workerfinished``, sent from its ``pytest_sessionfinish``) still has its own
end to go through: its terminal summary, every plugin's
``pytest_unconfigure`` (a coverage file written, a database closed) and its
interpreter's exit.  xdist would send each worker's gateway its exit right
away and kill what has not exited 10 s later; and execnet, on the worker's
side, interrupts (SIGINT) a worker whose main code is still running 5 s after
that exit arrived.  On a busy machine a worker's end takes longer than that,
and its work was lost silently.

Here the controller sends no exit until the worker's own code has returned:
it waits for the worker's xdist channel to close (the worker's
``pytest_cmdline_main`` returned, so its ``pytest_unconfigure`` ran to its
end), then exits the gateways and waits for the processes, local ones and
those on other hosts alike, and the gateways to the hosts after them.  Both
waits are bounded by :data:`WORKER_EXIT_LIMIT_S`; a worker still busy then is
killed and a line names it and what it was doing.  Everything runs in the
controller's main thread: no thread the interpreter could abandon.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# Seconds a worker may take, after the controller starts waiting (the end of
# the controller's own pytest_unconfigure), to finish its end-of-run hooks
# and exit.  Generous: a worker's end is normally about a second, a busy
# machine multiplies that, and a run waits this long only for a worker that
# hangs.
WORKER_EXIT_LIMIT_S = 300.0
# Seconds left, at the least, for the processes to exit once their gateways
# were told to (interpreter shutdown), when the limit above is spent.
EXIT_GRACE_S = 30.0
# Seconds a worker whose device the next one needs (chip.py) may take for its
# end after its last test.
CHIP_END_LIMIT_S = 120.0

END_HOOKS = "its end-of-run hooks (terminal summary, pytest_unconfigure)"


@dataclass
class EndingWorker:
    """One gateway to close at the end of a run.

    ``channel`` is a worker's xdist channel (None for a gateway to a host);
    ``finished`` whether the worker reported the end of its session, so that
    its channel closes on its own; ``gone`` whether it went down already
    (crashed, host lost: reported as such, a kill is not news).
    """

    gateway: Any
    name: str
    channel: Any = None
    finished: bool = False
    gone: bool = False


def describe(gateway: Any, label: str | None) -> str:
    """``worker gw1 (backend cpu2, pid 4242)``; the pid for local processes."""
    details = [f"backend {label}"] if label else [f"spec {gateway.spec}"]
    if _local(gateway):
        details.append(f"pid {gateway._io.popen.pid}")
    kind = "worker" if label else "gateway"
    return f"{kind} {gateway.id} ({', '.join(details)})"


def await_workers(
    group: Any,
    workers: Iterable[EndingWorker],
    say: Callable[[str], None],
    limit: float | None = None,
) -> list[str]:
    """Let every worker finish, then exit and reap the gateways of ``group``.

    ``group`` is the execnet group of the run's gateways; ``say`` prints one
    line.  Returns the lines said (one per worker killed).  ``limit`` in
    seconds, default :data:`WORKER_EXIT_LIMIT_S`.
    """
    limit = WORKER_EXIT_LIMIT_S if limit is None else limit
    start = time.monotonic()
    deadline = start + limit
    workers = list(workers)
    said: list[str] = []

    def tell(name: str, doing: str) -> None:
        # Also called from execnet's threads (a kill in terminate): printed
        # after terminate, from this thread.
        waited = time.monotonic() - start
        said.append(
            f"pytest-lyapax: {name} was {doing} {waited:.0f} s after the controller "
            "began waiting for it: killed (what it had left to do is lost)"
        )

    for worker in workers:
        if worker.channel is None or not worker.finished or worker.gone:
            continue
        try:
            worker.channel.waitclose(max(0.0, deadline - time.monotonic()))
        except worker.channel.TimeoutError:
            tell(worker.name, f"still in {END_HOOKS}")
            say(said[-1])
            if _local(worker.gateway):
                _kill(worker.gateway)
            # One on a host is interrupted by its exit below, and ended by
            # execnet there 15 s later: a kill through its host could block.
            worker.gone = True
        except Exception:  # noqa: BLE001, S112 - closed with an error: it is done
            continue
    for worker in workers:
        if not worker.gone:
            _report_kill(worker, tell)
    hung = len(said)
    group.terminate(timeout=max(deadline - time.monotonic(), EXIT_GRACE_S))
    for line in said[hung:]:
        say(line)
    return said


def end_now(worker: EndingWorker, limit: float = CHIP_END_LIMIT_S) -> str:
    """End one finished worker's process before the run ends: wait for its own
    end (its channel closes), exit its gateway and reap the process.  For a
    worker that holds a device the next worker needs (chip.py).  Returns a
    line to say if it had to be killed, else "".
    """
    said = ""
    if worker.channel is not None and worker.finished and not worker.gone:
        try:
            worker.channel.waitclose(limit)
        except worker.channel.TimeoutError:
            said = (
                f"pytest-lyapax: {worker.name} was still in {END_HOOKS} {limit:g} s "
                "after its last test, and its device is needed: killed"
            )
            _kill(worker.gateway)
        except Exception:  # noqa: BLE001, S110 - closed with an error: it is done
            pass
    try:
        worker.gateway.exit()
    except Exception:  # noqa: BLE001, S110 - gone already
        pass
    popen = getattr(getattr(worker.gateway, "_io", None), "popen", None)
    if popen is not None:
        try:
            popen.wait(timeout=EXIT_GRACE_S)
        except Exception:  # noqa: BLE001 - still there: ended by force
            _kill(worker.gateway)
            said = said or (
                f"pytest-lyapax: {worker.name} did not exit {EXIT_GRACE_S:g} s "
                "after its gateway was closed, and its device is needed: killed"
            )
    return said


def _report_kill(worker: EndingWorker, tell: Callable[[str, str], None]) -> None:
    """Make execnet's kill of a gateway that did not exit in time say so."""
    io = getattr(worker.gateway, "_io", None)
    kill = getattr(io, "kill", None)
    if kill is None:
        return
    if worker.channel is None:
        doing = "still exiting (the connection to its host)"
    elif worker.finished:
        doing = "still exiting its interpreter after its run (atexit handlers)"
    else:
        doing = "still in its session: the run ended before it finished"

    def reported_kill() -> None:
        tell(worker.name, doing)
        kill()

    io.kill = reported_kill


def _local(gateway: Any) -> bool:
    return getattr(getattr(gateway, "_io", None), "popen", None) is not None


def _kill(gateway: Any) -> None:
    try:
        gateway._io.kill()
    except Exception:  # noqa: BLE001, S110 - the process or its host is gone
        pass
