"""Warnings that point at the user's line.

A static ``stacklevel`` counts frames, and the frames between a public entry
point and the ``warnings.warn`` call change with every decorator
(``holds_one_blas_thread``, jaxtyping's checks), every helper and every
transformation: so the library's warnings once pointed at
``jaxtyping/_decorator.py`` or at lyapax's own modules. :func:`warn_at_caller` instead
skips every frame of lyapax, of the JAX packages its calls pass through and of
the standard library's wrappers, and points at the first frame left: the line
that called the library.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from pathlib import Path

__all__ = ["warn_at_caller"]

# Packages whose frames lie between a user's call and a lyapax warning: lyapax
# itself, the tracing machinery a jitted or vmapped body runs under, and the
# decorators public functions wear. Only those already imported are looked up.
_PASSED_THROUGH = ("lyapax", "jax", "jaxlib", "equinox", "jaxtyping", "beartype")
# beartype compiles its checking wrappers from source: their frames are named so.
_GENERATED = "<@beartype("


def _skipped() -> tuple[str, ...]:
    """Path prefixes of the frames :func:`warn_at_caller` passes over."""
    prefixes = []
    for name in _PASSED_THROUGH:
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        if file:
            prefixes.append(str(Path(file).resolve().parent) + os.sep)
    # functools.wraps and contextlib.contextmanager wrappers of the library's.
    for wrappers in (functools, contextlib):
        if wrappers.__file__:
            prefixes.append(str(Path(wrappers.__file__).resolve()))
    return (*prefixes, _GENERATED)


def _level() -> int:
    """The ``stacklevel`` that ``warnings.warn``, called in :func:`warn_at_caller`,
    needs to name the first frame outside :func:`_skipped`'s paths (the
    outermost frame when every frame is skipped)."""
    skipped = _skipped()
    frame, level = sys._getframe(2), 2  # 2: the caller of warn_at_caller
    while frame.f_back is not None and _resolved(frame.f_code.co_filename).startswith(
        skipped
    ):
        frame, level = frame.f_back, level + 1
    return level


@functools.lru_cache(maxsize=512)
def _resolved(filename: str) -> str:
    """``filename`` as an absolute path with links resolved (as the prefixes)."""
    if filename.startswith("<"):  # <stdin>, <string>, <frozen ...>: the user's
        return filename
    return str(Path(filename).resolve())


def warn_at_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` attributed to the line that called
    the library (the first frame outside lyapax, JAX and their wrappers)."""
    warnings.warn(message, category, stacklevel=_level())
