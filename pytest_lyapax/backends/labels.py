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
from dataclasses import dataclass, field

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
class HostSpec:
    """A parsed gateway spec of one backend's host."""

    text: str  # as the user wrote it
    kind: str  # ssh | socket | popen
    address: str  # ssh destination, socket host:port, or "" for popen
    python: str | None = None
    chdir: str | None = None
    nice: str | None = None
    dont_write_bytecode: bool = False
    ssh_config: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """Short description for messages: ``socket 127.0.0.1:8888``."""
        if self.kind == "popen":
            return f"popen python={self.python}"
        return f"{self.kind} {self.address}"

    def connect_spec(self) -> str:
        """The gateway that reaches the host (probe, and the worker's ``via``).

        ssh and socket gateways run with the ``thread`` model on the host, so
        several workers (``--jax-processes``) can be started through one.
        """
        if self.kind == "popen":
            parts = ["popen", f"python={self.python}"]
        elif self.kind == "socket":
            parts = [f"socket={self.address}", "execmodel=thread"]
        else:
            parts = [f"ssh={self.address}", "execmodel=thread"]
            if self.python:
                parts.append(f"python={self.python}")
            if self.ssh_config:
                parts.append(f"ssh_config={self.ssh_config}")
        if self.dont_write_bytecode:
            parts.append("dont_write_bytecode")
        return "//".join(parts)

    def worker_spec(self, local_spec: str, via: str | None) -> str:
        """The worker's ``--tx`` spec from the spec a local worker would get.

        Always a ``popen`` spec without ``chdir`` (a fresh interpreter on the
        host, started through the ``via`` gateway for ssh/socket), so xdist
        neither rsyncs nor rewrites the test paths; the plugin changes to
        ``chdir`` itself (``remote.py``).  ``JAX_PLATFORMS`` and the rest of
        ``local_spec``'s environment are set before anything is imported.
        """
        assert local_spec.startswith("popen")
        head = ["popen"]
        if via is not None:
            head.append(f"via={via}")
        if self.python:
            head.append(f"python={self.python}")
        if self.nice:
            head.append(f"nice={self.nice}")
        if self.dont_write_bytecode:
            head.append("dont_write_bytecode")
        env = [f"env:{k}={v}" for k, v in self.env.items()]
        return "//".join([*head, *env]) + local_spec[len("popen") :]


@dataclass(frozen=True)
class Backend:
    """One requested backend: its label, the ``JAX_PLATFORMS`` it runs under
    and, for a backend on another host, the parsed execnet gateway spec of
    that host (``--jax-backend-host``, ``hosts.py``; None: this machine)."""

    label: str
    platform: str
    host: HostSpec | None = None
    # Variables set before JAX starts in this backend's worker, in the order
    # given (--jax-backend-env): an execution variant such as float32.
    env: tuple[tuple[str, str], ...] = ()
    # The label this one runs a second time (--jax-rerun): same platform,
    # host and variables, so its results must equal that label's bit for bit.
    rerun_of: str = ""
    # The label whose tests this one runs on the other version of the code
    # (--jax-ab): B of an A/B, its worker importing that version.
    ab_of: str = ""
    # A device-count worker (--jax-devices): the label it splits and how many
    # devices its jax_mesh holds (0: not a device-count worker).
    devices_of: str = ""
    devices: int = 0
    # The float dtype asked of this label (--jax-precision; "": JAX's own
    # default), set through JAX_ENABLE_X64 among its variables.
    precision: str = ""

    @property
    def env_text(self) -> str:
        """The variant's variables as ``VAR=VALUE`` words ("" for none)."""
        return " ".join(f"{k}={v}" for k, v in self.env)

    @property
    def expected(self) -> str:
        """The ``jax.default_backend()`` a process with this platform must report."""
        return PLATFORM_BACKENDS[self.platform.split(",")[0]]


# XLA's flag that splits the host platform into that many CPU devices; read
# once, when JAX starts its CPU backend.
DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


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
