"""The plugin's extension points: hooks a ``conftest.py`` (or another plugin)
implements to change what pytest-lyapax does, without forking it.

Added to pytest's hooks by ``plugin.pytest_addhooks``.  Each hook has a
default implementation in ``plugin.py`` (registered ``trylast``) that does
what the plugin does without one, so a run that implements none behaves as
before.  A ``firstresult`` hook stops at the first implementation that
returns something other than None: return None to leave the choice to the
next one (in the end, the plugin's own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_lyapax.backends.labels import Backend


@pytest.hookspec(firstresult=True)
def pytest_lyapax_select_backends(
    config: pytest.Config, backends: Sequence[Backend]
) -> Sequence[str] | None:
    """Choose which of the requested backends run, and in which order.

    Called once, in the main process, when the options are read: ``backends``
    are those of ``--jax-backend`` (or the ``jax_backend`` ini key) in the
    order given, each with its platform and host (``--jax-backend-platform``,
    ``--jax-backend-host``), before the labels derived from them
    (``--jax-backend-env`` variants are attached, ``--jax-devices``,
    ``--jax-rerun`` and ``--jax-ab`` labels are added after the choice, for
    the chosen labels only: naming an unchosen one there is a usage error).

    Return the labels to run, in run order: a non-empty selection of the
    requested labels, each at most once (anything else is a usage error).
    The plugin's own implementation returns every label in the order given.

    .. code-block:: python

        def pytest_lyapax_select_backends(config, backends):
            # Skip the GPU where none is installed.
            import shutil

            gpu = shutil.which("nvidia-smi") is not None
            return [b.label for b in backends if b.platform != "cuda" or gpu]
    """


@pytest.hookspec(firstresult=True)
def pytest_lyapax_machine_info(
    config: pytest.Config, backend: Backend | None
) -> Mapping[str, Any] | None:
    """Describe the machine a benchmark runs on, in the process that runs it.

    Called in each worker (or, without xdist, the process that runs the
    tests) once per benchmark, as it is set up; ``backend`` is the backend
    the test runs on (None: a test without one).  The returned mapping is
    added to the benchmark's ``extra_info``, where a key already there
    (one the test set itself, ``backend``) keeps its value.  The plugin's own
    implementation returns the JAX backend, device kind and count, and the
    jax and jaxlib versions of the process (``jax_backend``, ``device``,
    ``device_count``, ``jax_version``, ``jaxlib_version``); return a mapping
    to replace that description.  To add keys to it instead, implement
    :func:`pytest_lyapax_update_machine_info`.
    """


def pytest_lyapax_update_machine_info(
    config: pytest.Config, backend: Backend | None, machine_info: dict[str, Any]
) -> None:
    """Change the description of :func:`pytest_lyapax_machine_info` in place
    (every implementation is called), e.g. to add the node's name:

    .. code-block:: python

        def pytest_lyapax_update_machine_info(config, backend, machine_info):
            machine_info["rack"] = os.environ.get("RACK", "")
    """
