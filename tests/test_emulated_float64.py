"""What float64 needs where it is emulated (a TPU), checked on a CPU that
pretends to be one (``jax.default_backend`` says "tpu"): the 0-1 test
without XLA's FFT or complex numbers (a TPU has neither in float64), and
the pseudo-spectral PDEs with their modes in real pairs, and diffrax's
adaptive solve refused in float64 there, at the call, with what to do
instead."""

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lyapax
from lyapax._engine import fft as fourier
from lyapax._engine.pairs import Pair
from lyapax.pde import complex_ginzburg_landau, kuramoto_sivashinsky

EMULATED = "float64 exists with x64 on only"


@pytest.fixture
def tpu_backend(monkeypatch):
    """New arrays 'land on a TPU': float64 counts as emulated; programs
    traced before are forgotten, so the next call traces again."""
    jax.clear_caches()
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "float64 on a TPU is emulated")
        yield
    jax.clear_caches()


def _autocorrelation(x, n_lags):
    n = x.shape[-1]
    return np.stack(
        [np.sum(x[..., : n - m] * x[..., m:], axis=-1) for m in range(1, n_lags + 1)],
        axis=-1,
    )


@pytest.mark.float64_only(EMULATED)
def test_the_autocorrelation_without_xla_fft_is_the_direct_sum(tpu_backend):
    # Lengths (padded to 2n): one point, dense ones, just above the dense
    # limit, a prime above it (one dense product), factorised ones.
    rng = np.random.default_rng(1)
    for n in [1, 7, 32, 33, 97, 600, 1200]:
        for lead in [(), (2, 3)]:
            x = rng.standard_normal((*lead, n))
            lags = min(n, 40)
            got = np.asarray(fourier.autocorrelation(jnp.asarray(x), lags))
            want = _autocorrelation(x, lags)
            assert got.shape == want.shape and got.dtype == np.float64
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * n, err_msg=n)


@pytest.mark.float64_only(EMULATED)
@pytest.mark.not_on_tpu("compares the lowering with and without emulation")
def test_emulated_float64_lowers_no_fft_and_no_complex(request):
    x = jnp.ones((2, 96))

    def lowered(a):
        return jax.jit(lambda v: fourier.autocorrelation(v, 10)).lower(a).as_text()

    assert "stablehlo.fft" in lowered(x)
    request.getfixturevalue("tpu_backend")
    text = lowered(x)
    assert "stablehlo.fft" not in text and "complex" not in text
    # float32 is native there: XLA's FFT as before.
    assert "stablehlo.fft" in lowered(x.astype(jnp.float32))


def _henon(n):
    x, y, out = 0.1, 0.1, []
    for _ in range(n + 100):
        x, y = 1.0 - 1.4 * x * x + y, 0.3 * x
        out.append(x)
    return np.asarray(out[100:])


@pytest.mark.float64_only(EMULATED)
def test_the_zero_one_test_without_xla_fft_is_the_same(request):
    # Found on the lent TPU v5e: "Unexpected operand type for FFT: c128".
    series = [_henon(600), np.sin(0.3 * np.arange(600))]
    with_fft = [float(lyapax.zero_one_test(s, n_frequencies=20).K) for s in series]
    request.getfixturevalue("tpu_backend")
    without = [float(lyapax.zero_one_test(s, n_frequencies=20).K) for s in series]
    np.testing.assert_allclose(without, with_fft, rtol=0, atol=1e-12)
    assert with_fft[0] > 0.9 and abs(with_fft[1]) < 0.1  # chaos 1, regular 0
    # Found on the lent TPU v5e: a float64 cumsum (the TPU's reduce-window)
    # did not compile in 70 s; the program has none.
    from lyapax.indicators._zero_one import _zero_one_kernel

    jaxpr = jax.make_jaxpr(_zero_one_kernel, static_argnums=(2, 3))(
        jnp.asarray(series), jnp.linspace(0.7, 2.4, 20), 60, 1
    )
    assert "cumsum" not in str(jaxpr)


