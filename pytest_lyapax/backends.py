"""Backend labels, the ``JAX_PLATFORMS`` value each one runs under, and node ids.

A *label* is what the user types in ``--jax-backend`` and what appears in test
ids (``test_x[cpu-20]``).  A *platform* is the ``JAX_PLATFORMS`` value its
worker process gets.  The two are kept apart so that tests (and users) can map
an extra label onto an existing platform, e.g. ``cpu2=cpu``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# Built-in labels and the platform each one selects.  ``gpu`` is exactly
# ``cuda``: ``JAX_PLATFORMS=gpu`` would also try rocm/oneapi, and a list such as
# ``cuda,cpu`` silently runs on the CPU when no GPU is there.
DEFAULT_PLATFORMS: dict[str, str] = {
    "cpu": "cpu",
    "gpu": "cuda",
    "tpu": "tpu",
    "rocm": "rocm",
}
LABEL_ALIASES: dict[str, str] = {"cuda": "gpu"}

# Platform names accepted in a JAX_PLATFORMS list, and the value that
# ``jax.default_backend()`` reports when that platform is the one in use.
PLATFORM_BACKENDS: dict[str, str] = {
    "cpu": "cpu",
    "cuda": "gpu",
    "rocm": "gpu",
    "gpu": "gpu",
    "tpu": "tpu",
}

# Labels become the first field of a parametrize id, which pytest joins with
# "-", so a label must not contain "-" (and must not look like a number).
LABEL_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")

# Backend states reported in the terminal and in benchmark.json.
OK = "ok"
UNAVAILABLE = "unavailable"
FALLBACK = "fallback"
CRASHED = "crashed"
NOT_RUN = "not-run"
RUNNABLE = (OK, FALLBACK)


@dataclass(frozen=True)
class Backend:
    """One requested backend: its label and the ``JAX_PLATFORMS`` it runs under."""

    label: str
    platform: str

    @property
    def expected(self) -> str:
        """The ``jax.default_backend()`` a process with this platform must report."""
        return PLATFORM_BACKENDS[self.platform.split(",")[0]]


def label_from_nodeid(nodeid: str, labels: Iterable[str]) -> str | None:
    """Return the backend label carried by a test id, or None if it has none.

    The plugin parametrizes ``jax_backend`` before any other parameter, so the
    label is the first ``-``-separated field inside the trailing ``[...]``.
    """
    last = nodeid.rsplit("::", 1)[-1]
    start = last.find("[")
    if start < 0 or not last.endswith("]"):
        return None
    first = last[start + 1 : -1].split("-", 1)[0]
    return first if first in set(labels) else None
