"""Master stability function and transversal exponents: exact and structural oracles."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse
from support.precision import tol

from lyapax import lyapunov_spectrum, ode_problem
from lyapax.coupling import kuramoto_coupling, linear_coupling, sigmoidal_coupling
from lyapax.network import (
    MSFResult,
    Network,
    laplacian_spectrum,
    master_stability_function,
    network_problem,
    synchronisation,
    transversal_exponents,
)
from lyapax.network._msf import msf_kernel_run
from lyapax.systems import linear_system, lorenz, rossler, tent_map

X_ONLY = np.diag([1.0, 0.0, 0.0])  # x-coupling of a 3-variable node


def ring(n):
    A = np.zeros((n, n))
    for i in range(n):
        A[i, (i + 1) % n] = A[i, (i - 1) % n] = 1.0
    return A


def rk4_factor(z):
    """Amplification of one RK4 step of y' = mu y, z = dt mu."""
    return 1 + z + z**2 / 2 + z**3 / 6 + z**4 / 24


@pytest.mark.slow
def test_msf_at_zero_is_the_node_exponent():
    # Same trajectory, same seeded frame, same RK4 tangents: the engine's
    # lambda_1 of the uncoupled node, to rounding; and the known value.
    x0 = jnp.array([1.0, 1.0, 1.0])
    msf = master_stability_function(
        lorenz(), np.eye(3), [0.0], x0, 0.01, 100_000, t_transient=20.0
    )
    node = lyapunov_spectrum(
        ode_problem(lorenz(), x0, 0.01), 100_000, k=1, renorm_every=10, t_transient=20.0
    )
    np.testing.assert_allclose(msf.exponent[0], node.exponents[0], rtol=1e-10)
    np.testing.assert_allclose(msf.stderr[0], node.stderr[0], rtol=1e-8)
    assert abs(msf.exponent[0] - 0.906) < 0.02


def test_msf_at_zero_rossler():
    msf = master_stability_function(
        rossler(), X_ONLY, [0.0], jnp.array([1.0, 1.0, 0.0]), 0.02, 200_000,
        t_transient=100.0,
    )  # fmt: skip
    assert abs(msf.exponent[0] - 0.0714) < 0.005


@pytest.mark.float64_only("complex128 is what a TPU's float64 lacks")
@pytest.mark.cpu_backend_only(
    "pretends a TPU on a CPU and compares with the complex program, which a "
    "TPU cannot build (test_full_state_coupling_shifts_by_re_alpha runs the "
    "pairs there)"
)
def test_complex_alphas_run_as_real_pairs_where_float64_is_emulated(monkeypatch):
    """A TPU has no complex128 (its compiler aborted the process on the MSF of
    complex alphas in float64, on the lent v5e): there the frames and alphas
    are real pairs and the complex QR is a real one. Pretended on a CPU: the
    program holds no complex number, and the transversal spectrum is the
    complex program's to rounding (x- and full-state coupling, k = 2)."""
    from lyapax._engine import precision as prec
    from lyapax.network import _msf

    alphas = np.array([0.0, 1 + 2j, -0.5 - 3j, 2.0])
    x0 = jnp.array([1.0, 1.0, 1.0])

    def spectra():
        return [
            master_stability_function(
                lorenz(), H, alphas, x0, 0.005, 2_000, k=2, t_transient=1.0
            )
            for H in (X_ONLY, np.eye(3))
        ]

    complex_runs = spectra()
    programs = []

    def lowered(*args, **kwargs):
        programs.append(msf_kernel_run.lower(*args, **kwargs).as_text())
        return msf_kernel_run(*args, **kwargs)

    # The rows' devices decide (a TPU among them), not where new arrays land.
    assert prec.emulated_float64(np.float64, "tpu")
    assert not prec.emulated_float64(np.float64, "cpu")
    assert not prec.emulated_float64(np.float32, "tpu")
    monkeypatch.setattr(prec.jax, "default_backend", lambda: "tpu")
    asked = []

    def emulated(dtype, platform):
        asked.append(platform)
        return prec.emulated_float64(dtype)

    monkeypatch.setattr(_msf, "emulated_float64", emulated)
    monkeypatch.setattr(_msf, "msf_kernel_run", lowered)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the emulated-float64 warning
        pair_runs = spectra()
    assert len(programs) == 2 and not any("complex" in text for text in programs)
    assert set(asked) == {jax.devices()[0].platform}  # the rows' device, asked
    for got, want in zip(pair_runs, complex_runs, strict=True):
        np.testing.assert_array_equal(got.alphas, alphas)
        np.testing.assert_allclose(got.spectrum, want.spectrum, rtol=0, atol=1e-13)
        np.testing.assert_allclose(got.stderr, want.stderr, rtol=0, atol=1e-13)
    # The pairs' real QR: Q orthonormal as a complex frame, R's diagonal.
    V = _msf.Pair(*np.random.default_rng(0).normal(size=(2, 3, 4, 2)))
    Q, growth = _msf._renormalise_pairs(V)
    Qc, growth_c = _msf._renormalise(jnp.asarray(V.re + 1j * V.im))
    np.testing.assert_allclose(Q.re + 1j * Q.im, Qc, atol=1e-14)
    np.testing.assert_allclose(growth, growth_c, atol=1e-14)


