"""Every public entry point of lyapax once, on a tiny problem, in one precision.

Made for the lent TPU, where float64 is emulated and XLA refuses some
operations: one process checks that each entry point compiles and runs in
``--dtype float32`` and in ``--dtype float64`` on whatever device JAX picks.
On a CPU it is a smoke run (CI). The entries, each on the smallest problem
and the fewest steps that still take its code path (``--list`` prints
them):

- spectra: ``lyapunov_spectrum`` of Lorenz (an ODE problem) and of the Henon
  map (a step function), ``simulate_trajectory``, ``run_until_converged``,
  ``kaplan_yorke_dimension``, ``convergence_drift``, ``check_invariants``;
- covariant vectors: ``covariant_vectors``, ``sweep_covariant_vectors``,
  ``subspace_angles``;
- sweeps: ``sweep_lyapunov_spectrum`` and ``sweep_trajectory`` over a
  ``problem_family`` of four rho values;
- finite time: ``finite_time_exponents``, ``ftle_field``, ``ftle_grid``
  (double gyre);
- delays: ``lyapunov_spectrum_dde`` of Mackey-Glass, a Kuramoto network
  with per-edge delays (``lyapax.simulator``'s ``ModelSpec`` through
  ``network_dde_problem``);
- networks: Kuramoto with dense and sparse (``BCOO``) weights
  (``systems.kuramoto_network``), a linear ``network_problem``,
  ``transversal_exponents``, ``master_stability_function`` and
  ``synchronisation``;
- problem kinds: Kuramoto-Sivashinsky and complex Ginzburg-Landau
  (``lyapax.pde``), ``hamiltonian_problem`` (Henon-Heiles), ``driven_problem``,
  ``random_problem``, ``sde_problem``, ``hybrid_problem`` (impact
  oscillator), a diffrax adaptive step (``lyapax.adaptive``);
- ``shadowing_sensitivity`` (Lorenz, d<z>/drho);
- indicators: ``megno``, ``gali``, ``two_trajectory_exponent``,
  ``expansion_entropy``, ``zero_one_test``, ``delay_embedding``,
  ``lyapunov_rosenstein``, ``lyapunov_kantz``.

Left out: the builders of steps and problems on their own (each entry above
builds one), ``lyapax.distributed`` (several processes) and host-only helpers
such as ``laplacian_spectrum``.

``--dtype`` builds every input (states, parameters, weights, series) in that
dtype; x64 stays on, so a float32 entry computes in float32 only where the
library keeps its inputs' dtype (each row names its outputs' dtypes). Some
defaults of the library are float64's (docs/testing.md, ``float64_only``):
in float32 ``gali`` gets ``threshold=1e-6`` and ``two_trajectory_exponent``
``d0=1e-3`` (their defaults 1e-12 and 1e-9 lie below float32's rounding),
the diffrax step ``rtol=1e-4, atol=1e-6`` (float64: 1e-8, 1e-10).

Printed: a JSON header (backend, device, jax, dtype), one JSON line per
entry (the first call's time, compilation included, and a second call's;
whether the outputs it checks are finite, their dtypes, the first values of
the first one, any warnings; or the error) and a summary line with the
counts ok / failed / not finite. A program that an earlier entry compiled
is reused (``finite_time_exponents`` after ``lyapunov_spectrum.ode``): with
``--only`` the first calls can take longer than in a full run.
``--json PATH`` also writes every row. ``--jobs N`` compiles N entries at
once in threads: compilation is host work, and on the lent TPU v5e the 40
float64 entries (about a minute of compiling each there) took about 2
minutes with ``--jobs 12`` instead of half an hour; times are then wall
times under that contention and warnings are not recorded. The exit code is 0 unless
``--strict`` is given: then 1 if an entry failed or gave a non-finite
output. Run:

    python benchmarks/entry_points.py --dtype float32 --json f32.json
    python benchmarks/entry_points.py --dtype float64 --only megno,gali
    python benchmarks/entry_points.py --dtype float64 --jobs 12
    python benchmarks/entry_points.py --list
"""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from sparse_bench import ring_lattice  # noqa: E402

