"""Precision on every device: one initial frame per seed for every
dtype, and the library's own products at ``Precision.HIGHEST`` whatever
``jax_default_matmul_precision`` says (the user's vector field keeps it)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import float64_run, tol
from support.warned import assert_warned_here

import lyapax
from lyapax import lyapunov_spectrum, ode_problem
from lyapax._engine.benettin import MEMO_FRAME_ENTRIES, fresh_frame, initial_basis
from lyapax.systems import kuramoto_network, lorenz

F64_FRAME = "the float64 frame is drawn with x64 on only"
MIXED_SUMS = "mixed precision's float64 sums exist with x64 on only"

# The seed page's dense Kuramoto call at d = 20 (examples/14_gpu_acceleration.py:
# k = 5, 200 steps, renorm_every 10, dt 1e-2, no transient), in float64, as
# computed at main a3bedab (CPU), before this change: the float64 frame must not move.
SEED_CALL_D20_FLOAT64 = [
    0.23280794863982102,
    0.057402232813955664,
    0.055331481979462374,
    -0.021500730267724213,
    -0.050470681542046494,
]


def _seed_call(d, dtype):
    theta0 = jnp.asarray(2 * np.pi * np.arange(d) / d, dtype)
    problem = kuramoto_network(
        d, omega=jnp.linspace(-1.0, 1.0, d), K=1.0, dt=1e-2, theta0=theta0
    )
    return lyapax.lyapunov_spectrum(
        problem, n_steps=200, k=5, renorm_every=10, t_transient=0.0
    )


@pytest.mark.float64_only(F64_FRAME)
@pytest.mark.parametrize(("d", "k"), [(3, 3), (20, 5), (300, 4)])
def test_the_float64_frame_is_the_one_drawn_before(d, k):
    # The frame at main a3bedab: QR of a float64 normal draw from the seed, on
    # the CPU (where float64 is emulated the library draws there too).
    with jax.default_device(jax.devices("cpu")[0]):
        before, _ = jnp.linalg.qr(
            jax.random.normal(jax.random.PRNGKey(7), (d, k), dtype=jnp.float64)
        )
    for frame in (
        initial_basis(7, d=d, k=k, dtype=jnp.float64),
        fresh_frame(7, d=d, k=k, dtype=jnp.float64)[0],
    ):
        assert frame.dtype == jnp.float64
        if jax.default_backend() == "cpu":
            np.testing.assert_array_equal(np.asarray(frame), np.asarray(before))
        else:  # drawn by a compiled host program: its last bit may differ
            # from eager ops on that host's CPU (3.9e-16 on the TPU v5e's)
            np.testing.assert_allclose(frame, before, rtol=0, atol=1e-15)


@pytest.mark.float64_only(F64_FRAME)
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16])
def test_a_lower_precision_frame_is_the_float64_frame_rounded(dtype):
    f64 = initial_basis(3, d=20, k=5, dtype=jnp.float64)
    for frame in (
        initial_basis(3, d=20, k=5, dtype=dtype),
        fresh_frame(3, d=20, k=5, dtype=dtype)[0],
    ):
        assert frame.dtype == dtype
        np.testing.assert_array_equal(np.asarray(frame), np.asarray(f64.astype(dtype)))


@pytest.mark.float64_only(F64_FRAME)
@pytest.mark.parametrize(("d", "k"), [(20, 5), (MEMO_FRAME_ENTRIES, 2)])
def test_where_float64_is_emulated_the_frame_is_drawn_on_the_host_cpu(
    monkeypatch, d, k
):
    # On the TPU the frame's float64 QR compiled ~20 s per new d; drawn on
    # the host's CPU it is the CPU's frame bit for bit (a memoised frame and
    # one too large for the memo alike).
    import lyapax._engine.benettin as benettin

    places = []

    def spy(draw):
        def where(*args, **kwargs):
            places.append(jax.config.jax_default_device)
            return draw(*args, **kwargs)

        return where

    cpu_frame = np.asarray(initial_basis(11, d=d, k=k, dtype=jnp.float64))
    # A small float64 draw is factored by NumPy, a larger one in the program.
    for name in ("initial_frame", "_normal_draw"):
        monkeypatch.setattr(benettin, name, spy(getattr(benettin, name)))
    _pretend_float64_is_emulated(monkeypatch)
    benettin._memo_frame.cache_clear()
    try:
        for dtype in (jnp.float32, jnp.float64):
            Y0, cum0 = fresh_frame(11, d=d, k=k, dtype=dtype)
            assert Y0.dtype == dtype and cum0.shape == (k,)
            np.testing.assert_array_equal(np.asarray(Y0), cpu_frame.astype(dtype))
        assert places == [jax.devices("cpu")[0]] * 2
        # x64 off: a float32 draw, on the default device as before.
        with jax.enable_x64(False):
            fresh_frame(11, d=d, k=k, dtype=jnp.float32)
        assert places[2:] == [None]
    finally:
        benettin._memo_frame.cache_clear()


def _pretend_float64_is_emulated(monkeypatch):
    """float64 emulated where new arrays land, as on a TPU, except under
    ``jax.default_device(cpu)`` (where the host's draws are made)."""
    from lyapax._engine import precision

    wide = (np.dtype(np.float64), np.dtype(np.complex128))
    monkeypatch.setattr(
        precision,
        "emulated_float64",
        lambda dtype: np.dtype(dtype) in wide and jax.config.jax_default_device is None,
    )


@pytest.mark.float64_only(F64_FRAME)
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_where_float64_is_emulated_programs_draw_their_frames_on_the_host(
    monkeypatch, dtype
):
    # A float32 program that held its float64 draw (and QR) compiled for
    # 13-51 s on the TPU: the sweeps' and the indicators' frames and
    # directions are drawn on the host's CPU instead, one host call per batch
    # of rows, and they are the CPU's draws bit for bit.
    from lyapax._engine import precision

    x0 = jnp.asarray([1.0, 1.0, 1.0], dtype)
    family = lyapax.problem_family(
        lambda rho: ode_problem(lorenz(rho=rho), x0, dt=0.01)
    )
    rhos = jnp.asarray([20.0, 28.0, 35.0], dtype)
    henon = jnp.asarray([0.1, 0.1], dtype)
    band = {"d0": 1e-3, "d_lower": 1e-5, "d_upper": 1e-1}
    runs = {
        "sweep": lambda: (
            lyapax.sweep_lyapunov_spectrum(
                family, None, rhos, None, 70, k=2, renorm_every=7
            ).exponents
        ),
        "megno": lambda: (
            lyapax.megno(
                ode_problem(lorenz(), x0, dt=0.01),
                100,
                state0_batch=jnp.stack([x0, 2 * x0]),
            ).mean_megno
        ),
        "two_trajectory": lambda: (
            lyapax.two_trajectory_exponent(
                lyapax.systems.henon_map(), henon, 1.0, 70, **band
            ).exponent
        ),
    }
    calls = []
    program = precision._host_program

    def spy(fn, static):
        compiled = program(fn, static)

        def call(*arrays):
            calls.append((fn.__name__, [a.shape for a in arrays]))
            return compiled(*arrays)

        return call

    def all_runs():
        jax.clear_caches()  # each program traced again, with or without
        try:
            return {name: np.asarray(run()) for name, run in runs.items()}
        finally:
            jax.clear_caches()

    plain = all_runs()
    assert calls == []
    monkeypatch.setattr(precision, "_host_program", spy)
    _pretend_float64_is_emulated(monkeypatch)
    drawn = all_runs()
    for name in runs:
        assert drawn[name].dtype == dtype
        np.testing.assert_array_equal(drawn[name], plain[name], err_msg=name)
    # One host call per program, each with its whole batch of seeds (keys).
    assert calls == [("_basis", [(3,)]), ("_basis", [(2,)]), ("_normal", [(1, 2)])]


def test_without_x64_a_float16_frame_is_the_float32_frame_rounded():
    # float32 is the widest float there: a float16 frame is drawn and
    # factored in it (a half-precision QR does not exist on CPU), and the
    # frame memoised with x64 on (the float64 frame rounded) is not served.
    if float64_run():
        fresh_frame(3, d=20, k=5, dtype=jnp.float16)
    with jax.enable_x64(False):
        f32 = initial_basis(3, d=20, k=5, dtype=jnp.float32)
        assert f32.dtype == jnp.float32
        for frame in (
            initial_basis(3, d=20, k=5, dtype=jnp.float16),
            fresh_frame(3, d=20, k=5, dtype=jnp.float16)[0],
        ):
            assert frame.dtype == jnp.float16
            np.testing.assert_array_equal(
                np.asarray(frame), np.asarray(f32.astype(jnp.float16))
            )


@pytest.mark.float64_only("compares a float32 run with a float64 run")
def test_float32_and_float64_runs_of_the_seed_call_agree_to_float32_accuracy():
    f64 = _seed_call(20, jnp.float64)
    f32 = _seed_call(20, jnp.float32)
    assert f64.exponents.dtype == jnp.float64
    assert f32.exponents.dtype == jnp.float32
    if jax.default_backend() == "cpu":  # where the stored value was computed
        np.testing.assert_allclose(f64.exponents, SEED_CALL_D20_FLOAT64, rtol=1e-12)
    # At main a3bedab the float32 run started from another frame (d = 50:
    # lambda_1 0.0689 against 0.0573); now they differ by rounding only.
    np.testing.assert_allclose(f32.exponents, f64.exponents, rtol=0, atol=2e-5)


# --- Precision.HIGHEST on the library's own products ---------------------------


def _dot_precisions(jaxpr):
    """The ``precision`` of every ``dot_general`` in a closed jaxpr, nested
    jaxprs (jit, scan, while, cond, custom rules) included."""
    found = []

    def walk(jx):
        for eqn in jx.eqns:
            if eqn.primitive.name == "dot_general":
                found.append(eqn.params["precision"])
            for value in eqn.params.values():
                for sub in value if isinstance(value, tuple | list) else (value,):
                    if isinstance(sub, jax.extend.core.ClosedJaxpr):
                        walk(sub.jaxpr)
                    elif isinstance(sub, jax.extend.core.Jaxpr):
                        walk(sub)

    walk(jaxpr.jaxpr)
    return found


def _is_highest(precision):
    highest = jax.lax.Precision.HIGHEST
    return precision == highest or (
        isinstance(precision, tuple) and all(p == highest for p in precision)
    )


def _library_products():
    """(name, function, arguments) of the library's own matrix products."""
    from lyapax.covariant._angles import subspace_angles
    from lyapax.covariant._kernels import combine, upper_inverse

    rng = np.random.default_rng(0)
    R = np.triu(rng.standard_normal((6, 6))) + 6 * np.eye(6)
    return [
        ("combine", combine, (np.ones((4, 6, 3)), np.ones((4, 3, 3)))),
        ("upper_inverse", upper_inverse, (R,)),
        ("subspace_angles", subspace_angles, (np.ones((6, 3)), np.eye(6)[:, :2])),
    ]


@pytest.mark.parametrize("name", ["combine", "upper_inverse", "subspace_angles"])
def test_library_products_ask_for_highest_under_a_bfloat16_default(name):
    fn, args = {n: (f, a) for n, f, a in _library_products()}[name][:2]
    with jax.default_matmul_precision("bfloat16"):
        precisions = _dot_precisions(jax.make_jaxpr(fn)(*args))
    assert precisions, f"{name} has no matrix product to check"
    assert all(_is_highest(p) for p in precisions), precisions


def test_the_shadowing_least_squares_and_gram_products_ask_for_highest():
    from lyapax.shadowing import _lsq, _segments

    text = __import__("inspect").getsource(_lsq) + __import__("inspect").getsource(
        _segments
    )
    # Every product there goes through the HIGHEST helpers: no bare `@`.
    code = [line.split("#")[0] for line in text.splitlines()]
    assert not [line for line in code if " @ " in line and '"' not in line]


def _is_default(precision):
    return precision is None or (
        isinstance(precision, tuple)
        and all(p in (None, jax.lax.Precision.DEFAULT) for p in precision)
    )


@pytest.mark.parametrize("d", [3, 300])  # the fused QR and LAPACK's
def test_a_benettin_run_adds_no_product_below_highest(d):
    # An elementwise field: every matrix product in the traced run is the
    # library's own, and none may follow the bfloat16 default.
    def run(x):
        field = lambda y: -0.5 * y + 0.1 * jnp.roll(y, 1)  # noqa: E731
        problem = lyapax.ode_problem(field, x * jnp.ones(d), dt=0.01)
        return lyapax.lyapunov_spectrum(
            problem, n_steps=20, k=3, renorm_every=5, t_transient=0.0
        ).exponents

    with jax.default_matmul_precision("bfloat16"):
        precisions = _dot_precisions(jax.make_jaxpr(run)(1.0))
    assert all(_is_highest(p) for p in precisions), precisions


def test_a_benettin_run_keeps_the_users_precision_in_the_vector_field():
    # The user's `A @ y` (and its tangent products) keep the default, which
    # the context's bfloat16 then sets when the program is lowered.
    A = jnp.array([[0.1, 1.0, 0.0], [-1.0, 0.1, 0.0], [0.0, 0.0, -0.5]])

    def run(x):
        problem = lyapax.ode_problem(lambda y: A @ y, x * jnp.ones(3), dt=0.01)
        return lyapax.lyapunov_spectrum(
            problem, n_steps=20, renorm_every=5, t_transient=0.0
        ).exponents

    with jax.default_matmul_precision("bfloat16"):
        precisions = _dot_precisions(jax.make_jaxpr(run)(1.0))
    assert precisions
    assert all(_is_default(p) for p in precisions), precisions


# --- precision= ---------------------------------------------------------------


def _lorenz():
    return lyapax.ode_problem(
        lyapax.systems.lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01
    )


def test_precision_rejects_a_bad_value_naming_it():
    with pytest.raises(ValueError, match="precision.*'half'"):
        lyapax.lyapunov_spectrum(_lorenz(), n_steps=10, precision="half")


def test_precision_float64_is_the_default_run_and_float32_casts():
    kw = dict(n_steps=2000, renorm_every=10, t_transient=1.0)
    plain = lyapax.lyapunov_spectrum(_lorenz(), **kw)
    f64 = lyapax.lyapunov_spectrum(_lorenz(), precision="float64", **kw)
    f32 = lyapax.lyapunov_spectrum(_lorenz(), precision="float32", **kw)
    np.testing.assert_array_equal(f64.exponents, plain.exponents)
    assert f32.exponents.dtype == jnp.float32
    assert f32.checkpoint.state.dtype == jnp.float32


@pytest.mark.float64_only(MIXED_SUMS)
def test_mixed_sums_in_float64_and_agrees_with_float64_within_two_stderr():
    # README's first example (Lorenz, 10^5 RK4 steps).
    kw = dict(n_steps=100_000, renorm_every=10, t_transient=50.0)
    f64 = lyapax.lyapunov_spectrum(_lorenz(), **kw)
    mixed = lyapax.lyapunov_spectrum(_lorenz(), precision="mixed", **kw)
    assert mixed.exponents.dtype == jnp.float64
    assert mixed.checkpoint.state.dtype == jnp.float32
    assert mixed.checkpoint.cum_log_growth.dtype == jnp.float64
    both = np.hypot(f64.stderr, mixed.stderr)
    assert np.all(np.abs(mixed.exponents - f64.exponents) <= 2 * both), (
        mixed.exponents,
        f64.exponents,
        both,
    )


@pytest.mark.float64_only(MIXED_SUMS)
def test_mixed_on_the_dense_kuramoto_seed_call_agrees_with_float64():
    d = 50
    problem = kuramoto_network(d, omega=jnp.linspace(-1.0, 1.0, d), K=1.0, dt=1e-2)
    kw = dict(n_steps=200, k=5, renorm_every=10, t_transient=0.0)
    f64 = lyapax.lyapunov_spectrum(problem, **kw)
    mixed = lyapax.lyapunov_spectrum(problem, precision="mixed", **kw)
    assert mixed.exponents.dtype == jnp.float64
    # 200 steps do not let the float32 trajectory wander: float32 accuracy.
    np.testing.assert_allclose(mixed.exponents, f64.exponents, rtol=0, atol=2e-5)
    assert np.all(np.abs(mixed.exponents - f64.exponents) <= 2 * f64.stderr)


@pytest.mark.float64_only(MIXED_SUMS)
def test_a_mixed_runs_zero_sums_are_made_once_with_its_frame():
    """No cast at every call: the float64 zeros a mixed run starts its sums
    from are memoised with the frame (one program launch less per call)."""
    first = fresh_frame(5, d=6, k=3, dtype=jnp.float32, sums=jnp.float64)
    again = fresh_frame(5, d=6, k=3, dtype=jnp.float32, sums=jnp.float64)
    plain = fresh_frame(5, d=6, k=3, dtype=jnp.float32)
    assert again[1] is first[1] and again[0] is first[0]
    np.testing.assert_array_equal(np.asarray(first[0]), np.asarray(plain[0]))
    assert first[1].dtype == jnp.float64 and plain[1].dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(first[1]), np.zeros(3))


