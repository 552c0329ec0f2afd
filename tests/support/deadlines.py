"""Deadlines for the plugin tests' waits, scaled for busy machines.

Every wait of these tests on a subprocess, a worker, a socket or a file is
bounded by a deadline that ``LYAPAX_TEST_TIMEOUT_FACTOR`` multiplies (default
1: the deadlines hold with the CI runner's two cores taken by busy loops,
``.ci/under_load``); a slower machine sets, e.g., 3.  Test modules import
this module by name (their folder is on ``sys.path``, like the conftest's).
"""

import os
import time
from collections.abc import Callable
from typing import Any

TIMEOUT_FACTOR_ENV = "LYAPAX_TEST_TIMEOUT_FACTOR"


def timeout_s(seconds: float) -> float:
    """``seconds`` times the factor in ``LYAPAX_TEST_TIMEOUT_FACTOR``."""
    return seconds * float(os.environ.get(TIMEOUT_FACTOR_ENV) or 1.0)


def wait_until(condition: Callable[[], Any], seconds: float, what: str) -> Any:
    """Poll ``condition`` until it returns something true, and return that;
    an AssertionError naming ``what`` after ``timeout_s(seconds)``."""
    limit = timeout_s(seconds)
    deadline = time.monotonic() + limit
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what}: not within {limit:g} s ({TIMEOUT_FACTOR_ENV})"
            )
        time.sleep(0.05)
    return value
