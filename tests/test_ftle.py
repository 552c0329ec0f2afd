"""FTLE fields against exact references: the steady double gyre's hyperbolic
points and centre, a Jordan block, incompressibility of the time-dependent
gyre, backward time as the reversed system's forward time; bad input."""

from __future__ import annotations

import io

import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import (
    OPS,
    SMALL_TRANSCENDENTALS,
    emulated_float64,
    tol,
    transcendental_ops,
)

from lyapax import systems
from lyapax.finite_time import ftle_field, ftle_grid, grid_points
from lyapax.finite_time._flow import n_steps_for

A = 0.1


def double_gyre(eps=0.0):
    return systems.double_gyre(A=A, eps=eps, omega=2 * np.pi / 10)


SADDLES_AND_CENTRE = np.array([[1.0, 0.0], [1.0, 1.0], [0.5, 0.5]])


@pytest.mark.parametrize("T", [0.7, 3.0, 10.0, -4.3])
def test_steady_gyre_saddles_are_pi2A_and_centre_is_zero_for_every_T(T):
    field = ftle_field(
        double_gyre(), SADDLES_AND_CENTRE, 0.0, T, 0.01, time_dependent=True
    )
    expected = np.array([np.pi**2 * A, np.pi**2 * A, 0.0])
    np.testing.assert_allclose(field.ftle_max, expected, rtol=0, atol=tol(1e-9))
    # Incompressible: the smallest exponent mirrors the largest.
    np.testing.assert_allclose(field.ftle_min, -expected, rtol=0, atol=tol(1e-9))
    # At (1, 0) the unstable direction of the forward flow is x (y backward).
    unstable = [1.0, 0.0] if T > 0 else [0.0, 1.0]
    np.testing.assert_allclose(field.direction[0], unstable, atol=tol(1e-12))
    np.testing.assert_allclose(
        field.flow_map[:2], SADDLES_AND_CENTRE[:2], atol=tol(1e-12)
    )


JORDAN_A = 0.3
JORDAN = np.array([[JORDAN_A, 1.0], [0.0, JORDAN_A]])


def jordan_flow(x):
    # One function for every T (a runtime length): one compile per integrator.
    return jnp.matmul(JORDAN, x)


@pytest.mark.parametrize("integrator", ["rk4", "rk6"])
@pytest.mark.parametrize("T", [0.25, 1.0, 3.7, 12.0])
def test_jordan_block_has_the_closed_form_ftle(T, integrator):
    a = JORDAN_A
    points = np.random.default_rng(0).normal(size=(5, 2))
    field = ftle_field(jordan_flow, points, 0.0, T, 0.01, integrator=integrator)
    exact_max = a + np.log((T + np.sqrt(T * T + 4)) / 2) / T
    exact_min = 2 * a - exact_max  # det of the flow map is exp(2 a T)
    np.testing.assert_allclose(field.ftle_max, exact_max, rtol=0, atol=tol(1e-10))
    np.testing.assert_allclose(field.ftle_min, exact_min, rtol=0, atol=tol(1e-10))


def test_three_dimensional_linear_flow_uses_the_svd_path():
    M = jnp.diag(jnp.array([0.5, -0.2, -1.0]))
    field = ftle_field(lambda x: M @ x, np.ones((3, 3)), 0.0, 2.0, 0.05)
    np.testing.assert_allclose(field.ftle_max, 0.5, atol=1e-6)
    np.testing.assert_allclose(field.ftle_min, -1.0, atol=1e-6)
    np.testing.assert_allclose(np.abs(field.direction), [[1, 0, 0]] * 3, atol=1e-9)


def test_time_dependent_gyre_is_incompressible():
    x = np.linspace(0.05, 1.95, 9)
    y = np.linspace(0.05, 0.95, 5)
    rhs = double_gyre(eps=0.25)
    field = ftle_grid(rhs, x, y, 0.0, 15.0, 0.02, time_dependent=True)
    assert field.ftle_max.shape == (5, 9) and field.direction.shape == (5, 9, 2)
    np.testing.assert_allclose(field.ftle_max + field.ftle_min, 0.0, atol=tol(1e-7))
    assert float(np.max(field.ftle_max)) > 0.1  # there is stretching to test


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_backward_ftle_equals_forward_ftle_of_the_reversed_system():
    rhs = double_gyre(eps=0.25)
    t0, T = 12.0, 8.0

    def reversed_rhs(s, x):  # y(s) = x(t0 - s): time runs the other way
        return -rhs(t0 - s, x)

    points = grid_points(np.linspace(0.1, 1.9, 6), np.linspace(0.1, 0.9, 4))
    back = ftle_field(rhs, points, t0, -T, 0.02, time_dependent=True)
    fwd = ftle_field(reversed_rhs, points, 0.0, T, 0.02, time_dependent=True)
    np.testing.assert_allclose(back.ftle_max, fwd.ftle_max, rtol=0, atol=1e-12)
    np.testing.assert_allclose(back.flow_map, fwd.flow_map, rtol=0, atol=1e-12)