@pytest.mark.float64_only(MIXED_SUMS)
def test_a_mixed_run_resumes_with_float64_sums():
    kw = dict(renorm_every=10, t_transient=0.0, precision="mixed")
    first = lyapax.lyapunov_spectrum(_lorenz(), n_steps=500, **kw)
    more = lyapax.lyapunov_spectrum(
        _lorenz(), n_steps=500, resume=first.checkpoint, **kw
    )
    assert more.checkpoint.cum_log_growth.dtype == jnp.float64
    assert np.all(np.isfinite(more.exponents))


@pytest.mark.parametrize(
    "precision",
    ["float32", pytest.param("mixed", marks=pytest.mark.float64_only(MIXED_SUMS))],
)
def test_a_sweep_row_is_the_single_run_of_the_same_precision(precision):
    x0s = jnp.array([[1.0, 1.0, 1.0], [2.0, 1.0, 0.5]])
    sweep = lyapax.sweep_lyapunov_spectrum(
        _lorenz(),
        None,
        None,
        None,
        2000,
        renorm_every=10,
        state0_batch=x0s,
        precision=precision,
    )
    single = lyapax.lyapunov_spectrum(
        lyapax.ode_problem(lyapax.systems.lorenz(), x0s[1], dt=0.01),
        n_steps=2000,
        renorm_every=10,
        precision=precision,
    )
    want = jnp.float32 if precision == "float32" else jnp.float64
    assert sweep.exponents.dtype == single.exponents.dtype == want
    # The sweep's fused QR against the single run's: float32 rounding apart.
    np.testing.assert_allclose(sweep.exponents[1], single.exponents, atol=1e-5)


