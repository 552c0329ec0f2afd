"""Driven and random problems: exact oracles and every entry point.

Oracles (each against an exact reference, float64):

- scalar driven map ``x_{n+1} = a_n x_n``: the exponent is the mean of
  ``ln|a_n|`` over the measured steps (slices ``m .. m + N - 1`` after a
  transient of ``m`` steps), to rounding; its gradient with respect to
  ``a_n`` is ``1 / (N a_n)`` on those slices and 0 elsewhere;
- products of i.i.d. standard Gaussian ``d x d`` matrices: the frame's QR
  factor at each step has independent ``R_ii^2 ~ chi^2_{d-i+1}`` (the
  Gaussian law is invariant under the orthonormal frame), so with
  ``renorm_every=1`` the per-step growths are i.i.d. with mean
  ``(ln 2 + digamma((d-i+1)/2)) / 2`` (Newman 1986) and variance
  ``trigamma((d-i+1)/2) / 4``: the tolerance is 5 exact standard errors;
- geometric Brownian motion ``dx = mu x dt + s x dW``: the Euler-Maruyama
  exponent equals the replayed sample mean of ``ln|1 + mu dt + s dW_n|``
  exactly, and is within 5 standard errors (mean and variance by
  Gauss-Hermite quadrature) of its expectation; Heun minus Euler-Maruyama on
  the same noise is ``s^2 / 2`` (Ito vs Stratonovich) within 5 exact
  standard errors plus the ``O(dt)`` bias;
- additive noise on ``dx = A x dt + B dW``: the tangent map is constant, so
  the exponents are ``ln|eig(M)| / dt`` with ``M = I + A dt`` (EM) or
  ``I + A dt + (A dt)^2 / 2`` (Heun), and these are ``Re eig(A)`` to
  ``O(dt)`` / ``O(dt^2)``;
- ``x_{n+1} = g A_n x``: every exponent is ``ln g + const`` per sample path,
  so its derivative with respect to ``g`` is ``1 / g`` exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import digamma, polygamma
from support.precision import OPS, tol

import lyapax
from lyapax import (
    check_invariants,
    covariant_vectors,
    driven_problem,
    expansion_entropy,
    finite_time_exponents,
    gali,
    lyapunov_spectrum,
    megno,
    random_problem,
    run_until_converged,
    sde_problem,
    sweep_lyapunov_spectrum,
    two_trajectory_exponent,
)


def scale(x, u):
    return u * x


@pytest.fixture(scope="module")
def gains():
    return jnp.asarray(np.random.default_rng(0).uniform(0.2, 3.0, 400))


# -- driven maps ---------------------------------------------------------------


def test_driven_scalar_map_mean_log_exact(gains):
    """Pins the input alignment: transient slices 0..29, measured 30..229."""
    problem = driven_problem(scale, jnp.ones(1), gains)
    result = lyapunov_spectrum(problem, 200, t_transient=30.0)
    expected = np.mean(np.log(np.abs(np.asarray(gains)[30:230])))
    np.testing.assert_allclose(result.exponents[0], expected, rtol=tol(1e-13, OPS))


def test_driven_dt_scales_exponents(gains):
    problem = driven_problem(scale, jnp.ones(1), gains, dt=0.5)
    result = lyapunov_spectrum(problem, 100)
    expected = np.mean(np.log(np.asarray(gains)[:100])) / 0.5
    np.testing.assert_allclose(result.exponents[0], expected, rtol=tol(1e-13, OPS))


@pytest.mark.slow
def test_driven_grad_reaches_inputs(gains):
    def exponent(a):
        problem = driven_problem(scale, jnp.ones(1), a)
        return lyapunov_spectrum(problem, 100, t_transient=20.0).exponents[0]

    grad = np.asarray(jax.grad(exponent)(gains))
    expected = np.zeros(gains.shape[0])
    expected[20:120] = 1.0 / (100 * np.asarray(gains)[20:120])
    np.testing.assert_allclose(grad, expected, rtol=1e-10, atol=1e-15)


def _pytree_problem(gains):
    """Inputs as a dict of two leaves, one per coordinate."""

    def step(x, u):
        return jnp.stack([u["a"] * x[0], u["b"] * x[1]])

    return driven_problem(step, jnp.ones(2), {"a": gains, "b": jnp.flip(gains)})


def test_driven_pytree_inputs(gains):
    whole = lyapunov_spectrum(_pytree_problem(gains), 300)
    # The sum is exact (the log-determinant of a diagonal product).
    logs = np.log(np.asarray(gains))
    expected = logs[:300].mean() + logs[::-1][:300].mean()
    np.testing.assert_allclose(np.sum(whole.exponents), expected, rtol=tol(1e-12))


@pytest.mark.slow  # three compiles; the plain run resumes random maps
def test_driven_resume_continues_at_its_slice(gains):
    """A resumed run continues at slice 150."""
    problem = _pytree_problem(gains)
    whole = lyapunov_spectrum(problem, 300)
    first = lyapunov_spectrum(problem, 150)
    rest = lyapunov_spectrum(problem, 150, resume=first.checkpoint)
    np.testing.assert_allclose(rest.exponents, whole.exponents, rtol=1e-12)


def test_driven_inputs_too_short(gains):
    problem = driven_problem(scale, jnp.ones(1), gains)
    with pytest.raises(ValueError, match=r"inputs has length 400.*needs 410 steps"):
        lyapunov_spectrum(problem, 400, t_transient=10.0)
    first = lyapunov_spectrum(problem, 300)
    with pytest.raises(ValueError, match=r"inputs has length 400.*needs 500 steps"):
        lyapunov_spectrum(problem, 200, resume=first.checkpoint)
    with pytest.raises(ValueError, match="inputs"):
        covariant_vectors(problem, n_steps=500)


@pytest.mark.float64_only(
    "x_380 = x_0 times 380 gains (about e^111) overflows float32's range (e^88.7)"
)
def test_check_invariants_needs_the_inputs_of_its_window(gains):
    """The window continues the run's counter: 380 + 30 steps need 410
    slices; 380 + 20 fit exactly, and the window's exponent (no QR needed
    in one dimension) is the mean log gain of slices 380..399."""
    problem = driven_problem(scale, jnp.ones(1), gains)
    result = lyapunov_spectrum(problem, 380)
    with pytest.raises(ValueError, match=r"inputs has length 400.*needs 410 steps"):
        check_invariants(problem, result, 30)
    report = check_invariants(problem, result, 20)
    expected = np.mean(np.log(np.asarray(gains)[380:400]))
    np.testing.assert_allclose(report.window_exponents[0], expected, rtol=tol(1e-12))


def test_indicators_need_the_inputs_of_their_run(gains):
    """Every indicator counts from step 0 (two_trajectory_exponent: its
    transient first); the error comes before anything is compiled."""
    problem = driven_problem(scale, jnp.ones(1), gains)
    pair = driven_problem(lambda x, u: u * x, jnp.ones(2), jnp.stack([gains] * 2, 1))
    calls = [
        (lambda: megno(problem, 500), 500),
        (lambda: gali(pair, 401), 401),
        (lambda: two_trajectory_exponent(problem, 390, t_transient=20.0), 410),
        (lambda: expansion_entropy(problem, np.ones((1, 2, 1)), n_steps=401), 401),
    ]
    for call, needed in calls:
        match = rf"inputs has length 400.*needs {needed} steps"
        with pytest.raises(ValueError, match=match):
            call()


def test_driven_bad_inputs():
    with pytest.raises(ValueError, match="same length.*\\[3, 4\\]"):
        driven_problem(scale, jnp.ones(1), {"a": jnp.ones(3), "b": jnp.ones(4)})
    with pytest.raises(ValueError, match="scalar leaf"):
        driven_problem(scale, jnp.ones(1), jnp.float64(1.0))
    with pytest.raises(ValueError, match="at least one array"):
        driven_problem(scale, jnp.ones(1), {})
    with pytest.raises(TypeError, match="step must be callable"):
        driven_problem(3, jnp.ones(1), jnp.ones(3))


def test_driven_sweep_over_input_sequences(gains):
    """A batch of input sequences in one program: row i is the single run."""
    batch = jnp.stack([gains, gains[::-1], jnp.sqrt(gains)])
    problem = driven_problem(scale, jnp.ones(1), gains)
    swept = sweep_lyapunov_spectrum(problem, None, batch, None, 100)
    logs = np.log(np.asarray(batch))[:, :100].mean(axis=1)
    np.testing.assert_allclose(swept.exponents[:, 0], logs, rtol=tol(1e-12))


def test_driven_finite_time_windows(gains):
    """Each window's exponent is the mean log gain over its slices."""
    problem = driven_problem(scale, jnp.ones(1), gains)
    ftle = finite_time_exponents(problem, n_steps=200, window=50.0, t_transient=10.0)
    logs = np.log(np.asarray(gains))[10:210].reshape(4, 50).mean(axis=1)
    np.testing.assert_allclose(np.asarray(ftle.exponents)[:, 0], logs, rtol=tol(1e-12))


