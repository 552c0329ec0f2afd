"""Separable Hamiltonians on symplectic steps against exact references.

Orders 2, 4 and 6 measured from two step sizes on the harmonic oscillator
(exact solution: a rotation) and the Kepler problem (after one period the
orbit closes exactly); the energy error of each symplectic step stays
bounded over 10^6 steps of Hénon–Heiles at E = 1/8 while RK4's drifts
(slow); the spectrum pairs ``λ_i + λ_{2n+1-i} = 0`` to rounding on the
discrete map for Hénon–Heiles, FPUT-β (n = 8) and a planar 3-body problem,
with two exponents near 0; every engine entry point takes the problem; bad
input is refused with a message naming the argument.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import OPS, tol

import lyapax
from lyapax import hamiltonian_problem, lyapunov_spectrum, ode_problem
from lyapax._engine.precision import float_power
from lyapax.hamiltonian import SYMPLECTIC_ORDERS
from lyapax.systems import fput_beta, henon_heiles, n_body

METHODS = tuple(SYMPLECTIC_ORDERS)
# The high orders' errors at these steps lie under float32's rounding.
BELOW_FLOAT32 = pytest.mark.float64_only(
    "the errors measured at these steps (1e-6 and below) are float32's rounding"
)


def identity(p):
    return p


def oscillator_problem(method, dt):
    return hamiltonian_problem(identity, identity, [1.0], [0.0], dt, method)


def henon_heiles_start(y=-0.2, py=0.0, energy=0.125):
    """``(q0, p0)`` on the surface ``H = energy`` with ``q1 = 0``, ``p1 > 0``."""
    potential = 0.5 * y * y - y**3 / 3.0
    px = np.sqrt(2.0 * (energy - potential) - py * py)
    return np.array([0.0, y]), np.array([px, py])


@eqx.filter_jit
def iterate(step, z, n):
    return jax.lax.fori_loop(0, n, lambda _, x: step(x), z)


def observed_order(errors, dts):
    return float(np.log(errors[0] / errors[1]) / np.log(dts[0] / dts[1]))


# --- orders from two step sizes ------------------------------------------


@pytest.mark.parametrize(
    "method",
    [pytest.param(m, marks=BELOW_FLOAT32) if m == "yoshida6" else m for m in METHODS],
)
def test_order_on_the_harmonic_oscillator(method):
    # H = (p² + q²)/2 from (1, 0): q(t) = cos t, p(t) = -sin t.
    t_end, dts = 3.0, (0.1, 0.05)
    errors = []
    for dt in dts:
        prob = oscillator_problem(method, dt)
        z = np.asarray(iterate(prob.step_fn, prob.state0, round(t_end / dt)))
        errors.append(np.hypot(z[0] - np.cos(t_end), z[1] + np.sin(t_end)))
    assert observed_order(errors, dts) == pytest.approx(
        SYMPLECTIC_ORDERS[method], abs=0.15
    )


def kepler_error(method, n_per_period):
    # Eccentricity 0.5, a = 1, GM = 1 (a 2-body n_body with a fixed heavy
    # centre would add its own motion: a reduced problem is exact here).
    # |q|^3 by the library's power: a TPU's emulated float64 x ** 1.5 of one
    # element is float32-accurate, and put yoshida6's order at 4.68 there.
    e = 0.5
    grad_v = lambda q: q / float_power(jnp.sum(q * q), 1.5)  # noqa: E731
    q0, p0 = [1.0 - e, 0.0], [0.0, np.sqrt((1 + e) / (1 - e))]
    period = 2 * np.pi
    prob = hamiltonian_problem(identity, grad_v, q0, p0, period / n_per_period, method)
    z = np.asarray(iterate(prob.step_fn, prob.state0, n_per_period))
    return float(np.linalg.norm(z - np.asarray(prob.state0)))


@pytest.mark.parametrize(
    ("method", "steps"),
    [
        ("leapfrog", (400, 800)),
        pytest.param("yoshida4", (200, 400), marks=BELOW_FLOAT32),
        pytest.param("yoshida6", (100, 200), marks=BELOW_FLOAT32),
    ],
)
def test_order_on_the_kepler_problem(method, steps):
    # After one period the exact orbit is back at its start.
    errors = [kepler_error(method, n) for n in steps]
    dts = [1.0 / n for n in steps]
    assert observed_order(errors, dts) == pytest.approx(
        SYMPLECTIC_ORDERS[method], abs=0.3
    )


# --- bounded energy error (slow: 10^6 steps) --------------------------------


def energy_series(step, z0, H, n_blocks, block):
    """``H`` every ``block`` steps, ``n_blocks`` values (one lax loop)."""

    @eqx.filter_jit
    def run(step, z0):
        def body(z, _):
            z = jax.lax.fori_loop(0, block, lambda _, x: step(x), z)
            return z, H(z[:2], z[2:])

        return jax.lax.scan(body, z0, None, length=n_blocks)[1]

    return np.asarray(run(step, z0))


@pytest.mark.slow
def test_energy_error_is_bounded_for_symplectic_steps_and_drifts_for_rk4():
    hh = henon_heiles()
    q0, p0 = henon_heiles_start(y=0.1)  # a regular orbit, so RK4's drift is clean
    dt, n_blocks, block = 0.1, 1000, 1000  # 10^6 steps, t = 10^5
    e0 = 0.125
    growth = {}
    for method in METHODS:
        prob = hh.problem(q0, p0, dt, method)
        err = np.abs(
            energy_series(prob.step_fn, prob.state0, hh.hamiltonian, n_blocks, block)
            - e0
        )
        growth[method] = err[-100:].max() / err[:100].max()
        # No drift: the error of the last tenth is that of the first tenth.
        assert growth[method] < 1.5, (method, growth[method])
    rk4 = ode_problem(
        lambda z: jnp.concatenate([z[2:], -hh.grad_v(z[:2])]),
        np.concatenate([q0, p0]),
        dt,
        "rk4",
    )
    err = np.abs(
        energy_series(
            rk4.step_fn, jnp.asarray(rk4.state0), hh.hamiltonian, n_blocks, block
        )
        - e0
    )
    # RK4 dissipates energy steadily: the error keeps growing with time.
    assert err[-100:].max() / err[:100].max() > 5.0
    assert np.all(np.diff(err[::100]) > 0)


# --- exact pairing on the discrete map ----------------------------------------


def planar_three_body():
    # Sun, Jupiter and Saturn-like masses on near-circular planar orbits.
    masses = np.array([1.0, 1e-3, 3e-4])
    system = n_body(masses, dim=2)
    radii = np.array([0.0, 5.2, 9.5])
    speeds = np.array([0.0, 1 / np.sqrt(5.2), 1 / np.sqrt(9.5)])
    q0 = np.stack([radii, np.zeros(3)], axis=1).ravel()
    p0 = (masses[:, None] * np.stack([np.zeros(3), speeds], axis=1)).ravel()
    p0[:2] -= p0.reshape(3, 2).sum(axis=0)  # the Sun cancels the momentum
    return system, q0, p0, 0.5


PAIRING_CASES = {
    "henon_heiles": lambda: (henon_heiles(), *henon_heiles_start(), 0.1),
    "fput_beta_8": lambda: (
        fput_beta(8, beta=1.0),
        np.zeros(8),
        np.sin(np.pi * np.arange(1, 9) / 9) * 1.5,
        0.1,
    ),
    "three_body": planar_three_body,
}


@pytest.fixture(scope="module", params=sorted(PAIRING_CASES))
def paired_run(request):
    system, q0, p0, dt = PAIRING_CASES[request.param]()
    prob = system.problem(q0, p0, dt, "yoshida4")
    res = lyapunov_spectrum(prob, 5000, resume=prob.paired_start())
    return request.param, prob, np.asarray(res.exponents)


def test_exponents_pair_to_rounding(paired_run):
    name, prob, ex = paired_run
    assert ex.shape == (2 * prob.n_dof,)
    scale = max(1.0, float(np.abs(ex).max()))
    np.testing.assert_allclose(
        ex + ex[::-1], 0.0, atol=tol(1e-12) * scale, err_msg=name
    )


def test_two_exponents_near_zero_for_energy_and_time(paired_run):
    name, prob, ex = paired_run
    n = prob.n_dof
    middle = ex[n - 1 : n + 1]
    if name == "three_body":
        # Momentum, centre of mass, energy and rotation: many zero pairs.
        assert np.all(np.abs(ex) < 0.05), ex
        return
    # The central pair is the smallest in size and small against lambda_1.
    assert np.all(np.abs(middle) <= np.abs(ex).min() + tol(1e-12, OPS)), ex
    assert np.abs(middle).max() < 0.25 * ex[0], ex


def test_a_random_frame_pairs_only_statistically():
    # The engine's default frame: the sum over all exponents is still 0 to
    # rounding (det J = 1), pairs only to order 1/t.
    prob = henon_heiles().problem(*henon_heiles_start(), 0.05, "yoshida4")
    ex = np.asarray(lyapunov_spectrum(prob, 2000).exponents)
    assert abs(ex.sum()) < tol(1e-12, OPS)
    # 1/t = 0.01; a float32 run (x64 off) starts from another random frame.
    assert np.abs(ex + ex[::-1]).max() < tol(5e-3, 1e-2)


def test_the_tangent_map_is_symplectic():
    prob = fput_beta(3).problem(np.full(3, 0.3), np.array([0.1, -0.2, 0.4]), 0.2)
    J = np.asarray(jax.jacfwd(prob.step_fn)(prob.state0))
    n = 3
    omega = np.block([[np.zeros((n, n)), np.eye(n)], [-np.eye(n), np.zeros((n, n))]])
    np.testing.assert_allclose(J.T @ omega @ J, omega, atol=tol(1e-13, OPS))


# --- the engine takes it unchanged ----------------------------------------------


@pytest.fixture(scope="module")
def hh_problem():
    hh = henon_heiles()
    return hh.problem(*henon_heiles_start(), 0.05, "leapfrog")


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_engine_entry_points_accept_the_problem(hh_problem):
    prob = hh_problem
    res = lyapunov_spectrum(prob, 200, save_states=True)
    assert np.all(np.abs(prob.energy(res.trajectory) - 0.125) < 1e-3)
    # Resuming from the checkpoint continues the same run.
    half = lyapunov_spectrum(prob, 100)
    resumed = lyapunov_spectrum(prob, 100, resume=half.checkpoint)
    np.testing.assert_allclose(resumed.exponents, res.exponents, rtol=1e-10)
    clv = lyapax.covariant_vectors(prob, 100, t_backward=2.0)
    assert np.asarray(clv.exponents).shape == (4,)
    ft = lyapax.finite_time_exponents(prob, 200, window=2.5)
    assert np.asarray(ft.exponents).shape[-1] == 4
    starts = np.stack([np.concatenate(henon_heiles_start(y)) for y in (-0.2, 0.0, 0.1)])
    swept = lyapax.sweep_lyapunov_spectrum(
        prob, None, None, None, 200, state0_batch=starts
    )
    np.testing.assert_allclose(swept.exponents[0], res.exponents, rtol=1e-10)


def test_progress_reports_a_hamiltonian_run(hh_problem, monkeypatch):
    import io

    from lyapax._engine import progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)  # a short run draws its bar
    sink = io.StringIO()
    res = lyapunov_spectrum(hh_problem, 200, progress=sink)
    assert "200/200" in sink.getvalue()
    plain = lyapunov_spectrum(hh_problem, 200)
    np.testing.assert_array_equal(res.exponents, plain.exponents)


def test_new_numbers_reuse_the_compiled_program(hh_problem):
    from lyapax._engine.benettin import run_benettin

    lyapunov_spectrum(hh_problem, 50)
    size = run_benettin._cache_size()
    for y, dt in ((0.05, 0.04), (0.1, 0.03)):
        prob = henon_heiles().problem(*henon_heiles_start(y), dt, "leapfrog")
        lyapunov_spectrum(prob, 50)
    assert run_benettin._cache_size() == size


# --- bad input ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"grad_t": 3.0}, TypeError, "grad_t must be callable"),
        ({"grad_v": None}, TypeError, "grad_v must be callable"),
        ({"p0": [0.0, 1.0]}, ValueError, "same shape"),
        ({"q0": [[1.0]]}, ValueError, "q0 must be a 1-D"),
        ({"integrator": "rk4"}, ValueError, "not symplectic"),
        ({"integrator": "verlet9"}, ValueError, "leapfrog, yoshida4, yoshida6"),
        ({"dt": 0.0}, ValueError, "dt must be a finite number > 0"),
        ({"hamiltonian": "H"}, TypeError, "hamiltonian must be callable"),
    ],
)
def test_bad_input_is_refused(kwargs, error, match):
    args = dict(grad_t=identity, grad_v=identity, q0=[1.0], p0=[0.0], dt=0.1) | kwargs
    with pytest.raises(error, match=match):
        hamiltonian_problem(**args)


def test_system_builders_refuse_bad_input():
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        fput_beta(0)
    with pytest.raises(ValueError, match="masses must be"):
        n_body([1.0])
    with pytest.raises(ValueError, match="dim must be"):
        n_body([1.0, 1.0], dim=4)
    prob = hamiltonian_problem(identity, identity, [1.0], [0.0], 0.1)
    with pytest.raises(ValueError, match="needs the Hamiltonian"):
        prob.energy(prob.state0)
    with pytest.raises(ValueError, match="problem_family"):
        lyapax.sweep_lyapunov_spectrum(prob, None, {"a": np.ones(2)}, None, 10)