def test_a_sweep_rejects_a_bad_precision_naming_it():
    with pytest.raises(ValueError, match="precision.*'bf16'"):
        lyapax.sweep_lyapunov_spectrum(
            _lorenz(),
            None,
            None,
            None,
            20,
            state0_batch=jnp.ones((2, 3)),
            precision="bf16",
        )


def test_cast_floats_casts_float_and_complex_arrays_and_keeps_a_tree_that_needs_none():
    from lyapax._engine.precision import cast_floats

    # Complex leaves: a pseudo-spectral step's coefficients (a PDE built in
    # float64 and run with precision='float32' failed with float64 output).
    tree = {
        "w": jnp.ones(3),
        "n": jnp.arange(3),
        "x": 0.5,
        "f": np.ones(2),
        "c": np.ones(2, np.complex128),
    }
    cast = cast_floats(tree, jnp.float32)
    assert cast["w"].dtype == cast["f"].dtype == jnp.float32
    assert cast["c"].dtype == jnp.complex64
    assert cast["n"].dtype == tree["n"].dtype and cast["x"] == 0.5
    assert cast_floats(cast, jnp.float32) is cast


def test_without_x64_float64_and_mixed_fall_back_to_float32():
    from lyapax._engine.precision import draw_dtype, resolve

    with jax.enable_x64(False):
        assert resolve("float64", np.float32) == (np.float32, None)
        assert resolve("mixed", np.float32) == (np.float32, np.float32)
        assert draw_dtype(np.float32) == draw_dtype(np.float16) == np.float32
    with jax.enable_x64(True):  # as in a float64 run of the suite
        assert resolve("mixed", np.float32) == (np.float32, np.float64)
        assert resolve(None, np.float64) == (np.float64, None)


