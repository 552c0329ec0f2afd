"""The package layout: every module imports, lyapax has no import cycle, no
module reaches into another package's private modules (except the shared
layers ``_engine`` and ``_internal``), ``__init__`` files only re-export,
capabilities are declared rather than probed, and the Architecture page's
module tree (docs/architecture.md) lists the subpackages as they are on disk.

The graph is read from the source with :mod:`ast` (every ``import`` statement,
at module level or inside a function, so lazy imports cannot hide a cycle); an
edge ``a -> b`` means module ``a`` names module ``b`` in an import.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
from support.architecture_page import diagram_layers, listed_modules

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
            assert not above, (module, above)


def test_internal_layer_imports_only_the_engine_and_itself():
    graph = import_graph()
    for module, targets in graph.items():
        if module.startswith("lyapax._internal"):
            shared = ("lyapax._engine", "lyapax._internal")
            above = {t for t in targets if not t.startswith(shared)}
            assert not above, (module, above)


#: Layers every package may import by private name.
SHARED_LAYERS = ("lyapax._engine", "lyapax._internal")


def _package_of(module: str) -> str:
    """The package a module belongs to (a package is its own)."""
    if MODULES[module].name == "__init__.py":
        return module
    return module.rsplit(".", 1)[0]


def _private_owner(module: str) -> str | None:
    """The package that owns ``module`` privately: the parent of its first
    ``_name`` component (None for a public module)."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def cross_package_private_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """``(importer, private module)`` pairs that cross a package boundary."""
    found = set()
    for module, targets in graph.items():
        for target in targets:
            owner = _private_owner(target)
            if owner is None or target.startswith(SHARED_LAYERS):
                continue
            if _package_of(module) != owner:
                found.add((module, target))
    return found


def test_the_private_import_rule_catches_a_crossing():
    graph = {"lyapax.dde.problem": {"lyapax.dde._step"}}
    assert not cross_package_private_imports(graph)
    graph = {"lyapax.systems": {"lyapax.dde._step", "lyapax._internal.sparse"}}
    assert cross_package_private_imports(graph) == {
        ("lyapax.systems", "lyapax.dde._step")
    }


def test_no_package_imports_another_packages_private_module():
    assert cross_package_private_imports(import_graph()) == set()


def _init_files() -> list[Path]:
    return sorted(ROOT.rglob("__init__.py"))


def _type_checking_block(node: ast.stmt) -> bool:
    """``if TYPE_CHECKING:`` holding imports only (what a lazy package
    re-exports, for static type checkers)."""
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
        and not node.orelse
        and all(isinstance(n, ast.Import | ast.ImportFrom) for n in node.body)
    )


def _lazy_hooks(node: ast.stmt) -> bool:
    """``__getattr__, __dir__ = lazy_exports(__name__, {...})``."""
    return (
        isinstance(node, ast.Assign)
        and ast.unparse(node.targets[0]) == "(__getattr__, __dir__)"
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func) == "lazy_exports"
    )


@pytest.mark.parametrize("path", _init_files(), ids=lambda p: str(p.parent.name))
def test_init_files_only_re_export(path):
    """Imports, ``__all__`` and the docstring: nothing defined in an
    ``__init__`` (a lazy package adds its ``TYPE_CHECKING`` imports and the
    hooks of :func:`lyapax._internal.lazy.lazy_exports`)."""
    for node in ast.parse(path.read_text()).body:
        docstring = isinstance(node, ast.Expr) and isinstance(
            getattr(node, "value", None), ast.Constant
        )
        all_list = isinstance(node, ast.Assign) and [
            t.id for t in node.targets if isinstance(t, ast.Name)
        ] == ["__all__"]
        imports = isinstance(node, ast.Import | ast.ImportFrom)
        lazy = _type_checking_block(node) or _lazy_hooks(node)
        assert docstring or all_list or imports or lazy, (
            f"{path.relative_to(ROOT.parent)}:{node.lineno} defines "
            f"{type(node).__name__}; move it to a module and re-export it"
        )


def unit_of(module: str) -> str:
    """The top-level module or package ``module`` belongs to (``lyapax`` for
    the root ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "lyapax"


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` between top-level modules and packages (no self edges)."""
    units: dict[str, set[str]] = {}
    for module, targets in graph.items():
        edges = units.setdefault(unit_of(module), set())
        edges.update(unit_of(t) for t in targets if unit_of(t) != unit_of(module))
    return units


def upward_edges(units: dict[str, set[str]], layers: list[list[str]]) -> list[str]:
    """Imports that do not point to a lower line of the diagram."""
    line = {name: i for i, names in enumerate(layers) for name in names}
    return sorted(
        f"{a} -> {b}"
        for a, targets in units.items()
        for b in targets
        if a in line and b in line and line[b] <= line[a]
    )


def test_the_diagram_check_finds_an_import_that_points_up():
    layers = [["top"], ["mid", "side"], ["base"]]
    units = {"top": {"mid"}, "mid": {"base", "side"}, "base": {"top"}, "side": set()}
    assert upward_edges(units, layers) == ["base -> top", "mid -> side"]


def test_the_layer_diagram_is_the_import_graph():
    """docs/architecture.md, "Layers": every top-level module and package on
    one line, every import between two of them pointing down."""
    layers = diagram_layers()
    drawn = [name for names in layers for name in names]
    units = unit_graph(import_graph())
    assert len(drawn) == len(set(drawn)), sorted(drawn)
    assert set(drawn) == set(units)
    assert upward_edges(units, layers) == []


#: What a module outside ``lyapax.sweep`` may take from the sweeps: their
#: entry points. Batched rows (steps, problems, families resolved to rows of a
#: plan) are ``lyapax._internal.rows``, shared by sweeps and indicators.
SWEEP_ENTRY_POINTS = {"sweep_lyapunov_spectrum", "sweep_trajectory"}


def taken_from_sweep(module: str, source: str, is_package: bool) -> set[str]:
    """Names (or whole modules) that ``module`` imports from ``lyapax.sweep``."""
    taken = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            taken.update(
                a.name for a in node.names if a.name.startswith("lyapax.sweep")
            )
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module or "", module, node.level, is_package)
            if base == "lyapax.sweep" or base.startswith("lyapax.sweep."):
                taken.update(f"{base}:{a.name}" for a in node.names)
    return taken


def test_the_sweep_import_rule_finds_rows_taken_from_sweeps():
    source = "from lyapax.sweep import ProblemFamily, sweep_lyapunov_spectrum"
    assert taken_from_sweep("lyapax.indicators._gali", source, False) == {
        "lyapax.sweep:ProblemFamily",
        "lyapax.sweep:sweep_lyapunov_spectrum",
    }
    assert taken_from_sweep("lyapax.x", "import lyapax.sweep._setup", False) == {
        "lyapax.sweep._setup"
    }


def test_no_package_imports_the_sweeps_for_rows():
    """Only the sweeps' entry points leave ``lyapax.sweep`` (the top-level
    ``lyapax`` re-exports its public names); rows live in one shared layer."""
    allowed = {f"lyapax.sweep:{name}" for name in SWEEP_ENTRY_POINTS}
    found = {}
    for module, path in MODULES.items():
        if module == "lyapax" or module.startswith("lyapax.sweep"):
            continue
        taken = taken_from_sweep(module, path.read_text(), path.name == "__init__.py")
        if taken - allowed:
            found[module] = taken - allowed
    assert found == {}


def test_batched_rows_have_one_home():
    import lyapax._internal.rows as rows
    import lyapax.sweep

    assert lyapax.sweep.ProblemFamily is rows.ProblemFamily
    assert lyapax.sweep.problem_family is rows.problem_family
    assert lyapax.problem_family is rows.problem_family


def test_edge_couplings_have_one_home_below_the_delay_package():
    """The edge-aware couplings live in ``lyapax.network.edge_coupling``
    (``lyapax.dde`` imports them downwards) and stay published from
    ``lyapax.network.coupling`` and ``lyapax.dde``."""
    import lyapax.dde
    import lyapax.network.coupling as coupling
    import lyapax.network.edge_coupling as edge

    for name in edge.__all__:
        assert getattr(coupling, name) is getattr(edge, name)
        assert name in coupling.__all__
    assert lyapax.dde.as_edge_coupling is edge.as_edge_coupling
    assert edge.EdgeCoupling.__module__ == "lyapax.network.edge_coupling"


def test_result_types_live_with_the_code_that_makes_them():
    import lyapax.utils

    assert lyapax.utils.Trajectory.__module__ == "lyapax._engine.trajectory"
    assert import_graph()["lyapax.integrators"] <= set(
        m for m in MODULES if m.startswith("lyapax._engine")
    )


def test_the_checks_learn_a_vector_field_from_the_step_base():
    """``check_invariants`` asks ``AbstractStep.vector_field``; it imports no
    concrete step (ODE or network) to recognise one by its class."""
    targets = import_graph()["lyapax.checks._invariants"]
    concrete = {
        t for t in targets if t.startswith(("lyapax.integrators", "lyapax.network"))
    }
    assert concrete == set()


#: Attribute names that say what a problem, step, coupling or integrator can do.
CAPABILITIES = {
    "_lyapax_adaptive_ode_only",
    "batched_jvp",
    "combine",
    "dt",
    "edge_aware",
    "edges",
    "fixed_stages",
    "for_engine",
    "presum",
    "source_slopes",
    "sources",
    "state0",
    "step_fn",
    "summable",
    "tangent_step",
    "uniform",
    "uses_step_index",
}


def capability_probes(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of every ``getattr``/``hasattr`` of a capability name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in CAPABILITIES
        ):
            found.append((node.lineno, node.args[1].value))
    return found


def test_the_probe_finder_finds_a_probe():
    assert capability_probes("getattr(f, 'uses_step_index', False)") == [
        (1, "uses_step_index")
    ]
    assert capability_probes("getattr(x, 'shape', None)") == []


def test_capabilities_are_declared_not_probed():
    """Only the ``_legacy`` modules (compatibility with undeclared forms) may
    look at attributes to learn what an object can do."""
    probes = {
        module: capability_probes(path.read_text())
        for module, path in MODULES.items()
        if path.name != "_legacy.py"
    }
    assert {m: p for m, p in probes.items() if p} == {}


def test_compatibility_code_lives_in_legacy_modules():
    """The 0.3.0 builders are defined in one visible module per subpackage."""
    import lyapax.dde
    import lyapax.network
    import lyapax.simulator.step

    legacy = {
        lyapax.dde.make_step_fn: "lyapax.dde._legacy",
        lyapax.dde.make_scalar_delayed_step_fn: "lyapax.dde._legacy",
        lyapax.dde.scalar_delayed_history0: "lyapax.dde._legacy",
        lyapax.dde.constant_history_buf0: "lyapax.dde._legacy",
        lyapax.dde.tau_eff: "lyapax.dde._legacy",
        lyapax.network.make_network_step_fn: "lyapax.network._legacy",
        lyapax.network.make_parametrized_network_step_fn: "lyapax.network._legacy",
        lyapax.simulator.step._write_ring: "lyapax.simulator.step",
    }
    for fn, module in legacy.items():
        assert fn.__module__ == module, (fn.__name__, fn.__module__)
        assert "compatib" in importlib.import_module(module).__doc__.lower()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports(module):
    importlib.import_module(module)


def test_architecture_page_lists_every_subpackage_module():
    listed = listed_modules("Modules")
    on_disk = {
        p.name: {m.stem for m in p.glob("*.py") if m.name != "__init__.py"}
        for p in ROOT.iterdir()
        if (p / "__init__.py").exists()
    }
    assert listed == on_disk


if __name__ == "__main__":
    # The graph the Layers diagram is drawn from: who imports whom, and the
    # lowest line each could sit on (0: imports nothing of lyapax).
    from functools import cache

    units = unit_graph(import_graph())

    @cache
    def lowest(unit: str) -> int:
        return 1 + max((lowest(t) for t in units[unit]), default=-1)

    for unit in sorted(units, key=lambda u: (-lowest(u), u)):
        print(f"{lowest(unit)}  {unit} -> {' '.join(sorted(units[unit])) or '-'}")


_ISSUE_NUMBER = r"\b[Ii]ssue \d+"


def _issue_numbers(text: str) -> list[int]:
    """Lines (1-based) of ``text`` that name a tracker issue by number."""
    import re

    return [
        i
        for i, line in enumerate(text.splitlines(), 1)
        if re.search(_ISSUE_NUMBER, line)
    ]


def test_the_issue_number_rule_finds_one():
    word = "Issue"  # not written next to a number here, or this file would match
    assert _issue_numbers(f'"""Doc."""\nx = 1  # {word} 24\n') == [2]
    assert _issue_numbers("# an issue with the input\n") == []


def test_no_issue_numbers_in_code():
    # Comments and docstrings say why, not which tracker entry asked for it:
    # the history lives in git.
    top = ROOT.parent
    found = [
        f"{path.relative_to(top)}:{line}"
        for folder in (
            "lyapax",
            "pytest_lyapax",
            "tests",
            "perf_tests",
            "benchmarks",
            "examples",
        )
        for path in sorted((top / folder).rglob("*.py"))
        for line in _issue_numbers(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def private_jax_uses(source: str) -> list[int]:
    """Lines that import or name JAX's private ``jax._src`` (its names move
    between releases without notice)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
            if node.module == "jax":
                names += [f"jax.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Attribute) and node.attr == "_src":
            if isinstance(node.value, ast.Name) and node.value.id == "jax":
                names = ["jax._src"]
        if any(n == "jax._src" or n.startswith("jax._src.") for n in names):
            found.append(node.lineno)
    return sorted(set(found))


def test_the_private_jax_rule_finds_each_form():
    assert private_jax_uses("from jax._src.core import trace_state_clean") == [1]
    assert private_jax_uses("import jax._src.core as c") == [1]
    assert private_jax_uses("from jax import _src") == [1]
    assert private_jax_uses("import jax\nx = jax._src.core") == [2]
    assert private_jax_uses("from jax.extend.core import find_top_trace") == []


def test_no_private_jax_import_in_lyapax():
    uses = {m: private_jax_uses(p.read_text()) for m, p in MODULES.items()}
    assert {m: lines for m, lines in uses.items() if lines} == {}


#: The engine's modules: what one hands another travels as a declared type.
ENGINE = {m: p for m, p in MODULES.items() if m.startswith("lyapax._engine")}


def dict_results(source: str) -> list[tuple[int, str]]:
    """``(line, function)`` of each function that returns a string-keyed dict:
    a ``dict``/``Mapping`` return annotation, or a ``return`` of a dict
    literal with a string key (as far as the source says)."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        ann = fn.returns
        head = ann.value if isinstance(ann, ast.Subscript) else ann
        name = getattr(head, "id", None) or getattr(head, "attr", None)
        if name in ("dict", "Dict", "Mapping", "MutableMapping"):
            found.append((fn.lineno, fn.name))
            continue
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Return)
                and isinstance(node.value, ast.Dict)
                and any(
                    isinstance(key, ast.Constant) and isinstance(key.value, str)
                    for key in node.value.keys
                )
            ):
                found.append((node.lineno, fn.name))
                break
    return found


def test_the_dict_result_rule_finds_each_form():
    assert dict_results("def f() -> dict[str, int]:\n    return g()") == [(1, "f")]
    assert dict_results("def f(x):\n    return {'rows': x}") == [(2, "f")]
    assert dict_results("def f(p):\n    return {k: 1 for k in p}") == []
    assert dict_results("def f() -> Estimates:\n    return Estimates(1)") == []


def test_engine_modules_hand_on_typed_records_not_dicts():
    """The kernel's output, the estimates and the run sizes are declared
    types (``equinox.Module`` or ``NamedTuple``) with named fields."""
    found = {m: dict_results(p.read_text()) for m, p in ENGINE.items()}
    assert {m: f for m, f in found.items() if f} == {}


def undeclared_problem_kinds(classes: list[type]) -> list[str]:
    """Names of the classes that present themselves to the engine
    (``for_engine``) without subclassing ``AbstractProblem``."""
    from lyapax._engine.abstract import AbstractProblem

    return sorted(
        c.__name__
        for c in classes
        if callable(getattr(c, "for_engine", None)) and AbstractProblem not in c.__mro__
    )


def registrations(source: str) -> list[int]:
    """Lines that ``register`` a class with ``AbstractProblem`` (a virtual
    subclass: its abstract methods go unchecked)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "register"
        and getattr(node.func.value, "id", None) == "AbstractProblem"
    ]


def test_the_problem_rules_find_an_undeclared_kind():
    from typing import NamedTuple

    class Loose(NamedTuple):
        dt: float

        def for_engine(self):
            return None

    assert undeclared_problem_kinds([Loose, int]) == ["Loose"]
    assert registrations("AbstractProblem.register(Loose)") == [1]


def test_a_kind_missing_a_method_or_dt_fails_when_created():
    from lyapax._engine.abstract import AbstractProblem

    with pytest.raises(TypeError, match="with_state"):

        class NoState(AbstractProblem):
            dt = 0.1

            def for_engine(self):
                return None

            def with_params(self, params):
                return self

    with pytest.raises(TypeError, match="dt"):

        class NoDt(AbstractProblem):
            def for_engine(self):
                return None

            def with_params(self, params):
                return self

            def with_state(self, state0):
                return self


def test_every_problem_kind_subclasses_abstract_problem():
    classes = []
    for module in MODULES:
        for value in vars(importlib.import_module(module)).values():
            if isinstance(value, type) and value.__module__.startswith("lyapax"):
                classes.append(value)
    assert undeclared_problem_kinds(classes) == []
    found = {m: registrations(p.read_text()) for m, p in MODULES.items()}
    assert {m: lines for m, lines in found.items() if lines} == {}