import lyapax  # noqa: E402
from lyapax import systems  # noqa: E402
from lyapax.coupling import kuramoto_coupling, linear_coupling  # noqa: E402
from lyapax.finite_time import ftle_grid  # noqa: E402
from lyapax.network import (  # noqa: E402
    Network,
    synchronisation,
    transversal_exponents,
)
from lyapax.pde import complex_ginzburg_landau, kuramoto_sivashinsky  # noqa: E402
from lyapax.simulator import (  # noqa: E402
    Connectivity,
    ModelSpec,
    Parameter,
    StateVar,
    build_jax_dfun,
)

#: An entry builds its problem (untimed) and returns ``run``, a call of the
#: entry point, and ``pick``, the outputs of its result that must be finite.
Entry = Callable[[Any], tuple[Callable[[], Any], Callable[[Any], dict[str, Any]]]]
ENTRIES: dict[str, Entry] = {}


def entry(name: str) -> Callable[[Entry], Entry]:
    def register(build: Entry) -> Entry:
        ENTRIES[name] = build
        return build

    return register


def f32(dtype) -> bool:
    return np.dtype(dtype) == np.float32


def lorenz_problem(dtype, rho=28.0):
    x0 = jnp.asarray([1.0, 1.0, 1.0], dtype)
    return lyapax.ode_problem(systems.lorenz(rho=rho), x0, dt=0.01)


def spectrum(result) -> dict[str, Any]:
    return {"exponents": result.exponents, "stderr": result.stderr}


def henon_series(dtype, n=600):
    """x of the Henon map, computed in float64 on the host, then rounded."""
    x, y = 0.1, 0.1
    out = np.empty(n + 100)
    for i in range(out.size):
        x, y = 1.0 - 1.4 * x * x + y, 0.3 * x
        out[i] = x
    return out[100:].astype(dtype)


# -- spectra ---------------------------------------------------------------


@entry("lyapunov_spectrum.ode")
def _lyapunov_ode(dtype):
    problem = lorenz_problem(dtype)

    def run():
        return lyapax.lyapunov_spectrum(
            problem, n_steps=200, renorm_every=10, t_transient=1.0
        )

    return run, spectrum


@entry("lyapunov_spectrum.map")
def _lyapunov_map(dtype):
    x0 = jnp.asarray([0.1, 0.1], dtype)

    def run():
        return lyapax.lyapunov_spectrum(
            systems.henon_map(), x0, dt=1.0, n_steps=200, t_transient=10.0
        )

    return run, spectrum


@entry("simulate_trajectory")
def _simulate(dtype):
    step = lyapax.rk4_step(systems.lorenz(), 0.01)
    x0 = jnp.asarray([1.0, 1.0, 1.0], dtype)

    def run():
        return lyapax.simulate_trajectory(step, x0, 100, 0.01)

    return run, lambda t: {"states": t.states, "times": t.times}


@entry("run_until_converged")
def _until_converged(dtype):
    problem = lorenz_problem(dtype)

    def run():
        return lyapax.run_until_converged(
            problem,
            tol=0.5,
            max_steps=400,
            chunk_steps=200,
            renorm_every=10,
            min_blocks=2,
        )

    return run, lambda r: spectrum(r.result)


@entry("kaplan_yorke_dimension")
def _kaplan_yorke(dtype):
    exponents = jnp.asarray([0.906, 0.0, -14.572], dtype)

    def run():
        return lyapax.kaplan_yorke_dimension(exponents)

    return run, lambda d: {"dimension": d}


@entry("convergence_drift")
def _drift(dtype):
    result = lyapax.lyapunov_spectrum(lorenz_problem(dtype), 200, renorm_every=10)

    def run():
        return lyapax.convergence_drift(result)

    return run, lambda d: {"absolute": d.absolute, "relative": d.relative}


@entry("check_invariants")
def _invariants(dtype):
    problem = lorenz_problem(dtype)
    result = lyapax.lyapunov_spectrum(problem, 200, renorm_every=10)

    def run():
        # warn=False: in float32 its tangent and zero-exponent checks are
        # float64's (docs/testing.md); here only that it runs is checked.
        return lyapax.check_invariants(problem, result, 50, n_probes=4, warn=False)

    return run, lambda r: {"window_exponents": r.window_exponents}