def test_a_float32_run_without_x64_says_so_at_the_callers_line():
    with jax.enable_x64(False):
        x0 = jnp.array([1.0, 1.0, 1.0], jnp.float32)
        with pytest.warns(UserWarning, match="jax_enable_x64 is off") as seen:
            lyapunov_spectrum(ode_problem(lorenz(), x0, dt=0.01), 20, renorm_every=10)
    assert_warned_here(seen, "jax_enable_x64 is off")


@pytest.mark.float64_only("float64 arrays exist with x64 on only")
def test_float64_on_a_tpu_warns_what_the_emulation_gives(monkeypatch):
    """A float64 run whose arrays land on a TPU says what emulated float64
    is (measured there); float32 there, and float64 on a CPU, do not."""
    from lyapax._engine import precision as prec

    with jax.default_device(jax.devices("cpu")[0]), warnings.catch_warnings():
        warnings.simplefilter("error")
        on_cpu = ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)
        lyapunov_spectrum(on_cpu, n_steps=20, renorm_every=10)  # CPU: silent
        assert prec.emulated_float64(np.float64) is False
    problem = ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)
    monkeypatch.setattr(prec.jax, "default_backend", lambda: "tpu")
    assert prec.emulated_float64(np.float64) and prec.emulated_float64(np.complex128)
    assert not prec.emulated_float64(np.float32)
    with pytest.warns(UserWarning, match="float64 on a TPU is emulated") as seen:
        lyapunov_spectrum(problem, n_steps=20, renorm_every=10)
    assert "precision='float32' or 'mixed'" in str(seen[0].message)
    assert_warned_here(seen, "emulated")
    with pytest.warns(UserWarning, match="float64 on a TPU is emulated") as seen:
        lyapax.sweep.sweep_lyapunov_spectrum(
            lambda x, p: x + 0.01 * p["c"] * x * (1.0 - x),
            jnp.array([0.5]),
            {"c": jnp.array([1.0, 0.5])},
            1.0,
            20,
            renorm_every=10,
        )
    assert_warned_here(seen, "emulated")
    with pytest.warns(UserWarning, match="float64 on a TPU is emulated") as seen:
        lyapax.run_until_converged(
            problem, tol=1e-9, max_steps=40, chunk_steps=20, renorm_every=10
        )
    assert_warned_here(seen, "emulated")  # each chunk's run: the caller's line