def test_run_ends_exactly_at_t0_plus_T():
    # dx/dt = 1: the flow map is x + T whatever T / dt is.
    field = ftle_field(lambda x: jnp.ones_like(x), np.zeros((2, 1)), 0.0, 1.03, 0.1)
    assert field.n_steps == 11
    np.testing.assert_allclose(field.flow_map, 1.03, rtol=0, atol=tol(1e-14, OPS))
    assert n_steps_for(1.0, 0.1) == 10 and n_steps_for(-0.35, 0.1) == 4
    # dx/dt = t on [2, 2 + T]: exact for RK4 (polynomial of degree 1 in t).
    field = ftle_field(
        lambda t, x: jnp.full_like(x, t),
        np.zeros((1, 1)),
        2.0,
        -0.77,
        0.1,
        time_dependent=True,
    )
    np.testing.assert_allclose(field.flow_map[0, 0], ((2 - 0.77) ** 2 - 4) / 2)


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_chunks_and_padding_give_the_unchunked_field(monkeypatch):
    from lyapax._engine import progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)  # a short run draws its bar
    points = grid_points(np.linspace(0.1, 1.9, 7), np.linspace(0.1, 0.9, 3))
    rhs = double_gyre(eps=0.25)
    whole = ftle_field(rhs, points, 0.0, 5.0, 0.05, time_dependent=True)
    bar = io.StringIO()
    parts = ftle_field(
        rhs, points, 0.0, 5.0, 0.05, time_dependent=True, batch_size=4, progress=bar
    )
    assert "ftle_field: 100%" in bar.getvalue() and "21/21" in bar.getvalue()
    np.testing.assert_array_equal(whole.ftle_max, parts.ftle_max)
    np.testing.assert_array_equal(whole.ftle_min, parts.ftle_min)
    np.testing.assert_array_equal(whole.flow_map, parts.flow_map)
    # The direction's normalisation is compiled per chunk shape (vector body
    # or scalar remainder loop): it may round differently by an ulp.
    np.testing.assert_allclose(whole.direction, parts.direction, rtol=0, atol=1e-15)


def test_bad_input_names_the_argument():
    rhs = double_gyre()
    good = SADDLES_AND_CENTRE
    with pytest.raises(ValueError, match="points must have shape"):
        ftle_field(rhs, np.ones(3), 0.0, 1.0, 0.1, time_dependent=True)
    with pytest.raises(ValueError, match="d=3"):
        ftle_field(rhs, np.ones((4, 3)), 0.0, 1.0, 0.1, time_dependent=True)
    with pytest.raises(ValueError, match="rhs\\(x\\) failed"):
        ftle_field(rhs, good, 0.0, 1.0, 0.1)  # rhs(t, x) without the flag
    with pytest.raises(ValueError, match="T must be nonzero"):
        ftle_field(rhs, good, 0.0, 0.0, 0.1, time_dependent=True)
    with pytest.raises(ValueError, match="dt must be"):
        ftle_field(rhs, good, 0.0, 1.0, -0.1, time_dependent=True)
    with pytest.raises(ValueError, match="points must be finite"):
        ftle_field(rhs, good * np.nan, 0.0, 1.0, 0.1, time_dependent=True)
    with pytest.raises(ValueError, match="integrator="):
        ftle_field(rhs, good, 0.0, 1.0, 0.1, time_dependent=True, integrator="rk5")
    with pytest.raises(MemoryError, match="batch_size="):
        ftle_field(rhs, good, 0.0, 1.0, 0.1, time_dependent=True, memory_limit=1_000)
    with pytest.raises(MemoryError, match="points has"):
        ftle_field(rhs, good, 0.0, 1.0, 0.1, time_dependent=True, memory_limit=10)


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_backward_gyre_field_is_the_forward_field_mirrored():
    # omega T = 3 pi: sin(omega (15 - s)) = sin(omega s), and y -> 1 - y maps
    # (u, v) to (-u, v), so the backward field from t0 = 15 is the forward
    # field reflected in y = 1/2.
    x = np.linspace(0.0, 2.0, 9)
    y = np.linspace(0.0, 1.0, 7)
    rhs = double_gyre(eps=0.25)
    fwd = ftle_grid(rhs, x, y, 0.0, 15.0, 0.05, time_dependent=True, integrator="rk6")
    bwd = ftle_grid(rhs, x, y, 15.0, -15.0, 0.05, time_dependent=True, integrator="rk6")
    np.testing.assert_allclose(bwd.ftle_max, fwd.ftle_max[::-1], rtol=0, atol=1e-8)


