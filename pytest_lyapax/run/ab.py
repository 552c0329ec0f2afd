"""The other version of an A/B run (``--jax-ab=REV``): where it is, and that
its worker really imports it.

A is the working tree; B is ``REV``: an existing directory (another checkout)
or else a git revision of the repository holding the rootdir, checked out
with ``git worktree add --detach`` into a temporary directory that is removed
when the session ends.  Each label ``LABEL`` gets a twin ``LABEL_b``
(:data:`AB_SUFFIX`) whose worker imports the code under test from B.

The code under test is every top-level package (a folder with
``__init__.py``) and module (``*.py``) of the working tree's import root
(``src/`` when the project folder has one, else that folder itself; the
project folder is the rootdir, or the nearest folder above it in its git
repository that holds code, as for a ``perf_tests/pytest.ini``), except
``conftest``, ``setup``, ``noxfile`` and names that start with ``test`` or
``_``.  In each worker, before pytest loads any conftest, its side's import
root (B's, or the working tree's for A) goes first on ``sys.path`` and
``PYTHONPATH``, and a finder placed first on ``sys.meta_path`` resolves those
names from there only: neither the rootdir that pytest's ``prepend`` import
mode puts at ``sys.path[0]`` (in B) nor an installed or editable copy can
shadow them.  Before its first test, the worker imports every one of them and
fails its tests (nothing timed) if one cannot be imported or comes from
elsewhere; the controller does the same in a
subprocess first (:func:`preflight`), so that a B that cannot be imported is
a usage error before any worker starts.  Names already imported when the
worker starts (a package that is itself a pytest plugin) stay as they are.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pytest_lyapax.backends import codeid
from pytest_lyapax.backends.labels import Backend

AB_OPTION = "--jax-ab"
AB_SUFFIX = "_b"
ROOT_ENV = "PYTEST_LYAPAX_AB_ROOT"
NAMES_ENV = "PYTEST_LYAPAX_AB_NAMES"
_NOT_CODE = {"conftest", "setup", "noxfile"}
_GIT_TIMEOUT_S = 120.0
_PREFLIGHT_TIMEOUT_S = 300.0


@dataclass
class AbState:
    """The A/B's part of the run (the controller's): what A and B are
    (:meth:`OtherVersion.to_json`), None in a run without ``--jax-ab``."""

    sides: dict[str, Any] | None = None


STATE_KEY = pytest.StashKey[AbState]()


def state_of(stash: pytest.Stash) -> AbState:
    """The run's A/B state (``sides`` None: no A/B)."""
    return stash.setdefault(STATE_KEY, AbState())


def add_ab_twins(value: str | None, backends: Sequence[Backend]) -> tuple[Backend, ...]:
    """Add ``LABEL_b`` right after each label (``--jax-ab``): the same
    platform and variables, running the other version of the code."""
    if not value:
        return tuple(backends)
    labels = {b.label for b in backends}
    out: list[Backend] = []
    for b in backends:
        out.append(b)
        if b.rerun_of or b.ab_of:
            continue
        twin = b.label + AB_SUFFIX
        if twin in labels:
            raise pytest.UsageError(
                f"{AB_OPTION}={value}: the label {twin!r} it would add is already "
                "requested; rename that backend"
            )
        if b.host is not None:
            raise pytest.UsageError(
                f"{AB_OPTION}={value}: backend {b.label!r} runs on another host "
                f"({b.host.where}), where the other version is not checked out; "
                "run the A/B on local backends"
            )
        out.append(replace(b, label=twin, ab_of=b.label))
    return tuple(out)


def import_root(checkout: Path, rootdir: Path) -> Path:
    """Where a checkout's code is imported from: its ``src/`` when the
    working tree (``rootdir``) has one."""
    return checkout / "src" if (rootdir / "src").is_dir() else checkout


def code_names(root: Path) -> list[str]:
    """The top-level packages and modules under ``root`` that count as the
    code under test (see the module docstring)."""
    names = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.is_dir() and (path / "__init__.py").is_file():
            name = path.name
        elif path.is_file() and path.suffix == ".py":
            name = path.stem
        else:
            continue
        if name.isidentifier() and name not in _NOT_CODE:
            if not name.startswith(("test", "_")):
                names.append(name)
    return names