@pytest.mark.float64_only("float64 arrays exist with x64 on only")
def test_a_tpu_float64_run_names_a_constant_minus_a_state_element(monkeypatch):
    """Emulated float64 computed ``28.0 - x`` of a one-element ``x`` 1.8e-8
    off on the TPU v5e (docs/method.md, "Precision"): a float64 run there
    names such a subtraction in the step, also inside a nested ``jit``, at
    every run (searched once per step structure); the library's Lorenz,
    whose parameters enter as run-time values, and the negation's form
    ``-x + 28.0`` are silent."""
    from lyapax._engine import precision as prec

    def field(x):
        return jnp.stack(
            [10.0 * (x[1] - x[0]), x[0] * (28.0 - x[2]) - x[1], x[0] * x[1] - x[2]]
        )

    def rewritten(x):
        return jnp.stack(
            [10.0 * (x[1] - x[0]), x[0] * (-x[2] + 28.0) - x[1], x[0] * x[1] - x[2]]
        )

    x0 = jnp.array([1.0, 1.0, 1.0])
    assert prec.constant_minus_element(field, x0) == "28.0 - x"
    assert prec.constant_minus_element(jax.jit(field), x0) == "28.0 - x"
    assert prec.constant_minus_element(rewritten, x0) is None
    assert prec.constant_minus_element(lambda x: 28.0 - x, jnp.ones(3)) is None
    monkeypatch.setattr(prec.jax, "default_backend", lambda: "tpu")

    def messages(rhs):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            lyapunov_spectrum(ode_problem(rhs, x0, dt=0.01), 20, renorm_every=10)
        assert_warned_here(seen, "emulated")
        named = [str(w.message) for w in seen if "the step computes" in str(w.message)]
        if named:
            assert_warned_here(seen, "the step computes")
        return named

    from lyapax._engine import run as run_module

    searched = []
    search = run_module.constant_minus_element

    def counted(*args):
        searched.append(args[0])
        return search(*args)

    monkeypatch.setattr(run_module, "constant_minus_element", counted)
    (named,) = messages(field)
    assert "28.0 - x" in named and "-x + c" in named
    # The search traces the step once per structure; every run names it.
    assert messages(field) == [named] and len(searched) == 1
    assert messages(rewritten) == []
    assert messages(lorenz()) == []
    # The library's own steps: a delay equation's interpolated reads (the
    # Hermite weights and the stage's read position) and the logistic map.
    dde = lyapax.dde_problem(
        lyapax.systems.mackey_glass(), jnp.array([1.2]), 2.0, 0.1, interpolate=True
    )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lyapax.lyapunov_spectrum_dde(dde, 20, k=2, renorm_every=10)
        lyapunov_spectrum(lyapax.systems.logistic_map(3.8), jnp.array([0.3]), 1.0, 20)
    assert not [w for w in seen if "the step computes" in str(w.message)]


def _f32_and_f64(run):
    """``run(dtype)``'s output arrays in float32 and in float64."""
    return [[np.asarray(a) for a in run(dtype)] for dtype in (np.float32, np.float64)]


