"""The plugin's import graph has no cycle.

The graph is read from the source with :mod:`ast`: every ``import`` statement
counts, at module level, inside a function (lazy imports) and under
``if TYPE_CHECKING:`` (a type-only import still ties the two modules: moving
either one drags the other). An edge ``a -> b`` means module ``a`` of
pytest_lyapax names module ``b`` of pytest_lyapax in an import.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest_lyapax

PACKAGE = "pytest_lyapax"
ROOT = Path(pytest_lyapax.__file__).parent


def _name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def plugin_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """``{module: modules of the package it imports}``, from the source."""
    paths = {_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                # ``from . import stats`` names the submodule stats.
                names.update(
                    f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base
                    for a in node.names
                )
        graph[module] = {n for n in names if n in paths and n != module}
    return graph


def cycle_of(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (first module repeated at the end), or None."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        return list(reversed(err.args[1]))
    return None


def test_the_graph_reads_every_kind_of_import(tmp_path):
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import X\n"
    )
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("import pytest_lyapax.a\n")
    graph = plugin_graph(pkg)
    assert graph["pytest_lyapax.a"] == {"pytest_lyapax.b"}
    assert graph["pytest_lyapax.b"] == {"pytest_lyapax.c"}
    assert graph["pytest_lyapax.c"] == {"pytest_lyapax.a"}
    cycle = cycle_of(graph)
    assert cycle is not None and cycle[0] == cycle[-1] and len(cycle) == 4


def test_no_import_cycle_in_the_plugin():
    graph = plugin_graph()
    assert len(graph) > 20  # the walk found the package
    cycle = cycle_of(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])
