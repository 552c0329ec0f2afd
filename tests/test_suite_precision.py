"""The suite in float64 and in float32: tolerances by the run's precision
(``tests/support/precision.py``) and the markers of what a run cannot check
(``tests/support/markers.py``)."""

from __future__ import annotations

import warnings

import jax
import pytest
from support import markers, precision
from support.precision import OPS, RUN, tol, warnings_as_errors


def test_a_float64_run_keeps_the_float64_tolerance_and_float32_takes_its_own(
    monkeypatch,
):
    # The rule where float64 is native (on a TPU: the next test).
    monkeypatch.setattr(precision.jax, "default_backend", lambda: "cpu")
    with jax.enable_x64(True):
        assert tol(1e-12) == 1e-12 and tol(1e-12, OPS) == 1e-12
        assert precision.float64_run()
    with jax.enable_x64(False):
        assert tol(1e-12) == RUN and tol(1e-12, OPS) == OPS
        assert tol(3e-3) == 3e-3  # never below the float64 tolerance
        assert not precision.float64_run()


def test_emulated_float64_widens_the_float64_tolerance(monkeypatch):
    # A TPU's float64 rounds each add and multiply ~1e-14 relative.
    monkeypatch.setattr(precision.jax, "default_backend", lambda: "tpu")
    with jax.enable_x64(True):
        assert tol(1e-12) == 1e-12 * precision.EMULATED
    with jax.enable_x64(False):
        assert tol(1e-12) == RUN  # float32 is native there


class _Item:
    """What the markers' rule reads of a collected test."""

    def __init__(self, **marks):
        self.nodeid = "test_x.py::test_x"
        self.marks = {
            name: getattr(pytest.mark, name)(*args).mark for name, args in marks.items()
        }
        self.added = []

    def get_closest_marker(self, name):
        return self.marks.get(name)

    def add_marker(self, marker):
        self.added.append(marker.mark)


def _skips(item):
    return [m.kwargs.get("reason", m.args[0] if m.args else "") for m in item.added]


def test_a_float32_run_skips_float64_only_tests_with_their_reason():
    item, plain = _Item(float64_only=("float64's range",)), _Item()
    with jax.enable_x64(True):
        markers.skip_what_this_run_cannot_check([item, plain])
    assert item.added == [] and plain.added == []
    with jax.enable_x64(False):
        markers.skip_what_this_run_cannot_check([item, plain])
    assert _skips(item) == ["float64 only: float64's range"] and plain.added == []
    with pytest.raises(pytest.UsageError, match="float64_only needs a reason"):
        with jax.enable_x64(False):
            markers.skip_what_this_run_cannot_check([_Item(float64_only=())])


def test_a_process_on_a_tpu_skips_what_cannot_run_there(monkeypatch):
    item = _Item(not_on_tpu=("a child process on the CPU",))
    # Both platforms faked: the test itself may run on a TPU.
    monkeypatch.setattr(markers.jax, "default_backend", lambda: "cpu")
    markers.skip_what_this_run_cannot_check([item])
    assert item.added == []
    monkeypatch.setattr(markers.jax, "default_backend", lambda: "tpu")
    markers.skip_what_this_run_cannot_check([item])
    assert _skips(item) == ["not on a TPU: a child process on the CPU"]


def test_an_accelerator_skips_what_holds_on_the_cpu_backend_only(monkeypatch):
    item = _Item(cpu_backend_only=("the OpenBLAS policy",))
    monkeypatch.setattr(markers.jax, "default_backend", lambda: "cpu")
    markers.skip_what_this_run_cannot_check([item])
    assert item.added == []
    for backend in ("tpu", "gpu"):
        item = _Item(cpu_backend_only=("the OpenBLAS policy",))
        monkeypatch.setattr(markers.jax, "default_backend", lambda b=backend: b)
        markers.skip_what_this_run_cannot_check([item])
        assert _skips(item) == [f"on {backend}, not the CPU: the OpenBLAS policy"]


def test_a_machine_without_ip_sockets_skips_what_needs_one(monkeypatch):
    item = _Item(needs_ip_socket=("binds a port",))
    monkeypatch.setattr(markers, "ip_sockets_allowed", lambda: None)
    markers.skip_what_this_run_cannot_check([item])
    assert item.added == []
    monkeypatch.setattr(markers, "ip_sockets_allowed", lambda: "[Errno 97] ...")
    markers.skip_what_this_run_cannot_check([item])
    assert _skips(item) == [
        "no IP socket on this machine ([Errno 97] ...): binds a port"
    ]


def test_warnings_are_errors_but_the_one_every_float32_run_gives():
    message = f"{precision.FLOAT32_WARNING}: exponents will carry ..."
    for x64 in (True, False):
        with jax.enable_x64(x64), warnings_as_errors():
            with pytest.raises(UserWarning, match="another"):
                warnings.warn("another", UserWarning, stacklevel=1)
            if x64:
                with pytest.raises(UserWarning, match="state0 is float32"):
                    warnings.warn(message, UserWarning, stacklevel=1)
            else:
                warnings.warn(message, UserWarning, stacklevel=1)  # ignored