@pytest.mark.float64_only("float32 inputs among float64 defaults need x64 on")
@pytest.mark.parametrize("entry", ["msf", "transversal", "ks", "cgl", "two_trajectory"])
def test_float32_inputs_compute_in_float32_where_x64_is_on(entry):
    # Found on a chip in float32 with x64 on (benchmarks/entry_points.py):
    # float64 alphas, PDE coefficients and two-trajectory bounds made these
    # runs' tangents or sums float64, and JAX refused the mixed types.
    from lyapax import systems
    from lyapax.coupling import kuramoto_coupling
    from lyapax.network import Network, network_problem, transversal_exponents
    from lyapax.pde import complex_ginzburg_landau, kuramoto_sivashinsky

    def msf(dtype):
        m = lyapax.master_stability_function(
            systems.lorenz(),
            jnp.asarray(np.eye(3), dtype),
            np.array([0.0, 1.0, 4.0]),  # float64 values, as users pass them
            jnp.asarray([1.0, 1.0, 1.0], dtype),
            0.01,
            200,
            t_transient=1.0,
        )
        return m.exponent, m.stderr

    def transversal(dtype, n=5):
        ring = np.roll(np.eye(n), 1, 1) + np.roll(np.eye(n), -1, 1)
        problem = network_problem(
            lambda x, c, p: p["omega"] + c,
            Network(ring.astype(dtype), (0,)),
            kuramoto_coupling(),
            {"omega": jnp.full((n,), 1.3, dtype), "G": jnp.asarray(2.0, dtype)},
            jnp.full((1, n), 0.4, dtype),
            0.01,
        )
        res = transversal_exponents(problem, 200, t_transient=0.5)
        return res.exponents, res.stderr

    def ks(dtype):
        u0 = np.sin(np.arange(32.0)).astype(dtype)
        problem = kuramoto_sivashinsky(32, 22.0, state0=u0, dt=0.25)
        return (lyapunov_spectrum(problem, 100, k=4).exponents,)

    def cgl(dtype, n=32):
        u0 = np.concatenate([np.ones(n), 0.1 * np.sin(np.arange(n))]).astype(dtype)
        problem = complex_ginzburg_landau(n, 20.0, 0.5, 0.5, state0=u0, dt=0.05)
        return (lyapunov_spectrum(problem, 100, k=4).exponents,)

    def two_trajectory(dtype):
        res = lyapax.two_trajectory_exponent(
            systems.henon_map(),
            jnp.asarray([0.1, 0.1], dtype),
            1.0,
            500,
            t_transient=10.0,
            d0=1e-3,  # above float32's rounding of the state
            d_lower=1e-5,
            d_upper=1e-1,
        )
        return res.exponent, res.stderr

    run = locals()[entry]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "state0 is float32")
        f32, f64 = _f32_and_f64(run)
    for a, b in zip(f32, f64, strict=True):
        assert a.dtype == np.float32 and b.dtype == np.float64
        assert np.isfinite(a).all()
    # The leading output agrees with the float64 run to float32's accuracy
    # over a short run (chaotic orbits part slowly at first).
    np.testing.assert_allclose(f32[0], f64[0], rtol=0, atol=2e-2)


def _primitives(fn, x):
    return {eqn.primitive.name for eqn in jax.make_jaxpr(fn)(x).jaxpr.eqns}


def test_on_a_tpu_float32_growths_take_their_log_from_a_series(monkeypatch):
    """A TPU's float32 log is up to ~4000 ulp off near 1 (docs/method.md):
    there a float32 growth's log comes from frexp and a series, within a
    few ulp; the CPU and every other dtype keep ``jnp.log``."""
    from lyapax._engine import precision as prec

    rng = np.random.default_rng(3)
    x = np.concatenate(
        [rng.uniform(0.9, 1.1, 4000), np.exp(rng.uniform(-80.0, 80.0, 4000))]
    ).astype(np.float32)
    exact = np.log(x.astype(np.float64))
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    on_tpu = prec._platform() == "tpu"
    # Shapes not traced before: JAX keeps a trace per function and shape.
    monkeypatch.setattr(prec, "_platform", lambda: "cpu")
    assert "log" in _primitives(prec.growth_log, jnp.zeros(13, jnp.float32))
    monkeypatch.setattr(prec, "_platform", lambda: "tpu")
    assert "log" not in _primitives(prec.growth_log, jnp.zeros(14, jnp.float32))
    got = np.asarray(prec.growth_log(jnp.asarray(x)), np.float64)
    # Measured: 2.8 ulp on the CPU; on the TPU v5e, whose float32 divide
    # and multiplies round differently, 3.8 (benchmarks/float32_ops.py).
    assert np.max(np.abs(got - exact) / ulp) <= (4.0 if on_tpu else 3.0)
    # Gradients through it (a differentiated exponent) are 1/x.
    some = jnp.array([0.3, 0.99, 1.7, 123.0], jnp.float32)
    slopes = jax.vmap(jax.grad(prec.growth_log))(some)
    np.testing.assert_allclose(np.asarray(slopes), 1 / np.asarray(some), rtol=3e-6)
    edges = prec.growth_log(jnp.array([0.0, np.inf, np.nan, 1.0, 0.5], jnp.float32))
    np.testing.assert_array_equal(
        np.asarray(edges), np.float32([-np.inf, np.inf, np.nan, 0.0, -np.log(2.0)])
    )


