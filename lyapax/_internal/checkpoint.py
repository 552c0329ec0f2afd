"""Checkpoint files: NumPy ``.npz`` archives written atomically, read as untrusted.

A checkpoint file is a plain ``.npz`` archive (``numpy.load(path,
allow_pickle=False)`` reads it without lyapax). Every file holds a header:

- ``format`` = ``"lyapax-checkpoint"``, ``format_version`` (int,
  :data:`FORMAT_VERSION`), ``lyapax_version`` (str), ``kind`` (what wrote it:
  ``"run_until_converged"``, ``"run_history_segment"`` or ``"sweep_chunk"``);
- ``structure``: SHA-256 of the problem's computation (the jaxpr of its step
  or of the sweep's program: operations, shapes, dtypes, constants written
  into the code), ``values``: SHA-256 of its numbers (parameters, initial
  state, ``dt``, constants held as arrays), ``settings``: the run's settings
  as JSON (``k``, ``renorm_every``, ...);

and then the arrays of its kind (documented in docs/long_runs.md).
Writing goes to a temporary file in the same folder, flushed to disk, then
renamed over the target (``os.replace``): a reader sees the old complete file
or the new complete file, never a part. Temporary files carry their writer's
process id and host (``.NAME.PID@HOST.tmp``): the next write removes those of
dead processes on this host (a writer killed mid-write), never another live
process's. Reading loads with
``allow_pickle=False`` and checks the header, every key, shape and dtype
before anything is used; a file that fails is refused with
:class:`CheckpointError` naming it, and left as it is.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "CheckpointError",
    "Identity",
    "check_writable",
    "fingerprint",
    "host_name",
    "previous",
    "read",
    "read_versioned",
    "remove_stale",
    "temp_name",
    "write",
]

FORMAT = "lyapax-checkpoint"
#: Raised whenever the layout of a kind of checkpoint changes (2: bounded
#: ``run_until_converged`` files, binned history summary).
FORMAT_VERSION = 2

#: Object addresses in printed jaxprs (``<function f at 0x7f...>``) differ
#: between processes; they are cut before hashing.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used: unreadable, truncated, of another
    format version, lyapax version or problem, or with arrays of the wrong
    shape; the message names the file."""


class Identity(dict):
    """What a checkpoint must match: ``structure``, ``values`` (hex digests)
    and ``settings`` (a dict of JSON numbers and strings)."""


def fingerprint(
    fn: Any, args: tuple, settings: Mapping[str, Any], more_values: Any = ()
) -> Identity:
    """The :class:`Identity` of the computation ``fn(*args)``.

    ``structure`` hashes the printed jaxpr of ``fn`` traced on ``args`` (no
    compilation), with the shapes and dtypes of the constants it closes
    over; ``values`` hashes the bytes of every leaf of ``args``, of those
    constants and of the pytree ``more_values``.
    """
    closed = jax.make_jaxpr(fn)(*args)
    structure = hashlib.sha256(_ADDRESS.sub("", str(closed.jaxpr)).encode())
    values = hashlib.sha256()
    consts = [np.asarray(c) for c in closed.consts]
    for arr in consts:
        structure.update(f"{arr.dtype.str}{arr.shape}".encode())
    leaves = jax.tree.leaves((args, more_values))
    for arr in [*map(np.asarray, leaves), *consts]:
        values.update(f"{arr.dtype.str}{arr.shape}".encode())
        values.update(np.ascontiguousarray(arr).tobytes())
    return Identity(
        structure=structure.hexdigest(),
        values=values.hexdigest(),
        settings=dict(settings),
    )


def check_writable(folder: Path, what: str) -> None:
    """Fail now, not after hours of work, when ``folder`` cannot take files.

    Raises:
        ValueError: ``folder`` is not a directory. OSError: a file cannot be
            created there (the message names the folder and ``what``).
    """
    if not folder.is_dir():
        raise ValueError(
            f"{what}: the folder {str(folder)!r} does not exist or is not a "
            "directory; create it first"
        )
    probe = folder / f".lyapax-write-test-{os.getpid()}"
    try:
        probe.write_bytes(b"")
    except OSError as e:
        raise OSError(
            e.errno,
            f"{what}: cannot write checkpoints in {str(folder)!r}: {e.strerror}",
        ) from e
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


