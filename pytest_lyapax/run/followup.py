"""A follow-up run: the test of a search at the sizes it chose, in a fresh
``python -m pytest`` with the searching run's own options.

The searching run (run/search.py) starts it with :func:`run` and reads its
records from the report it writes in a temporary folder; its out-of-memory
points come back through a file that :class:`FollowUpHooks` writes in the
follow-up run (:data:`CHILD_ENV` names it, and makes that run search
nothing itself).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pytest_lyapax.report.identity import bare_id

# Set in a follow-up run: it searches nothing itself.
CHILD_ENV = "PYTEST_LYAPAX_SEARCH_STEP"

# Options of the run that a follow-up run must not inherit: with a value ...
_DROP_WITH_VALUE = (
    "--jax-sizes",
    "--jax-report-dir",
    "--jax-compare",
    "--jax-compare-fail",
    "--basetemp",
    "--junitxml",
    "--junit-xml",
    "-k",
    "-m",
)
# ... and without one.
_DROP_FLAGS = (
    "--jax-find-crossover",
    "--jax-find-ceiling",
    "--jax-compare-allow-missing",
    "--jax-compare-across-machines",
    "--lf",
    "--last-failed",
    "--ff",
    "--failed-first",
    "-x",
    "--exitfirst",
)


class FollowUpHooks:
    """In a follow-up run: its out-of-memory points, written where the
    searching run reads them (a run that measured nothing writes no report)."""

    def __init__(self, session: Any, path: str) -> None:
        self.session = session
        self.path = path

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        try:
            Path(self.path).write_text(json.dumps(list(self.session.points)))
        except OSError:
            pass


def follow_up_args(config: pytest.Config) -> list[str]:
    """The run's own arguments without its test paths and the options a
    follow-up run sets itself or must not inherit."""
    paths = {str(a) for a in config.args}
    args = [str(a) for a in config.invocation_params.args]
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        flag = arg.split("=", 1)[0]
        if arg in _DROP_FLAGS:
            continue
        if flag in _DROP_WITH_VALUE:
            skip = "=" not in arg and not (flag in ("-k", "-m") and len(arg) > 2)
            continue
        if arg in paths and not arg.startswith("-"):
            continue
        out.append(arg)
    return out


def run(
    config: pytest.Config,
    fullname: str,
    sizes: Sequence[int],
    labels: Sequence[str],
    env: dict[str, str],
    extra: Sequence[str] = (),
    timeout_s: float | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """Run the test of ``fullname`` at ``sizes`` on ``labels``: its
    records and points (out of memory) from the follow-up run's report, and
    why it measured nothing ("" when it measured something).
    ``timeout_s``: the most it may take (at least 30 s; None: an hour); a run
    cut there measured nothing."""
    root = config.rootpath
    path, _, rest = bare_id(fullname).partition("::")
    target = f"{root / path}::{rest}" if rest else str(root / path)
    with tempfile.TemporaryDirectory(prefix="lyapax-search-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            target,
            *follow_up_args(config),
            f"--jax-backend={','.join(labels)}",
            f"--jax-sizes={','.join(str(s) for s in sizes)}",
            f"--jax-report-dir={tmp}",
            "-p",
            "no:cacheprovider",
            *extra,
        ]
        points_file = Path(tmp) / "points.json"
        full_env = {**os.environ, CHILD_ENV: str(points_file), **env}
        limit = 3600 if timeout_s is None else max(timeout_s, 30.0)
        try:
            proc = subprocess.run(
                cmd,
                cwd=config.invocation_params.dir,
                env=full_env,
                capture_output=True,
                text=True,
                timeout=limit,
            )
        except subprocess.TimeoutExpired:
            return [], [], f"cut after {limit:.0f} s"
        except (OSError, subprocess.SubprocessError) as exc:
            return [], [], f"not started: {exc}"
        data = _json_of(Path(tmp) / "benchmark.json")
        points = _json_of(points_file)
    benchmarks = data.get("benchmarks") if isinstance(data, dict) else None
    records = [r for r in benchmarks or [] if isinstance(r, dict)]
    points = points if isinstance(points, list) else []
    why = "" if records else why_nothing(proc.returncode, proc.stdout, proc.stderr)
    return records, [p for p in points if isinstance(p, dict)], why


def why_nothing(returncode: int, stdout: str, stderr: str, limit: int = 300) -> str:
    """Why a follow-up run wrote no record, in one line: its exit code and
    its first failure or error line (else the last line it printed)."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    said = next((x for x in lines if x.startswith(("FAILED ", "ERROR "))), None)
    if said is None:
        errors = [line.strip() for line in stderr.splitlines() if line.strip()]
        said = (errors or lines or ["no output"])[-1]
    if len(said) > limit:
        said = said[: limit - 3] + "..."
    return f"exit code {returncode}: {said}"


def _json_of(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