@pytest.mark.float64_only("the float64 series and its float64 reference")
def test_on_a_tpu_float64_growths_take_their_log_from_a_series(monkeypatch):
    """A TPU's emulated float64 log was 4e-9 relative off at 0.083-0.093 on
    the TPU v5e (docs/method.md, "Precision"), where its adds and
    multiplies are within 1e-14: there a float64 growth's log comes from a
    float-only power of two and a series; elsewhere ``jnp.log``."""
    from lyapax._engine import precision as prec

    rng = np.random.default_rng(4)
    x = np.concatenate(
        [
            rng.uniform(0.9, 1.1, 4000),
            rng.uniform(0.08, 0.1, 1000),
            # Above 1e-20: below it the chip's float64 has fewer than 53 bits.
            np.exp(rng.uniform(-45.0, 80.0, 4000)),
            2.0 ** np.arange(-64.0, 121.0),
        ]
    )
    exact = np.log(x)
    on_tpu = prec._platform() == "tpu"
    monkeypatch.setattr(prec, "_platform", lambda: "cpu")
    assert "log" in _primitives(prec.growth_log, jnp.zeros(16, jnp.float64))
    monkeypatch.setattr(prec, "_platform", lambda: "tpu")
    assert "log" not in _primitives(prec.growth_log, jnp.zeros(17, jnp.float64))
    got = np.asarray(prec.growth_log(jnp.asarray(x)))
    err = np.abs(got - exact)
    if on_tpu:
        # Emulated float64's adds and multiplies: ~1e-14 relative each.
        assert np.max(err / np.maximum(np.abs(exact), 1.0)) <= 1e-13
    else:
        # Measured 3.0 ulp on the CPU.
        assert np.max(err / np.spacing(np.maximum(np.abs(exact), 1e-300))) <= 3.0
    some = jnp.array([0.3, 0.99, 1.7, 123.0])
    slopes = jax.vmap(jax.grad(prec.growth_log))(some)
    np.testing.assert_allclose(
        np.asarray(slopes), 1 / np.asarray(some), rtol=tol(1e-14)
    )
    edges = prec.growth_log(jnp.array([0.0, np.inf, np.nan, 1.0, 0.5]))
    np.testing.assert_allclose(
        np.asarray(edges),
        [-np.inf, np.inf, np.nan, 0.0, -np.log(2.0)],
        rtol=1e-14 if on_tpu else 0.0,  # ln 2's two parts added there
    )


@pytest.mark.float64_only("the float64 series and its float64 reference")
def test_on_a_tpu_float64_mackey_glass_takes_its_power_from_the_series(monkeypatch):
    """The chip's float64 pow goes through its log (a Mackey-Glass run was
    4.2e-9 off there): the library's ``|x|^n`` takes the series log on a
    TPU in float64, and is ``x ** n`` everywhere else."""
    from lyapax import systems
    from lyapax._engine import precision as prec

    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(0.0, 2.0, 2000), [0.0, 1.0, 0.5, 1e-3]])
    exact = x**10.0
    on_tpu = prec._platform() == "tpu"
    field = systems.mackey_glass()
    now, delayed = jnp.array([0.9]), jnp.array([1.3])
    monkeypatch.setattr(prec, "_platform", lambda: "cpu")
    # On the CPU device: the chip's own pow is the loss under test.
    with jax.default_device(jax.devices("cpu")[0]):
        plain = np.asarray(field(now, delayed))
    assert "pow" in _primitives(lambda y: prec.float_power(y, 10.0), jnp.zeros(18))
    monkeypatch.setattr(prec, "_platform", lambda: "tpu")
    used = _primitives(lambda y: prec.float_power(y, jnp.float64(10.0)), jnp.zeros(19))
    assert "log" not in used and "exp" not in used
    got = np.asarray(prec.float_power(jnp.asarray(x), jnp.float64(10.0)))
    if on_tpu:
        # exp carries its argument's rounding, so the error grows with
        # |n log x| (measured on the TPU v5e: up to 3.6e-15 |n log x|
        # relative); checked above 1e-20, where the chip's float64 keeps its
        # width (two float32s: the low one flushes below ~1e-30; 2.2e-56 is 0).
        keep = exact >= 1e-20
        arg = np.abs(10.0 * np.log(np.where(keep, x, 1.0)))
        err = np.abs(got - exact) / np.where(keep, exact, 1.0)
        worst = np.argmax(err[keep] / (1.0 + arg[keep]))
        # (and 1.8e-14 at x = 1.014, where n log x is 0.14: the chip's divide
        # is 2.7e-14 relative).
        assert np.all(err[keep] <= 3e-14 + 1e-14 * arg[keep]), (
            x[keep][worst],
            err[keep][worst],
        )
    else:
        # Measured 5.7e-15 on the CPU.
        np.testing.assert_allclose(got, exact, rtol=1e-14, atol=0)
    assert got[-4] == 0.0 and got[-3] == 1.0
    slopes = jax.vmap(jax.grad(lambda y: prec.float_power(y, 10.0)))(
        jnp.array([0.0, 0.3, 1.0, 1.7])
    )
    np.testing.assert_allclose(
        np.asarray(slopes), 10.0 * np.array([0.0, 0.3, 1.0, 1.7]) ** 9, rtol=tol(1e-14)
    )
    np.testing.assert_allclose(
        np.asarray(field(now, delayed)), plain, rtol=1e-13 if on_tpu else 1e-15
    )


