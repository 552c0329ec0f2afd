"""The plugin's import graph: no cycle, and no import up the layers; and
features plug in one way: one table declares the options, one function reads
them into one settings object, one payload goes to the workers, one table
registers each role's hook objects (read from the source too).

The graph is read from the source with :mod:`ast`: every ``import`` statement
counts, at module level, inside a function (lazy imports) and under
``if TYPE_CHECKING:`` (a type-only import still ties the two modules: moving
either one drags the other). An edge ``a -> b`` means module ``a`` of
pytest_lyapax names module ``b`` of pytest_lyapax in an import.

The layers, bottom to top (a module may import its own layer and those
below, never one above):

``report``     the report model: schema, statistics, identity, series,
               crossovers, comparisons, gates, cost model, merge, history (no
               pytest, no matplotlib at import)
``backends``   labels, probes, hosts, code identity, the remote-side worker
``views``      tables, figure, explanations and their renderers
``measuring``  the benchmark fixture and the measurement of one call
``run``        options, session, items, scheduling, remote hosts, output
top            ``plugin`` (the hooks), ``hookspecs`` (the plugin's own hooks)
               and ``cli`` (the report tools)
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
import sys
from pathlib import Path

import pytest
from support.architecture_page import listed_modules

import pytest_lyapax

PACKAGE = "pytest_lyapax"
ROOT = Path(pytest_lyapax.__file__).parent
LAYERS = ("report", "backends", "views", "measuring", "run")
# The modules of the top floor, which nothing in the package may import.
TOP = {"plugin", "hookspecs", "cli", "__main__"}


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


def layer_of(module: str) -> int:
    """The floor of a module: its subpackage's index in LAYERS, top above."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1  # the package itself: an empty __init__
    if parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    if parts[1] in TOP and len(parts) == 2:
        return len(LAYERS)
    raise AssertionError(f"{module} is in no layer: put it in one of {LAYERS}")


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every ``a -> b`` with b on a higher floor than a."""
    return sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if layer_of(b) > layer_of(a)
    )


def test_an_upward_import_is_found(tmp_path):
    pkg = tmp_path / PACKAGE
    for sub in ("", "report", "run"):
        (pkg / sub).mkdir(exist_ok=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "run" / "options.py").write_text("from ..report.schema import X\n")
    (pkg / "report" / "schema.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pytest_lyapax.run.options import Y\n"
    )
    graph = plugin_graph(pkg)
    assert graph["pytest_lyapax.run.options"] == {"pytest_lyapax.report.schema"}
    found = upward_imports(graph)
    assert found == ["pytest_lyapax.report.schema -> pytest_lyapax.run.options"]


def test_a_module_outside_the_layers_is_refused():
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("pytest_lyapax.helpers")


def test_no_import_goes_up_the_layers():
    graph = plugin_graph()
    for module in graph:
        layer_of(module)  # every module sits on a floor
    assert upward_imports(graph) == []


def test_the_subpackage_inits_are_empty():
    for sub in ("", *LAYERS):
        init = ROOT / sub / "__init__.py"
        body = ast.parse(init.read_text()).body
        assert all(
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            for node in body
        ), f"{init} holds code: the subpackages only group modules"


def test_the_report_model_imports_no_pytest_no_matplotlib_no_jax():
    modules = sorted(m for m in plugin_graph() if m.startswith(f"{PACKAGE}.report."))
    assert len(modules) >= 8
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "heavy = {'pytest', 'matplotlib', 'jax', 'xdist'} & set(sys.modules)\n"
        + "print(sorted(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_architecture_page_lists_every_plugin_module():
    listed = listed_modules("The plugin")
    on_disk = {
        sub: {m.stem for m in (ROOT / sub).glob("*.py") if m.name != "__init__.py"}
        for sub in LAYERS
    }
    on_disk[""] = TOP - {"__main__"}
    assert listed == on_disk


# What writes to pytest's terminal: its reporter's methods and the hook that
# hands the reporter out.
TERMINAL_NAMES = {"write_sep", "write_line", "terminalreporter"}


def terminal_uses(path: Path) -> tuple[set[str], set[str]]:
    """(names of ``TERMINAL_NAMES`` a module uses, functions it defines)."""
    tree = ast.parse(path.read_text(), str(path))
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in TERMINAL_NAMES:
            used.add(node.attr)
        elif isinstance(node, ast.Name | ast.arg):
            name = node.id if isinstance(node, ast.Name) else node.arg
            if name in TERMINAL_NAMES:
                used.add(name)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "print":
            used.add("print")
    defined = {
        node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
    }
    return used, defined


def test_one_terminal_summary_rendered_from_the_report_sections():
    """The terminal summary is one renderer of the report's sections: one
    ``pytest_terminal_summary`` in the package (the collector's, which
    composes with ``views/explain.report_sections``), only
    ``views/render.py`` writes the sections to the terminal, and no module of
    ``report/`` writes to it or prints (features contribute sections)."""
    hooks, writers = [], []
    for path in sorted(ROOT.rglob("*.py")):
        module = _name(path, ROOT)
        used, defined = terminal_uses(path)
        if "pytest_terminal_summary" in defined:
            hooks.append(module)
        if "write_sep" in used:
            writers.append(module)
        if module.startswith(f"{PACKAGE}.report."):
            assert not used, f"{module} writes to the terminal: {sorted(used)}"
    assert hooks == [f"{PACKAGE}.run.collector"]
    assert writers == [f"{PACKAGE}.views.render"]
    collector = (ROOT / "run" / "collector.py").read_text()
    assert "terminal_sections" in collector and "write_terminal" in collector
    output = (ROOT / "run" / "output.py").read_text()
    assert "explain.report_sections(view, run=" in output


def test_the_terminal_check_sees_a_report_module_that_prints(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "def pytest_terminal_summary(terminalreporter):\n"
        "    terminalreporter.write_sep('-', 'x')\n    print('y')\n"
    )
    used, defined = terminal_uses(path)
    assert used == {"terminalreporter", "write_sep", "print"}
    assert "pytest_terminal_summary" in defined


# Features plug in one way: one table declares the options, one function
# reads them into one settings object, one payload goes to the workers.
OPTION_TABLE = f"{PACKAGE}.run.optiontable"
SETTINGS_READER = f"{PACKAGE}.run.options"
# What the controller writes into a worker's ``workerinput``: the one payload
# (a JSON string) and the link to a host (an execnet channel, which cannot
# travel inside JSON; remote.py).
WORKERINPUT_KEYS = {"WORKERINPUT_KEY", "LINK_KEY"}


def _calls(tree: ast.AST, names: set[str]) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
    ]


def plugin_trees(root: Path = ROOT) -> dict[str, ast.AST]:
    return {
        _name(path, root): ast.parse(path.read_text(), str(path))
        for path in sorted(root.rglob("*.py"))
    }


def option_declarers(trees: dict[str, ast.AST]) -> set[str]:
    """Modules that declare a pytest option or ini key (``addoption``,
    ``addini``, ``getgroup``)."""
    names = {"addoption", "addini", "getgroup"}
    return {module for module, tree in trees.items() if _calls(tree, names)}


def settings_readers(trees: dict[str, ast.AST]) -> set[str]:
    """Modules that read one of the plugin's options (``getoption`` or
    ``getini`` of a ``jax_`` name) or define a ``read_*settings`` function."""
    found = set()
    for module, tree in trees.items():
        for call in _calls(tree, {"getoption", "getini"}):
            first = call.args[0] if call.args else None
            if isinstance(first, ast.Constant) and str(first.value).startswith("jax_"):
                found.add(module)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("read_"):
                if node.name.endswith("settings"):
                    found.add(f"{module}.{node.name}")
    return found


def workerinput_writes(trees: dict[str, ast.AST]) -> list[tuple[str, str]]:
    """``(module, key)`` of each ``... .workerinput[key] = ...``."""
    writes = []
    for module, tree in trees.items():
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Attribute)
                    and target.value.attr == "workerinput"
                ):
                    writes.append((module, ast.unparse(target.slice)))
    return writes


def test_one_table_declares_every_option():
    assert option_declarers(plugin_trees()) == {OPTION_TABLE}


def test_one_function_reads_the_options_into_one_settings_object():
    assert settings_readers(plugin_trees()) == {
        SETTINGS_READER,
        f"{SETTINGS_READER}.read_settings",
    }


def test_one_payload_goes_to_the_workers():
    writes = workerinput_writes(plugin_trees())
    keys = [key for _, key in writes]
    assert sorted(keys) == sorted(WORKERINPUT_KEYS), writes


def hook_registrars(trees: dict[str, ast.AST]) -> set[str]:
    """Modules that register a hook object (``pluginmanager.register``)."""
    return {
        module
        for module, tree in trees.items()
        for call in _calls(tree, {"register"})
        if isinstance(call.func.value, ast.Attribute)
        and call.func.value.attr == "pluginmanager"
    }


def test_one_table_registers_the_hook_objects_of_every_role():
    assert hook_registrars(plugin_trees()) == {f"{PACKAGE}.run.runplan"}


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, ast.AST]:
    pkg = tmp_path / PACKAGE
    for name, text in {"__init__.py": "", "run/__init__.py": "", **files}.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    return plugin_trees(pkg)


def test_the_option_check_sees_a_second_declaration(tmp_path):
    trees = _tree(
        tmp_path,
        {
            "run/optiontable.py": "def declare(parser):\n    parser.addini('x', 'y')\n",
            "run/agreement.py": "def add(group):\n    group.addoption('--jax-x')\n",
        },
    )
    assert option_declarers(trees) == {OPTION_TABLE, f"{PACKAGE}.run.agreement"}


def test_the_settings_check_sees_a_second_reader(tmp_path):
    trees = _tree(
        tmp_path,
        {
            "run/options.py": "def read_settings(c):\n    c.getini('jax_backend')\n",
            "run/agreement.py": (
                "def read_agree_settings(c):\n    return c.getoption('jax_no_agree')\n"
            ),
            "run/runplan.py": "def f(c):\n    c.getoption('usepdb')\n",
        },
    )
    assert settings_readers(trees) == {
        SETTINGS_READER,
        f"{SETTINGS_READER}.read_settings",
        f"{PACKAGE}.run.agreement",
        f"{PACKAGE}.run.agreement.read_agree_settings",
    }


def test_the_payload_check_sees_a_second_key(tmp_path):
    trees = _tree(
        tmp_path,
        {
            "run/scheduling.py": "def f(n):\n    n.workerinput[WORKERINPUT_KEY] = 1\n",
            "run/agreement.py": "def f(n):\n    n.workerinput['agree'] = 2\n",
        },
    )
    writes = workerinput_writes(trees)
    assert sorted(writes) == [
        (f"{PACKAGE}.run.agreement", "'agree'"),
        (f"{PACKAGE}.run.scheduling", "WORKERINPUT_KEY"),
    ]
    assert sorted(key for _, key in writes) != sorted(WORKERINPUT_KEYS)


def test_the_registration_check_sees_a_second_registrar(tmp_path):
    trees = _tree(
        tmp_path,
        {
            "run/runplan.py": "def f(c, h):\n    c.pluginmanager.register(h, 'a')\n",
            "run/agreement.py": "def f(c, h):\n    c.pluginmanager.register(h, 'b')\n",
            "run/turns.py": "def f(selector, conn):\n    selector.register(conn, 1)\n",
        },
    )
    assert hook_registrars(trees) == {
        f"{PACKAGE}.run.runplan",
        f"{PACKAGE}.run.agreement",
    }


# What every feature shares, and so lives on the run's session; a feature's
# own state (the agreement's, the A/B's, the searches', the remote hosts', the
# chip's) is a dataclass of its module, under its key on ``session.stash``.
SHARED_FIELDS = {
    "settings",
    "role",
    "states",
    "own_label",
    # What the tests measured and where they ran out of memory.
    "records",
    "points",
    "pending_detection",
    # The report writer's outcome and the compare gate's verdict (output.py).
    "figure_error",
    "gate_failures",
    "gate_refused",
    "notes",
    "expected",
    "finished",
    "test_labels",
    "interrupted",
    "benchmark_disabled",
    "collection_errors",
    "worker_labels",
    # Who may run now (turns.py): the measuring loop and the worker's hooks.
    "turns",
    "stash",
}


def session_fields(trees: dict[str, ast.AST]) -> set[str]:
    """The fields ``LyapaxSession`` declares (run/session.py)."""
    tree = trees[f"{PACKAGE}.run.session"]
    return {
        node.target.id
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef) and cls.name == "LyapaxSession"
        for node in cls.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }


def test_the_session_keeps_only_what_every_feature_shares():
    assert session_fields(plugin_trees()) == SHARED_FIELDS


def test_the_session_check_sees_a_feature_field(tmp_path):
    fields = "".join(f"    {name}: int = 0\n" for name in sorted(SHARED_FIELDS))
    trees = _tree(
        tmp_path,
        {
            "run/session.py": (
                "class LyapaxSession:\n"
                f"{fields}"
                "    agreement: list = []\n"
                "    @property\n"
                "    def labels(self): ...\n"
            ),
        },
    )
    assert session_fields(trees) == SHARED_FIELDS | {"agreement"}
