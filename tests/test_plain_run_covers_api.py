"""The plain run (``-m "not slow"``) keeps a test of every public function.

Tests move to ``slow`` to keep the plain run short; this check makes sure no
public function of lyapax is left to the slow run alone.  It reads the test
files with :mod:`ast`, no test is run or collected:

- a *plain test* is a ``test_*`` function (or a method of a ``Test*`` class)
  that neither it, its class nor its module (``pytestmark``) marks ``slow``;
  a test whose parametrization marks only some cases slow stays plain;
- what a plain test reaches is every name its decorators and body use, and,
  followed transitively, the module-level functions, fixtures and constants of
  its module and the fixtures of the ``conftest.py`` files above it that those
  names (and its arguments) refer to; ``from lyapax import f as g`` counts a
  use of ``g`` as a use of ``f``;
- a public function is covered when its name is among the names reached.

It is deliberately conservative: a name only inside a string (the code that
the plugin tests write with ``pytester``, README blocks) does not count.  A
local variable that happens to share a public function's name would count.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
from test_public_api import PUBLIC_MODULES

import lyapax

TESTS = Path(__file__).parent


def _marks_slow(decorators: list[ast.expr]) -> bool:
    """Whether a decorator list holds ``pytest.mark.slow`` itself (not inside a
    parametrize case, which leaves the other cases plain)."""
    for decorator in decorators:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr == "slow":
            return True
    return False


def _module_marks_slow(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            values = (
                node.value.elts
                if isinstance(node.value, ast.List | ast.Tuple)
                else [node.value]
            )
            if _marks_slow(values):
                return True
    return False


def _names_used(node: ast.AST) -> set[str]:
    """Identifiers a node's code uses: names, attributes and argument names
    (a test's arguments are the fixtures it asks for)."""
    used: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            used.add(child.id)
        elif isinstance(child, ast.Attribute):
            used.add(child.attr)
        elif isinstance(child, ast.arg):
            used.add(child.arg)
    return used


class _Module:
    """The parts of one test file this check needs."""

    def __init__(self, path: Path) -> None:
        tree = ast.parse(path.read_text(), filename=str(path))
        self.definitions: dict[str, ast.AST] = {}
        self.aliases: dict[str, str] = {}
        self.plain_tests: list[ast.AST] = []
        module_slow = _module_marks_slow(tree)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.definitions[node.name] = node
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            self.definitions[name.id] = node
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
            if module_slow:
                continue
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if node.name.startswith("test") and not _marks_slow(
                    node.decorator_list
                ):
                    self.plain_tests.append(node)
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                if _marks_slow(node.decorator_list):
                    continue
                for item in node.body:
                    if (
                        isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                        and item.name.startswith("test")
                        and not _marks_slow(item.decorator_list)
                    ):
                        self.plain_tests.append(item)


def names_reached_by_plain_tests(root: Path) -> set[str]:
    """Every name that the plain tests under ``root`` reach (see the module
    docstring for what counts)."""
    modules = {path: _Module(path) for path in sorted(root.rglob("*.py"))}
    reached: set[str] = set()
    for path, module in modules.items():
        if not path.name.startswith("test_"):
            continue
        # Fixtures and helpers visible here: conftest files from the root down
        # to this folder, then this module (nearer definitions win).
        scope: dict[str, ast.AST] = {}
        aliases: dict[str, str] = {}
        for folder in reversed([path.parent, *path.parent.parents]):
            conftest = modules.get(folder / "conftest.py")
            if conftest is not None:
                scope.update(conftest.definitions)
                aliases.update(conftest.aliases)
        scope.update(module.definitions)
        aliases.update(module.aliases)
        pending = list(module.plain_tests)
        seen: set[int] = set()
        while pending:
            node = pending.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            for name in _names_used(node):
                reached.add(aliases.get(name, name))
                if name in scope:
                    pending.append(scope[name])
    return reached


def public_functions() -> dict[str, str]:
    """``{name: "module.name"}`` for every public function of lyapax (classes
    and constants are left out)."""
    found: dict[str, str] = {}
    for module_name in ["lyapax", *PUBLIC_MODULES]:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            if inspect.isfunction(getattr(module, name)):
                found.setdefault(name, f"{module_name}.{name}")
    return found


def test_every_public_function_has_a_plain_test():
    reached = names_reached_by_plain_tests(TESTS)
    functions = public_functions()
    assert len(functions) > 50, sorted(functions)
    missing = sorted(where for name, where in functions.items() if name not in reached)
    assert not missing, (
        "these public functions are tested only by tests marked slow (or not at "
        f"all); keep one quick test of each in the plain run: {missing}"
    )


def test_the_check_sees_a_function_lose_its_last_plain_test(tmp_path: Path):
    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "from lyapax import lorenz\n"
        "@pytest.fixture\n"
        "def system():\n"
        "    return lorenz()\n"
    )
    (tmp_path / "test_a.py").write_text(
        "import pytest\n"
        "from lyapax import lyapunov_spectrum as spectrum, kaplan_yorke_dimension\n"
        "CASES = [1, 2]\n"
        "def _helper():\n"
        "    return henon()\n"
        "@pytest.mark.parametrize('n', CASES)\n"
        "def test_plain(system, n):\n"
        "    spectrum(system, n)\n"
        "    _helper()\n"
        "@pytest.mark.slow\n"
        "def test_long():\n"
        "    kaplan_yorke_dimension([1.0])\n"
        "class TestGroup:\n"
        "    @pytest.mark.slow\n"
        "    def test_method(self):\n"
        "        ftle()\n"
    )
    (tmp_path / "test_b.py").write_text(
        "import pytest\npytestmark = [pytest.mark.slow]\ndef test_x():\n    megno()\n"
    )
    reached = names_reached_by_plain_tests(tmp_path)
    # Through the fixture, the alias, the module helper and the constant.
    assert {"lorenz", "lyapunov_spectrum", "henon", "CASES"} <= reached
    # Only in slow tests: a method, a function, a module marked slow.
    assert not {"kaplan_yorke_dimension", "ftle", "megno"} & reached
    # The import of a name is not a use of it.
    (tmp_path / "test_a.py").write_text("from lyapax import kaplan_yorke_dimension\n")
    assert "kaplan_yorke_dimension" not in names_reached_by_plain_tests(tmp_path)


@pytest.mark.parametrize("name", ["lyapunov_spectrum", "kaplan_yorke_dimension"])
def test_public_functions_are_listed(name):
    assert name in public_functions()
    assert getattr(lyapax, name) is not None