@pytest.mark.slow  # its own compiles; test_driven_inputs_too_short is the plain run's
def test_driven_covariant_vectors_diagonal():
    """A diagonal driven map: the covariant vectors are the coordinate axes
    and the exponents the mean log gains."""
    rng = np.random.default_rng(1)
    a = jnp.asarray(rng.uniform(1.5, 3.0, 300))
    b = jnp.asarray(rng.uniform(0.1, 0.8, 300))

    def step(x, u):
        return jnp.stack([u[0] * x[0], u[1] * x[1]])

    problem = driven_problem(step, jnp.ones(2), jnp.stack([a, b], axis=1))
    result = covariant_vectors(problem, n_steps=200, t_transient=20.0)
    logs = [np.log(a[20:220]).mean(), np.log(b[20:220]).mean()]
    # The transient aligns the frame to ~(0.8 / 1.5)^20.
    np.testing.assert_allclose(result.exponents, logs, atol=1e-5)
    np.testing.assert_allclose(np.sum(result.exponents), np.sum(logs), rtol=1e-10)
    vectors = np.abs(np.asarray(result.vectors))
    np.testing.assert_allclose(vectors[..., 0, 0], 1.0, atol=1e-8)
    np.testing.assert_allclose(vectors[..., 1, 1], 1.0, atol=1e-8)


