"""Backend labels, the ``JAX_PLATFORMS`` value each one runs under, and node ids.

A *label* is what the user types in ``--jax-backend`` and what appears in test
ids (``test_x[cpu-20]``); which backend an item runs on is kept on the item
itself (its ``jax_backend`` parameter, or the plugin's stash), never parsed
back out of an id.  A *platform* is the ``JAX_PLATFORMS`` value its
worker process gets.  The two are kept apart so that tests (and users) can map
an extra label onto an existing platform, e.g. ``cpu2=cpu``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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

# Labels become part of test ids, so keep them to simple identifiers.
LABEL_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")

# Backend states reported in the terminal and in benchmark.json.
OK = "ok"
UNAVAILABLE = "unavailable"
FALLBACK = "fallback"
CRASHED = "crashed"
NOT_RUN = "not-run"
PARTIAL = "partial"  # some of the backend's tests did not run (-x, --maxfail)
INTERRUPTED = "interrupted"  # stopped by Ctrl-C (KeyboardInterrupt)
MISMATCH = "mismatch"  # a backend on another host runs other code (remote.py)
RUNNABLE = (OK, FALLBACK)


@dataclass(frozen=True)
class Backend:
    """One requested backend: its label, the ``JAX_PLATFORMS`` it runs under
    and, for a backend on another host, the execnet gateway spec of that host
    (``--jax-backend-host``; None: this machine)."""

    label: str
    platform: str
    host: str | None = None

    @property
    def expected(self) -> str:
        """The ``jax.default_backend()`` a process with this platform must report."""
        return PLATFORM_BACKENDS[self.platform.split(",")[0]]


# Set in GPU workers unless the user set it: a correctness run starts child
# JAX processes (pytester, subprocess tests) that would find most of the
# GPU's memory reserved by the worker's default preallocation.
GPU_MEMORY_ENV = "XLA_PYTHON_CLIENT_PREALLOCATE"


# pytest's order of the outcome words in its summary line; other categories
# (``subtests passed``, ``rerun``, ...) follow in alphabetical order.
_OUTCOME_ORDER = ("failed", "passed", "skipped", "xfailed", "xpassed", "error")


def outcome_text(outcomes: Mapping[str, int]) -> str:
    """A backend's outcome counts as pytest words them, e.g.
    ``"1 failed, 753 passed, 18 subtests passed"`` ("" when empty)."""

    def rank(key: str) -> tuple[int, str]:
        if key in _OUTCOME_ORDER:
            return _OUTCOME_ORDER.index(key), ""
        return len(_OUTCOME_ORDER), key

    return ", ".join(f"{outcomes[k]} {k}" for k in sorted(outcomes, key=rank))
