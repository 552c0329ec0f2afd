"""What a run of the suite cannot check, marked with the reason
(docs/testing.md, "Running the test suite on a TPU").

- ``@pytest.mark.float64_only("why")``: the test checks what only float64
  has (bits or digits of a float64 computation, float64's range, a float64
  or mixed-precision feature, an error below float32's resolution); a
  float32 run (``--jax-precision=float32``) skips it with the reason.
- ``@pytest.mark.not_on_tpu("why")``: the test cannot run in a process that
  holds a TPU (the chip admits one process: a child process computes on
  the CPU there); skipped there with the reason.
- ``@pytest.mark.cpu_backend_only("why")``: the test checks what lyapax does
  where JAX's default backend is the CPU (its OpenBLAS thread policy);
  skipped where it is an accelerator, with the reason.
- ``@pytest.mark.needs_ip_socket("why")``: the test opens an IP socket,
  which some machines allow none of, not even on loopback (the lent TPU's);
  skipped there with the reason.

The skips are decided once the tests are collected (the run's dtype is
fixed before that; the platform and the sockets are asked only when a
collected test carries their marker).
"""

from __future__ import annotations

import jax
import pytest

from pytest_lyapax.run.sandbox import ip_sockets_allowed
from support.precision import float64_run

NAMES = ("float64_only", "not_on_tpu", "cpu_backend_only", "needs_ip_socket")
LINES = (
    "float64_only(reason): checks what only float64 has; skipped in a "
    "float32 run (--jax-precision=float32) with the reason",
    "not_on_tpu(reason): cannot run in a process that holds a TPU; skipped "
    "there with the reason",
    "cpu_backend_only(reason): checks what holds where JAX's default backend "
    "is the CPU; skipped on an accelerator with the reason",
    "needs_ip_socket(reason): opens an IP socket; skipped on a machine that "
    "allows none, with the reason",
)


def skip_what_this_run_cannot_check(items: list[pytest.Item]) -> None:
    """Mark skipped, with the marker's reason, each of ``items`` whose
    markers say this run cannot check it (the suite's
    ``pytest_collection_modifyitems``)."""
    asked: dict[str, str | None] = {}

    def why_not(name: str) -> str | None:
        if name not in asked:
            if name == "float64_only":
                asked[name] = None if float64_run() else "float64 only"
            elif name == "not_on_tpu":
                tpu = jax.default_backend() == "tpu"
                asked[name] = "not on a TPU" if tpu else None
            elif name == "cpu_backend_only":
                backend = jax.default_backend()
                asked[name] = None if backend == "cpu" else f"on {backend}, not the CPU"
            else:
                none = ip_sockets_allowed()
                asked[name] = f"no IP socket on this machine ({none})" if none else None
        return asked[name]

    for item in items:
        for name in NAMES:
            marker = item.get_closest_marker(name)
            if marker is not None and (why := why_not(name)) is not None:
                item.add_marker(pytest.mark.skip(f"{why}: {_reason(marker, item)}"))
                break


def _reason(marker: pytest.Mark, item: pytest.Item) -> str:
    reason = marker.args[0] if marker.args else marker.kwargs.get("reason")
    if not reason:
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.{marker.name} needs a reason"
        )
    return str(reason)