# -- random maps ---------------------------------------------------------------


D = 4


def gaussian(x, key):
    return jax.random.normal(key, (D, D), x.dtype) @ x


def newman(d):
    """Exponents and per-step variances of products of d x d Gaussian matrices."""
    nu = (d - np.arange(1, d + 1) + 1) / 2
    return 0.5 * (np.log(2) + digamma(nu)), polygamma(1, nu) / 4


def _gaussian_product_check(n_steps):
    # From 0 the state stays finite; the tangent map is the matrix itself.
    problem = random_problem(gaussian, jnp.zeros(D), jax.random.key(11))
    result = lyapunov_spectrum(problem, n_steps)
    mean, var = newman(D)
    err = np.abs(np.asarray(result.exponents) - mean) / np.sqrt(var / n_steps)
    assert np.all(err < 5), (result.exponents, mean, err)


def test_gaussian_products_quick():
    _gaussian_product_check(2_000)


@pytest.mark.slow
def test_gaussian_products_long():
    _gaussian_product_check(100_000)


def test_random_same_realisation_chunks_and_checkpoint(tmp_path):
    """One piece, two chunks and run_until_converged resumed from its file
    all see the noise of the same global steps."""
    problem = random_problem(gaussian, jnp.ones(D), jax.random.key(5))
    whole = lyapunov_spectrum(problem, 400)
    first = lyapunov_spectrum(problem, 200)
    rest = lyapunov_spectrum(problem, 200, resume=first.checkpoint)
    np.testing.assert_allclose(rest.exponents, whole.exponents, rtol=1e-12)
    path = tmp_path / "run.npz"
    kwargs = dict(tol=1e-12, chunk_steps=200, min_blocks=2, checkpoint=path)
    run_until_converged(problem, max_steps=200, **kwargs)
    resumed = run_until_converged(problem, max_steps=400, **kwargs)
    assert resumed.n_steps == 400
    np.testing.assert_allclose(resumed.result.exponents, whole.exponents, rtol=1e-12)


@pytest.mark.slow  # two compiles; test_random_keys_same_numbers is the plain run's
def test_random_sweep_of_keys_equals_single_runs():
    """A batch of typed keys in one program: row i is the run with key i."""
    keys = jax.random.split(jax.random.key(2), 3)
    problem = random_problem(gaussian, jnp.ones(D), keys[0])
    swept = sweep_lyapunov_spectrum(problem, None, keys, None, 100)
    for i in range(3):
        single = lyapunov_spectrum(random_problem(gaussian, jnp.ones(D), keys[i]), 100)
        np.testing.assert_allclose(swept.exponents[i], single.exponents, rtol=1e-12)


