"""The ``jax_results`` fixture's recorder: results a test computed, made ready
to travel from its backend's worker to the controller.

``jax_results.record(name, value, stderr=None)`` flattens ``value`` (a pytree
of arrays and scalars) into leaves with their pytree path, shape and dtype,
copied to the host at once.  A leaf of at most :data:`INLINE_BYTES` bytes
travels in the test's report as JSON numbers (exact: a float64 prints as its
shortest round-tripping repr); a larger one is written to
``<report dir>/results/<sha256>.npy`` and only its path, shape,
dtype, sha256 and min/max/mean travel.  The controller compares the entries
(:mod:`pytest_lyapax.report.agreement`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_lyapax.report.agreement import BENCHMARK, RESULT

# The attribute of a test's call report that carries its recorded results.
RESULTS_ATTR = "pytest_lyapax_results"
INLINE_BYTES = 64 * 1024
# A benchmark's return value larger than this is not recorded (not compared):
# large-size benchmarks would otherwise fill the report directory.
MAX_BENCHMARK_BYTES = 16 * 1024 * 1024
# Set by the worker: where large leaves go (None: nowhere, kept inline).
STORE_KEY = pytest.StashKey["Path | None"]()
_RECORDER_KEY = pytest.StashKey["ResultsRecorder"]()
# The benchmark fixture's attribute holding its call's return value.
BENCHMARK_RESULT_ATTR = "_pytest_lyapax_result"
# Dtypes numpy cannot save or JSON cannot hold exactly as they are: stored as
# float64 (exact for these formats).
_WIDENED = ("bfloat16", "float16")


def _host_array(leaf: Any, what: str) -> Any:
    import numpy as np

    array = np.asarray(leaf)
    name = array.dtype.name
    if array.dtype.kind not in "biufc" and name not in _WIDENED:
        raise TypeError(
            f"jax_results.record: {what} has dtype {name!r}; allowed are numbers "
            "(bool, integer, float, complex, bfloat16) and arrays of them"
        )
    return array


def _flatten(value: Any, what: str) -> list[tuple[str, Any]]:
    import jax

    leaves, _ = jax.tree_util.tree_flatten_with_path(value)
    return [
        (
            jax.tree_util.keystr(path),
            _host_array(leaf, f"{what}{jax.tree_util.keystr(path)}"),
        )
        for path, leaf in leaves
    ]


def _summary(array: Any) -> dict[str, float | None]:
    import numpy as np

    values = np.asarray(
        array, dtype=np.complex128 if array.dtype.kind == "c" else float
    )
    finite = values[np.isfinite(values)].real
    if not finite.size:
        return {"min": None, "max": None, "mean": None}
    return {
        "min": float(finite.min()),
        "max": float(finite.max()),
        "mean": float(finite.mean()),
    }


def _inline(array: Any) -> Any:
    import numpy as np

    if array.dtype.name in _WIDENED:
        array = array.astype(np.float64)
    if array.dtype.kind == "c":
        array = np.stack([array.real, array.imag], axis=-1)
    return array.tolist()


def _to_file(array: Any, store: Path) -> dict[str, Any]:
    import numpy as np

    saved = array.astype(np.float64) if array.dtype.name in _WIDENED else array
    saved = np.ascontiguousarray(saved)
    digest = hashlib.sha256(
        f"{array.dtype.name}{array.shape}".encode() + saved.tobytes()
    ).hexdigest()
    store.mkdir(parents=True, exist_ok=True)
    path = store / f"{digest}.npy"
    if not path.exists():
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, saved)
        tmp.replace(path)
    return {"path": str(path), "sha256": digest, **_summary(array)}


def encode_value(
    name: str, value: Any, stderr: Any, store: Path | None, kind: str = RESULT
) -> dict[str, Any]:
    """One recorded name as its JSON entry (see the module doc).

    Raises:
        TypeError: a leaf that is not numeric.
        ValueError: ``stderr`` whose pytree structure differs from ``value``'s
            or whose leaves do not broadcast to the value's shapes.
    """
    import numpy as np

    leaves = _flatten(value, "value")
    errors: list[Any] = [None] * len(leaves)
    if stderr is not None:
        flat = _flatten(stderr, "stderr")
        paths = [p for p, _ in leaves]
        if [p for p, _ in flat] != paths:
            raise ValueError(
                f"jax_results.record({name!r}): stderr has leaves "
                f"{[p for p, _ in flat]}, value has {paths}; give stderr the "
                "same pytree structure as value"
            )
        for i, ((path, array), (_, err)) in enumerate(zip(leaves, flat, strict=True)):
            try:
                err = np.broadcast_to(np.asarray(err, dtype=float), array.shape)
            except ValueError:
                raise ValueError(
                    f"jax_results.record({name!r}): stderr{path} has shape "
                    f"{np.shape(err)}, which does not broadcast to the value's "
                    f"{array.shape}"
                ) from None
            errors[i] = err.tolist()
    out = []
    for (path, array), err in zip(leaves, errors, strict=True):
        entry: dict[str, Any] = {
            "path": path,
            "shape": list(array.shape),
            "dtype": array.dtype.name,
            "stderr": err,
        }
        if array.nbytes <= INLINE_BYTES:
            entry["data"] = _inline(array)
        elif store is not None:
            entry["file"] = _to_file(array, store)
        else:
            entry["data"] = None  # not compared anywhere: one backend only
            entry["file"] = _summary(array)
        out.append(entry)
    return {"name": name, "kind": kind, "leaves": out}


class ResultsRecorder:
    """What the ``jax_results`` fixture returns: ``record`` results of this test."""

    def __init__(self, store: Path | None) -> None:
        self.store = store
        self.entries: list[dict[str, Any]] = []

    def record(self, name: str, value: Any, *, stderr: Any = None) -> None:
        """Record ``value`` (a pytree of arrays/scalars) under ``name``, to be
        compared with the same name recorded by this test on the reference
        backend.  ``stderr``: standard errors of a statistical estimate, the
        same pytree as ``value`` (leaves broadcastable to its shapes).

        Raises:
            TypeError: ``name`` not a non-empty string, or a non-numeric leaf.
            ValueError: ``name`` recorded twice in this test, or a ``stderr``
                that does not fit ``value``.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"jax_results.record: name must be a non-empty string, got {name!r}"
            )
        if any(e["name"] == name for e in self.entries):
            raise ValueError(
                f"jax_results.record: {name!r} was already recorded in this test; "
                "give each result its own name"
            )
        self.entries.append(encode_value(name, value, stderr, self.store))