# -- covariant vectors -----------------------------------------------------


@entry("covariant_vectors")
def _covariant(dtype):
    problem = lorenz_problem(dtype)

    def run():
        return lyapax.covariant_vectors(
            problem, 200, renorm_every=10, t_transient=1.0, t_backward=0.5
        )

    return run, lambda r: {"exponents": r.exponents, "vectors": r.vectors}


@entry("sweep_covariant_vectors")
def _sweep_covariant(dtype):
    x0 = jnp.asarray([1.0, 1.0, 1.0], dtype)
    rhos = {"rho": jnp.asarray([28.0, 35.0], dtype)}

    def make(p):
        return lyapax.ode_problem(systems.lorenz(rho=p["rho"]), x0, dt=0.01)

    def run():
        return lyapax.sweep_covariant_vectors(
            make, rhos, 200, renorm_every=10, t_transient=0.5, t_backward=0.5
        )

    return run, lambda r: {"exponents": r.exponents, "vectors": r.vectors}


@entry("subspace_angles")
def _angles(dtype):
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((4, 2)), dtype)
    b = jnp.asarray(rng.standard_normal((4, 2)), dtype)

    def run():
        return lyapax.subspace_angles(a, b)

    return run, lambda angles: {"angles": angles}


# -- sweeps ----------------------------------------------------------------


def lorenz_family(dtype):
    x0 = jnp.asarray([1.0, 1.0, 1.0], dtype)
    rhos = jnp.asarray([20.0, 28.0, 35.0, 45.0], dtype)
    family = lyapax.problem_family(
        lambda rho: lyapax.ode_problem(systems.lorenz(rho=rho), x0, dt=0.01)
    )
    return family, rhos


@entry("sweep_lyapunov_spectrum")
def _sweep(dtype):
    family, rhos = lorenz_family(dtype)

    def run():
        return lyapax.sweep_lyapunov_spectrum(
            family, None, rhos, None, 200, renorm_every=10, t_transient=1.0
        )

    return run, spectrum


@entry("sweep_trajectory")
def _sweep_trajectory(dtype):
    family, rhos = lorenz_family(dtype)

    def run():
        return lyapax.sweep_trajectory(family, None, rhos, None, 100)

    return run, lambda t: {"states": t.states}


# -- finite time -----------------------------------------------------------


@entry("finite_time_exponents")
def _finite_time(dtype):
    problem = lorenz_problem(dtype)

    def run():
        return lyapax.finite_time_exponents(
            problem, n_steps=200, window=0.5, renorm_every=10, t_transient=1.0
        )

    return run, lambda r: {"exponents": r.exponents}


def gyre():
    return systems.double_gyre(A=0.1, eps=0.25, omega=2 * np.pi / 10)


@entry("ftle_field")
def _ftle_field(dtype):
    points = jnp.asarray(np.random.default_rng(1).uniform(0.1, 0.9, (16, 2)), dtype)

    def run():
        return lyapax.ftle_field(gyre(), points, 0.0, 2.0, 0.1, time_dependent=True)

    return run, lambda f: {"ftle_max": f.ftle_max, "flow_map": f.flow_map}


@entry("ftle_grid")
def _ftle_grid(dtype):
    x = np.linspace(0.0, 2.0, 8, dtype=dtype)
    y = np.linspace(0.0, 1.0, 4, dtype=dtype)

    def run():
        return ftle_grid(gyre(), x, y, 0.0, 2.0, 0.1, time_dependent=True)

    return run, lambda f: {"ftle_max": f.ftle_max}


# -- delays ----------------------------------------------------------------


@entry("lyapunov_spectrum_dde")
def _dde(dtype):
    problem = lyapax.dde_problem(
        systems.mackey_glass(), jnp.asarray([1.2], dtype), 2.0, 0.1, interpolate=True
    )

    def run():
        return lyapax.lyapunov_spectrum_dde(
            problem, 200, k=3, renorm_every=10, t_transient=5.0
        )

    return run, spectrum