def test_random_keys_same_numbers():
    """A typed key, its legacy raw form and a sweep row (a typed key, or its
    raw data) step with the same matrices: ``fold_in(key, n)`` of one key."""
    x, n = jnp.arange(1.0, D + 1.0), jnp.int32(17)
    expected = np.asarray(gaussian(x, jax.random.fold_in(jax.random.key(3), n)))
    typed = random_problem(gaussian, jnp.ones(D), jax.random.key(3))
    raw = random_problem(gaussian, jnp.ones(D), jax.random.PRNGKey(3))
    other = random_problem(gaussian, jnp.ones(D), jax.random.key(8))
    rows = [other.with_params(jax.random.key(3))]
    rows.append(other.with_params(jax.random.key_data(jax.random.key(3))))
    for problem in (typed, raw, *rows):
        got = problem.step_fn(x, n)
        np.testing.assert_array_equal(np.asarray(got), expected)


@pytest.mark.parametrize("key", [3, np.zeros(2), jnp.zeros(2, jnp.uint32)[:1]])
def test_random_bad_key(key):
    with pytest.raises(TypeError, match="key must be one JAX PRNG key"):
        random_problem(gaussian, jnp.ones(D), key)


@pytest.mark.slow
def test_grad_of_every_exponent_is_one_over_g():
    key = jax.random.key(7)

    def exponents(g):
        def step(x, k):
            return g * jax.random.normal(k, (3, 3), x.dtype) @ x

        return lyapunov_spectrum(random_problem(step, jnp.ones(3), key), 60).exponents

    g = 1.7
    np.testing.assert_allclose(jax.jacfwd(exponents)(g), np.full(3, 1 / g), rtol=1e-10)


# -- SDEs ----------------------------------------------------------------------

MU, SIGMA, DT = 0.3, 0.5, 0.01


def gbm(scheme, key):
    return sde_problem(
        lambda x: MU * x, lambda x: SIGMA * x, jnp.ones(1), DT, key, scheme=scheme
    )


def replayed_increments(key, n, m=1):
    draw = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(key, i), (m,)))
    return np.sqrt(DT) * np.asarray(draw(jnp.arange(n)))


def _moments(fn):
    """Mean and variance of ``fn(Z)``, Z standard normal (Gauss-Hermite)."""
    z, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    values = fn(z)
    mean = np.sum(w * values)
    return mean, np.sum(w * (values - mean) ** 2)


def _gbm_check(n_steps):
    key = jax.random.PRNGKey(4)
    em = lyapunov_spectrum(gbm("euler_maruyama", key), n_steps).exponents[0]
    heun = lyapunov_spectrum(gbm("heun", key), n_steps).exponents[0]
    dW = replayed_increments(key, n_steps)[:, 0]
    a = MU * DT + SIGMA * dW
    # The sample path, replayed: exact to rounding.
    np.testing.assert_allclose(em, np.mean(np.log(np.abs(1 + a))) / DT, rtol=1e-11)
    np.testing.assert_allclose(
        heun, np.mean(np.log(1 + a + a * a / 2)) / DT, rtol=1e-11
    )
    T = n_steps * DT

    def em_log(z):
        return np.log(np.abs(1 + MU * DT + SIGMA * np.sqrt(DT) * z))

    mean, var = _moments(em_log)
    assert abs(em - mean / DT) < 5 * np.sqrt(n_steps * var) / T
    # Ito mu - s^2/2 vs the scheme's expectation: O(dt).
    assert abs(mean / DT - (MU - SIGMA**2 / 2)) < 2 * SIGMA**4 * DT

    def gap(z):
        b = MU * DT + SIGMA * np.sqrt(DT) * z
        return np.log(1 + b + b * b / 2) - np.log(np.abs(1 + b))

    _, gap_var = _moments(gap)
    bias = 2 * (SIGMA**2 + MU) ** 2 * DT
    assert abs(heun - em - SIGMA**2 / 2) < 5 * np.sqrt(n_steps * gap_var) / T + bias


@pytest.mark.slow
def test_gbm_quick():
    _gbm_check(4_000)


@pytest.mark.slow
def test_gbm_long():
    _gbm_check(200_000)


A = np.array([[-0.5, 1.0, 0.0], [0.0, -1.0, 0.3], [0.0, 0.0, -2.0]])