def recorder_for(item: pytest.Item) -> ResultsRecorder:
    """The item's recorder (one per test)."""
    recorder = item.stash.get(_RECORDER_KEY, None)
    if recorder is None:
        recorder = ResultsRecorder(item.config.stash.get(STORE_KEY, None))
        item.stash[_RECORDER_KEY] = recorder
    return recorder


def _nbytes(value: Any) -> int:
    """Bytes of a pytree's leaves, read without copying them to the host."""
    import jax

    return sum(
        int(getattr(leaf, "nbytes", 8)) for leaf in jax.tree_util.tree_leaves(value)
    )


def payload_of(
    item: pytest.Item, tolerance: dict[str, Any], benchmark: bool
) -> str | None:
    """The item's recorded results (and, with ``benchmark``, its benchmark's
    return value under the name ``benchmark``) as its report's JSON string."""
    recorder = item.stash.get(_RECORDER_KEY, None)
    entries = list(recorder.entries) if recorder is not None else []
    fixture = (getattr(item, "funcargs", None) or {}).get("benchmark")
    if benchmark and fixture is not None and hasattr(fixture, BENCHMARK_RESULT_ATTR):
        value = getattr(fixture, BENCHMARK_RESULT_ATTR)
        delattr(fixture, BENCHMARK_RESULT_ATTR)  # the device buffers go with it
        store = item.config.stash.get(STORE_KEY, None)
        entry = None
        try:
            if _nbytes(value) <= MAX_BENCHMARK_BYTES:
                entry = encode_value("benchmark", value, None, store, BENCHMARK)
        except (TypeError, ValueError):
            pass  # a benchmark returning something not numeric: not compared
        if entry is not None and entry["leaves"]:
            entries.append(entry)
    if not entries:
        return None
    return json.dumps({"tolerance": tolerance, "entries": entries}, allow_nan=True)
