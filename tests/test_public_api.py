"""The public surface: every exported name imports; one version everywhere."""

import importlib
import importlib.metadata
import pkgutil

import pytest

import lyapax

PUBLIC_MODULES = lyapax.PUBLIC_MODULES


def test_the_public_modules_are_those_named_without_an_underscore():
    """One convention: a module of lyapax is public when its name has no
    leading underscore, and ``lyapax.PUBLIC_MODULES`` lists every such module
    and subpackage once."""
    on_disk = {
        f"lyapax.{m.name}"
        for m in pkgutil.iter_modules(lyapax.__path__)
        if not m.name.startswith("_")
    }
    assert len(set(PUBLIC_MODULES)) == len(PUBLIC_MODULES)
    assert set(PUBLIC_MODULES) == on_disk


@pytest.mark.parametrize("name", lyapax.__all__)
def test_every_name_in_all_is_importable(name):
    assert getattr(lyapax, name) is not None


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_public_modules_export_what_they_list(module):
    mod = importlib.import_module(module)
    for name in getattr(mod, "__all__", []):
        assert hasattr(mod, name), f"{module}.{name}"


def test_version_is_defined_once_and_matches_the_distribution():
    version_module = importlib.import_module("lyapax.__version__")
    assert version_module.__version__ == lyapax.__version__
    try:
        installed = importlib.metadata.version("lyapax")
    except importlib.metadata.PackageNotFoundError:
        # As on the lent TPU, where the tree runs from PYTHONPATH; CI and
        # README's set-up install it, and check the version here.
        pytest.skip("lyapax is not installed: the tree runs from its path")
    assert installed == lyapax.__version__


@pytest.mark.parametrize("package", ["lyapax", "pytest_lyapax"])
def test_packages_carry_the_pep561_marker(package):
    # Without py.typed (and its package-data entry, so that a wheel has it)
    # users' type checkers ignore the annotations mypy checks here.
    import tomllib
    from importlib.resources import files
    from pathlib import Path

    assert (files(package) / "py.typed").is_file()
    pyproject = Path(__file__).parents[1] / "pyproject.toml"
    data = tomllib.loads(pyproject.read_text())
    assert "py.typed" in data["tool"]["setuptools"]["package-data"][package]
