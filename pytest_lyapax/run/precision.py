"""Precision as an axis (``--jax-precision``): which float dtype each label's
worker computes in, set before JAX starts there.

``float32`` sets every label, ``tpu:float32`` one label, ``native`` float64
where the platform has it natively (cpu, gpu) and float32 elsewhere (a TPU);
two dtypes for one label (``float64,float32``, or ``cpu:float64,cpu:float32``)
make twin labels, as the device counts do: the first keeps the label, each
further one runs as ``LABEL_<dtype>``.  The dtype reaches the worker as
``JAX_ENABLE_X64`` among the label's own variables.

Without ``--jax-backend`` there is no label's worker to start: ``float32``
or ``float64`` then sets this process's JAX (and that of each worker of a
plain pytest-xdist run, which reads the same command line), after the
initial conftests (one may enable x64 for a suite) and before any test
module is imported; the plugin sets it again before each collector and each
test (plugin.py), so that a module or a test that flips the global flag
does not carry it into the next one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from pytest_lyapax.backends.labels import LABEL_ALIASES, Backend
from pytest_lyapax.report.precision import (
    DTYPES,
    EMULATED_FLOAT64,
    FLOAT64,
    NATIVE_FLOAT64,
    native_dtype,
)

PRECISION_OPTION = "--jax-precision"
NATIVE = "native"
X64_ENV = "JAX_ENABLE_X64"
_VALUES = (*DTYPES, NATIVE)


def process_dtype(text: str) -> str:
    """The one dtype ``--jax-precision=text`` asks of a process that runs
    no backend label; ``pytest.UsageError`` naming the value for anything
    but ``float32`` or ``float64`` (``native``, a label's value and two
    dtypes need the labels of ``--jax-backend``)."""
    value = text.strip().lower()
    if value not in DTYPES:
        raise pytest.UsageError(
            f"{PRECISION_OPTION}={text}: without --jax-backend it sets the dtype "
            f"of this process's JAX: float32 or float64 ({NATIVE}, a backend's "
            "value and several values need --jax-backend=LIST)"
        )
    return value


def set_process_dtype(dtype: str) -> None:
    """This process's JAX computes in ``dtype`` from now on (x64 on for
    float64); nothing is done when it already does."""
    import jax

    x64 = dtype == FLOAT64
    if bool(jax.config.jax_enable_x64) != x64:  # type: ignore[attr-defined]
        jax.config.update("jax_enable_x64", x64)


def twin_label(label: str, dtype: str) -> str:
    """The label of ``label``'s twin computing in ``dtype``."""
    return f"{label}_{dtype}"


def _usage(where: str, text: str, why: str) -> pytest.UsageError:
    return pytest.UsageError(
        f"{where}={text}: {why}; write it like {PRECISION_OPTION}=float32, "
        f"{PRECISION_OPTION}=tpu:float32 or {PRECISION_OPTION}=float64,float32 "
        f"(values: {', '.join(_VALUES)})"
    )


def parse_precision(
    text: str, backends: Sequence[Backend], where: str = PRECISION_OPTION
) -> dict[str, tuple[str, ...]]:
    """The dtypes asked of each label, in the order given (a label not
    named, with no entry for every label, keeps JAX's default: absent).

    Raises ``pytest.UsageError`` naming the option and value for an unknown
    value, an unrequested label or an empty list.
    """
    labels = [b.label for b in backends]
    every: list[str] = []
    per_label: dict[str, list[str]] = {}
    entries = [e.strip().lower() for e in text.split(",")]
    if not any(entries):
        raise _usage(where, text, "names no precision")
    for entry in entries:
        label, colon, value = entry.rpartition(":")
        value, label = value.strip(), label.strip()
        label = LABEL_ALIASES.get(label, label)  # cuda:float32 is gpu's
        if value not in _VALUES:
            raise _usage(where, text, f"{value!r} is not a precision")
        if colon and label not in labels:
            raise _usage(
                where,
                text,
                f"backend {label!r} is not requested (requested: {', '.join(labels)})",
            )
        chosen = per_label.setdefault(label, []) if colon else every
        if value not in chosen:
            chosen.append(value)
    out: dict[str, tuple[str, ...]] = {}
    for b in backends:
        values = per_label.get(b.label) or every
        dtypes = [native_dtype(b.expected) if v == NATIVE else v for v in values]
        if dtypes:
            out[b.label] = tuple(dict.fromkeys(dtypes))
    return out


def _check_platform(backend: Backend, dtype: str, where: str, text: str) -> None:
    """float64 asked of a platform that has no float64 at all, or of a label
    whose own variables already turn x64 the other way."""
    platform = backend.expected
    if dtype == FLOAT64 and platform not in (*NATIVE_FLOAT64, *EMULATED_FLOAT64):
        raise _usage(where, text, f"{backend.label!r} ({platform}) has no float64")
    own = dict(backend.env).get(X64_ENV)
    if own is not None and own.strip().lower() in ("0", "1", "true", "false"):
        wanted = dtype == FLOAT64
        if (own.strip().lower() in ("1", "true")) != wanted:
            raise _usage(
                where,
                text,
                f"--jax-backend-env sets {X64_ENV}={own} for {backend.label!r}, "
                f"which contradicts {dtype}; give the precision once",
            )


def add_precisions(
    text: str | None,
    backends: Sequence[Backend],
    where: str = PRECISION_OPTION,
    env_wins: bool = False,
) -> tuple[Backend, ...]:
    """Each backend with its dtype set (``JAX_ENABLE_X64`` among its
    variables), and a twin label after it for each further dtype.

    ``env_wins`` (the ini's default, not the command line): a label whose
    own variables (``--jax-backend-env``) set ``JAX_ENABLE_X64`` keeps them.
    """
    if text is None:
        return tuple(backends)
    asked = parse_precision(text, backends, where)
    labels = {b.label for b in backends}
    out: list[Backend] = []
    for b in backends:
        dtypes = asked.get(b.label, ())
        if env_wins and X64_ENV in dict(b.env):
            dtypes = ()
        for i, dtype in enumerate(dtypes):
            _check_platform(b, dtype, where, text)
            label = b.label if i == 0 else twin_label(b.label, dtype)
            if i and label in labels:
                raise _usage(
                    where,
                    text,
                    f"the label {label!r} it would add is already requested; "
                    "rename that backend",
                )
            env = {**dict(b.env), X64_ENV: "1" if dtype == FLOAT64 else "0"}
            out.append(replace(b, label=label, env=tuple(env.items()), precision=dtype))
        if not dtypes:
            out.append(b)
    return tuple(out)


def refused(backend: Backend, info: Mapping[str, Any]) -> str | None:
    """Why the label's platform refused the dtype asked of it: its probe,
    run with the label's variables, computed in another dtype (None: it
    did not, or nothing was asked or found)."""
    found = info.get("precision")
    dtype = found.get("dtype") if isinstance(found, Mapping) else None
    if (
        not backend.precision
        or not isinstance(dtype, str)
        or dtype == backend.precision
    ):
        return None
    return (
        f"{PRECISION_OPTION}: {backend.label!r} asked {backend.precision}, and its "
        f"platform ({backend.expected}) computes in {dtype} with {X64_ENV}="
        f"{dict(backend.env).get(X64_ENV)}; ask {dtype} of it"
    )