@entry("network_dde.simulator_kuramoto")
def _network_dde(dtype):
    n, dt = 4, 0.01
    model = ModelSpec(
        name="kuramoto",
        state_variables=(StateVar("theta"),),
        parameters=(Parameter("omega", 0.0),),
        cvar=("theta",),
        dfun_str={"theta": "omega + c"},
    )
    weights = (np.ones((n, n)) - np.eye(n)).astype(dtype)
    lengths = np.random.default_rng(3).uniform(1.0, 5.0, (n, n))
    conn = Connectivity(weights, tract_lengths=lengths, speed=10.0)
    network = Network(weights, model.cvar_indices, delay_steps=conn.delay_steps(dt))
    params = {
        "omega": jnp.linspace(-1.0, 1.0, n, dtype=dtype),
        "G": jnp.asarray(2.0, dtype),
    }
    theta0 = jnp.asarray(np.linspace(0.0, 2 * np.pi, n, endpoint=False), dtype)
    problem = lyapax.network_dde_problem(
        build_jax_dfun(model), network, kuramoto_coupling(), params, theta0, dt
    )

    def run():
        return lyapax.lyapunov_spectrum_dde(problem, 100, k=2, renorm_every=10)

    return run, spectrum


# -- networks --------------------------------------------------------------


def kuramoto_run(problem):
    def run():
        return lyapax.lyapunov_spectrum(
            problem, n_steps=200, k=3, renorm_every=10, t_transient=0.0
        )

    return run, spectrum


@entry("network.kuramoto_dense")
def _kuramoto_dense(dtype):
    d = 8
    weights = jnp.asarray(np.ones((d, d)) - np.eye(d), dtype)
    omega = jnp.linspace(-1.0, 1.0, d, dtype=dtype)
    theta0 = jnp.asarray(2 * np.pi * np.arange(d) / d, dtype)
    problem = systems.kuramoto_network(weights, omega=omega, K=1.0, theta0=theta0)
    return kuramoto_run(problem)


@entry("network.kuramoto_sparse")
def _kuramoto_sparse(dtype):
    n = 16
    weights = ring_lattice(n, 4, dtype)
    omega = jnp.linspace(-1.0, 1.0, n, dtype=dtype)
    theta0 = jnp.asarray(2 * np.pi * np.arange(n) / n, dtype)
    problem = systems.kuramoto_network(weights, omega=omega, K=1.0, theta0=theta0)
    return kuramoto_run(problem)


def ring(n, dtype):
    weights = np.zeros((n, n))
    for i in range(n):
        weights[i, (i + 1) % n] = weights[i, (i - 1) % n] = 1.0
    return weights.astype(dtype)


@entry("network_problem.linear")
def _network_linear(dtype):
    n = 5
    weights = np.random.default_rng(2).uniform(size=(n, n)).astype(dtype)
    params = {"gamma": jnp.asarray(-1.0, dtype), "G": jnp.asarray(0.5, dtype)}
    problem = lyapax.network_problem(
        lambda x, c, p: p["gamma"] * x + c,
        Network(weights, (0,)),
        linear_coupling(),
        params,
        jnp.linspace(-1.0, 1.0, n, dtype=dtype),
        0.05,
        integrator="rk4",
    )

    def run():
        return lyapax.lyapunov_spectrum(problem, 200, renorm_every=10)

    return run, spectrum


@entry("transversal_exponents")
def _transversal(dtype):
    n = 5
    params = {"omega": jnp.full((n,), 1.3, dtype), "G": jnp.asarray(2.0, dtype)}
    problem = lyapax.network_problem(
        lambda x, c, p: p["omega"] + c,
        Network(ring(n, dtype), (0,)),
        kuramoto_coupling(),
        params,
        jnp.full((1, n), 0.4, dtype),
        0.01,
    )

    def run():
        return transversal_exponents(problem, 200, t_transient=0.5)

    return run, lambda m: {"exponents": m.exponents, "stderr": m.stderr}


def msf_call(dtype):
    x0 = jnp.asarray([1.0, 1.0, 1.0], dtype)
    coupling = jnp.asarray(np.eye(3), dtype)
    alphas = jnp.asarray([0.0, 1.0, 4.0], dtype)
    return lambda: lyapax.master_stability_function(
        systems.lorenz(), coupling, alphas, x0, 0.01, 200, t_transient=1.0
    )