@pytest.mark.parametrize(
    "alphas", [np.array([0.0, 0.5, 2.0, -1.0]), np.array([0.0, 1 + 2j, -0.5 - 3j])]
)
def test_full_state_coupling_shifts_by_re_alpha(alphas):
    # H = I: xi(t) = exp(-alpha t) xi_0(t), so Lambda(alpha) = lambda_1 - Re alpha
    # up to the RK4 error of exp(-alpha dt) (dt = 0.005: about 1e-6 |alpha|).
    x0 = jnp.array([1.0, 1.0, 1.0])
    msf = master_stability_function(
        lorenz(), jnp.eye(3), alphas, x0, 0.005, 20_000, t_transient=10.0
    )
    expected = msf.exponent[0] - alphas.real
    np.testing.assert_allclose(msf.exponent, expected, rtol=0, atol=5e-6)
    assert msf.exponent.shape == msf.stderr.shape == (alphas.size,)
    np.testing.assert_array_equal(msf.alphas, alphas)


@pytest.mark.parametrize("complex_alpha", [False, True])
def test_linear_node_is_the_leading_eigenvalue(complex_alpha):
    # F(x) = A x: the RK4 tangent map is R(dt (A - alpha H)), whose exponents
    # are ln|R(dt mu)| / dt over the eigenvalues mu of A - alpha H (= Re mu up
    # to O(dt^4)). Exact: the leading one once the frame is aligned (the
    # transient), when it is real or the frame complex; the sum always.
    A = np.array([[-0.5, 1.0, 0.0], [0.0, -1.0, 2.0], [0.3, 0.0, -2.0]])
    H = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.5]])
    alphas = np.array([0.0, 0.7, 3.0]) + (0.8j if complex_alpha else 0.0)
    dt = 0.01
    msf = master_stability_function(
        linear_system(A), H, alphas, jnp.ones(3), dt, 2_000, k=3, t_transient=60.0
    )
    for a, row in zip(alphas, np.asarray(msf.spectrum), strict=True):
        mu = np.linalg.eigvals(A - a * H)
        rates = np.sort(np.log(np.abs(rk4_factor(dt * mu))) / dt)[::-1]
        top = mu[np.argmax(mu.real)]
        if complex_alpha or top.imag == 0:
            np.testing.assert_allclose(row[0], rates[0], rtol=0, atol=tol(1e-8))
            assert abs(row[0] - mu.real.max()) < tol(1e-6, 1e-5)
        if complex_alpha:
            np.testing.assert_allclose(row, rates, rtol=0, atol=tol(1e-8))
        np.testing.assert_allclose(row.sum(), rates.sum(), rtol=0, atol=tol(1e-9))
    np.testing.assert_array_equal(msf.exponent, msf.spectrum[:, 0])


def test_coupled_tent_maps_transversal_exponents():
    # x_i' = (1 - eps) f(x_i) + eps / deg sum_j A_ij f(x_j): with H = f and
    # alpha = eps (1 - mu_k) the transversal exponents are ln 2 + ln|1 - alpha|.
    n, eps = 6, 0.3
    mu = np.linalg.eigvalsh(ring(n) / 2.0)
    alphas = eps * (1.0 - mu)
    msf = master_stability_function(
        tent_map(), tent_map(), alphas, jnp.array([0.3]), 1.0, 200, integrator="map"
    )
    expected = np.log(2.0) + np.log(np.abs(1.0 - alphas))
    np.testing.assert_allclose(msf.exponent, expected, rtol=0, atol=tol(1e-12))


