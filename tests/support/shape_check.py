"""Shape and type annotations of the public entry points, checked by the tests
(the conftest of ``tests/`` installs this module's checks).

Every test calls the entry points below through ``jaxtyping.jaxtyped`` with
beartype, so their annotations (``Float[Array, "d k"]`` shapes, with axis
names shared across arguments and the result) are checked on each call the
suite makes. The annotations may be wider than what a function accepts, never
narrower: when the check rejects a call, the function itself is called and
must reject it with its own error (which the test then sees); if it accepts
the call instead, the annotation is wrong and the check's error is raised.
"""

from __future__ import annotations

import functools
import sys

from beartype import BeartypeConf, beartype
from jaxtyping import TypeCheckError, jaxtyped

import lyapax
import lyapax.converge
import lyapax.core
import lyapax.covariant
import lyapax.dde
import lyapax.diagnostics
import lyapax.indicators
import lyapax.network
import lyapax.sweep
import lyapax.utils

#: The public entry points whose annotations the suite checks.
ENTRY_POINTS = (
    lyapax.core.lyapunov_spectrum,
    lyapax.core.ode_problem,
    lyapax.dde.lyapunov_spectrum_dde,
    lyapax.dde.dde_problem,
    lyapax.dde.network_dde_problem,
    lyapax.network.network_problem,
    lyapax.network.network_step,
    lyapax.sweep.sweep_lyapunov_spectrum,
    lyapax.sweep.sweep_trajectory,
    lyapax.converge.run_until_converged,
    lyapax.utils.simulate_trajectory,
    lyapax.diagnostics.kaplan_yorke_dimension,
    lyapax.diagnostics.convergence_drift,
    lyapax.covariant.covariant_vectors,
    lyapax.covariant.sweep_covariant_vectors,
    lyapax.covariant.subspace_angles,
    lyapax.indicators.two_trajectory_exponent,
    lyapax.indicators.gali,
    lyapax.indicators.expansion_entropy,
    lyapax.indicators.zero_one_test,
    lyapax.indicators.delay_embedding,
    lyapax.indicators.lyapunov_rosenstein,
    lyapax.indicators.lyapunov_kantz,
    lyapax.indicators.linear_region,
)


#: PEP 484's numeric tower, as static checkers read annotations: an ``int``
#: passes where a ``float`` is annotated.
CHECKER = beartype(conf=BeartypeConf(is_pep484_tower=True))


def shape_checked(fn):
    """``fn`` with its annotations checked (see the module docstring)."""
    typed = jaxtyped(typechecker=CHECKER)(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return typed(*args, **kwargs)
        except TypeCheckError:
            fn(*args, **kwargs)  # must raise its own, clearer error
            raise

    call.__wrapped_by_shape_check__ = True
    return call


def install() -> None:
    """Replace every entry point, wherever lyapax exports it, by its check."""
    for fn in ENTRY_POINTS:
        checked = shape_checked(fn)
        for name, module in list(sys.modules.items()):
            if name == "lyapax" or name.startswith("lyapax."):
                for attr, value in list(vars(module).items()):
                    if value is fn:
                        setattr(module, attr, checked)
