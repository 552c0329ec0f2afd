"""Shared set-up of the per-backend benchmarks.

Run them with ``pytest perf_tests --jax-backend=cpu,gpu`` (the pytest.ini here
makes ``cpu,gpu`` the default); see pytest_lyapax for what the plugin does.
"""

import jax
import pytest


def pytest_configure(config: pytest.Config) -> None:
    # lyapax computes in float64. Every process of the run (the controller and
    # each backend's worker) loads this conftest; enabling x64 does not start a
    # JAX backend, so the controller still never touches a device.
    jax.config.update("jax_enable_x64", True)