@pytest.mark.slow
def test_batch_size_gives_the_same_numbers():
    alphas = np.linspace(0.0, 4.0, 7)
    args = (rossler(), X_ONLY, alphas, jnp.array([1.0, 1.0, 0.0]), 0.02, 2_000)
    whole = master_stability_function(*args, k=2)
    chunked = master_stability_function(*args, k=2, batch_size=3)
    np.testing.assert_allclose(chunked.spectrum, whole.spectrum, rtol=0, atol=1e-12)
    np.testing.assert_allclose(chunked.stderr, whole.stderr, rtol=0, atol=1e-12)
    single = master_stability_function(*args[:2], alphas[4:5], *args[3:], k=2)
    np.testing.assert_allclose(single.spectrum[0], whole.spectrum[4], atol=1e-12)


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_callable_coupling_function_is_differentiated():
    # h(x) = (x0 + x0^3 / 3, x1, 0) at the fixed point c of F(x) = A (x - c):
    # DH(c) = diag(1 + c0^2, 1, 0), so the callable equals that matrix H.
    A = jnp.array([[-0.5, 1.0, 0.0], [0.0, -1.0, 2.0], [0.3, 0.0, -2.0]])
    c = jnp.array([0.7, -0.2, 0.1])

    def node(x):
        return A @ (x - c)

    def h(x):
        return jnp.array([x[0] + x[0] ** 3 / 3, x[1], 0.0])

    H = np.diag([1.0 + 0.7**2, 1.0, 0.0])
    alphas = np.array([0.0, 0.4, 1.0 + 0.5j])
    by_jvp = master_stability_function(node, h, alphas, c, 0.01, 500, k=2)
    by_matrix = master_stability_function(node, H, alphas, c, 0.01, 500, k=2)
    np.testing.assert_allclose(by_jvp.spectrum, by_matrix.spectrum, atol=1e-12)


def _rossler_ring(n, sigma, s0):
    ros = rossler()

    def dfun(x, c, p):
        f = jax.vmap(ros, in_axes=1, out_axes=1)(x)
        # diffusive: sigma sum_j A_ij (x_j - x_i) = c - sigma deg x_i
        return f.at[0].add(c[0] - p["G"] * 2.0 * x[0])

    x0 = jnp.tile(jnp.asarray(s0)[:, None], (1, n))
    network = Network(ring(n), (0,))
    return network_problem(
        dfun, network, linear_coupling(), {"G": sigma}, x0, 0.01, integrator="rk4"
    )


@pytest.mark.slow
def test_network_spectrum_is_the_union_over_modes():
    # The full 12-dimensional spectrum of a ring of 4 x-coupled Roessler nodes
    # started synchronised = union over Laplacian modes of the spectra of
    # DF - sigma gamma_k H (mode 0: the node itself). Statistical agreement
    # (different frames, T = 400); the mode sets are >= 0.1 apart.
    sigma, s0 = 0.3, [1.0, 1.0, 0.0]
    problem = _rossler_ring(4, sigma, s0)
    modes = transversal_exponents(problem, 40_000, t_transient=50.0)
    full = lyapunov_spectrum(problem, 40_000, renorm_every=10, t_transient=50.0)
    np.testing.assert_allclose(modes.gammas, [0.0, 2.0, 2.0, 4.0], atol=1e-12)
    union = np.sort(np.asarray(modes.exponents).ravel())[::-1]
    np.testing.assert_allclose(np.asarray(full.exponents), union, rtol=0, atol=0.03)
    # the modes are the MSF at sigma gamma_k with H = x-coupling
    msf = master_stability_function(
        rossler(), X_ONLY, sigma * modes.gammas, jnp.asarray(s0), 0.01, 40_000,
        k=3, t_transient=50.0,
    )  # fmt: skip
    np.testing.assert_allclose(msf.spectrum, modes.exponents, rtol=0, atol=0.03)
    assert modes.transversal_max == pytest.approx(modes.exponents[1:, 0].max())
    assert modes.transversal_max < 0  # sigma = 0.3 synchronises this ring


@pytest.mark.slow
def test_kuramoto_modes_are_exact():
    # Identical Kuramoto phases in sync on a ring: mode k decays at
    # -(G / N) cos(lag) gamma_k, through the network's own Heun step.
    n, G, dt = 5, 2.0, 0.01
    ring_w = ring(n)
    network = Network(ring_w, (0,))

    def dfun(x, c, p):
        return p["omega"] + c

    omega = jnp.full((n,), 1.3)
    problem = network_problem(
        dfun, network, kuramoto_coupling(), {"omega": omega, "G": G},
        jnp.full((1, n), 0.4), dt,
    )  # fmt: skip
    modes = transversal_exponents(problem, 2_000, t_transient=5.0)
    rate = -(G / n) * modes.gammas * dt
    heun = np.log(np.abs(1 + rate + rate**2 / 2)) / dt
    np.testing.assert_allclose(np.asarray(modes.exponents)[:, 0], heun, atol=1e-10)
    # the whole network agrees, up to the O(1/T) of its frame's alignment
    full = lyapunov_spectrum(problem, 20_000, renorm_every=10, t_transient=5.0)
    np.testing.assert_allclose(full.exponents, np.sort(heun)[::-1], atol=2e-3)


