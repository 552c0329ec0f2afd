"""The suite checks the annotations of the public entry points (see
:mod:`support.shape_check`), a run of the whole folder spreads its files over
worker processes (see :mod:`support.suite_workers`), and a run skips what
it cannot check, a float32 run (``--jax-precision=float32``) what only
float64 can (see :mod:`support.markers` and :mod:`support.precision`)."""

import pytest
from support import markers, precision, shape_check, suite_workers

shape_check.install()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # Before pytest-xdist's own hook, which turns the count into workers.
    suite_workers.apply_default_workers(config)


def pytest_configure(config: pytest.Config) -> None:
    for line in markers.LINES:
        config.addinivalue_line("markers", line)
    if not precision.float64_run():
        # What every float32 run says, and what this run asked for.
        warning = f"ignore:{precision.FLOAT32_WARNING}:UserWarning"
        config.addinivalue_line("filterwarnings", warning)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    markers.skip_what_this_run_cannot_check(items)
