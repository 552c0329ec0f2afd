"""Network couplings at their lyapax 0.3.0 public path (compatibility module).

They live in :mod:`lyapax.network.coupling`, with their declared bases
(:class:`AbstractCoupling`, :class:`AbstractDelayedCoupling`,
:class:`AbstractSummedCoupling`) for couplings of your own.
"""

from lyapax.network.coupling import (
    AbstractCoupling,
    AbstractDelayedCoupling,
    AbstractSummedCoupling,
    KuramotoCoupling,
    LinearCoupling,
    SigmoidalCoupling,
    coupling_jvp,
    kuramoto_coupling,
    linear_coupling,
    sigmoidal_coupling,
)

__all__ = [
    "AbstractCoupling",
    "AbstractDelayedCoupling",
    "AbstractSummedCoupling",
    "KuramotoCoupling",
    "LinearCoupling",
    "SigmoidalCoupling",
    "coupling_jvp",
    "kuramoto_coupling",
    "linear_coupling",
    "sigmoidal_coupling",
]
