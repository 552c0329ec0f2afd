"""Fixtures for the pytest_lyapax plugin tests."""

import os

import pytest

pytest_plugins = ["pytester"]

# Variables that an enclosing run (for instance ``pytest tests --jax-backend=cpu``,
# which runs these tests inside a backend worker) would leak into the pytest
# runs these tests start.
LEAKY_VARIABLES = (
    "JAX_PLATFORMS",
    "PYTEST_LYAPAX_LABEL",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
    "PYTEST_ADDOPTS",
)


@pytest.fixture(scope="session")
def clean_environment() -> dict[str, str]:
    """The current environment without the variables of an enclosing run."""
    return {k: v for k, v in os.environ.items() if k not in LEAKY_VARIABLES}


@pytest.fixture(autouse=True)
def _isolated_from_enclosing_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LEAKY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
