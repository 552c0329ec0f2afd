"""What ``import lyapax`` loads, and the lazy re-exports of its packages.

The packages import their features when first used (PEP 562 hooks of
:mod:`lyapax._internal.lazy`); the same names sit in an ``if TYPE_CHECKING:``
block of imports for type checkers. These tests pin the modules a bare import
loads and check that the block and the runtime table name the same objects.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import lyapax

ROOT = Path(lyapax.__file__).parent

#: The modules of lyapax a bare ``import lyapax`` loads: no feature, no JAX.
BARE_IMPORT = [
    "lyapax",
    "lyapax.__version__",
    "lyapax._internal",
    "lyapax._internal.lazy",
    "lyapax._public",
]

_PROBE = """
import json, sys
import lyapax
print(json.dumps({
    "lyapax": sorted(m for m in sys.modules if m.split(".")[0] == "lyapax"),
    "jax": "jax" in sys.modules,
}))
"""


def _fresh(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT.parent,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_bare_import_loads_no_feature_and_no_jax():
    loaded = _fresh(_PROBE)
    assert loaded["lyapax"] == BARE_IMPORT
    assert not loaded["jax"]


def test_from_lyapax_import_loads_only_what_it_names():
    code = _PROBE.replace(
        "import lyapax\n", "from lyapax import lyapunov_spectrum, coupling\n"
    )
    loaded = set(_fresh(code)["lyapax"])
    assert {"lyapax.core", "lyapax.coupling"} <= loaded
    assert not loaded & {"lyapax.indicators", "lyapax.covariant", "lyapax.pde"}


def _lazy_packages() -> list[Path]:
    return sorted(
        p
        for p in ROOT.rglob("__init__.py")
        if "lazy_exports(" in p.read_text() and p.parent != ROOT / "_internal"
    )


def _package(path: Path) -> str:
    return ".".join(path.parent.relative_to(ROOT.parent).parts)


def _type_checking_names(path: Path) -> dict[str, tuple[str, str | None]]:
    """``{name: (module, attribute or None for a module)}`` of the
    ``if TYPE_CHECKING:`` block."""
    names = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom), ast.unparse(imp)
                for alias in imp.names:
                    names[alias.asname or alias.name] = (imp.module, alias.name)
    return names


@pytest.mark.parametrize("path", _lazy_packages(), ids=_package)
def test_the_type_checking_block_names_the_runtime_objects(path):
    """Each name the type checkers see is the object the package hands out
    at run time, and the package hands out nothing the block leaves out."""
    package = importlib.import_module(_package(path))
    seen = _type_checking_names(path)
    assert seen, path
    for name, (module, attr) in seen.items():
        source = importlib.import_module(module)
        expected = getattr(source, attr, None)
        if expected is None:  # ``from lyapax import coupling``: a submodule
            expected = importlib.import_module(f"{module}.{attr}")
        assert getattr(package, name) is expected, (name, module)
    exported = set(getattr(package, "__all__", ()))
    assert exported <= set(seen) | {"__version__", "PUBLIC_MODULES"}
    assert exported <= set(dir(package))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        lyapax.not_a_name  # noqa: B018
    with pytest.raises(ImportError):
        from lyapax import not_a_name  # noqa: F401


def test_a_public_submodule_is_an_attribute():
    assert lyapax.systems is importlib.import_module("lyapax.systems")


_FIRST_RUN = """
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
before = "scipy" in sys.modules
from lyapax import lyapunov_spectrum, ode_problem
from lyapax.systems import lorenz
problem = ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)
lyapunov_spectrum(problem, n_steps=20, renorm_every=10).exponents.block_until_ready()
print(json.dumps({"before": before, "after": "scipy" in sys.modules}))
"""


def test_the_readme_call_on_a_cpu_needs_no_lapack_lowering():
    # A small frame's QR is NumPy's, and a d <= 16 renormalisation the fused
    # QR: the first call lowers no LAPACK custom call, whose lowering imports
    # SciPy (0.1 s of a second process's first call with the compile cache).
    code = "import os\nos.environ['JAX_PLATFORMS'] = 'cpu'\n" + _FIRST_RUN
    loaded = _fresh(code)
    if loaded["before"]:
        pytest.skip("this JAX imports SciPy itself")
    assert not loaded["after"]