@pytest.mark.float64_only("the float64 series and its float64 reference")
def test_the_float64_series_exp_is_within_an_ulp_on_any_platform():
    """A TPU's float64 exp of small arrays is float32-accurate (1.8e-8 for
    one element, measured on a TPU v5e): ``_series_exp64`` builds it from
    adds, multiplies and exact powers of two instead, on every platform."""
    from lyapax._engine import precision as prec

    rng = np.random.default_rng(11)
    # Within e^+-60: a TPU's float64 is two float32s, whose low part is
    # flushed to 0 below ~1e-30, where only float32's digits are left.
    y = np.concatenate(
        [rng.uniform(-60.0, 60.0, 4000), rng.uniform(-0.4, 0.4, 2000), [0.0, -0.0]]
    )
    on_tpu = jax.default_backend() == "tpu"
    for shape in ((1,), y.shape):
        # One-element arrays are where the chip's own exp was off.
        if shape == (1,):
            got = np.asarray(
                jax.lax.map(prec._series_exp64, jnp.asarray(y[:300, None]))
            )
            exact = np.exp(y[:300, None])
        else:
            got = np.asarray(jax.jit(prec._series_exp64)(jnp.asarray(y)))
            exact = np.exp(y)
        # Measured 2.2e-16 (one ulp) on the CPU; on a TPU v5e 5e-14 (its
        # float64 adds and multiplies are 1e-14 relative themselves).
        np.testing.assert_allclose(got, exact, rtol=1e-13 if on_tpu else 4.5e-16)
    edges = np.asarray(
        prec._series_exp64(jnp.array([-171.0, 171.0, -np.inf, np.inf, np.nan]))
    )
    np.testing.assert_array_equal(edges, [0.0, np.inf, 0.0, np.inf, np.nan])
    slopes = jax.vmap(jax.grad(prec._series_exp64))(jnp.asarray(y[:50]))
    np.testing.assert_allclose(np.asarray(slopes), np.exp(y[:50]), rtol=tol(1e-15))


@pytest.mark.float64_only("the float64 polynomials and their float64 reference")
def test_on_a_tpu_float64_small_sines_come_from_polynomials(monkeypatch):
    """A TPU's float64 sin and cos of one-element arrays are float32-accurate
    (4.2e-8, measured on a TPU v5e; 8 elements 1.7e-14): there the library's
    own (the double gyre, the Kuramoto coupling, the 0-1 test) take
    ``sincos``'s polynomials below 8 elements, and ``jnp.sin``/``jnp.cos``
    everywhere else."""
    from lyapax import systems
    from lyapax._engine import precision as prec

    on_tpu = prec._platform() == "tpu"
    gyre = systems.double_gyre()
    point, t = jnp.array([0.7, 0.3]), jnp.float64(3.3)
    with jax.default_device(jax.devices("cpu")[0]):
        plain = np.asarray(gyre(t, point))
        plain_slope = np.asarray(jax.jacfwd(lambda x: gyre(t, x))(point))
    monkeypatch.setattr(prec, "_platform", lambda: "cpu")
    assert "sin" in _primitives(prec.float_sin, jnp.zeros(3))
    monkeypatch.setattr(prec, "_platform", lambda: "tpu")
    from lyapax._engine.sincos import sincos

    values = jnp.linspace(-4.0, 4.0, 8)
    for n, want in ((7, sincos(values[:7])), (8, (jnp.sin(values), jnp.cos(values)))):
        got = (prec.float_sin(values[:n]), prec.float_cos(values[:n]))
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    y = np.random.default_rng(13).uniform(-50.0, 50.0, (400, 1))
    for fn, exact in ((prec.float_sin, np.sin), (prec.float_cos, np.cos)):
        got = np.asarray(jax.lax.map(fn, jnp.asarray(y)))
        # sincos: 1.1e-16 absolute on a CPU; on the lent TPU v5e 5.6e-14,
        # the emulated reduction's rounding near |x| = 50.
        np.testing.assert_allclose(
            got, exact(y), rtol=0, atol=1.5e-13 if on_tpu else 2.3e-16
        )
    # Beyond sincos's range, the chip's own.
    far = np.asarray(prec.float_sin(jnp.array([1e7, np.inf, np.nan])))
    np.testing.assert_allclose(far[0], np.sin(1e7), rtol=tol(1e-15))
    assert np.isnan(far[1:]).all()
    # (its v is a difference near 4e-4: 5.1e-17 apart on the TPU v5e)
    np.testing.assert_allclose(
        np.asarray(gyre(t, point)), plain, rtol=tol(1e-15), atol=1e-14 if on_tpu else 0
    )
    # Each slope from the same polynomials, forward and reverse.
    for fn, slope_of in (
        (prec.float_sin, np.cos),
        (prec.float_cos, lambda v: -np.sin(v)),
    ):
        slopes = jax.vmap(jax.grad(fn))(values[:7])
        np.testing.assert_allclose(
            np.asarray(slopes),
            slope_of(np.asarray(values[:7])),
            rtol=0,
            atol=tol(2.3e-16),
        )
    slope = np.asarray(jax.jacfwd(lambda x: gyre(t, x))(point))
    np.testing.assert_allclose(slope, plain_slope, rtol=tol(1e-15), atol=tol(1e-16))


def test_a_float32_run_on_a_tpu_takes_its_growths_logs_from_the_series(monkeypatch):
    from lyapax._engine import precision as prec

    def field(x):
        return jnp.stack([-2.0 * x[0] + x[1], -x[1]])

    problem = ode_problem(field, jnp.array([1.0, 1.0], jnp.float32), dt=0.01)
    plain = np.asarray(
        lyapunov_spectrum(problem, n_steps=2000, renorm_every=10).exponents
    )
    shapes = []
    series = prec._series_log
    monkeypatch.setattr(
        prec, "_series_log", lambda x: shapes.append(x.shape) or series(x)
    )
    monkeypatch.setattr(prec, "_platform", lambda: "tpu")
    jax.clear_caches()  # the CPU's program was traced with jnp.log
    try:
        on_tpu = lyapunov_spectrum(problem, n_steps=2000, renorm_every=10).exponents
    finally:
        jax.clear_caches()
    assert shapes and all(s == (2,) for s in shapes)
    assert on_tpu.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(on_tpu), plain, rtol=0, atol=2e-6)
