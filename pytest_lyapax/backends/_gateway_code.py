"""Runs in the execnet gateway process on a backend's host: starts its probe.

Sent with ``gateway.remote_exec(this module)`` (execnet sends the source and
runs it with ``__name__ == "__channelexec__"`` and a ``channel`` global).
It receives one dict -- ``env`` (added to the host's environment),
``chdir``, ``python`` (None: the gateway's own), ``code`` and ``argv`` (the
probe script and its arguments) and ``timeout`` in seconds -- runs the probe
in a fresh interpreter and sends back ``returncode``/``stdout``/``stderr``,
or ``error`` with why it could not run.  The gateway process itself never
imports JAX: the worker that follows must be the first to, with its platform.

Self-contained: only the standard library; importing it runs nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any


def run_probe(args: dict[str, Any]) -> dict[str, Any]:
    """Run ``args["code"]`` as the host's probe; what it printed, or why not."""
    env = dict(os.environ)
    env.update(args["env"])
    cwd = args["chdir"]
    python = args["python"] or sys.executable
    if cwd is not None and not os.path.isdir(cwd):
        return {"error": f"chdir={cwd} is not a directory on the host"}
    try:
        proc = subprocess.run(
            [python, "-c", args["code"], *args["argv"]],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=args["timeout"],
        )
    except subprocess.TimeoutExpired:
        return {"error": f"its JAX probe took longer than {args['timeout']:g} s"}
    except OSError as exc:
        return {"error": f"cannot start python={python} there: {exc}"}
    return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


if __name__ == "__channelexec__":
    channel: Any = globals()["channel"]  # execnet's, for this execution
    channel.send(run_probe(channel.receive()))
