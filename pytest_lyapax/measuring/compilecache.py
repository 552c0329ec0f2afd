"""JAX's persistent compilation cache in the processes that run tests.

``--jax-compile-cache=DIR`` (default: a folder under the report folder, or
the ``JAX_COMPILATION_CACHE_DIR`` the run was started with; ``none``: off)
points JAX's cache (``jax_compilation_cache_dir``) at one folder shared by
every local worker and by later runs, so a second run loads the programs the
first compiled instead of compiling them again.  JAX's key includes the
program, the backend, the x64 mode and the matmul precision, so two labels
never load each other's programs.  JAX writes only programs whose compile
took at least ``jax_persistent_cache_min_compile_time_secs`` (1 s by
default: the float64 programs of a TPU take a minute, a CPU's milliseconds),
left as JAX sets it.

:func:`use` runs in the worker before its first compile: before JAX is
imported it sets the environment JAX reads when it starts, after that JAX's
configuration.  Each warm-up records the cache's lookups and hits
(``measure.py``: ``extra_info["warmup"]["cache"]``).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ENV = "JAX_COMPILATION_CACHE_DIR"
FOLDER = "compile-cache"  # under the report folder: the default
OPTION = "--jax-compile-cache"
# Controller, on the session's stash: whether the report folder was there
# before the run (was_there), for tidy_unreported.
REPORT_EXISTED = pytest.StashKey[bool]()


def use(directory: Path | None) -> Callable[[], None]:
    """Point this process's JAX at ``directory`` (None: no persistent cache);
    returns what puts the environment and JAX's setting back (a run inside
    another process's test, as pytester's in-process runs are)."""
    before = os.environ.get(ENV)
    jax_before = _jax_setting()

    def restore() -> None:
        if before is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = before
        if "jax" in sys.modules and _jax_setting() != jax_before:
            import jax

            jax.config.update("jax_compilation_cache_dir", jax_before)

    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        os.environ[ENV] = str(directory)
    else:
        os.environ.pop(ENV, None)
    if "jax" in sys.modules:
        import jax

        jax.config.update(
            "jax_compilation_cache_dir", None if directory is None else str(directory)
        )
    return restore


def was_there(report_dir: Path | None) -> bool:
    """Whether ``report_dir`` exists: asked by the controller before the
    workers start, for :func:`tidy_unreported` at the end."""
    return report_dir is not None and report_dir.exists()


def tidy_unreported(
    directory: Path | None, report_dir: Path | None, report_existed: bool
) -> None:
    """A run that measured nothing writes no report, and so leaves no report
    folder behind either: the default cache folder the workers filled inside
    a report folder this run created goes, with that folder if it is then
    empty.  A folder given by the user, or a report folder that was there
    before (its cache serves the next run), is kept."""
    if report_existed or directory is None or report_dir is None:
        return
    if directory != report_dir / FOLDER or not directory.is_dir():
        return
    shutil.rmtree(directory, ignore_errors=True)
    try:
        report_dir.rmdir()
    except OSError:  # not empty: something else was put there
        pass


def _jax_setting() -> str | None:
    if "jax" not in sys.modules:
        return None
    import jax

    value = getattr(jax.config, "jax_compilation_cache_dir", None)
    return value if isinstance(value, str) else None


def describe(directory: Path | None) -> str:
    """The run's cache in one line, for the report's header."""
    if directory is None:
        return f"compile cache: off ({OPTION}=none)"
    return (
        f"compile cache: {directory} (JAX keeps programs that compiled for 1 s or "
        f"more; {OPTION}=none turns it off)"
    )