@dataclass
class OtherVersion:
    """Where B lives for this run, and what A and B are."""

    value: str  # as the user wrote it
    checkout: Path  # B's copy of the rootdir
    root: Path  # B's import root
    names: list[str]
    a: dict[str, Any] = field(default_factory=dict)
    b: dict[str, Any] = field(default_factory=dict)
    worktree: Path | None = None  # the temporary git worktree, to remove
    repo: Path | None = None

    @property
    def a_root(self) -> Path:
        """A's import root: the working tree's."""
        return import_root(Path(self.a["path"]), Path(self.a["path"]))

    def spec_env(self, b: bool) -> str:
        """The variables of a worker of side B (else A), as ``--tx`` spec
        parts: where it imports the code under test from."""
        root = self.root if b else self.a_root
        return f"//env:{ROOT_ENV}={root}//env:{NAMES_ENV}={','.join(self.names)}"

    def to_json(self) -> dict[str, Any]:
        return {"option": self.value, "a": self.a, "b": self.b, "code": self.names}

    def remove(self) -> None:
        """Remove the temporary worktree (nothing for a directory given)."""
        if self.worktree is None or self.repo is None:
            return
        _git(self.repo, "worktree", "remove", "--force", str(self.worktree))
        shutil.rmtree(self.worktree.parent, ignore_errors=True)
        _git(self.repo, "worktree", "prune")
        self.worktree = None


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(args, 1, "", str(exc))


def _side(checkout: Path, what: str) -> dict[str, Any]:
    commit, dirty = codeid.git_state(checkout)
    return {"what": what, "path": str(checkout), "commit": commit, "dirty": dirty}


def _project(rootdir: Path) -> Path:
    """The folder whose code is compared: the rootdir, or else the nearest
    folder above it, up to its git repository's top, that holds code (a
    suite whose ``pytest.ini`` sits in a subfolder, as ``perf_tests/``)."""
    top = _git(rootdir, "rev-parse", "--show-toplevel")
    repo = Path(top.stdout.strip()).resolve() if top.returncode == 0 else rootdir
    for folder in (rootdir, *rootdir.parents):
        if code_names(import_root(folder, folder)):
            return folder
        if folder == repo:
            break
    return rootdir


