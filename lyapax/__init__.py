"""lyapax: Lyapunov spectra of ODEs, maps, delay equations and networks in JAX."""

from typing import TYPE_CHECKING

from lyapax.__version__ import __version__
from lyapax._internal.lazy import lazy_exports
from lyapax._public import PUBLIC_MODULES

if TYPE_CHECKING:
    from lyapax import coupling
    from lyapax.checks import Check, InvariantReport, check_invariants
    from lyapax.converge import (
        CheckpointError,
        CheckpointLocked,
        ConvergedRun,
        ConvergenceProgress,
        run_until_converged,
    )
    from lyapax.core import (
        ConvergenceDrift,
        LyapunovCheckpoint,
        LyapunovResult,
        ODEProblem,
        convergence_drift,
        kaplan_yorke_dimension,
        lyapunov_spectrum,
        ode_problem,
    )
    from lyapax.covariant import (
        CovariantResult,
        covariant_vectors,
        subspace_angles,
        sweep_covariant_vectors,
    )
    from lyapax.dde import (
        DDECheckpoint,
        DDEProblem,
        dde_problem,
        lyapunov_spectrum_dde,
        network_dde_problem,
    )
    from lyapax.driven import (
        DrivenProblem,
        RandomProblem,
        SDEProblem,
        driven_problem,
        random_problem,
        sde_problem,
    )
    from lyapax.finite_time import (
        FiniteTimeResult,
        FTLEField,
        finite_time_exponents,
        ftle_field,
    )
    from lyapax.hamiltonian import HamiltonianProblem, hamiltonian_problem
    from lyapax.hybrid import HybridProblem, hybrid_problem
    from lyapax.indicators import (
        DivergenceResult,
        ExpansionEntropy,
        GALIResult,
        MEGNOResult,
        TwoTrajectoryResult,
        ZeroOneResult,
        delay_embedding,
        expansion_entropy,
        gali,
        lyapunov_kantz,
        lyapunov_rosenstein,
        megno,
        two_trajectory_exponent,
        zero_one_test,
    )
    from lyapax.integrators import (
        euler_step,
        get_integrator,
        heun_step,
        ode_step,
        rk4_step,
        rk6_step,
    )
    from lyapax.network import (
        MSFResult,
        Network,
        master_stability_function,
        network_problem,
        network_step,
        network_step_parametrized,
    )
    from lyapax.shadowing import ShadowingResult, shadowing_sensitivity
    from lyapax.sweep import problem_family, sweep_lyapunov_spectrum, sweep_trajectory
    from lyapax.utils import simulate_trajectory

__all__ = [
    "__version__",
    "PUBLIC_MODULES",
    "ConvergenceDrift",
    "LyapunovCheckpoint",
    "LyapunovResult",
    "ODEProblem",
    "convergence_drift",
    "euler_step",
    "get_integrator",
    "heun_step",
    "kaplan_yorke_dimension",
    "lyapunov_spectrum",
    "ode_problem",
    "ode_step",
    "rk4_step",
    "rk6_step",
    "simulate_trajectory",
    # networks and delays
    "DDECheckpoint",
    "DDEProblem",
    "Network",
    "dde_problem",
    "lyapunov_spectrum_dde",
    "network_dde_problem",
    "network_problem",
    "network_step",
    "network_step_parametrized",
    "coupling",
    # covariant vectors
    "CovariantResult",
    "covariant_vectors",
    "subspace_angles",
    "sweep_covariant_vectors",
    # finite-time exponents and FTLE fields
    "FTLEField",
    "FiniteTimeResult",
    "finite_time_exponents",
    "ftle_field",
    # sweeps and convergence
    "CheckpointError",
    "CheckpointLocked",
    "ConvergedRun",
    "ConvergenceProgress",
    "problem_family",
    "run_until_converged",
    "sweep_lyapunov_spectrum",
    "sweep_trajectory",
    # Hamiltonian systems on symplectic steps
    "HamiltonianProblem",
    "hamiltonian_problem",
    # flows with impacts and switches (saltation-corrected tangents)
    "HybridProblem",
    "hybrid_problem",
    # synchronisation and self-checks
    "MSFResult",
    "master_stability_function",
    "Check",
    "InvariantReport",
    "check_invariants",
    # chaos indicators
    "ExpansionEntropy",
    "GALIResult",
    "MEGNOResult",
    "TwoTrajectoryResult",
    "expansion_entropy",
    "gali",
    "megno",
    "two_trajectory_exponent",
    # chaos indicators: the 0-1 test, exponents from a measured series
    "DivergenceResult",
    "ZeroOneResult",
    "delay_embedding",
    "lyapunov_kantz",
    "lyapunov_rosenstein",
    "zero_one_test",
    # driven and random systems
    "DrivenProblem",
    "RandomProblem",
    "SDEProblem",
    "driven_problem",
    "random_problem",
    "sde_problem",
    # derivatives of long-time averages (least-squares shadowing)
    "ShadowingResult",
    "shadowing_sensitivity",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "lyapax.coupling": None,
        "lyapax.checks": ("Check", "InvariantReport", "check_invariants"),
        "lyapax.converge": (
            "CheckpointError",
            "CheckpointLocked",
            "ConvergedRun",
            "ConvergenceProgress",
            "run_until_converged",
        ),
        "lyapax.core": (
            "ConvergenceDrift",
            "LyapunovCheckpoint",
            "LyapunovResult",
            "ODEProblem",
            "convergence_drift",
            "kaplan_yorke_dimension",
            "lyapunov_spectrum",
            "ode_problem",
        ),
        "lyapax.covariant": (
            "CovariantResult",
            "covariant_vectors",
            "subspace_angles",
            "sweep_covariant_vectors",
        ),
        "lyapax.dde": (
            "DDECheckpoint",
            "DDEProblem",
            "dde_problem",
            "lyapunov_spectrum_dde",
            "network_dde_problem",
        ),
        "lyapax.driven": (
            "DrivenProblem",
            "RandomProblem",
            "SDEProblem",
            "driven_problem",
            "random_problem",
            "sde_problem",
        ),
        "lyapax.finite_time": (
            "FiniteTimeResult",
            "FTLEField",
            "finite_time_exponents",
            "ftle_field",
        ),
        "lyapax.hamiltonian": ("HamiltonianProblem", "hamiltonian_problem"),
        "lyapax.hybrid": ("HybridProblem", "hybrid_problem"),
        "lyapax.indicators": (
            "DivergenceResult",
            "ExpansionEntropy",
            "GALIResult",
            "MEGNOResult",
            "TwoTrajectoryResult",
            "ZeroOneResult",
            "delay_embedding",
            "expansion_entropy",
            "gali",
            "lyapunov_kantz",
            "lyapunov_rosenstein",
            "megno",
            "two_trajectory_exponent",
            "zero_one_test",
        ),
        "lyapax.integrators": (
            "euler_step",
            "get_integrator",
            "heun_step",
            "ode_step",
            "rk4_step",
            "rk6_step",
        ),
        "lyapax.network": (
            "MSFResult",
            "Network",
            "master_stability_function",
            "network_problem",
            "network_step",
            "network_step_parametrized",
        ),
        "lyapax.shadowing": ("ShadowingResult", "shadowing_sensitivity"),
        "lyapax.sweep": (
            "problem_family",
            "sweep_lyapunov_spectrum",
            "sweep_trajectory",
        ),
        "lyapax.utils": ("simulate_trajectory",),
    },
)
