"""JAX's persistent compilation cache in the processes that run tests.

``--jax-compile-cache=DIR`` (default: a folder under the report folder, or
the ``JAX_COMPILATION_CACHE_DIR`` the run was started with; ``none``: off)
points JAX's cache (``jax_compilation_cache_dir``) at one folder shared by
every local worker and by later runs, so a second run loads the programs the
first compiled instead of compiling them again.  JAX's key includes the
program, the backend, the x64 mode and the matmul precision, so two labels
never load each other's programs.  JAX writes only programs whose compile
took at least ``jax_persistent_cache_min_compile_time_secs``, 1 s by
default: a CPU compiles most programs in less, so with JAX's default a second
run of the main job on a TPU machine saved the chip's compiles but only a sixth
of the CPU's (measured: 102 s of compiles, then 51.4 s).  The workers therefore
keep every program (threshold 0) unless the run was started with
``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` set, which then stands.

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
MIN_TIME_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"
_MIN_TIME = "jax_persistent_cache_min_compile_time_secs"
FOLDER = "compile-cache"  # under the report folder: the default
OPTION = "--jax-compile-cache"
# Controller, on the session's stash: whether the report folder was there
# before the run (was_there), for tidy_unreported.
REPORT_EXISTED = pytest.StashKey[bool]()


def use(directory: Path | None) -> Callable[[], None]:
    """Point this process's JAX at ``directory`` (None: no persistent cache),
    keeping every program it compiles unless the user chose a threshold;
    returns what puts the environment and JAX's settings back (a run inside
    another process's test, as pytester's in-process runs are)."""
    saved = {name: os.environ.get(name) for name in (ENV, MIN_TIME_ENV)}
    jax_before = _jax_setting()
    min_before = _jax_min_time()
    user_min_time = saved[MIN_TIME_ENV] is not None

    def restore() -> None:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if "jax" in sys.modules:
            import jax

            if _jax_setting() != jax_before:
                jax.config.update("jax_compilation_cache_dir", jax_before)
            if min_before is not None and _jax_min_time() != min_before:
                jax.config.update(_MIN_TIME, min_before)

    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        os.environ[ENV] = str(directory)
        if not user_min_time:
            os.environ[MIN_TIME_ENV] = "0"
    else:
        os.environ.pop(ENV, None)
    if "jax" in sys.modules:
        import jax

        jax.config.update(
            "jax_compilation_cache_dir", None if directory is None else str(directory)
        )
        if directory is not None and not user_min_time:
            jax.config.update(_MIN_TIME, 0.0)
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


def _jax_min_time() -> float | None:
    if "jax" not in sys.modules:
        return None
    import jax

    value = getattr(jax.config, _MIN_TIME, None)
    return float(value) if isinstance(value, int | float) else None


def describe(directory: Path | None) -> str:
    """The run's cache in one line, for the report's header."""
    if directory is None:
        return f"compile cache: off ({OPTION}=none)"
    user = os.environ.get(MIN_TIME_ENV)
    kept = (
        "every program"
        if user is None
        else f"programs that compiled for {user} s or more ({MIN_TIME_ENV})"
    )
    return f"compile cache: {directory} (keeps {kept}; {OPTION}=none turns it off)"
