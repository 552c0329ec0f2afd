"""Which code a worker runs: the identity two hosts must share to be compared.

A worker computes its :func:`code_identity` once it has collected its tests,
before any of them runs:

``commit``, ``dirty``  ``git rev-parse HEAD`` of the rootdir and whether
                       tracked files are modified (None outside a git tree);
``files``              sha256 of every Python file under the rootdir that the
                       process has loaded: the collected test modules, the
                       conftest files and the packages under test imported
                       from the checkout (relative paths, ``/``-separated);
``packages``           versions of the installed distributions the test
                       modules import (packages under test from
                       site-packages, e.g. ``jaxopt``);
``tools``              versions of jax, jaxlib, pytest-benchmark and
                       pytest_lyapax (the ``lyapax`` distribution).

:func:`differences` says, one phrase each, how two identities differ;
:func:`reference_identity` computes this checkout's identity for the files
and packages another host reported, without importing anything.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

TOOLS = ("jax", "jaxlib", "pytest-benchmark", "lyapax")
# Directories below a rootdir that hold environments, not the project's code.
_SKIP_PARTS = {"site-packages", "dist-packages", "__pycache__", "node_modules"}
_GIT_TIMEOUT_S = 20.0


def version_of(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def tool_versions() -> dict[str, str | None]:
    return {name: version_of(name) for name in TOOLS}


def git_state(root: Path) -> tuple[str | None, bool | None]:
    """Commit of ``root``'s git tree and whether tracked files differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
        )
        if head.returncode != 0:
            return None, None
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    return head.stdout.strip() or None, dirty


def file_hash(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _relative(path: Path, root: Path) -> str | None:
    try:
        rel = path.resolve().relative_to(root)
    except (ValueError, OSError):
        return None
    if _SKIP_PARTS & set(rel.parts) or any(p.startswith(".") for p in rel.parts):
        return None
    return rel.as_posix()


def loaded_files(root: Path, extra: Iterable[Path] = ()) -> list[str]:
    """Relative paths of Python files under ``root`` that this process loaded."""
    root = root.resolve()
    paths = {Path(p) for p in extra}
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if isinstance(name, str) and name.endswith(".py"):
            paths.add(Path(name))
    rels = {_relative(p, root) for p in paths}
    return sorted(r for r in rels if r is not None)


def imported_distributions(modules: Iterable[Any], root: Path) -> dict[str, str]:
    """Installed distributions (not under ``root``) that ``modules`` import."""
    tops: set[str] = set()
    for module in modules:
        for value in vars(module).values():
            name = getattr(value, "__name__", None) if _is_module(value) else None
            name = name or getattr(value, "__module__", None)
            if isinstance(name, str) and name:
                tops.add(name.split(".")[0])
    stdlib = set(sys.stdlib_module_names) | {"builtins", "pytest", "_pytest"}
    owners = metadata.packages_distributions()
    out: dict[str, str] = {}
    for top in sorted(tops - stdlib):
        module = sys.modules.get(top)
        where = getattr(module, "__file__", None)
        if isinstance(where, str) and _relative(Path(where), root.resolve()):
            continue  # imported from the checkout: its files are hashed
        for dist in owners.get(top, []):
            version = version_of(dist)
            if version is not None:
                out[dist] = version
    return out


def _is_module(value: object) -> bool:
    return type(value).__name__ == "module"


def code_identity(
    root: Path, test_files: Iterable[Path], test_modules: Iterable[Any]
) -> dict[str, Any]:
    """This process's code identity (see the module docstring)."""
    commit, dirty = git_state(root)
    files = loaded_files(root, test_files)
    return {
        "root": str(root),
        "commit": commit,
        "dirty": dirty,
        "files": {rel: file_hash(root / rel) for rel in files},
        "packages": imported_distributions(test_modules, root),
        "tools": tool_versions(),
    }


def reference_identity(
    root: Path, files: Iterable[str], packages: Iterable[str]
) -> dict[str, Any]:
    """This checkout's identity for the files and distributions named elsewhere."""
    commit, dirty = git_state(root)
    return {
        "root": str(root),
        "commit": commit,
        "dirty": dirty,
        "files": {rel: file_hash(root / rel) for rel in sorted(set(files))},
        "packages": {name: version_of(name) for name in sorted(set(packages))},
        "tools": tool_versions(),
    }


def differences(
    here: Mapping[str, Any], there: Mapping[str, Any], where: str
) -> list[str]:
    """How ``there`` (the host ``where``) differs from ``here``, one phrase each."""
    out = []
    if here.get("commit") and there.get("commit") and here["commit"] != there["commit"]:
        out.append(
            f"commit {str(here['commit'])[:12]} here, {str(there['commit'])[:12]} "
            f"on {where}"
        )
    mine, theirs = here.get("files") or {}, there.get("files") or {}
    for rel in sorted(set(mine) | set(theirs)):
        a, b = mine.get(rel), theirs.get(rel)
        if a == b:
            continue
        if a is None:
            out.append(f"{rel}: on {where}, not in this checkout")
        elif b is None:
            out.append(f"{rel}: not on {where}")
        else:
            out.append(f"{rel} differs")
    for kind in ("tools", "packages"):
        mine, theirs = here.get(kind) or {}, there.get(kind) or {}
        for name in sorted(set(mine) | set(theirs)):
            a, b = mine.get(name), theirs.get(name)
            if a != b:
                out.append(
                    f"{name} {a or 'not installed'} here, {b or 'not installed'} "
                    f"on {where}"
                )
    return out
