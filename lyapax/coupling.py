"""Network couplings (public path; they live in :mod:`lyapax.network.coupling`)."""

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