@pytest.mark.float64_only(EMULATED)
def test_the_transforms_on_pairs_are_numpys(tpu_backend):
    rng = np.random.default_rng(2)
    for n in [4, 6, 32, 96, 128]:
        for lead in [(), (3,)]:
            x, y = rng.standard_normal((2, *lead, n))
            z = fourier.dft(Pair(jnp.asarray(x), jnp.asarray(y)))
            np.testing.assert_allclose(
                np.asarray(z.re) + 1j * np.asarray(z.im),
                np.fft.fft(x + 1j * y),
                rtol=0,
                atol=1e-13 * n,
                err_msg=n,
            )
            back = fourier.dft(z, inverse=True)
            np.testing.assert_allclose(back.re, x, rtol=0, atol=1e-14 * n)
            np.testing.assert_allclose(back.im, y, rtol=0, atol=1e-14 * n)
            half = fourier.rdft(jnp.asarray(x))
            want = np.fft.rfft(x)
            np.testing.assert_allclose(half.re, want.real, rtol=0, atol=1e-13 * n)
            np.testing.assert_allclose(half.im, want.imag, rtol=0, atol=1e-13 * n)
            # irfft ignores the imaginary parts of modes 0 and n/2: so must we.
            noisy = (
                want
                + 1j * np.eye(1, n // 2 + 1, 0)
                + 0.5j * np.eye(1, n // 2 + 1, n // 2)
            )
            got = fourier.irdft(Pair.of(noisy, np.float64), n)
            np.testing.assert_allclose(
                got, np.fft.irfft(noisy, n), rtol=0, atol=1e-14 * n
            )


def _pdes():
    ks = kuramoto_sivashinsky(32, 22.0, state0=np.sin(np.arange(32.0)), dt=0.25)
    n = 32
    u0 = np.concatenate([np.ones(n), 0.1 * np.sin(np.arange(n))])
    cgl = complex_ginzburg_landau(n, 20.0, 0.5, 0.5, state0=u0, dt=0.05)
    ks_if = kuramoto_sivashinsky(
        32, 22.0, state0=np.sin(np.arange(32.0)), dt=0.1, integrator="ifrk4"
    )
    return ks, cgl, ks_if


def _step_program(problem):
    return eqx.filter_jit(lambda step, u: step(u)).lower(
        problem.step_fn, problem.state0
    )


@pytest.mark.float64_only(EMULATED)
def test_a_float64_pde_runs_there_in_real_pairs(request):
    # Found on the lent TPU v5e: no float64 FFT, and converting f64 to c128
    # aborted the compiler (the whole process). Its modes are real pairs now.
    kw = dict(k=2, renorm_every=10)
    with jax.default_device(jax.devices("cpu")[0]):
        built_here = _pdes()
        want = [lyapax.lyapunov_spectrum(p, 200, **kw).exponents for p in built_here]
        on_cpu = lyapax.lyapunov_spectrum(built_here[1], 2000, **kw).exponents
    request.getfixturevalue("tpu_backend")
    there = _pdes()
    assert isinstance(there[1].step_fn.coeffs.Q, Pair)
    for problem, expected in zip(there, want, strict=True):
        text = _step_program(problem).as_text()
        assert "stablehlo.fft" not in text and "complex" not in text
        got = lyapax.lyapunov_spectrum(problem, 200, **kw)
        assert got.exponents.dtype == np.float64
        # 200 steps: KS's chaos has not yet separated the two roundings.
        np.testing.assert_allclose(got.exponents, expected, rtol=0, atol=1e-12)
    # Built where complex numbers exist, run where they do not: refused.
    with pytest.raises(ValueError, match="built where complex numbers exist"):
        lyapax.lyapunov_spectrum(built_here[1], 20, **kw)
    # float32 and mixed of a problem built there: complex64 as before, and
    # this CGL run stays near its float64 exponents (1e-6 apart on CPU).
    for precision in ("float32", "mixed"):
        result = lyapax.lyapunov_spectrum(there[1], 2000, precision=precision, **kw)
        np.testing.assert_allclose(result.exponents, on_cpu, rtol=0, atol=1e-4)
        ks_run = lyapax.lyapunov_spectrum(there[0], 20, k=2, precision=precision)
        assert np.all(np.isfinite(ks_run.exponents))


@pytest.mark.float64_only(EMULATED)
def test_a_traced_pde_symbol_in_emulated_float64_is_refused(tpu_backend):
    u0 = np.sin(np.arange(32.0))
    family = lyapax.problem_family(
        lambda length: kuramoto_sivashinsky(32, length, state0=u0, dt=0.25)
    )
    with pytest.raises(ValueError, match="symbol, multiplier or dt is traced"):
        lyapax.sweep.sweep_lyapunov_spectrum(
            family, None, jnp.asarray([21.0, 22.0]), None, 20, k=2
        )
    # What the message offers: the family's state in float32 (complex64 there).
    family32 = lyapax.problem_family(
        lambda length: kuramoto_sivashinsky(
            32, length, state0=u0.astype(np.float32), dt=0.25
        )
    )
    swept = lyapax.sweep.sweep_lyapunov_spectrum(
        family32, None, jnp.asarray([21.0, 22.0]), None, 20, k=2
    )
    assert swept.exponents.shape == (2, 2) and np.all(np.isfinite(swept.exponents))


@pytest.mark.float64_only(EMULATED)
def test_a_float32_pde_run_in_float64_there_casts_its_coefficients_to_pairs(
    request,
):
    n = 32
    u0 = np.concatenate([np.ones(n), 0.1 * np.sin(np.arange(n))]).astype(np.float32)
    kw = dict(k=2, renorm_every=10)
    with jax.default_device(jax.devices("cpu")[0]):
        cgl = complex_ginzburg_landau(n, 20.0, 0.5, 0.5, state0=u0, dt=0.05)
        want = lyapax.lyapunov_spectrum(cgl, 200, precision="float64", **kw)
    request.getfixturevalue("tpu_backend")
    cgl = complex_ginzburg_landau(n, 20.0, 0.5, 0.5, state0=u0, dt=0.05)
    assert cgl.step_fn.coeffs.Q.dtype == np.complex64  # float32 is native there
    got = lyapax.lyapunov_spectrum(cgl, 200, precision="float64", **kw)
    assert got.exponents.dtype == np.float64
    np.testing.assert_allclose(got.exponents, want.exponents, rtol=0, atol=1e-12)


def test_numpy_arrays_hand_their_products_with_a_pair_to_the_pair():
    z = Pair(jnp.asarray([1.0, 2.0]), jnp.asarray([3.0, 4.0]))
    for got in (np.asarray([2.0, 3.0]) * z, z * np.asarray([2.0, 3.0])):
        assert isinstance(got, Pair)
        np.testing.assert_array_equal(got.re, [2.0, 6.0])
        np.testing.assert_array_equal(got.im, [6.0, 12.0])
    got = 1.0 - z
    np.testing.assert_array_equal(got.re, [0.0, -1.0])
    np.testing.assert_array_equal(got.im, [-3.0, -4.0])


def _adaptive_problem():
    from lyapax.adaptive import diffrax_adaptive_step

    def field(y):
        return jnp.stack([-0.5 * y[0] + y[1], -y[0] - 0.5 * y[1]])

    step = diffrax_adaptive_step("dopri5", rtol=1e-4, atol=1e-6)
    return lyapax.ode_problem(field, jnp.asarray([1.0, 0.3]), 0.2, integrator=step)


@pytest.mark.float64_only(EMULATED)
def test_diffrax_in_emulated_float64_is_refused_and_mixed_runs(tpu_backend):
    # Found on the lent TPU v5e: diffeqsolve's nextafter fails to compile
    # in emulated float64 ("Binary op and ... s32[] and u32[]").
    problem = _adaptive_problem()
    with pytest.raises(ValueError, match="cannot be solved by diffrax on a TPU"):
        lyapax.lyapunov_spectrum(problem, n_steps=5, k=1)
    # The rotation's exponent is its damping, -0.5, within the solver's rtol
    # 1e-4 (the chip's float32 gave -0.49995).
    for precision in ("float32", "mixed"):
        result = lyapax.lyapunov_spectrum(problem, n_steps=5, k=1, precision=precision)
        np.testing.assert_allclose(result.exponents, [-0.5], atol=2e-4)
