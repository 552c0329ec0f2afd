"""Machines that allow no IP socket, not even on loopback (sandboxes).

The plugin itself needs none: the turns of interleaved rounds go over a unix
socket (turns.py) and everything else over execnet's pipes.  Another plugin
may need one: pytest-rerunfailures opens a TCP server in the controller of
every xdist run and a client in each worker, and stops the run with an
INTERNALERROR where that fails.  On such a machine it is unregistered before
it starts, with one line in the report header.
"""

from __future__ import annotations

import errno
import socket

import pytest

from pytest_lyapax.run.options import NOTES_KEY

# Plugins that open an IP socket in an xdist run, by their registered name.
NEEDS_IP = ("rerunfailures",)


def ip_sockets_allowed() -> str | None:
    """None if an IP socket can be made here, else why not (the OSError)."""
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    except OSError as error:
        if error.errno in (errno.EAFNOSUPPORT, errno.EPERM, errno.EACCES):
            return str(error)
        raise
    sock.close()
    return None


def drop_plugins_needing_ip(config: pytest.Config) -> None:
    """Unregister the plugins of :data:`NEEDS_IP` when no IP socket can be
    made; the line saying so waits in ``config.stash[NOTES_KEY]``.

    In an xdist worker, also when the controller sent no port for them (it
    dropped them).
    """
    manager = config.pluginmanager
    present = [name for name in NEEDS_IP if manager.get_plugin(name) is not None]
    if not present:
        return
    workerinput = getattr(config, "workerinput", None)
    why = ip_sockets_allowed()
    if why is None and (workerinput is None or "sock_port" in workerinput):
        return
    for name in present:
        manager.unregister(name=name)
    why = why or "the controller has disabled it"
    config.stash.setdefault(NOTES_KEY, []).extend(
        f"{name} disabled: it needs an IP socket under xdist, which this "
        f"machine does not allow ({why}); -p no:{name} turns it off quietly"
        for name in present
    )