def host_name() -> str:
    """This host's name, as written in temporary file names and locks."""
    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "host"


def temp_name(path: Path, suffix: str = "tmp") -> Path:
    """This process's temporary file for ``path``: ``.NAME.PID@HOST.SUFFIX``."""
    return path.with_name(f".{path.name}.{os.getpid()}@{host_name()}.{suffix}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by another user
        return True
    return True


def remove_stale(path: Path) -> None:
    """Remove the temporary files of ``path`` left by dead writers on this
    host; those of live processes or other hosts are left alone."""
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.(\d+)@(.+?)\.(?:prev\.)?tmp$")
    host = host_name()
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*@*.*tmp"):
        match = pattern.match(stale.name)
        if match is None or match.group(2) != host:
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and not _alive(pid):
            with contextlib.suppress(OSError):
                stale.unlink()


def write(
    path: Path,
    kind: str,
    version: str,
    identity: Identity,
    arrays: Mapping[str, Any],
    keep_previous: bool = False,
) -> None:
    """Write ``arrays`` with the header to ``path``, atomically; with
    ``keep_previous`` the file it replaces stays at :func:`previous` ``(path)``.

    Raises:
        OSError: the write failed (a full disk, a lost permission); the
            temporary file is removed and a previous file at ``path`` is left
            unchanged, which the message says.
    """
    header = {
        "format": np.asarray(FORMAT),
        "format_version": np.asarray(FORMAT_VERSION),
        "lyapax_version": np.asarray(version),
        "kind": np.asarray(kind),
        "structure": np.asarray(identity["structure"]),
        "values": np.asarray(identity["values"]),
        "settings": np.asarray(json.dumps(identity["settings"], sort_keys=True)),
    }
    body = {name: np.asarray(value) for name, value in arrays.items()}
    remove_stale(path)  # left by a writer killed mid-write, never a live one's
    tmp = temp_name(path)
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **header, **body)  # type: ignore[arg-type]
            f.flush()
            os.fsync(f.fileno())
        if keep_previous and path.exists():
            _keep(path)
        os.replace(tmp, path)
    except OSError as e:
        kept = "the previous file is unchanged" if path.exists() else "nothing was kept"
        raise OSError(
            e.errno,
            f"could not write the checkpoint {str(path)!r}: {e.strerror or e} ({kept})",
        ) from e
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    _sync_folder(path.parent)


def previous(path: Path) -> Path:
    """Where the checkpoint that ``path`` replaced is kept (``PATH.prev``)."""
    return path.with_name(path.name + ".prev")


def _keep(path: Path) -> None:
    """Hard-link ``path`` to :func:`previous` (atomically, by a rename of a
    temporary link); skipped where the file system has no hard links."""
    link = temp_name(path, "prev.tmp")
    with contextlib.suppress(OSError):
        link.unlink()
    try:
        os.link(path, link)
        os.replace(link, previous(path))
    except OSError:
        with contextlib.suppress(OSError):
            link.unlink()


def _sync_folder(folder: Path) -> None:
    """Flush the rename to disk where the system allows it (POSIX)."""
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


Expect = Mapping[str, tuple[tuple[int, ...] | None, str]]


def read(
    path: Path, kind: str, version: str, identity: Identity, expect: Expect
) -> dict[str, np.ndarray]:
    """The arrays of the checkpoint at ``path`` (of :data:`FORMAT_VERSION`),
    checked: :func:`read_versioned` with one layout."""
    return read_versioned(path, kind, version, identity, {FORMAT_VERSION: expect})[1]