@entry("master_stability_function")
def _msf(dtype):
    return msf_call(dtype), lambda m: {"exponent": m.exponent, "stderr": m.stderr}


@entry("synchronisation")
def _synchronisation(dtype):
    msf = msf_call(dtype)()
    weights = ring(6, dtype)

    def run():
        return synchronisation(msf, weights, sigma=0.5)

    return run, lambda r: {"gammas": r.gammas}


# -- problem kinds ---------------------------------------------------------


def pde_run(problem):
    def run():
        return lyapax.lyapunov_spectrum(problem, 100, k=4)

    return run, spectrum


@entry("pde.kuramoto_sivashinsky")
def _ks(dtype):
    u0 = np.sin(np.arange(32.0)).astype(dtype)
    return pde_run(kuramoto_sivashinsky(32, 22.0, state0=u0, dt=0.25))


@entry("pde.complex_ginzburg_landau")
def _cgl(dtype):
    n = 32
    u0 = np.concatenate([np.ones(n), 0.1 * np.sin(np.arange(n))]).astype(dtype)
    return pde_run(complex_ginzburg_landau(n, 20.0, 0.5, 0.5, state0=u0, dt=0.05))


@entry("hamiltonian_problem")
def _hamiltonian(dtype):
    def grad_v(q):  # Henon-Heiles
        return jnp.stack([q[0] + 2 * q[0] * q[1], q[1] + q[0] ** 2 - q[1] ** 2])

    y = -0.2
    px = np.sqrt(2.0 * (0.125 - (0.5 * y * y - y**3 / 3.0)))
    q0, p0 = np.array([0.0, y], dtype), np.array([px, 0.0], dtype)
    problem = lyapax.hamiltonian_problem(lambda p: p, grad_v, q0, p0, 0.05)

    def run():
        return lyapax.lyapunov_spectrum(problem, 200, renorm_every=10)

    return run, spectrum


@entry("driven_problem")
def _driven(dtype):
    gains = jnp.asarray(np.random.default_rng(0).uniform(0.5, 2.0, 300), dtype)
    problem = lyapax.driven_problem(lambda x, u: u * x, jnp.ones(1, dtype), gains)

    def run():
        return lyapax.lyapunov_spectrum(problem, 200, t_transient=30.0)

    return run, spectrum


@entry("random_problem")
def _random(dtype):
    def step(x, key):
        return jax.random.normal(key, (3, 3), x.dtype) @ x

    problem = lyapax.random_problem(step, jnp.zeros(3, dtype), jax.random.key(11))

    def run():
        return lyapax.lyapunov_spectrum(problem, 200)

    return run, spectrum


@entry("sde_problem")
def _sde(dtype):
    mu, sigma = jnp.asarray(0.3, dtype), jnp.asarray(0.5, dtype)
    problem = lyapax.sde_problem(
        lambda x: mu * x,
        lambda x: sigma * x,
        jnp.ones(1, dtype),
        0.01,
        jax.random.key(4),
    )

    def run():
        return lyapax.lyapunov_spectrum(problem, 200)

    return run, spectrum


class Bounce(eqx.Module):
    """The impact oscillator's reset ``(x, v) -> (x, -r v)``."""

    r: Any

    def __call__(self, x):
        return jnp.stack([x[0], -self.r * x[1]])


@entry("hybrid_problem")
def _hybrid(dtype):
    problem = lyapax.hybrid_problem(
        lambda x: jnp.stack([x[1], -x[0]]),
        lambda x: x[0],
        Bounce(jnp.asarray(0.8, dtype)),
        jnp.asarray([1.0, 0.0], dtype),
        0.01,
    )

    def run():
        return lyapax.lyapunov_spectrum(problem, 400)

    return run, spectrum


@entry("adaptive.diffrax")
def _adaptive(dtype):
    from lyapax.adaptive import diffrax_adaptive_step

    # Tolerances float32 can meet in float32 (the defaults are float64's).
    rtol, atol = (1e-4, 1e-6) if f32(dtype) else (1e-8, 1e-10)
    a = jnp.asarray([[-0.5, 1.0], [-1.0, -0.5]], dtype)
    integrator = diffrax_adaptive_step("dopri5", rtol=rtol, atol=atol)
    problem = lyapax.ode_problem(
        lambda y: a @ y, jnp.asarray([1.0, 0.3], dtype), 0.2, integrator=integrator
    )

    def run():
        return lyapax.lyapunov_spectrum(problem, n_steps=5, k=1)

    return run, spectrum


