"""Find out, without touching JAX in this process, which backends really work.

Each backend is probed once, in a fresh interpreter whose environment is the
one its worker will get, by running a small real computation.  The pytest
controller never initialises a JAX backend itself: on a GPU host that would
reserve GPU memory the GPU worker needs.
"""

from __future__ import annotations

import glob
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata

from pytest_lyapax.backends import _probe_script
from pytest_lyapax.backends.chiplock import describe_lock_error, is_lock_error
from pytest_lyapax.backends.labels import FALLBACK, OK, UNAVAILABLE, Backend

PROBE_TIMEOUT_S = 180.0
# The probe itself (pytest_lyapax/backends/_probe_script.py), as the source
# text a fresh interpreter runs with ``python -c``, here or on a host.
PROBE_SOURCE = inspect.getsource(_probe_script)


@dataclass(frozen=True)
class ProbeResult:
    """What a probe found: a status (ok/unavailable/fallback), why, and details."""

    status: str
    reason: str = ""
    info: dict[str, object] = field(default_factory=dict)


def _installed_gpu_plugins() -> list[str]:
    names = set()
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith(("jax-cuda", "jax-rocm", "jaxlib-cuda")):
            names.add(f"{name} {dist.version}")
    return sorted(names)


def gpu_diagnosis() -> str:
    """Say which jax GPU plugin packages are installed and whether a GPU is visible."""
    plugins = _installed_gpu_plugins()
    devices = sorted(glob.glob("/dev/nvidia*"))
    parts = [
        "installed jax GPU plugins: " + ", ".join(plugins)
        if plugins
        else "no jax CUDA plugin is installed (pip install 'jax[cuda12]' or "
        "'jax[cuda13]')",
        "NVIDIA device files: " + ", ".join(devices[:4])
        if devices
        else "no /dev/nvidia* device files (no NVIDIA driver or GPU visible)",
    ]
    return "; ".join(parts)


def explain_failure(backend: Backend, error_type: str, error: str) -> str:
    """Turn a failed probe's exception into a reason a user can act on."""
    first_line = error.strip().splitlines()[0] if error.strip() else ""
    wants_gpu = backend.expected == "gpu"
    if is_lock_error(error):
        # Another process holds the chip, or its lock file was left over.
        return (
            f"JAX could not start platform {backend.platform!r}: "
            f"{describe_lock_error(error)}"
        )
    if not first_line:
        # JAX_PLATFORMS=cuda without a usable GPU fails with a bare AssertionError.
        reason = (
            f"JAX could not start platform {backend.platform!r} "
            f"(it raised {error_type} with no message)"
        )
    else:
        reason = f"JAX could not start platform {backend.platform!r}: {first_line}"
    if wants_gpu:
        reason += f"; {gpu_diagnosis()}"
    return reason


def interpret(
    backend: Backend, returncode: int, stdout: str, stderr: str
) -> ProbeResult:
    """Classify one probe's output (pure; separated out for testing)."""
    payload = None
    for line in stdout.splitlines():
        if line.startswith(_probe_script.MARK):
            payload = json.loads(line[len(_probe_script.MARK) :])
    if payload is None:
        tail = " | ".join(stderr.strip().splitlines()[-3:]) or "no output"
        reason = (
            f"the probe process for JAX_PLATFORMS={backend.platform!r} exited with "
            f"code {returncode} before reporting ({tail})"
        )
        if backend.expected == "gpu":
            reason += f"; {gpu_diagnosis()}"
        return ProbeResult(UNAVAILABLE, reason)
    if not payload.get("ok"):
        reason = explain_failure(
            backend, payload.get("error_type", "Error"), payload.get("error", "")
        )
        return ProbeResult(
            UNAVAILABLE, reason, {"jax_version": payload.get("jax_version")}
        )
    keys = ("device", "device_count", "jax_version", "precision")
    info = {k: payload.get(k) for k in keys}
    info["jax_backend"] = payload["backend"]
    if payload["backend"] != backend.expected:
        first = backend.platform.split(",")[0]
        reason = (
            f"silent fallback: JAX_PLATFORMS={backend.platform!r} ran on "
            f"{payload['backend']!r} instead of {backend.expected!r} (JAX moves on to "
            f"the next platform in a list when the first cannot start); map "
            f"{backend.label!r} to one platform, e.g. "
            f"--jax-backend-platform={backend.label}={first}"
        )
        return ProbeResult(FALLBACK, reason, info)
    return ProbeResult(OK, "", info)


def probe_environment(backend: Backend) -> dict[str, str]:
    """The environment a backend's processes get (probe and worker alike)."""
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = backend.platform
    env.update(backend.env)  # the label's own variables (--jax-backend-env)
    return env