def test_chunks_are_equal_so_padding_is_small():
    from lyapax.finite_time._memory import even_chunk

    assert even_chunk(45_451, None) == 22_726  # two chunks, one padded point
    assert even_chunk(10, 4) == 4 and even_chunk(12, 4) == 4 and even_chunk(3, 8) == 3
    # Without a batch_size every device gets a chunk: 10 points on 2 devices.
    assert even_chunk(10, None, 2) == 5 and even_chunk(45_451, None, 2) == 22_726
    # Aligned (CPU): multiples of 8, up without a batch_size, else not past it.
    assert even_chunk(501_501, None, default=8192, align=8) == 8096
    assert even_chunk(1001, None, default=8192, align=8) == 1008
    assert even_chunk(1001, 500, align=8) == 336 and even_chunk(1001, 7, align=8) == 7
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        even_chunk(10, 0)


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_two_devices_give_the_single_device_field(tmp_path):
    # Forced host devices need a fresh process (XLA_FLAGS before jax starts).
    import os
    import subprocess
    import sys

    script = tmp_path / "two_devices.py"
    script.write_text(
        "import jax\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "import numpy as np\n"
        "from lyapax import systems\n"
        "from lyapax.finite_time import ftle_field, grid_points\n"
        "assert len(jax.devices()) == 2\n"
        "pts = grid_points(np.linspace(0.1, 1.9, 13), np.linspace(0.1, 0.9, 7))\n"
        "kw = dict(time_dependent=True, integrator='rk6', batch_size=20)\n"
        "a = ftle_field(systems.double_gyre(), pts, 0.0, 5.0, 0.25, **kw)\n"
        "b = ftle_field(systems.double_gyre(), pts, 0.0, 5.0, 0.25, devices=1, **kw)\n"
        # Equal to rounding, not bitwise: each device's chunk has another
        # shape, and XLA vectorises the stacked point+tangent carry per shape.
        "err = float(np.max(np.abs(a.ftle_max - b.ftle_max)))\n"
        "assert err <= 1e-11, f'fields differ by {err}'\n"
        "print('ok', a.ftle_max.shape)\n"
    )
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok (91,)"


def test_shared_transcendentals_keep_values_and_tangents():
    # Every rewritten primitive (sin, cos, exp, tanh), a nested jit and an
    # untouched one (log): the rewritten field and its jvp equal the original
    # to rounding, and the barrier is really there (conditionals compiled).
    import jax

    from lyapax.finite_time._shared import shared_transcendentals

    inner = jax.jit(lambda z: jnp.sin(z) * z)

    def rhs(t, x):
        return jnp.stack(
            [
                jnp.sin(2 * x[0]) * jnp.cos(x[1] + t) + inner(x[1]),
                jnp.exp(-x[0] * t) * jnp.tanh(x[1]) + jnp.log(2 + x[0] ** 2),
            ]
        )

    shared = shared_transcendentals(rhs)
    x, v = jnp.array([0.3, -1.2]), jnp.array([0.7, 0.4])
    for f in (rhs, shared):
        assert jax.jit(f)(0.5, x).shape == (2,)
    want = jax.jvp(lambda z: rhs(0.5, z), (x,), (v,))
    got = jax.jit(lambda t: jax.jvp(lambda z: shared(t, z), (x,), (v,)))(0.5)
    for a, b in zip(want, got, strict=True):
        ops = transcendental_ops()  # two programs' exp, log, tanh
        if emulated_float64():  # of one-element arrays, as x[0] is
            rtol = atol = SMALL_TRANSCENDENTALS
        else:
            rtol, atol = tol(1e-14, ops), tol(1e-15, ops)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    text = jax.jit(shared).lower(0.5, x).compile().as_text()
    assert text.count(" conditional(") == 4  # sin, cos, exp, tanh; not log