def test_sigmoidal_modes_at_the_synchronous_fixed_point():
    # x_i' = -x_i + c_i, c = G a sigmoid((W x - mid) / s) on a ring, started at
    # the synchronous fixed point x*: mode k decays at -1 + q mu_k (q the
    # sigmoid's slope at r x*, mu_k = 2 cos(2 pi k / n)), through Heun.
    n, dt, G = 6, 0.01, 1.5
    coupling = sigmoidal_coupling(a=1.0, midpoint=0.5, sigma=0.8)
    x = 0.0
    for _ in range(200):  # x* = G sigmoid((2 x* - 0.5) / 0.8)
        x = G / (1 + np.exp(-(2 * x - 0.5) / 0.8))
    problem = network_problem(
        lambda x, c, p: -x + c, Network(ring(n), (0,)), coupling, {"G": G},
        jnp.full(n, x), dt,
    )  # fmt: skip
    modes = transversal_exponents(problem, 1_000, renorm_every=10)
    sig = 1 / (1 + np.exp(-(2 * x - 0.5) / 0.8))
    q = G * sig * (1 - sig) / 0.8
    mu = 2.0 - modes.gammas  # the ring's weight eigenvalues, r = 2
    z = dt * (-1.0 + q * mu)
    heun = np.log(np.abs(1 + z + z**2 / 2)) / dt
    np.testing.assert_allclose(np.asarray(modes.exponents)[:, 0], heun, atol=tol(1e-10))


def test_laplacian_spectrum_dense_and_sparse():
    n = 8
    A = ring(n)
    expected = np.sort(2 - 2 * np.cos(2 * np.pi * np.arange(n) / n))
    for weights in (A, scipy.sparse.csr_matrix(A), Network(A, (0,))):
        np.testing.assert_allclose(laplacian_spectrum(weights), expected, atol=1e-12)
    sparse_net = Network(scipy.sparse.csr_matrix(A), (0,))
    np.testing.assert_allclose(laplacian_spectrum(sparse_net), expected, atol=1e-12)
    directed = np.roll(np.eye(n), 1, axis=1)
    gam = laplacian_spectrum(directed)
    expected_directed = np.sort_complex(1 - np.exp(2j * np.pi * np.arange(n) / n))
    np.testing.assert_allclose(np.sort_complex(gam), expected_directed, atol=1e-12)


def test_synchronisation_interval_and_modes():
    # A synthetic MSF negative on (1, 5): a ring (gamma_1 = 2 - 2 cos(2 pi / n),
    # gamma_max = 4 for even n) synchronises for 1 / gamma_1 < sigma < 5 / 4.
    alphas = np.linspace(0.0, 8.0, 801)
    lam = (alphas - 1.0) * (alphas - 5.0) / 10.0
    msf = MSFResult(alphas, lam, np.zeros_like(lam), lam[:, None], lam[:, None])
    n = 6
    g1 = 2 - 2 * np.cos(2 * np.pi / n)
    rep = synchronisation(msf, ring(n))
    assert rep.sigma_interval == pytest.approx((1.0 / g1, 5.0 / 4.0), abs=1e-9)
    # the Laplacian spectrum computed once and passed instead of the weights
    again = synchronisation(msf, laplacian_spectrum(ring(n)))
    assert again.sigma_intervals == rep.sigma_intervals
    assert rep.open_ended == [False]
    inside = synchronisation(msf, ring(n), sigma=1.1)
    assert inside.synchronised is True
    assert np.all(inside.stable[1:])
    np.testing.assert_allclose(
        inside.exponent, (1.1 * inside.gammas - 1) * (1.1 * inside.gammas - 5) / 10,
        atol=1e-4,
    )  # fmt: skip
    outside = synchronisation(msf, ring(n), sigma=1.4)
    assert outside.synchronised is False
    assert not outside.stable[-1]
    # all-to-all: gamma = n for every transversal mode
    full = np.ones((n, n)) - np.eye(n)
    rep_all = synchronisation(msf, full)
    assert rep_all.sigma_interval == pytest.approx((1.0 / n, 5.0 / n), abs=1e-9)
    # a long ring cannot fit gamma_max / gamma_1 > 5 into (1, 5)
    assert synchronisation(msf, ring(20)).sigma_intervals == []


