"""Runs in a remote worker's interpreter before xdist's worker code: its chdir.

Sent with ``gateway.remote_exec(this module)``; receives the directory over
the ``channel`` execnet provides, changes to it and sends back the working
directory it got.  Self-contained: only the standard library.
"""

from __future__ import annotations

import os
from typing import Any

if __name__ == "__channelexec__":
    channel: Any = globals()["channel"]  # execnet's, for this execution
    os.chdir(channel.receive())
    channel.send(os.getcwd())