def probe_backends(
    backends: Sequence[Backend],
    timeout: float = PROBE_TIMEOUT_S,
    exclusive: frozenset[str] = frozenset({"tpu"}),
    known: Mapping[tuple[str, tuple[tuple[str, str], ...]], ProbeResult] | None = None,
) -> dict[str, ProbeResult]:
    """Probe all backends concurrently, once per distinct platform and set of
    the label's own variables; key by label.

    The probes of a platform in ``exclusive`` (its device admits one process
    at a time) run one after another instead, each ended, its device
    released, before the next starts, and all before any worker starts.
    ``known``: results found already (``--jax-backend=auto``), by platform
    and variables, not probed again.

    ``JAX_PLATFORMS=cpu`` alone is not probed: jaxlib always contains the CPU
    backend, a probe would only cost a JAX start-up (~1 s), and each worker
    still checks ``jax.default_backend()`` before its first test.  A CPU
    label with variables of its own is (``XLA_FLAGS`` may not parse).
    """

    known = known or {}

    def unprobed(backend: Backend) -> bool:
        return (backend.platform == "cpu" and not backend.env) or (
            (backend.platform, backend.env) in known
        )

    def start(backend: Backend) -> subprocess.Popen[str]:
        env = probe_environment(backend)
        # A probe needs only a few bytes of device memory: don't reserve most of it.
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
        return subprocess.Popen(
            [sys.executable, "-c", PROBE_SOURCE],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(proc: subprocess.Popen[str]) -> tuple[int | None, str, str]:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
            return proc.returncode, stdout, stderr
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None, "", ""

    Key = tuple[str, tuple[tuple[str, str], ...]]
    procs: dict[Key, subprocess.Popen[str]] = {}
    one_at_a_time: dict[Key, Backend] = {}
    for backend in backends:
        key = (backend.platform, backend.env)
        if key in procs or key in one_at_a_time or unprobed(backend):
            continue
        if backend.platform.split(",")[0] in exclusive:
            one_at_a_time[key] = backend
        else:
            procs[key] = start(backend)
    outputs: dict[Key, tuple[int | None, str, str]] = {}
    for key, backend in one_at_a_time.items():
        outputs[key] = finish(start(backend))  # ended before the next starts
    for key, proc in procs.items():
        outputs[key] = finish(proc)
    results = {}
    for backend in backends:
        if (backend.platform, backend.env) in known:
            results[backend.label] = known[(backend.platform, backend.env)]
            continue
        if unprobed(backend):
            results[backend.label] = ProbeResult(OK, "", {"jax_backend": "cpu"})
            continue
        returncode, stdout, stderr = outputs[(backend.platform, backend.env)]
        if returncode is None:
            results[backend.label] = ProbeResult(
                UNAVAILABLE,
                f"probing JAX_PLATFORMS={backend.platform!r} took longer than "
                f"{timeout:g} s",
            )
        else:
            results[backend.label] = interpret(backend, returncode, stdout, stderr)
    return results


# The platforms --jax-backend=auto looks for beside the CPU, in this order.
AUTO_CANDIDATES = (
    Backend("gpu", "cuda"),
    Backend("tpu", "tpu"),
    Backend("rocm", "rocm"),
)


def discover(timeout: float = PROBE_TIMEOUT_S) -> dict[str, ProbeResult]:
    """Probe every platform ``--jax-backend=auto`` may find; by label."""
    return probe_backends(AUTO_CANDIDATES, timeout)


def tpu_signs() -> list[str]:
    """What suggests this machine has a TPU (cheap: no JAX started)."""
    signs = []
    if os.environ.get("TPU_ACCELERATOR_TYPE"):
        signs.append(f"TPU_ACCELERATOR_TYPE={os.environ['TPU_ACCELERATOR_TYPE']}")
    if glob.glob("/dev/accel*"):
        signs.append("/dev/accel*")
    if importlib.util.find_spec("libtpu") is not None:
        signs.append("libtpu installed")
    return signs


def tpu_hints(
    backends: Sequence[Backend],
    results: Mapping[str, ProbeResult],
    timeout: float = PROBE_TIMEOUT_S,
) -> dict[str, str]:
    """For each unavailable GPU label of a run that asked for no TPU, on a
    machine whose TPU a probe found working: how to ask for it instead."""
    if any(b.expected == "tpu" for b in backends):
        return {}
    missing = [
        b.label
        for b in backends
        if b.expected == "gpu" and results.get(b.label, ProbeResult(OK)).status != OK
    ]
    if not missing or not tpu_signs():
        return {}
    found = probe_backends([Backend("tpu", "tpu")], timeout)["tpu"]
    if found.status != OK:
        return {}
    firsts = [b.label for b in backends if not (b.rerun_of or b.ab_of or b.devices_of)]
    hints = {}
    for label in missing:
        ask = ",".join(dict.fromkeys("tpu" if x == label else x for x in firsts))
        device = found.info.get("device") or "a TPU"
        hints[label] = (
            f"this machine has a TPU ({device}) and no GPU: ask for it with "
            f"--jax-backend={ask}"
        )
    return hints
