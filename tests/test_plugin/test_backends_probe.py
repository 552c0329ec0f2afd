"""Reading a backend probe (pytest_lyapax/backends/probe.py)."""

from pytest_lyapax.backends.labels import (
    FALLBACK,
    OK,
    UNAVAILABLE,
    Backend,
)
from pytest_lyapax.backends.probe import interpret


def probe_line(**payload):
    import json

    return "PYTEST_LYAPAX_PROBE " + json.dumps(payload)


def test_probe_translates_the_empty_cuda_assertion():
    out = probe_line(ok=False, error_type="AssertionError", error="", jax_version="0")
    result = interpret(Backend("gpu", "cuda"), 0, out, "")
    assert result.status == UNAVAILABLE
    assert (
        "'cuda'" in result.reason and "AssertionError with no message" in result.reason
    )
    assert "jax" in result.reason and "/dev/nvidia" in result.reason


def test_probe_detects_a_silent_fallback():
    out = probe_line(
        ok=True, backend="cpu", device="cpu", device_count=1, jax_version="0"
    )
    result = interpret(Backend("gpu", "cuda,cpu"), 0, out, "")
    assert result.status == FALLBACK
    assert "silent fallback" in result.reason
    assert "--jax-backend-platform=gpu=cuda" in result.reason


def test_probe_ok_and_crashed():
    out = probe_line(
        ok=True, backend="cpu", device="cpu", device_count=1, jax_version="0"
    )
    assert interpret(Backend("cpu", "cpu"), 0, out, "").status == OK
    crashed = interpret(Backend("cpu", "cpu"), -11, "", "Segmentation fault\n")
    assert crashed.status == UNAVAILABLE
    assert "exited with code -11" in crashed.reason and "Segmentation" in crashed.reason
