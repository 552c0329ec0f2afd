"""The published step builders: ``make_step_fn`` and ``build_jax_dfun``.

``make_step_fn`` (the carry step of a delay-coupled network) is built by the
delay engine, :mod:`lyapax.dde`; ``build_jax_dfun`` compiles a
:class:`~lyapax.simulator.ModelSpec` to the node ``dfun`` both take.
"""

from lyapax.dde._compat import make_step_fn
from lyapax.simulator._model import build_jax_dfun

__all__ = ["build_jax_dfun", "make_step_fn"]
