"""Where a library warning points: at the line that called the library,
through every decorator, helper and transformation in between."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any

from support import shape_check


def _wrapper_line() -> tuple[Path, int]:
    """The line of the suite's annotation check that calls an entry point
    (``shape_check.shape_checked``): the caller a warning names when the
    test called a checked entry point, as a user's own wrapper would be."""
    lines, first = inspect.getsourcelines(shape_check.shape_checked)
    at = next(i for i, line in enumerate(lines) if "return typed(" in line)
    return Path(shape_check.__file__).resolve(), first + at


def assert_warned_here(record: Any, match: str) -> None:
    """The warnings in ``record`` (``pytest.warns(...) as record`` or a
    ``catch_warnings(record=True)`` list) whose message matches ``match``
    exist and all name the calling test's file (or, for an entry point the
    suite checks, the check's call of it).

    Raises:
        AssertionError: none matched, or one names another file.
    """
    here = Path(sys._getframe(1).f_code.co_filename).resolve()
    found = [w for w in record if re.search(match, str(w.message))]
    assert found, f"no warning matching {match!r} in {[str(w.message) for w in record]}"
    wrapper = _wrapper_line()
    elsewhere = [
        f"{w.filename}:{w.lineno}"
        for w in found
        if Path(w.filename).resolve() != here
        and (Path(w.filename).resolve(), w.lineno) != wrapper
    ]
    assert not elsewhere, f"{match!r} warned at {elsewhere}, not in {here.name}"
