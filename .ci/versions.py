"""Print the versions an environment resolved (called by .ci/run and .ci/matrix)."""

import sys
from importlib.metadata import PackageNotFoundError, version

NAMES = [
    "jax", "jaxlib", "numpy", "equinox", "jaxtyping", "diffrax", "tqdm", "pytest",
    "pytest-benchmark", "pytest-xdist", "matplotlib", "scipy", "optax",
]  # fmt: skip


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


print(f"   Python {sys.version.split()[0]}: " + ", ".join(
    f"{name} {_version(name)}" for name in NAMES
))  # fmt: skip