@entry("shadowing_sensitivity")
def _shadowing(dtype):
    def rhs(u, rho):
        x, y, z = u
        return jnp.stack([10.0 * (y - x), x * (rho - z) - y, x * y - 8.0 / 3.0 * z])

    def z_of(u, rho):
        return u[2]

    x0 = jnp.asarray([1.0, 1.0, 20.0], dtype)
    rho = jnp.asarray(28.0, dtype)

    def run():  # rhs and z_of the same objects at each call: one compilation
        return lyapax.shadowing_sensitivity(
            rhs, x0, rho, z_of, 0.01, 10, 20, n_unstable=1, t_transient=1.0
        )

    return run, lambda r: {
        "average": r.average,
        "gradient": r.gradient,
        "stderr": r.stderr,
    }


# -- indicators ------------------------------------------------------------


@entry("megno")
def _megno(dtype):
    y = -0.2
    px = np.sqrt(2.0 * (0.125 - (0.5 * y * y - y**3 / 3.0)))
    q0, p0 = np.array([0.0, y], dtype), np.array([px, 0.0], dtype)
    problem = systems.henon_heiles().problem(q0, p0, 0.05, "yoshida4")

    def run():
        return lyapax.megno(problem, 200)

    return run, lambda r: {"megno": r.megno, "mean_megno": r.mean_megno}


@entry("gali")
def _gali(dtype):
    x0 = jnp.asarray([0.1, 0.1], dtype)
    # float32: the default threshold 1e-12 lies below what a float32 GALI
    # reaches (about 1e-9, docs/testing.md); 1e-6 is within its reach.
    extra = {"threshold": 1e-6} if f32(dtype) else {}

    def run():
        return lyapax.gali(systems.henon_map(), x0, 1.0, 100, **extra)

    return run, lambda r: {"gali": r.gali, "sali": r.sali}


@entry("two_trajectory_exponent")
def _two_trajectory(dtype):
    x0 = jnp.asarray([0.1, 0.1], dtype)
    # float32: the default d0 = 1e-9 lies below float32's rounding of a state
    # of order 1 (the perturbed orbit rounds onto the reference one: nan);
    # d0 = 1e-3 in a band [1e-5, 1e-1] stays above it.
    extra = {"d0": 1e-3, "d_lower": 1e-5, "d_upper": 1e-1} if f32(dtype) else {}

    def run():
        return lyapax.two_trajectory_exponent(
            systems.henon_map(), x0, 1.0, 500, t_transient=10.0, **extra
        )

    return run, lambda r: {"exponent": r.exponent, "stderr": r.stderr}


@entry("expansion_entropy")
def _expansion_entropy(dtype):
    points = np.random.default_rng(0).uniform(0.0, 1.0, (2, 50, 1)).astype(dtype)

    def unit_interval(x):
        return (x[0] >= 0.0) & (x[0] <= 1.0)

    def run():
        return lyapax.expansion_entropy(
            systems.tent_map(), points, 1.0, 15, inside=unit_interval
        )

    return run, lambda r: {"entropy": r.entropy, "log_expansion": r.log_expansion}


@entry("zero_one_test")
def _zero_one(dtype):
    series = henon_series(dtype)

    def run():
        return lyapax.zero_one_test(series, n_frequencies=20)

    return run, lambda r: {"K": r.K}


@entry("delay_embedding")
def _embedding(dtype):
    series = henon_series(dtype)

    def run():
        return lyapax.delay_embedding(series, 3, 2)

    return run, lambda e: {"vectors": e}


@entry("lyapunov_rosenstein")
def _rosenstein(dtype):
    series = henon_series(dtype)

    def run():
        return lyapax.lyapunov_rosenstein(series, 2, 1, horizon=10)

    return run, lambda r: {"exponent": r.exponent, "divergence": r.divergence}


