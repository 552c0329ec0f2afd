"""Backends on other hosts: parsing ``--jax-backend-host`` and the gateway specs.

``--jax-backend-host LABEL=SPEC`` binds a backend label to an execnet gateway
spec, the same specs pytest-xdist's ``--tx`` takes:

``ssh=me@server//python=/opt/venv/bin/python//chdir=/srv/checkout``
    a fresh interpreter over ssh;
``socket=192.168.1.5:8888//chdir=/srv/checkout``
    an execnet socket server (``execnet/script/socketserver.py``) on the host;
``popen//python=/other/venv/bin/python//chdir=/path``
    another interpreter on this machine (a second environment).

``python=`` is the interpreter the backend's worker runs (for ``socket=`` the
server's own by default), ``chdir=`` the checkout it runs in (the tests are
found there, under the same relative paths as here); ``env:NAME=VALUE``,
``nice=`` and ``dont_write_bytecode`` pass through.  ``JAX_PLATFORMS`` is the
plugin's to set, ``via``/``id`` are the plugin's too, and no rsync is done:
the host must already hold the code (the code-identity check says when it
does not).  Everything here is pure; ``remote.py`` makes the connections.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from pytest_lyapax.backends.labels import LABEL_PATTERN, Backend, HostSpec

OPTION = "--jax-backend-host"
KINDS = ("ssh", "socket", "popen")
# Keys a spec may carry besides its kind (execnet XSpec keys).
PASS_KEYS = ("python", "chdir", "nice", "dont_write_bytecode", "ssh_config")
RESERVED_ENV = ("JAX_PLATFORMS",)


def _fail(raw: str, problem: str) -> pytest.UsageError:
    return pytest.UsageError(
        f"{OPTION}: {raw!r}: {problem}. Write LABEL=SPEC with an execnet gateway "
        "spec, e.g. gpu=ssh=me@server//python=/opt/venv/bin/python//chdir=/srv/"
        "checkout, cpu2=socket=127.0.0.1:8888 or cpu2=popen//python=/venv/bin/python"
    )


def parse_host_spec(raw: str, text: str) -> HostSpec:
    """Parse one gateway spec (``raw`` is the whole option value, for messages)."""
    kinds: dict[str, str] = {}
    values: dict[str, str | bool] = {}
    env: dict[str, str] = {}
    for part in text.split("//"):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not key:
            raise _fail(raw, "empty part in the spec (two '//' in a row?)")
        if key.startswith("env:"):
            name = key[4:]
            if not name:
                raise _fail(raw, "env: needs a variable name (env:NAME=VALUE)")
            if name in RESERVED_ENV:
                raise _fail(
                    raw,
                    f"{name} is set by the plugin from the backend's platform "
                    "(--jax-backend-platform); remove it from the spec",
                )
            env[name] = value
        elif key in KINDS:
            kinds[key] = value
        elif key in PASS_KEYS:
            values[key] = value if sep else True
        elif key in ("via", "id", "rsync", "execmodel"):
            raise _fail(raw, f"'{key}' is chosen by the plugin; remove it")
        else:
            allowed = ", ".join([*KINDS, *PASS_KEYS, "env:NAME"])
            raise _fail(raw, f"unknown key {key!r} (allowed: {allowed})")
    if len(kinds) != 1:
        raise _fail(raw, "give exactly one of ssh=DEST, socket=HOST:PORT, popen")
    kind, address = next(iter(kinds.items()))
    if kind == "socket":
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise _fail(raw, f"socket={address!r} is not HOST:PORT")
    elif kind == "ssh" and not address.strip():
        raise _fail(raw, "ssh= needs a destination (user@host)")
    elif kind == "popen":
        if address:
            raise _fail(raw, "popen takes no value (popen//python=...)")
        if not isinstance(values.get("python"), str) or not values["python"]:
            raise _fail(
                raw,
                "popen without python= is this machine's own interpreter; bind "
                "another environment's python, or use --jax-backend-platform",
            )
    for key in ("python", "chdir", "nice", "ssh_config"):
        if values.get(key) is True or values.get(key) == "":
            raise _fail(raw, f"{key}= needs a value")
    return HostSpec(
        text=text,
        kind=kind,
        address=address,
        python=_str(values.get("python")),
        chdir=_str(values.get("chdir")),
        nice=_str(values.get("nice")),
        dont_write_bytecode=bool(values.get("dont_write_bytecode")),
        ssh_config=_str(values.get("ssh_config")),
        env=env,
    )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def parse_host_bindings(values: Sequence[str]) -> dict[str, HostSpec]:
    """Parse ``LABEL=SPEC`` entries (``--jax-backend-host``, ini key too)."""
    hosts: dict[str, HostSpec] = {}
    for raw in values:
        label, sep, text = raw.strip().partition("=")
        label = label.strip().lower()
        if not sep or not label or not text.strip():
            raise _fail(raw, "not LABEL=SPEC")
        if not LABEL_PATTERN.match(label):
            raise _fail(
                raw,
                f"label {label!r} must start with a lowercase letter and use only "
                "a-z, 0-9 and _",
            )
        spec = parse_host_spec(raw, text.strip())
        if label in hosts and hosts[label] != spec:
            raise pytest.UsageError(
                f"{OPTION}: backend {label!r} is bound to two hosts "
                f"({hosts[label].text!r} and {spec.text!r}); give it once"
            )
        hosts[label] = spec
    return hosts


def bind_hosts(
    backends: Sequence[Backend], hosts: Mapping[str, HostSpec]
) -> tuple[Backend, ...]:
    """Attach each host to its backend; a host for an unrequested label is an error."""
    labels = {b.label for b in backends}
    unknown = sorted(set(hosts) - labels)
    if unknown:
        raise pytest.UsageError(
            f"{OPTION}: backend {unknown[0]!r} is bound to a host but not requested; "
            f"add it to --jax-backend (requested: {', '.join(sorted(labels))}); a "
            f"new label also needs --jax-backend-platform={unknown[0]}=PLATFORM"
        )
    return tuple(
        replace(b, host=hosts[b.label]) if b.label in hosts else b for b in backends
    )


def parse_timeout(text: str, option: str) -> float:
    """A positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value != value or value == float("inf"):
        raise pytest.UsageError(
            f"{option}: {text!r} is not a positive number of seconds; e.g. {option}=60"
        )
    return value


def typed_xdist_error(flags: Sequence[str]) -> pytest.UsageError:
    """The usage error for ``--tx``/``-n`` typed together with ``--jax-backend``."""
    return pytest.UsageError(
        f"{flags[0]} cannot be combined with --jax-backend: the plugin starts one "
        "xdist worker per backend itself. To run a backend on another host, bind "
        "the host to its label instead of typing --tx, e.g. --jax-backend=cpu,gpu "
        "--jax-backend-host=gpu=ssh=me@server//python=/opt/venv/bin/python//chdir="
        "/srv/checkout (socket=HOST:PORT and popen//python=PATH work too); -n 0 "
        "runs everything in this process"
    )
