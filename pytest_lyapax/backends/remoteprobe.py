"""Probe a backend on another host, through its execnet gateway, with a deadline.

The probe is the local one (``probe.py``) run *there*: the gateway process
starts a fresh interpreter (the worker's ``python``, in the worker's
``chdir``) with ``JAX_PLATFORMS`` set, which runs a real JAX computation and
reports the host's name, CPU and the versions of jax, jaxlib,
pytest-benchmark and pytest_lyapax.  The gateway process itself never imports
JAX: an execnet socket server serves every connection in one process, and
the worker that follows must be the first to import JAX with its platform.

Every wait is bounded by ``timeout`` (connect and answer) plus the probe's
own JAX start-up allowance; a host that refuses, does not answer or fails is
``unavailable`` with the reason, never a hang.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pytest_lyapax.backends import _gateway_code, _probe_script, codeid
from pytest_lyapax.backends.hosts import HostSpec
from pytest_lyapax.backends.labels import (
    GPU_MEMORY_ENV,
    MISMATCH,
    OK,
    UNAVAILABLE,
    Backend,
)
from pytest_lyapax.backends.probe import (
    PROBE_SOURCE,
    PROBE_TIMEOUT_S,
    ProbeResult,
    interpret,
)

_NAMES = (*codeid.TOOLS, "pytest", "pytest-xdist", "execnet")


T = TypeVar("T")


class NoAnswer(Exception):
    """A step that did not finish before its deadline."""


def within(seconds: float, what: str, step: Callable[[], T]) -> T:
    """Run ``step`` in a daemon thread; raise :class:`NoAnswer` after ``seconds``.

    A step stuck in a blocking read (a host that accepted the connection and
    never answers) is left behind in its daemon thread: it cannot keep the
    interpreter alive, and the caller moves on.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = step()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            box["error"] = exc

    thread = threading.Thread(target=run, name=f"pytest-lyapax-{what}", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise NoAnswer(f"no answer within {seconds:g} s ({what})")
    if "error" in box:
        raise box["error"]
    return box["value"]


def describe_error(exc: BaseException) -> str:
    """A connection failure in a few words (``connection refused``)."""
    if isinstance(exc, NoAnswer):
        return str(exc)
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def probe_environment(backend: Backend, host: HostSpec) -> dict[str, str]:
    env = {**host.env, "JAX_PLATFORMS": backend.platform, **dict(backend.env)}
    env.setdefault(GPU_MEMORY_ENV, "false")  # the probe needs a few bytes only
    return env


def interpret_host(
    backend: Backend,
    host: HostSpec,
    answer: Mapping[str, Any],
    allow_mismatch: bool,
) -> ProbeResult:
    """Classify the answer of a host's probe (pure; separated out for testing)."""
    if "error" in answer:
        return ProbeResult(UNAVAILABLE, f"host {host.where}: {answer['error']}")
    stdout = str(answer.get("stdout", ""))
    result = interpret(
        backend, int(answer.get("returncode", 1)), stdout, str(answer.get("stderr", ""))
    )
    info: dict[str, Any] = {}
    for line in stdout.splitlines():
        if line.startswith(_probe_script.INFO_MARK):
            info = json.loads(line[len(_probe_script.INFO_MARK) :])
    versions = info.pop("versions", {}) or {}
    info.pop("plugin_importable", None)
    details = {**result.info, **info, "gateway": host.where}
    details["jaxlib_version"] = versions.get("jaxlib")
    reason = f"on host {info.get('host') or host.where}: {result.reason}"
    if result.status != OK:
        return ProbeResult(result.status, reason, details)
    missing = [n for n in ("lyapax", "pytest-xdist") if not versions.get(n)]
    if not missing and info.get("plugin_importable") is False:
        missing = ["importable pytest_lyapax"]
    if missing:
        return ProbeResult(
            UNAVAILABLE,
            f"host {host.where} (python={info.get('python')}) has no "
            f"{' and no '.join(missing)} installed; install the same versions as "
            "here",
            details,
        )
    here = {"tools": codeid.tool_versions()}
    there = {"tools": {n: versions.get(n) for n in codeid.TOOLS}}
    diffs = codeid.differences(here, there, info.get("host") or host.where)
    if diffs and not allow_mismatch:
        return ProbeResult(MISMATCH, mismatch_reason(diffs), details)
    if diffs:
        details["code_differences"] = diffs
    return ProbeResult(OK, "", details)


def mismatch_reason(diffs: Sequence[str]) -> str:
    shown = "; ".join(diffs[:6])
    more = f"; and {len(diffs) - 6} more" if len(diffs) > 6 else ""
    return (
        f"its code differs from this checkout: {shown}{more}. Check out the same "
        "commit and install the same versions there, or pass "
        "--jax-allow-code-mismatch"
    )


def probe_host(
    backend: Backend,
    host: HostSpec,
    timeout: float,
    allow_mismatch: bool = False,
    probe_timeout: float = PROBE_TIMEOUT_S,
) -> ProbeResult:
    """Probe one backend on its host (see the module docstring)."""
    import execnet

    group = execnet.Group()
    try:
        gateway = within(
            timeout, "connect", lambda: group.makegateway(host.connect_spec())
        )
        channel = gateway.remote_exec(_gateway_code)
        channel.send(
            {
                "env": probe_environment(backend, host),
                "chdir": host.chdir,
                "python": host.python if host.kind != "popen" else None,
                "code": PROBE_SOURCE,
                "argv": [_probe_script.HOST_INFO_FLAG, *_NAMES],
                "timeout": probe_timeout,
            }
        )
        answer = channel.receive(timeout=timeout + probe_timeout)
    except Exception as exc:  # noqa: BLE001 - every failure makes it unavailable
        if type(exc).__name__ == "TimeoutError" and not isinstance(exc, NoAnswer):
            exc = NoAnswer(f"no answer within {timeout + probe_timeout:g} s (probe)")
        return ProbeResult(
            UNAVAILABLE, f"host {host.where} unreachable: {describe_error(exc)}"
        )
    finally:
        try:
            within(timeout, "disconnect", lambda: group.terminate(timeout=2.0))
        except NoAnswer:
            pass  # left to its daemon thread
    return interpret_host(backend, host, answer, allow_mismatch)


def probe_hosts(
    targets: Sequence[tuple[Backend, HostSpec]],
    timeout: float,
    allow_mismatch: bool = False,
) -> dict[str, ProbeResult]:
    """Probe every remote backend concurrently; key by label."""
    results: dict[str, ProbeResult] = {}

    def one(backend: Backend, host: HostSpec) -> None:
        results[backend.label] = probe_host(backend, host, timeout, allow_mismatch)

    threads = [
        threading.Thread(target=one, args=target, daemon=True) for target in targets
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout * 3 + PROBE_TIMEOUT_S)
    for backend, host in targets:
        results.setdefault(
            backend.label,
            ProbeResult(UNAVAILABLE, f"host {host.where}: its probe did not finish"),
        )
    return results