@entry("lyapunov_kantz")
def _kantz(dtype):
    series = henon_series(dtype)

    def run():
        return lyapax.lyapunov_kantz(series, 2, 1, horizon=10)

    return run, lambda r: {"exponent": r.exponent, "divergence": r.divergence}


# -- the run ---------------------------------------------------------------


def _leaves(outputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Each picked output as host arrays (a pytree output: one per leaf)."""
    flat = {}
    for name, value in outputs.items():
        leaves = jax.tree_util.tree_leaves(value)
        for i, leaf in enumerate(leaves):
            flat[name if len(leaves) == 1 else f"{name}[{i}]"] = np.asarray(leaf)
    return flat


def measure(name: str, build: Entry, dtype, own_warnings: bool = True) -> dict:
    """One entry's row. ``own_warnings=False`` (entries run in threads): no
    warnings recorded, since Python's warning filters are one per process."""
    row: dict[str, Any] = {"entry": name}
    recorder = (
        warnings.catch_warnings(record=True)
        if own_warnings
        else contextlib.nullcontext()
    )
    with recorder as caught:
        if own_warnings:
            warnings.simplefilter("always")
        try:
            start = time.perf_counter()
            run, pick = build(dtype)
            row["build_s"] = time.perf_counter() - start
            start = time.perf_counter()
            outputs = jax.block_until_ready(pick(run()))
            row["first_call_s"] = time.perf_counter() - start
            start = time.perf_counter()
            jax.block_until_ready(pick(run()))
            row["second_call_s"] = time.perf_counter() - start
            arrays = _leaves(outputs)
            row["dtypes"] = {k: str(v.dtype) for k, v in arrays.items()}
            bad = [k for k, v in arrays.items() if not np.all(np.isfinite(v))]
            row["not_finite"] = bad
            row["status"] = "not_finite" if bad else "ok"
            first = next(iter(arrays.values()))
            row["head"] = np.asarray(first, np.float64).ravel()[:4].tolist()
        except Exception as exc:  # report and go on: one process, every entry
            row["status"] = "failed"
            row["error"] = repr(exc)[:2000]
    messages = sorted(
        {f"{w.category.__name__}: {w.message}"[:300] for w in caught or ()}
    )
    if messages:
        row["warnings"] = messages
    with _PRINT:
        print(json.dumps(row), flush=True)
    return row


_PRINT = threading.Lock()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="float64", choices=("float32", "float64"))
    parser.add_argument("--only", default=None, help="entries to run (commas)")
    parser.add_argument("--json", default=None, help="also write the rows here")
    parser.add_argument("--list", action="store_true", help="print the entries")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="entries compiled at once, in threads (rows in the order they finish, "
        "times under that contention, no warnings recorded)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 if an entry failed or gave nan"
    )
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(ENTRIES))
        return 0
    names = list(ENTRIES)
    if args.only:
        names = [n for n in args.only.split(",") if n]
        unknown = sorted(set(names) - set(ENTRIES))
        if unknown:
            parser.error(f"--only: unknown {unknown}; --list prints the entries")
    dtype = np.dtype(args.dtype)
    device = jax.devices()[0]
    header = {
        "backend": jax.default_backend(),
        "device": f"{device.platform}:{device.device_kind}",
        "jax": jax.__version__,
        "lyapax": lyapax.__version__,
        "dtype": args.dtype,
        "x64": bool(jax.config.jax_enable_x64),
        "default_matmul_precision": str(jax.config.jax_default_matmul_precision),
    }
    print(json.dumps(header), flush=True)
    start = time.perf_counter()
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.jobs == 1:
        rows = [measure(name, ENTRIES[name], dtype) for name in names]
    else:
        with ThreadPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(lambda n: measure(n, ENTRIES[n], dtype, False), names))
    counts = {
        status: sum(row["status"] == status for row in rows)
        for status in ("ok", "failed", "not_finite")
    }
    summary = {
        "summary": args.dtype,
        "entries": len(rows),
        **counts,
        "total_s": round(time.perf_counter() - start, 2),
        "failed_entries": [r["entry"] for r in rows if r["status"] != "ok"],
    }
    print(json.dumps(summary), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": header, "rows": rows, "summary": summary}, f, indent=1)
    if args.strict and (counts["failed"] or counts["not_finite"]):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