def test_bad_input_is_named():
    x0 = jnp.ones(3)
    with pytest.raises(ValueError, match="alphas"):
        master_stability_function(lorenz(), np.eye(3), np.ones((2, 2)), x0, 0.01, 10)
    with pytest.raises(ValueError, match="alphas"):
        master_stability_function(lorenz(), np.eye(3), [np.nan], x0, 0.01, 10)
    with pytest.raises(ValueError, match="coupling_jacobian"):
        master_stability_function(lorenz(), np.eye(2), [0.0], x0, 0.01, 10)
    with pytest.raises(ValueError, match="coupling_jacobian"):
        master_stability_function(lorenz(), lambda x: x[:2], [0.0], x0, 0.01, 10)
    with pytest.raises(ValueError, match="node_rhs"):
        master_stability_function(lambda x: x[:2], np.eye(3), [0.0], x0, 0.01, 10)
    with pytest.raises(ValueError, match="k must"):
        master_stability_function(lorenz(), np.eye(3), [0.0], x0, 0.01, 10, k=4)
    with pytest.raises(ValueError, match="renorm_every"):
        master_stability_function(lorenz(), np.eye(3), [0.0], x0, 0.01, 15)
    with pytest.raises(ValueError, match="integrator"):
        master_stability_function(
            lorenz(), np.eye(3), [0.0], x0, 0.01, 10, integrator="rk5"
        )


def test_transversal_exponents_refuses_what_it_cannot_do():
    problem = _rossler_ring(4, 0.3, [1.0, 1.0, 0.0])
    with pytest.raises(ValueError, match="not synchronous"):
        transversal_exponents(
            problem._replace(state0=problem.state0 + 0.1 * jnp.arange(12)), 10
        )
    uneven = np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]], float)
    prob = network_problem(
        lambda x, c, p: -x + c, Network(uneven, (0,)), linear_coupling(), {},
        jnp.zeros(3), 0.01,
    )  # fmt: skip
    with pytest.raises(ValueError, match="row sums"):
        transversal_exponents(prob, 10)

    def own_coupling(x, weights, params):
        return (weights @ x.T).T

    custom = network_problem(
        lambda x, c, p: -x + c, Network(ring(4), (0,)), own_coupling, {},
        jnp.zeros(4), 0.01,
    )  # fmt: skip
    with pytest.raises(TypeError, match="linear_coupling"):
        transversal_exponents(custom, 10)
    with pytest.raises(TypeError, match="network_problem"):
        transversal_exponents(ode_problem(lorenz(), jnp.ones(3), 0.01), 10)
    with pytest.raises(ValueError, match="identical nodes"):
        p = network_problem(
            lambda x, c, p: p["omega"] + c, Network(ring(4), (0,)),
            kuramoto_coupling(), {"omega": jnp.arange(4.0)}, jnp.zeros(4), 0.01,
        )  # fmt: skip
        transversal_exponents(p, 10)


def test_new_numbers_and_lengths_do_not_recompile():
    x0 = jnp.array([1.0, 1.0, 0.0])
    master_stability_function(rossler(), X_ONLY, [0.0, 1.0, 2.0], x0, 0.02, 400)
    size = msf_kernel_run._cache_size()
    again = master_stability_function(
        rossler(a=0.25), 2.0 * X_ONLY, [0.5, 1.5, 2.5], x0 + 0.1, 0.01, 800,
        renorm_every=20, t_transient=1.0,
    )  # fmt: skip
    assert msf_kernel_run._cache_size() == size
    assert np.isfinite(again.exponent).all()


SHARDED = textwrap.dedent(
    """
    import json
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    from lyapax.network import master_stability_function
    from lyapax.systems import rossler

    H = np.diag([1.0, 0.0, 0.0])
    alphas = np.array([0.0, 0.5, 1.0, 2.0, 4.0])  # 5 rows: one padded
    args = (rossler(), H, alphas, jnp.array([1.0, 1.0, 0.0]), 0.02, 1000)
    two = master_stability_function(*args, k=2)
    one = master_stability_function(*args, k=2, devices=1)
    print(json.dumps({
        "devices": len(jax.devices()),
        "diff": float(np.max(np.abs(two.spectrum - one.spectrum))),
    }))
    """
)


@pytest.mark.slow
def test_alphas_split_over_two_devices_give_single_device_numbers():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run(
        [sys.executable, "-c", SHARDED], capture_output=True, text=True, env=env,
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["devices"] == 2
    assert facts["diff"] <= 1e-12
