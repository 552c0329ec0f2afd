"""One OpenBLAS policy for every public entry point that runs XLA programs.

Each such entry point is decorated with
:func:`lyapax._engine.blas_threads.holds_one_blas_thread` (OpenBLAS held to
one thread while its programs run on CPU, docs/performance.md). These tests
replace the policy by one that raises as soon as it is entered, call every
entry point on a tiny problem and see it raised, so nothing is compiled; a
new public function must join the list or the exempt set (builders, result
types, host-only helpers).
"""

from __future__ import annotations

import contextlib
import inspect

import jax.numpy as jnp
import numpy as np
import pytest

import lyapax
from lyapax import (
    check_invariants,
    covariant_vectors,
    dde_problem,
    delay_embedding,
    expansion_entropy,
    finite_time_exponents,
    ftle_field,
    gali,
    lyapunov_kantz,
    lyapunov_rosenstein,
    lyapunov_spectrum,
    lyapunov_spectrum_dde,
    master_stability_function,
    megno,
    ode_problem,
    problem_family,
    run_until_converged,
    shadowing_sensitivity,
    simulate_trajectory,
    subspace_angles,
    sweep_covariant_vectors,
    sweep_lyapunov_spectrum,
    sweep_trajectory,
    two_trajectory_exponent,
    zero_one_test,
)
from lyapax._engine import blas_threads
from lyapax.integrators import rk4_step
from lyapax.systems import lorenz

X0 = jnp.array([1.0, 1.0, 1.0])
lorenz_step = rk4_step(lorenz(), 0.01)
SERIES = np.sin(0.1 * np.arange(400.0))

#: Public functions that build problems, steps or results, or only compute
#: on the host: they run no XLA program of their own worth holding.
EXEMPT = {
    "convergence_drift",
    "dde_problem",
    "driven_problem",
    "euler_step",
    "get_integrator",
    "hamiltonian_problem",
    "hybrid_problem",
    "heun_step",
    "kaplan_yorke_dimension",
    "network_dde_problem",
    "network_problem",
    "network_step",
    "network_step_parametrized",
    "ode_problem",
    "ode_step",
    "problem_family",
    "random_problem",
    "rk4_step",
    "rk6_step",
    "sde_problem",
}


def _problem():
    return ode_problem(lorenz(), X0, 0.01)


def _family():
    return problem_family(lambda rho: ode_problem(lorenz(rho=rho), X0, 0.01))


#: Every entry point with a tiny call of it.
CALLS = {
    "lyapunov_spectrum": lambda: lyapunov_spectrum(_problem(), 10),
    "run_until_converged": lambda: run_until_converged(
        _problem(), tol=0.1, max_steps=100, chunk_steps=10
    ),
    "simulate_trajectory": lambda: simulate_trajectory(lorenz_step, X0, 10, 0.01),
    "lyapunov_spectrum_dde": lambda: lyapunov_spectrum_dde(
        dde_problem(lambda x, xd: -xd, jnp.array([1.0]), 1.0, 0.1), 20
    ),
    "covariant_vectors": lambda: covariant_vectors(_problem(), 10),
    "sweep_covariant_vectors": lambda: sweep_covariant_vectors(
        lambda rho: ode_problem(lorenz(rho=rho), X0, 0.01), jnp.array([27.0, 28.0]), 10
    ),
    "subspace_angles": lambda: subspace_angles(jnp.eye(3)[:, :1], jnp.eye(3)[:, 1:]),
    "finite_time_exponents": lambda: finite_time_exponents(_problem(), 100, 0.5),
    "ftle_field": lambda: ftle_field(lorenz(), np.zeros((2, 3)), 0.1, dt=0.01),
    "sweep_lyapunov_spectrum": lambda: sweep_lyapunov_spectrum(
        _family(), None, jnp.array([27.0, 28.0]), 0.01, 10
    ),
    "sweep_trajectory": lambda: sweep_trajectory(
        _family(), None, jnp.array([27.0, 28.0]), 0.01, 10
    ),
    "master_stability_function": lambda: master_stability_function(
        lorenz(), X0, np.eye(3), [0.1], 0.01, 10
    ),
    "check_invariants": lambda: check_invariants(_problem(), 10),
    "expansion_entropy": lambda: expansion_entropy(_problem(), X0[None], 10),
    "gali": lambda: gali(_problem(), 10),
    "megno": lambda: megno(_problem(), 10),
    "two_trajectory_exponent": lambda: two_trajectory_exponent(_problem(), 10),
    "delay_embedding": lambda: delay_embedding(SERIES, 3, 2),
    "lyapunov_rosenstein": lambda: lyapunov_rosenstein(SERIES, 3, 2),
    "lyapunov_kantz": lambda: lyapunov_kantz(SERIES, 3, 2),
    "zero_one_test": lambda: zero_one_test(SERIES),
    "shadowing_sensitivity": lambda: shadowing_sensitivity(
        lambda x, p: p - x, X0, 1.0, lambda x, p: x[0], 0.01, 2, 5, n_unstable=0
    ),
}


class _Entered(Exception):
    """Raised by the replaced policy when an entry point enters it."""


@contextlib.contextmanager
def _raising(enabled: bool = True):
    raise _Entered
    yield  # pragma: no cover


def test_every_public_entry_point_is_listed():
    public = {
        name
        for name in lyapax.__all__
        if inspect.isfunction(getattr(lyapax, name))
        and not inspect.isclass(getattr(lyapax, name))
    }
    assert public - EXEMPT == set(CALLS)
    assert len(blas_threads.ENTRY_POINTS) >= len(CALLS)


ON_CPU = "the OpenBLAS policy holds where JAX computes on the CPU"


@pytest.mark.cpu_backend_only(ON_CPU)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_entry_point_goes_through_the_blas_policy(name, monkeypatch):
    monkeypatch.setattr(blas_threads, "one_blas_thread", _raising)
    with pytest.raises(_Entered):
        CALLS[name]()


@pytest.mark.cpu_backend_only(ON_CPU)
def test_a_sweep_holds_openblas_to_one_thread_and_restores_it():
    # End to end: the count is 1 while a sweep traces its rows' step, and the
    # previous count is back after the call.
    lyapunov_spectrum(_problem(), 10)  # LAPACK is loaded by now
    controls = blas_threads.blas_thread_controls()
    if not controls:
        pytest.skip("no OpenBLAS loaded in this process (not Linux, or MKL)")
    before = [get() for _, get in controls]
    counts = []

    def step(x, r):
        counts.append([get() for _, get in controls])
        return r * x * (1.0 - x)

    out = sweep_lyapunov_spectrum(
        step, jnp.array([0.3]), jnp.array([3.7, 3.9]), 1.0, 50
    )
    assert np.all(np.isfinite(np.asarray(out.exponents)))
    assert counts and counts[-1] == [1] * len(controls)
    assert [get() for _, get in controls] == before


def test_the_loaded_libraries_are_read_during_the_first_use_only(monkeypatch):
    """Both reads of ``/proc/self/maps`` fall in the first use (start and
    end, where it compiled), none at the start of the next run: the seed
    page's timed second call paid ~1 ms for the second read."""
    reads = []

    def loaded():
        reads.append(1)
        return []

    monkeypatch.setattr(blas_threads, "_loaded_openblas", loaded)
    monkeypatch.setitem(blas_threads._state, "scans", 0)
    monkeypatch.setitem(blas_threads._state, "controls", [])
    with blas_threads.one_blas_thread():
        assert len(reads) == 1
    assert len(reads) == 2
    with blas_threads.one_blas_thread():
        pass
    assert len(reads) == 2