@pytest.mark.parametrize(
    ("scheme", "noise"),
    [
        # Slow: a compile of its own; general noise's plain test is
        # test_sde_replayed_increments_general_noise.
        pytest.param("euler_maruyama", "general", marks=pytest.mark.slow),
        ("heun", "diagonal"),
    ],
)
def test_additive_noise_linear(scheme, noise):
    """Exponents of the scheme's constant tangent map, exactly; Re eig(A) to
    the scheme's order."""
    dt = 0.02
    Aj = jnp.asarray(A)
    B = jnp.asarray(np.arange(6.0).reshape(3, 2) / 5)
    diffusion = (lambda x: B) if noise == "general" else (lambda x: jnp.full(3, 0.4))
    problem = sde_problem(
        lambda x: Aj @ x, diffusion, jnp.ones(3), dt, jax.random.key(9), noise, scheme
    )
    # A transient of 40 time units aligns the frame to ~exp(-0.5 * 40).
    result = lyapunov_spectrum(problem, 1000, t_transient=40.0)
    M = np.eye(3) + A * dt
    if scheme == "heun":
        M = M + (A * dt) @ (A * dt) / 2
    exact = np.sort(np.log(np.abs(np.linalg.eigvals(M))) / dt)[::-1]
    np.testing.assert_allclose(result.exponents, exact, rtol=0, atol=tol(1e-9))
    order = 1 if scheme == "euler_maruyama" else 2
    re = np.sort(np.linalg.eigvals(A).real)[::-1]
    np.testing.assert_allclose(result.exponents, re, atol=4 * dt**order * 4)


@pytest.mark.slow  # a traced run's compile; test_grad_of_every_exponent_is_one_over_g
def test_sde_grad_reaches_diffusion_params():  # is the plain run's closed-over grad
    """d/ds of the GBM exponent along a path: replayed, by finite differences
    of the exact sample-path formula."""
    key = jax.random.PRNGKey(4)
    n = 500
    dW = replayed_increments(key, n)[:, 0]

    def exponent(s):
        p = sde_problem(lambda x: MU * x, lambda x: s * x, jnp.ones(1), DT, key)
        return lyapunov_spectrum(p, n).exponents[0]

    expected = np.mean(dW / (1 + MU * DT + SIGMA * dW)) / DT
    np.testing.assert_allclose(jax.grad(exponent)(SIGMA), expected, rtol=1e-9)


def test_sde_replayed_increments_general_noise():
    """General noise (d=2, m=3): one EM step equals the replayed formula."""
    key = jax.random.key(12)
    G = jnp.asarray(np.arange(6.0).reshape(2, 3))
    problem = sde_problem(
        lambda x: -x, lambda x: G * x[0], jnp.array([1.0, 2.0]), DT, key, "general"
    )
    dW = np.sqrt(DT) * np.asarray(jax.random.normal(jax.random.fold_in(key, 0), (3,)))
    x0 = np.array([1.0, 2.0])
    expected = x0 - x0 * DT + np.asarray(G) @ dW
    got = problem.step_fn(jnp.asarray(x0), jnp.int32(0))
    np.testing.assert_allclose(got, expected, rtol=tol(1e-14, OPS))


def test_sde_bad_input():
    key = jax.random.key(0)
    x0 = jnp.ones(2)

    def f(x):
        return -x

    with pytest.raises(ValueError, match="scheme must be one of"):
        sde_problem(f, f, x0, DT, key, scheme="milstein")
    with pytest.raises(ValueError, match="noise must be one of"):
        sde_problem(f, f, x0, DT, key, noise="scalar")
    with pytest.raises(ValueError, match=r"diffusion must return.*\(d,\).*\(2, 2\)"):
        sde_problem(f, lambda x: jnp.eye(2), x0, DT, key)
    with pytest.raises(ValueError, match=r"diffusion must return.*\(d, m\)"):
        sde_problem(f, f, x0, DT, key, noise="general")
    with pytest.raises(ValueError, match="drift must map"):
        sde_problem(lambda x: x[:1], f, x0, DT, key)
    with pytest.raises(TypeError, match="key must be one JAX PRNG key"):
        sde_problem(f, f, x0, DT, 0)
    with pytest.raises(TypeError, match="diffusion must be callable"):
        sde_problem(f, 1.0, x0, DT, key)


def test_public_names():
    for name in ("driven_problem", "random_problem", "sde_problem"):
        assert name in lyapax.__all__
