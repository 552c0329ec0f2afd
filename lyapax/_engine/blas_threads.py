"""One OpenBLAS thread while a run's programs execute on CPU.

XLA calls LAPACK (OpenBLAS on Linux wheels) for ``jnp.linalg.qr``. OpenBLAS
threads the rank-one updates of a tall frame's QR, and its worker threads,
which wait spinning between calls, compete with XLA's own thread pool for the
cores: measured on 2 cores, a dense Kuramoto run (d = 1000, k = 10, 200 RK4
steps) took 1.43 s with OpenBLAS's default threads and 0.76 s with one, and a
Kuramoto-Sivashinsky run (n = 1024, k = 16) 0.18 s against 0.16 s, 0.49 s
against 0.15 s with another process holding a core (docs/performance.md).

:func:`one_blas_thread` sets every loaded OpenBLAS to one thread for the
duration of a run and restores the previous count after it (nested and
concurrent runs share one setting; the last to leave restores it); setting
the count costs about a microsecond. The libraries are found in
``/proc/self/maps`` (Linux; about 1 ms to read with JAX loaded) twice only:
at the start of the first use and again at its end (the first run loads
LAPACK if nothing had, and compiles, so the second read costs nothing a user
notices, and the next run starts at once); a library loaded later still is
not limited. Elsewhere, or when no OpenBLAS is loaded, it does nothing.

:func:`holds_one_blas_thread` is the one place where the public entry points
that run XLA programs (single runs, sweeps, FTLE fields, delay equations,
covariant vectors, indicators, the master stability function, ...) take this
policy: each is decorated with it, and ``tests/test_blas_policy.py`` checks
that every one of them goes through it.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import jax

from lyapax._engine.validate import under_transformation

__all__ = [
    "ENTRY_POINTS",
    "blas_thread_controls",
    "holds_one_blas_thread",
    "on_cpu",
    "one_blas_thread",
]

# Exported names of OpenBLAS's thread control in the builds wheels ship
# (plain, SciPy's "scipy_" prefix, the 64-bit-integer "64_" suffix).
_SETTERS = (
    "openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "scipy_openblas_set_num_threads64_",
)

_lock = threading.Lock()
_state: dict[str, Any] = {"depth": 0, "saved": [], "scans": 0, "controls": []}
#: Controls of the libraries already opened, by path.
_opened: dict[str, tuple[Any, Any] | None] = {}
#: Scans of the loaded libraries before the list is kept as it is.
_SCANS = 2


def _loaded_openblas() -> list[str]:
    try:
        with open("/proc/self/maps") as maps:
            lines = maps.readlines()
    except OSError:
        return []
    paths = {line.split()[-1] for line in lines if "openblas" in line.lower()}
    return sorted(p for p in paths if p.startswith("/"))


def blas_thread_controls() -> list[tuple[Any, Any]]:
    """``(set_num_threads, get_num_threads)`` of each loaded OpenBLAS (found
    at the first :data:`_SCANS` calls, then kept)."""
    if _state["scans"] >= _SCANS:
        return _state["controls"]
    controls: list[tuple[Any, Any]] = []
    for path in _loaded_openblas():
        if path not in _opened:
            _opened[path] = _open(path)
        control = _opened[path]
        if control is not None:
            controls.append(control)
    _state["scans"] += 1
    _state["controls"] = controls
    return controls


def _open(path: str) -> tuple[Any, Any] | None:
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    for name in _SETTERS:
        setter = getattr(lib, name, None)
        getter = getattr(lib, name.replace("_set_", "_get_"), None)
        if setter is not None and getter is not None:
            setter.restype, getter.restype = None, ctypes.c_int
            setter.argtypes, getter.argtypes = [ctypes.c_int], []
            return setter, getter
    return None


@contextmanager
def one_blas_thread(enabled: bool = True) -> Iterator[None]:
    """Every loaded OpenBLAS on one thread inside the block (see the module
    docstring); nothing when ``enabled`` is false."""
    if not enabled:
        yield
        return
    with _lock:
        if _state["depth"] == 0:
            controls = blas_thread_controls()
            _state["saved"] = [(s, g()) for s, g in controls]
            for setter, _ in controls:
                setter(1)
        _state["depth"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0:
                saved, _state["saved"] = _state["saved"], []
                for setter, count in saved:
                    setter(count)
                if _state["scans"] < _SCANS:
                    # The second scan here, at the end of the first run (which
                    # compiled), not at the start of the next one (~1 ms).
                    blas_thread_controls()


def on_cpu(x: Any) -> bool:
    """Whether the concrete array ``x`` lives on a CPU device (False for a
    tracer or a host value)."""
    devices = getattr(x, "devices", None)
    try:
        return any(d.platform == "cpu" for d in devices()) if devices else False
    except Exception:  # a tracer: no devices to ask
        return False


F = TypeVar("F", bound=Callable[..., Any])

#: Qualified names of the entry points decorated by :func:`holds_one_blas_thread`.
ENTRY_POINTS: set[str] = set()


def holds_one_blas_thread(fn: F) -> F:
    """Decorate a public entry point: on CPU its whole call, tracing,
    compiling and running its programs, runs inside :func:`one_blas_thread`,
    and the array leaves of its result are waited for before OpenBLAS gets
    its threads back (the programs run asynchronously). Inside a caller's
    ``jit``/``vmap``/``grad`` nothing runs yet, and it does nothing; elsewhere
    than on CPU neither. Costs ~5 us a call."""

    @functools.wraps(fn)
    def entry(*args: Any, **kwargs: Any) -> Any:
        if not _runs_on_cpu():
            return fn(*args, **kwargs)
        # Looked up at call time: tests replace the policy to see it entered.
        with one_blas_thread():
            result = fn(*args, **kwargs)
            _wait_for(result)
        return result

    ENTRY_POINTS.add(f"{fn.__module__}.{fn.__qualname__}")
    return entry  # type: ignore[return-value]


def _runs_on_cpu() -> bool:
    """The call's programs run now (no trace of a caller's) on a CPU default
    device."""
    if under_transformation():
        return False
    device = jax.config.jax_default_device  # type: ignore[attr-defined]
    if device is not None:
        return getattr(device, "platform", device) == "cpu"
    return jax.default_backend() == "cpu"


def _wait_for(result: Any) -> None:
    for leaf in jax.tree.leaves(result):
        if isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer):
            leaf.block_until_ready()
