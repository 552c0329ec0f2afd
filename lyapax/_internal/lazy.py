"""Packages that import their features when first used (PEP 562).

A package's ``__init__`` lists what it re-exports as ``{module: names}`` and
binds the two hooks this module makes::

    __getattr__, __dir__ = lazy_exports(__name__, {"lyapax.core": ("ODEProblem",)})

``package.ODEProblem`` (and ``from package import ODEProblem``) then imports
``lyapax.core`` on first use and keeps the object in the package's namespace,
so the second look-up is an ordinary attribute. A name that is a submodule
(``{"lyapax.coupling": None}`` names ``lyapax.coupling`` itself) or any
importable submodule of the package loads the same way. Static type checkers
read the same names from an ``if TYPE_CHECKING:`` block of imports in the
``__init__``; ``tests/test_layout.py`` checks that the block and the table
agree.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, Iterable[str] | None]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: each name of
    ``exports[module]`` is imported from ``module`` when first looked up; a
    module mapped to ``None`` is itself the attribute (its last name)."""
    where: dict[str, tuple[str, str | None]] = {}
    for module, names in exports.items():
        if names is None:
            where[module.rsplit(".", 1)[1]] = (module, None)
        else:
            for name in names:
                where[name] = (module, name)

    def __getattr__(name: str) -> Any:
        found = where.get(name)
        if found is not None:
            module, attr = found
            value = importlib.import_module(module)
            if attr is not None:
                value = getattr(value, attr)
        elif not name.startswith("__") and _is_submodule(package, name):
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        namespace = vars(sys.modules[package])
        return sorted(set(namespace) | set(where))

    return __getattr__, __dir__


def _is_submodule(package: str, name: str) -> bool:
    try:
        return importlib.util.find_spec(f"{package}.{name}") is not None
    except (ImportError, ValueError):
        return False
