"""The suite checks the annotations of the public entry points (see
:mod:`support.shape_check`), and a run of the whole folder spreads its files over
worker processes (see :mod:`support.suite_workers`)."""

import pytest
from support import shape_check, suite_workers

shape_check.install()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # Before pytest-xdist's own hook, which turns the count into workers.
    suite_workers.apply_default_workers(config)