def read_versioned(
    path: Path,
    kind: str,
    version: str,
    identity: Identity,
    layouts: Mapping[int, Expect],
) -> tuple[int, dict[str, np.ndarray]]:
    """``(format version, arrays)`` of the checkpoint at ``path``, checked.

    ``layouts`` maps each format version the caller reads (older ones to
    migrate) to its ``expect``, which

    maps every key the file must hold (besides the header) to
    ``(shape, dtype kind)``: shape None accepts any; dtype kind a NumPy kind
    letter string such as ``"f"``, ``"iu"`` or ``"fc"``. Keys of the file
    outside the header and ``expect`` are an error too.

    Raises:
        CheckpointError: naming ``path`` and what is wrong.
    """
    name = str(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            data = {key: archive[key] for key in archive.files}
    except Exception as e:  # untrusted input: any failure to parse is a refusal
        prev = previous(path)
        hint = (
            f" The checkpoint it replaced is kept at {str(prev)!r}: rename it to "
            f"{path.name!r} to continue from there."
            if prev.exists()
            else ""
        )
        raise CheckpointError(
            f"checkpoint {name!r} cannot be read ({type(e).__name__}: {e}); it is "
            "truncated or not a lyapax checkpoint. It was left as it is: delete "
            f"it (or pass another path) to start afresh.{hint}"
        ) from None
    fmt = _text(data, "format")
    if fmt != FORMAT:
        raise CheckpointError(f"{name!r} is not a lyapax checkpoint (format {fmt!r})")
    got = data.get("format_version")
    if got is None or got.shape != () or got.dtype.kind not in "iu":
        raise CheckpointError(f"checkpoint {name!r} has no valid format_version")
    if int(got) not in layouts:
        readable = ", ".join(map(str, sorted(layouts)))
        raise CheckpointError(
            f"checkpoint {name!r} has format version {int(got)}; this lyapax reads "
            f"version {readable}. Continue it with the lyapax that wrote it, or "
            "delete the file (or pass another path) to start afresh"
        )
    expect = layouts[int(got)]
    written_by = _text(data, "lyapax_version")
    if written_by != version:
        raise CheckpointError(
            f"checkpoint {name!r} was written by lyapax {written_by}, this is lyapax "
            f"{version}: a run is only continued by the version that started it "
            "(finish it with that version, or delete the file to start afresh)"
        )
    if _text(data, "kind") != kind:
        raise CheckpointError(
            f"checkpoint {name!r} holds a {_text(data, 'kind')!r}, not a {kind!r}"
        )
    _check_identity(name, data, identity)
    missing = sorted(set(expect) - set(data))
    extra = sorted(set(data) - set(expect) - _HEADER)
    if missing or extra:
        raise CheckpointError(
            f"checkpoint {name!r} has missing keys {missing} / unexpected keys {extra}"
        )
    for key, (shape, kinds) in expect.items():
        arr = data[key]
        if arr.dtype.kind not in kinds or (shape is not None and arr.shape != shape):
            raise CheckpointError(
                f"checkpoint {name!r}: {key} has shape {arr.shape} and dtype "
                f"{arr.dtype}; expected shape {shape} and a dtype of kind {kinds!r}"
            )
    return int(got), {key: data[key] for key in expect}


_HEADER = {
    "format",
    "format_version",
    "lyapax_version",
    "kind",
    "structure",
    "values",
    "settings",
}


def _text(data: Mapping[str, np.ndarray], key: str) -> str | None:
    arr = data.get(key)
    if arr is None or arr.shape != () or arr.dtype.kind != "U":
        return None
    return str(arr)


def _check_identity(name: str, data: Mapping[str, np.ndarray], want: Identity) -> None:
    settings = _text(data, "settings")
    try:
        written = json.loads(settings) if settings is not None else None
    except ValueError:
        written = None
    if not isinstance(written, dict):
        raise CheckpointError(f"checkpoint {name!r} has no valid settings")
    differ = {
        key: (written.get(key), value)
        for key, value in want["settings"].items()
        if written.get(key) != value
    }
    if differ:
        listing = ", ".join(
            f"{k}: {a!r} there, {b!r} here" for k, (a, b) in differ.items()
        )
        raise CheckpointError(
            f"checkpoint {name!r} was written by a run with other settings ({listing})"
        )
    if _text(data, "structure") != want["structure"]:
        raise CheckpointError(
            f"checkpoint {name!r} was written for another problem: its computation "
            "(step function, shapes, dtypes or constants in the code) differs from "
            "this one's. Pass another checkpoint path, or delete the file to start "
            "afresh"
        )
    if _text(data, "values") != want["values"]:
        raise CheckpointError(
            f"checkpoint {name!r} was written for the same kind of problem with other "
            "numbers (parameters, initial state or dt). Pass another checkpoint "
            "path, or delete the file to start afresh"
        )