@pytest.mark.float64_only(
    "sincos is the FTLE field's float64 path (float32 never takes it)"
)
@pytest.mark.cpu_backend_only(
    "the field takes it on XLA:CPU only; where float64 is emulated (the lent "
    "TPU v5e) it was 3.3e-9 absolute off NumPy at |x| <= 1e4, and float_sin's "
    "small arrays there are checked in test_precision"
)
def test_fast_sincos_matches_the_library_and_refuses_what_it_cannot_reduce():
    from lyapax._engine.sincos import LIMIT, sincos

    x = np.concatenate(
        [
            np.random.default_rng(0).uniform(-1e4, 1e4, 20_000),
            np.arange(-40, 41) * np.pi / 4,  # quadrant edges
            [0.0, -0.0, 1e-300, LIMIT, -LIMIT],
        ]
    )
    s, c = (np.asarray(v) for v in sincos(jnp.asarray(x)))
    np.testing.assert_allclose(s, np.sin(x), rtol=0, atol=4e-16)
    np.testing.assert_allclose(c, np.cos(x), rtol=0, atol=4e-16)
    for bad in (np.nextafter(LIMIT, np.inf), -1e300, np.inf, np.nan):
        assert np.isnan(np.asarray(sincos(jnp.asarray([bad])))).all(), bad


@pytest.mark.float64_only("the float32 fast path rounds float64 sin/cos: needs x64")
def test_a_float32_field_takes_the_float64_sin_and_cos_rounded():
    # XLA:CPU's float32 sin/cos made a float32 field 2.3x slower than the
    # float64 one; with x64 on it takes float64's arithmetic ones, rounded.
    import jax

    from lyapax.finite_time._shared import shared_transcendentals

    gyre = double_gyre(eps=0.25)
    fast = shared_transcendentals(gyre, fast_trig=True)
    t, x = np.float32(0.5), jnp.array([0.3, 0.6], jnp.float32)
    assert " sin " in str(jax.make_jaxpr(gyre)(t, x))
    assert " sin " not in str(jax.make_jaxpr(fast)(t, x))
    assert " cos " not in str(jax.make_jaxpr(fast)(t, x))
    got = jax.jit(fast)(t, x)
    assert got.dtype == jnp.float32
    want = gyre(np.float64(t), x.astype(jnp.float64))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    points = grid_points(np.linspace(0.05, 1.95, 9), np.linspace(0.05, 0.95, 5))
    f32 = ftle_field(gyre, points.astype(np.float32), 0.0, 10.0, 0.1, True)
    f64 = ftle_field(gyre, points, 0.0, 10.0, 0.1, True)
    assert f32.ftle_max.dtype == np.float32
    np.testing.assert_allclose(f32.ftle_max, f64.ftle_max, atol=1e-4)


@pytest.mark.slow
def test_fast_trig_field_equals_the_library_one_and_falls_back_out_of_range():
    from functools import partial

    from lyapax._engine.tree import split_static
    from lyapax.finite_time import field as F
    from lyapax.integrators import TABLEAUS

    points = grid_points(np.linspace(0.05, 1.95, 9), np.linspace(0.05, 0.95, 5))

    def library(rhs, T):
        # The same kernel with the library's sin/cos (what a GPU runs).
        dyn, static = split_static(rhs)
        n = n_steps_for(T, 0.1)
        run = partial(F._field_kernel, dyn, static=static, tableau=TABLEAUS["rk4"])
        out = run(points, 0.0, T / n, np.int32(n), 1 / abs(T), mesh=None, share=None)
        return np.asarray(out.ftle_max)

    gyre = double_gyre(eps=0.25)
    fast = ftle_field(gyre, points, 0.0, 10.0, 0.1, time_dependent=True)
    np.testing.assert_allclose(fast.ftle_max, library(gyre, 10.0), atol=1e-11)

    def far(t, x):  # sin/cos arguments beyond the fast functions' range
        return jnp.stack([jnp.sin(x[1] + 1e7), -jnp.cos(x[0] - 1e7)])

    got = ftle_field(far, points, 0.0, 2.0, 0.1, time_dependent=True).ftle_max
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, library(far, 2.0), atol=1e-12)


def test_grid_points_are_row_by_row_like_an_image():
    x, y = np.array([0.0, 1.0, 2.0]), np.array([10.0, 20.0])
    points = grid_points(x, y)
    assert points.shape == (6, 2)
    # Point i * nx + j is (x[j], y[i]).
    for i in range(2):
        for j in range(3):
            assert tuple(points[i * 3 + j]) == (x[j], y[i])
    with pytest.raises(ValueError, match="x and y must be non-empty 1-D arrays"):
        grid_points(np.zeros((2, 2)), y)