def other_version(value: str, rootdir: Path, invocation_dir: Path) -> OtherVersion:
    """Find or check out B (``--jax-ab=value``); a usage error naming the
    option and the value when it is neither a directory nor a revision."""
    rootdir = _project(rootdir.resolve())
    names = code_names(import_root(rootdir, rootdir))
    if not names:
        raise pytest.UsageError(
            f"{AB_OPTION}={value}: neither the rootdir {rootdir} nor a folder above "
            "it in its git repository holds a package or module to compare "
            "(top-level folders with __init__.py or *.py files, or the same "
            "under src/)"
        )
    given = Path(value).expanduser()
    given = given if given.is_absolute() else invocation_dir / given
    a = _side(rootdir, "working tree")
    if given.is_dir():
        checkout = given.resolve()
        if checkout == rootdir:
            raise pytest.UsageError(
                f"{AB_OPTION}={value}: that directory is the working tree itself; "
                "give another checkout or a git revision"
            )
        return OtherVersion(
            value, checkout, import_root(checkout, rootdir), names, a,
            _side(checkout, "directory"),
        )  # fmt: skip
    top = _git(rootdir, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise pytest.UsageError(
            f"{AB_OPTION}={value}: neither a directory nor usable as a git revision: "
            f"the rootdir {rootdir} is not in a git repository"
        )
    repo = Path(top.stdout.strip()).resolve()
    commit = _git(repo, "rev-parse", "--verify", "--quiet", f"{value}^{{commit}}")
    if commit.returncode != 0 or not commit.stdout.strip():
        raise pytest.UsageError(
            f"{AB_OPTION}={value}: no such directory, and no commit of the git "
            f"repository {repo} by that name; give a revision (a commit, branch "
            "or tag, e.g. HEAD~1) or the path of another checkout"
        )
    sha = commit.stdout.strip()
    where = Path(tempfile.mkdtemp(prefix="pytest-lyapax-ab-")) / "b"
    added = _git(repo, "worktree", "add", "--detach", str(where), sha)
    if added.returncode != 0:
        shutil.rmtree(where.parent, ignore_errors=True)
        raise pytest.UsageError(
            f"{AB_OPTION}={value}: git worktree add failed: {added.stderr.strip()}"
        )
    checkout = where / rootdir.relative_to(repo)
    b = {"what": f"revision {value}", "path": str(checkout), "commit": sha}
    return OtherVersion(
        value, checkout, import_root(checkout, rootdir), names, a, b, where, repo
    )


# ------------------------------------------------------------ a side's worker


class _SideFinder(importlib.abc.MetaPathFinder):
    """Finds the code under test in one side's import root only."""

    def __init__(self, root: str, names: set[str]) -> None:
        self.root, self.names = root, names

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None  # submodules follow their package's __path__
        return importlib.machinery.PathFinder.find_spec(fullname, [self.root])


def enter(root: str, names: Sequence[str]) -> list[str]:
    """Make this process import ``names`` from ``root``; the names imported
    already, which stay as they are."""
    sys.path.insert(0, root)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    sys.meta_path.insert(0, _SideFinder(root, set(names)))
    return [n for n in names if n in sys.modules]


# A side's worker: the names imported before its path took effect (plugins),
# None until then.
_KEPT: list[str] | None = None


def _env_names() -> list[str]:
    return [n for n in os.environ.get(NAMES_ENV, "").split(",") if n]


def enter_from_environment() -> None:
    """In a side's worker (its variables set), before any conftest loads."""
    global _KEPT
    root = os.environ.get(ROOT_ENV)
    if root and _KEPT is None:
        _KEPT = enter(root, _env_names())


def import_problems(root: str, names: Sequence[str]) -> list[str]:
    """Import each name; one phrase per name that fails or comes from
    outside ``root`` (empty: every name is that side's)."""
    base = Path(root).resolve()
    out = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # any failure of that side's import
            out.append(f"import {name} failed: {type(exc).__name__}: {exc}")
            continue
        where = getattr(module, "__file__", None)
        if where is None or not Path(where).resolve().is_relative_to(base):
            out.append(f"{name} is imported from {where}, not from {base}")
    return out


_PREFLIGHT = """
import json, sys
from pytest_lyapax.run import ab
root, names = sys.argv[1], sys.argv[2].split(",")
kept = ab.enter(root, names)
print(json.dumps(ab.import_problems(root, [n for n in names if n not in kept])))
"""


def refuse_tests_inside_the_code(side: OtherVersion, paths: Sequence[Path]) -> None:
    """A usage error when a test path given is a package of the code under
    test or lies inside one (``pkg``, ``pkg/tests/test_x.py``): B's worker
    imports that package
    from B, so pytest would import B's copy of those tests, or, in the
    ``importlib`` mode, the working tree's package beside B's."""
    root = side.a_root.resolve()
    for path in paths:
        try:
            inner = path.resolve().relative_to(root).parts
        except ValueError:
            continue
        if inner and inner[0] in side.names:
            side.remove()
            raise pytest.UsageError(
                f"{AB_OPTION}={side.value}: the tests {path} live inside the "
                f"package under test ({inner[0]}/): one process cannot import "
                f"{inner[0]} from the other version and these tests from the "
                "working tree; an A/B needs tests outside the compared packages"
            )


def preflight(side: OtherVersion, env: dict[str, str]) -> None:
    """Import B's code in a fresh interpreter (``env``: a worker's
    variables); a usage error naming the option when that fails."""
    names = ",".join(side.names)
    # A local worker starts with this process's sys.path (pytest's
    # ``pythonpath`` ini entries included): so does the check.
    path = os.pathsep.join(p for p in sys.path if p)
    try:
        # -P: the checkout (the working directory) is not put first on
        # sys.path, so the plugin itself comes from where this process has it,
        # as in a worker, also when the compared project is the plugin's own.
        done = subprocess.run(
            [sys.executable, "-P", "-c", _PREFLIGHT, str(side.root), names],
            capture_output=True,
            text=True,
            timeout=_PREFLIGHT_TIMEOUT_S,
            env={**os.environ, **env, "PYTHONPATH": path},
            cwd=side.checkout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        problems = [str(exc)]
    else:
        lines = done.stdout.strip().splitlines()
        try:
            problems = json.loads(lines[-1]) if lines else None
        except ValueError:
            problems = None
        if problems is None or done.returncode != 0:
            tail = done.stderr.strip().splitlines()
            problems = [tail[-1] if tail else f"exit status {done.returncode}"]
    if problems:
        side.remove()
        raise pytest.UsageError(
            f"{AB_OPTION}={side.value}: the other version's code cannot be used "
            f"from {side.root}: {'; '.join(map(str, problems))}"
        )


class SideCheck:
    """A worker of an A/B: before its first test, every name of the code
    under test must import from its side's tree (else every test fails in
    set-up, nothing timed)."""

    def __init__(self) -> None:
        self.problems: list[str] | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.problems is None:
            root = os.environ.get(ROOT_ENV, "")
            names = [n for n in _env_names() if n not in (_KEPT or [])]
            self.problems = import_problems(root, names) if root else [
                f"{ROOT_ENV} is not set in this worker"
            ]  # fmt: skip
        if self.problems:
            pytest.fail(
                f"{AB_OPTION}: this worker does not run its side's code: "
                + "; ".join(self.problems),
                pytrace=False,
            )
