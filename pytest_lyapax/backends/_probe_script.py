"""The probe of a backend, run as a script in a fresh interpreter.

Sent as source text and run with ``python -c`` (this module's own code, read
by :func:`inspect.getsource`), here for a local backend and on the host for
a remote one, with ``JAX_PLATFORMS`` set to the backend's platform.  It
prints one line ``PYTEST_LYAPAX_PROBE {json}``: whether a real computation
ran, on which backend and device, or the exception it raised (reported here,
so the controller sees its type even when its message is empty).  Given
``--host-info NAME...`` it prints a second line ``PYTEST_LYAPAX_HOST {json}``
with the host's name, CPU, Python, working directory and the installed
versions of those distributions.

Self-contained: only the standard library at import (JAX inside the probe),
so that it runs in any interpreter; importing it runs nothing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import Any

MARK = "PYTEST_LYAPAX_PROBE "
INFO_MARK = "PYTEST_LYAPAX_HOST "
HOST_INFO_FLAG = "--host-info"


def _precision(jax: Any) -> dict[str, str]:
    """The dtype (x64 on or off) and matmul precision in force.  jax.config
    declares its flags at run time: none is typed for mypy."""
    x64, matmul = (
        getattr(jax.config, name)
        for name in ("jax_enable_x64", "jax_default_matmul_precision")
    )
    return {
        "dtype": "float64" if x64 else "float32",
        "matmul": str(matmul or "default").lower(),
    }


def probe_jax() -> dict[str, Any]:
    """Run a small JAX computation; what ran where, or what it raised."""
    out: dict[str, Any] = {}
    try:
        import jax
        import jax.numpy as jnp

        out["jax_version"] = jax.__version__
        x = jnp.arange(16.0)
        total = float(jax.block_until_ready(jnp.dot(x, x)))
        if total != 1240.0:
            raise RuntimeError(f"probe computation returned {total!r}, expected 1240.0")
        device = jax.devices()[0]
        out.update(
            ok=True,
            backend=jax.default_backend(),
            device=device.device_kind,
            device_count=jax.device_count(),
            precision=_precision(jax),
        )
    except BaseException as exc:  # noqa: BLE001 - every failure is the answer
        out.update(ok=False, error_type=type(exc).__name__, error=str(exc))
    return out


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu() -> str:
    try:
        import cpuinfo  # type: ignore[import-untyped]

        return str(cpuinfo.get_cpu_info().get("brand_raw") or platform.processor())
    except Exception:  # noqa: BLE001, S110 - optional: /proc/cpuinfo next
        pass
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def host_info(names: Sequence[str]) -> dict[str, Any]:
    """The host, its CPU and Python, and the versions of ``names`` installed."""
    return {
        "host": platform.node(),
        "cpu": _cpu(),
        "python": sys.executable,
        "python_version": platform.python_version(),
        "cwd": os.getcwd(),
        "versions": {name: _version(name) for name in names},
        "plugin_importable": importlib.util.find_spec("pytest_lyapax") is not None,
    }


def main(argv: Sequence[str]) -> None:
    """Print the probe's line and, after ``--host-info``, the host's line."""
    print(MARK + json.dumps(probe_jax()), flush=True)
    if argv and argv[0] == HOST_INFO_FLAG:
        print(INFO_MARK + json.dumps(host_info(argv[1:])), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
