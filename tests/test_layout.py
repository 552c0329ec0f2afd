"""The package layout: every module imports, lyapax has no import cycle, and the
README's Architecture tree lists the subpackages as they are on disk.

The graph is read from the source with :mod:`ast` (every ``import`` statement,
at module level or inside a function, so lazy imports cannot hide a cycle); an
edge ``a -> b`` means module ``a`` names module ``b`` in an import.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import lyapax

ROOT = Path(lyapax.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(name: str, module: str, level: int, is_package: bool) -> str:
    if level == 0:
        return name
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def import_graph() -> dict[str, set[str]]:
    """``{module: modules of lyapax it imports}`` for every module of lyapax."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node.module or "", module, node.level, is_package)
                for alias in node.names:
                    # ``from pkg import sub`` names the submodule when it is one.
                    sub = f"{base}.{alias.name}"
                    targets.add(sub if sub in MODULES else base)
        graph[module] = {t for t in targets if t in MODULES and t != module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first repeated at the end)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 finished
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)) is not None:
            return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_lyapax():
    graph = import_graph()
    assert len(graph) > 20  # the walk found the package
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_engine_imports_nothing_above_it():
    graph = import_graph()
    for module, targets in graph.items():
        if module.startswith("lyapax._engine"):
            above = {t for t in targets if not t.startswith("lyapax._engine")}
            assert not above - {"lyapax.integrators"}, (module, above)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports(module):
    importlib.import_module(module)


def test_readme_architecture_lists_every_subpackage_module():
    readme = (ROOT.parent / "README.md").read_text()
    section = readme.split("## Architecture", 1)[1].split("\n## ", 1)[0]
    tree = re.search(r"```text\n(.*?)```", section, flags=re.S).group(1)
    listed: dict[str, set[str]] = {}
    folder = None
    for line in tree.splitlines():
        head = re.match(r"(\w+)/", line)
        folder = head.group(1) if head else folder
        listed.setdefault(folder, set()).update(re.findall(r"(\w+)\.py", line))
    on_disk = {
        p.name: {m.stem for m in p.glob("*.py") if m.name != "__init__.py"}
        for p in ROOT.iterdir()
        if (p / "__init__.py").exists()
    }
    assert listed == on_disk
