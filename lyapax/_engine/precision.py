"""The library's own linear algebra at full precision, and dtype-free random frames.

On a TPU a float32 matrix product runs in bfloat16 passes by default (about
three digits; ``jax_default_matmul_precision`` chooses). The products that
are the library's own (Gram and projection products, the covariant vectors'
coefficients, the shadowing least squares, neighbour distances) go through
:func:`matmul` and :func:`einsum`, which ask for
``jax.lax.Precision.HIGHEST`` whatever that default says; the user's vector
field (and so the tangent products through it) keeps the user's setting. On
CPU the precision argument changes nothing: float32 and float64 products are
computed in full there either way.

:func:`standard_normal` draws random frames in float64 whenever float64
exists (``jax_enable_x64``) and rounds them to the run's dtype, so that one
seed gives one frame for every precision: the float64 frame as before, and a
float32 run starts from that frame rounded. With x64 off only float32 can be
drawn, and a seed's float32 frame is JAX's float32 draw (a float16 frame that
one rounded).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from lyapax._engine.pairs import Pair
from lyapax._engine.qr import power_of_two_split
from lyapax._engine.sincos import LIMIT, sincos

__all__ = [
    "HIGHEST",
    "EMULATED_FLOAT64",
    "emulated_float64",
    "PRECISIONS",
    "as_run_time_values",
    "cast_floats",
    "constant_minus_element",
    "check_precision",
    "cumsum",
    "draws_on_host",
    "host_cpu",
    "on_host",
    "precision_view",
    "einsum",
    "float_cos",
    "float_power",
    "float_sin",
    "growth_log",
    "matmul",
    "resolve",
    "standard_normal",
]

HIGHEST = jax.lax.Precision.HIGHEST


def matmul(a: Any, b: Any) -> Array:
    """``a @ b`` at ``Precision.HIGHEST``."""
    return jnp.matmul(a, b, precision=HIGHEST)


def cumsum(x: Any, axis: int = -1) -> Array:
    """``jnp.cumsum(x, axis)``; where float64 is emulated, by an explicit
    associative scan (the form XLA:CPU's cumsum takes anyway): the TPU
    lowers a cumsum to a reduce-window, whose float64 emulation did not
    finish compiling in 70 s for a ``(20, 2, 600)`` array on the lent TPU
    v5e, where the scan's adds compile in seconds."""
    x = jnp.asarray(x)
    if emulated_float64(x.dtype):
        return jax.lax.associative_scan(jnp.add, x, axis=axis % x.ndim)
    return jnp.cumsum(x, axis=axis)


def einsum(subscripts: str, *operands: Any) -> Array:
    """``jnp.einsum`` at ``Precision.HIGHEST``."""
    return jnp.einsum(subscripts, *operands, precision=HIGHEST)


# log(m) = 2 atanh(s), s = (m - 1) / (m + 1): the odd series' coefficients
# 1/(2j + 1); with m in [sqrt(1/2), sqrt(2)), |s| <= 0.1716, s^2 <= 0.0295,
# and the first term left out (s^12 / 13) is below 1e-10 of the first.
_ATANH_SERIES = tuple(1.0 / (2 * j + 1) for j in range(6))
# ln 2 in two parts: the first has 16 significant bits, so e * _LN2_HI is
# exact in float32 for every exponent e of a float32.
_LN2_HI = 0.693145751953125
_LN2_LO = 1.4286068203094173e-06


def growth_log(x: Any) -> Array:
    """``log(x)`` of the growths ``|diag R|`` (``x >= 0``; ``-inf`` at 0),
    accurate to a few float32 ulp on every platform.

    A TPU's float32 ``log`` is an approximation: up to about 4000 ulp off
    near ``x = 1``, where every block's growth lies, and biased (docs/method.md,
    "Precision"), which moved float32 exponents by 1e-4 there. Where new
    arrays land on a TPU a float32 ``x`` takes its log from ``frexp`` and a
    short series in adds, multiplies and one divide (each within 2.4 ulp
    there). Emulated float64 ``log`` of one-element arrays there was up to
    1e-8 off (4e-9 relative at ``x`` of 0.083-0.093, against 1e-14 for its
    adds and multiplies), so a float64 ``x`` there takes
    :func:`_series_log64`. Elsewhere, and for every other dtype, ``jnp.log``
    as before."""
    x = jnp.asarray(x)
    if x.dtype not in (jnp.float32, jnp.float64) or _platform() != "tpu":
        return jnp.log(x)
    return _series_log(x) if x.dtype == jnp.float32 else _series_log64(x)


def _series_log(x: Array) -> Array:
    """``log(x)`` of a float32 ``x`` from ``frexp`` and the series."""
    mantissa, exponent = jnp.frexp(x)  # x = mantissa * 2**exponent, [0.5, 1)
    low = mantissa < np.float32(np.sqrt(0.5))
    m = jnp.where(low, mantissa * 2, mantissa)
    e = (exponent - low.astype(exponent.dtype)).astype(x.dtype)
    return _atanh_log(x, m, e, _ATANH_SERIES, (_LN2_HI, _LN2_LO))


def _atanh_log(
    x: Array, m: Array, e: Array, series: tuple, ln2: tuple[float, float]
) -> Array:
    """``e ln 2 + log m`` with ``log m = 2 atanh s``, ``s = (m - 1)/(m + 1)``
    (``m`` in ``[sqrt(1/2), sqrt(2))``), in ``x``'s dtype: the series' tail in
    Horner form, ln 2 in two parts; ``-inf`` at 0, ``nan`` below, ``inf``
    and ``nan`` kept."""
    c = x.dtype.type
    s = (m - 1) / (m + 1)  # m - 1 is exact (Sterbenz)
    z = s * s
    poly = jnp.full_like(z, series[-1])
    for coefficient in series[-2::-1]:
        poly = poly * z + c(coefficient)
    out = e * c(ln2[0]) + (e * c(ln2[1]) + 2 * s * poly)
    out = jnp.where(x == 0, -jnp.inf, jnp.where(x < 0, jnp.nan, out))
    return jnp.where(jnp.isfinite(x), out, x)  # inf stays inf, nan stays nan


# log(m) in float64 by the same series: with |s| <= 0.1716 the first term
# left out (s^22 / 23) is below 1e-17 of the first. ln 2 in two parts: the
# first has 32 significant bits, so e * _LN2_HI64 is exact for every exponent.
_ATANH_SERIES64 = tuple(1.0 / (2 * j + 1) for j in range(11))
_LN2_HI64 = 6.93147180369123816490e-01
_LN2_LO64 = 1.90821492927058770002e-10


def _series_log64(x: Array) -> Array:
    """``log(x)`` of a float64 ``x >= 0`` from its power of two (found by
    float comparisons: the TPU's float64 emulation has no 64-bit integer
    shifts, so no ``frexp``) and the series in adds, multiplies and one
    divide. For normal ``x``; ``-inf`` at 0, ``nan`` below."""
    factor, e = power_of_two_split(x)
    m = x * factor  # in [1, 2): exact
    high = m >= np.sqrt(2.0)
    m = jnp.where(high, m * 0.5, m)
    e = jnp.where(high, e + 1.0, e)
    return _atanh_log(x, m, e, _ATANH_SERIES64, (_LN2_HI64, _LN2_LO64))


# exp(r) for |r| <= ln(2)/2 by its Taylor series: the first term left out,
# r^14 / 14!, is below 4e-18.
_EXP_SERIES64 = tuple(1.0 / math.factorial(j) for j in range(14))
# Beyond this |y| a TPU's float64 (float32's exponent range) holds no exp(y).
_EXP_EDGE64 = 170.0


def _series_exp64(y: Array) -> Array:
    """``exp(y)`` of a float64 ``y`` from ``y = k ln 2 + r`` (``|r| <= ln(2)/2``,
    ln 2 in two parts), the series of ``exp(r)`` in adds and multiplies, and
    ``2**k`` built exactly in float32 by bits (native integers on a TPU); 0
    below ``-170``, ``inf`` above ``170``, ``nan`` kept."""
    c = y.dtype.type
    inside = jnp.clip(y, -_EXP_EDGE64, _EXP_EDGE64)
    k = jnp.floor(inside * c(1.0 / math.log(2.0)) + c(0.5))
    r = (inside - k * c(_LN2_HI64)) - k * c(_LN2_LO64)
    poly = jnp.full_like(r, _EXP_SERIES64[-1])
    for coefficient in _EXP_SERIES64[-2::-1]:
        poly = poly * r + c(coefficient)
    # |k| <= 246: two factors of at most 2**123 each stay normal float32s.
    half = jnp.floor(k * c(0.5))
    out = poly * _power_of_two(half) * _power_of_two(k - half)
    out = jnp.where(y > _EXP_EDGE64, jnp.inf, jnp.where(y < -_EXP_EDGE64, 0.0, out))
    return jnp.where(jnp.isnan(y), y, out)


def _power_of_two(k: Array) -> Array:
    """``2**k`` for integral ``k`` in ``[-126, 127]``, in ``k``'s dtype: the
    float32 with exponent field ``k + 127``, widened (both exact)."""
    bits = jax.lax.shift_left(k.astype(jnp.int32) + 127, jnp.int32(23))
    return jax.lax.bitcast_convert_type(bits, jnp.float32).astype(k.dtype)


def float_power(x: Any, n: Any) -> Array:
    """``x ** n`` for ``x >= 0`` and a float exponent ``n`` (a model's
    ``|x|^n``), as ``x ** n`` except in float64 on a TPU: there ``pow``,
    ``log`` and ``exp`` of small arrays are float32-accurate (measured on a
    TPU v5e: 1.8e-8 relative for arrays of one element; a Mackey-Glass run
    was 4.2e-9 relative off the CPU's), so it is ``exp(n log x)`` with
    :func:`_series_log64`'s log and :func:`_series_exp64`'s exp."""
    x = jnp.asarray(x)
    if x.dtype != jnp.float64 or _platform() != "tpu":
        return x**n
    positive = x > 0
    # The inner where keeps the gradient finite where x is 0.
    grown = _series_exp64(n * _series_log64(jnp.where(positive, x, 1.0)))
    return jnp.where(positive, grown, x**n)


# Below this many elements a TPU's emulated float64 sin, cos, exp, log and
# tanh were float32-accurate (measured at 0 and 1 element; 8 were accurate).
_SMALL = 8


def _small_emulated(x: Array) -> bool:
    return x.dtype == jnp.float64 and x.size < _SMALL and _platform() == "tpu"


def _guarded_sincos(x: Array) -> tuple[Array, Array]:
    """:func:`sincos`, with the platform's own beyond its range."""
    s, c = sincos(x)
    inside = jnp.abs(x) <= LIMIT
    return jnp.where(inside, s, jnp.sin(x)), jnp.where(inside, c, jnp.cos(x))


def _with_own_slope(value_and_slope: Callable[[Array], tuple[Array, Array]]) -> Any:
    """``f(x)`` with ``f'(x) dx`` from the same ``value_and_slope(x)``:
    differentiating the polynomials instead doubled the field's program (an
    FTLE field's tangents), whose emulated float64 compile time follows its
    size."""

    @jax.custom_jvp
    def f(x: Array) -> Array:
        return value_and_slope(x)[0]

    @f.defjvp
    def _jvp(primals: Any, tangents: Any) -> Any:
        value, slope = value_and_slope(primals[0])
        return value, slope * tangents[0]

    return f


def _sin_and_slope(x: Array) -> tuple[Array, Array]:
    s, c = _guarded_sincos(x)
    return s, c


def _cos_and_slope(x: Array) -> tuple[Array, Array]:
    s, c = _guarded_sincos(x)
    return c, -s


_poly_sin = _with_own_slope(_sin_and_slope)
_poly_cos = _with_own_slope(_cos_and_slope)


def float_sin(x: Any) -> Array:
    """``jnp.sin(x)``, except for a float64 array of fewer than 8 elements on
    a TPU, whose emulated ``sin`` is float32-accurate (4.2e-8 relative for
    one element, measured on a TPU v5e): there from :func:`sincos`'s
    polynomials, whose reduction is exact in the chip's 48-bit pairs for
    ``|x|`` below about 4e5 and loses bits beyond; above ``2**22`` the
    chip's ``sin``. Its derivative is the same polynomials' cosine."""
    x = jnp.asarray(x)
    return _poly_sin(x) if _small_emulated(x) else jnp.sin(x)


def float_cos(x: Any) -> Array:
    """``jnp.cos(x)``, with :func:`float_sin`'s exception."""
    x = jnp.asarray(x)
    return _poly_cos(x) if _small_emulated(x) else jnp.cos(x)


def draw_dtype(dtype: Any) -> Any:
    """The dtype a frame of ``dtype`` is drawn in: for a real floating
    ``dtype`` the widest float there is (float64 when x64 is on, else
    float32: a float16 frame is the float32 one rounded, and is drawn and
    factored where a half-precision QR does not exist), else ``dtype``."""
    if not jnp.issubdtype(dtype, jnp.floating):
        return dtype
    x64 = jax.config.jax_enable_x64  # type: ignore[attr-defined]
    return jnp.float64 if x64 else jnp.float32


def standard_normal(key: Any, shape: tuple[int, ...], dtype: Any) -> Array:
    """``jax.random.normal(key, shape)`` drawn in :func:`draw_dtype` and
    rounded to ``dtype``: bit-identical to a float64 draw in float64. Where
    that draw would be emulated float64 it is made on the host's CPU
    (:func:`on_host`): the CPU's draw (to the last bit on the CPU tried;
    within 4e-16 of eager CPU ops on the TPU v5e's host)."""
    shape = tuple(shape)
    if not draws_on_host(dtype):
        return jax.random.normal(key, shape, draw_dtype(dtype)).astype(dtype)
    impl = None
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        # A callback takes arrays: a typed key travels as its data.
        key, impl = jax.random.key_data(key), str(jax.random.key_impl(key))
    out = jax.ShapeDtypeStruct(shape, np.dtype(dtype))
    return on_host(_normal, out, key, static=(shape, np.dtype(dtype), impl))


def _normal(data: Any, shape: tuple[int, ...], dtype: Any, impl: Any) -> Array:
    key = data if impl is None else jax.random.wrap_key_data(data, impl=impl)
    return jax.random.normal(key, shape, draw_dtype(dtype)).astype(dtype)


def host_cpu() -> Any:
    """The host's CPU device, or None where JAX was started without it
    (``JAX_PLATFORMS=tpu``)."""
    try:
        return jax.devices("cpu")[0]
    except RuntimeError:
        return None


def draws_on_host(dtype: Any) -> bool:
    """Whether a random frame of ``dtype`` is drawn on the host's CPU: its
    draw (:func:`draw_dtype`) would be emulated float64 where new arrays
    land, and the host's CPU is there to draw it."""
    return emulated_float64(draw_dtype(dtype)) and host_cpu() is not None


def on_host(fn: Any, out: jax.ShapeDtypeStruct, *args: Any, static: tuple) -> Array:
    """``fn(*args, *static)`` computed on the host's CPU and handed to the
    program that asks, traced or not, under ``vmap`` too (each batch in one
    host call).

    For the random frames of a run on a backend that emulates float64 (a
    TPU), which are drawn in float64 for every dtype: on the lent TPU v5e a
    float32 program that held its float64 draw and QR compiled for 13-51 s
    (3 s without). The frame is then the CPU's (a compiled host program: on
    the TPU v5e's host within 4e-16 of eager CPU ops). ``fn`` is a
    module-level function and ``static`` hashable: together they key the
    host's compiled program."""
    ndims = tuple(np.ndim(a) for a in args)
    program = _host_program(fn, static)
    cpu = host_cpu()

    def host(*arrays: Any) -> np.ndarray:
        arrays = tuple(np.asarray(a) for a in arrays)
        lead = arrays[0].shape[: arrays[0].ndim - ndims[0]]
        flat = [
            a.reshape((-1, *a.shape[a.ndim - n :]))
            for a, n in zip(arrays, ndims, strict=True)
        ]
        with jax.default_device(cpu):
            result = np.asarray(program(*flat))
        return result.reshape((*lead, *out.shape))

    return jax.pure_callback(host, out, *args, vmap_method="broadcast_all")


@lru_cache(maxsize=64)
def _host_program(fn: Any, static: tuple) -> Any:
    return jax.jit(jax.vmap(lambda *a: fn(*a, *static)))


#: Accepted values of the public ``precision=`` argument (and None: the
#: state's own dtype).
PRECISIONS = ("float64", "float32", "mixed")


def resolve(precision: Any, dtype: Any) -> tuple[Any, Any]:
    """``(state dtype, dtype of the sums of log|diag R|)`` of a run whose
    state is ``dtype``, under ``precision`` (None, ``"float64"``,
    ``"float32"`` or ``"mixed"``).

    ``"mixed"``: state and tangents in float32, the per-block growths added
    into float64 sums where float64 exists (x64 on); with x64 off the sums
    are float32 too. ``"float64"`` with x64 off runs in float32, and the run
    warns as any float32 run without x64 does.

    Raises:
        ValueError: ``precision`` is none of these, naming it.
    """
    if precision is None:
        return np.dtype(dtype), None
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(
            f"precision must be None or one of {PRECISIONS}; got {precision!r}"
        )
    x64 = bool(jax.config.jax_enable_x64)  # type: ignore[attr-defined]
    wide = np.dtype(np.float64 if x64 else np.float32)
    if precision == "float64":
        return wide, None
    if precision == "float32":
        return np.dtype(np.float32), None
    return np.dtype(np.float32), wide


def check_precision(precision: Any) -> None:
    """Raise ``ValueError`` naming ``precision`` unless it is None or one of
    :data:`PRECISIONS`."""
    resolve(precision, np.float64)


def cast_floats(tree: Any, dtype: Any) -> Any:
    """``tree`` with every floating array leaf cast to ``dtype`` and every
    complex one to ``dtype``'s complex counterpart (a pseudo-spectral step's
    coefficients), or to a :class:`~lyapax._engine.pairs.Pair` of ``dtype``
    arrays where that dtype is emulated float64 (a TPU has no complex128);
    other leaves, Python numbers included, as they are. ``tree`` itself when
    no leaf needs it, so that what is cached by identity (the split of a
    step) stays cached."""
    wide = jnp.result_type(dtype, jnp.complex64)
    pairs = emulated_float64(dtype)

    def target(leaf: Any) -> Any:
        kind = getattr(leaf, "dtype", None)
        if not isinstance(leaf, jax.Array | np.ndarray | np.generic) or kind is None:
            return None
        if jnp.issubdtype(kind, jnp.floating):
            return dtype if kind != dtype else None
        if jnp.issubdtype(kind, jnp.complexfloating):
            return wide if kind != wide else None
        return None

    if all(target(leaf) is None for leaf in jax.tree.leaves(tree)):
        return tree

    def cast(x: Any) -> Any:
        to = target(x)
        if to is not None and pairs and jnp.issubdtype(to, jnp.complexfloating):
            return Pair(jnp.real(x).astype(dtype), jnp.imag(x).astype(dtype))
        return x if to is None else jnp.asarray(x, to)

    return jax.tree.map(cast, tree)


def precision_view(view: Any, precision: Any) -> tuple[Any, Any]:
    """``(view, sums dtype or None)``: an engine view (``step``, ``z0``)
    whose state and floating parameters are in the state dtype that
    ``precision`` asks for (:func:`resolve`; None leaves ``view`` as it is).

    Raises:
        ValueError: a bad ``precision``, naming it.
    """
    state, sums = resolve(precision, view.z0.dtype)
    if precision is None:
        return view, None
    if view.z0.dtype == state and cast_floats(view.step, state) is view.step:
        return view, sums
    step = cast_floats(view.step, state)
    return view._replace(step=step, z0=jnp.asarray(view.z0, state)), sums


#: The dtypes that a TPU emulates (float64 and the complex128 built on it).
_WIDE = frozenset({np.dtype(np.float64), np.dtype(np.complex128)})

#: What float64 is on a platform that emulates it (measured on a TPU v5e with
#: JAX 0.10.2 against NumPy; docs/method.md, "Precision").
EMULATED_FLOAT64 = (
    "float64 on a TPU is emulated with pairs of float32: about 1e-14 relative "
    "per add or multiply, but only float32's exponent range (|x| from ~1e-38 "
    "to ~3e38: smaller values flush to 0, larger ones overflow; below ~1e-30 "
    "only float32's digits are left), programs compile about 20x longer, and "
    "on arrays of one element (a scalar state) exp, log, sin, cos and tanh were "
    "measured 1e-9 to 2e-7 relative off, and so was a constant minus such an "
    "array, '28.0 - x[2]' in a field (the library's own logs, powers and "
    "systems avoid these): write '-x[2] + 28.0' or pass the constant as a "
    "parameter; for full float64 run on the CPU "
    "(jax.config.update('jax_platforms', 'cpu')), for speed pass "
    "precision='float32' or 'mixed'"
)


def as_run_time_values(tree: Any) -> Any:
    """``tree`` behind an optimization barrier, for a kernel called inside a
    caller's trace, where a problem's parameters, ``dt`` and frame are
    constants of the caller's program. A TPU's emulated float64 computes a
    constant minus a one-element array about 1.8e-8 relative off (measured
    on a TPU v5e: ``28.0 - x[2]`` in Lorenz's field; docs/method.md,
    "Precision"); behind the barrier they stay run-time values, as they are
    in an untraced run, where they are the program's arguments. No cost on a
    CPU, where the results are the same bits."""
    return jax.lax.optimization_barrier(tree)


def constant_minus_element(fn: Callable[..., Any], *args: Any) -> str | None:
    """The first ``c - x`` in ``fn(*args)``'s program with ``c`` a constant
    and ``x`` an array of one element (shape ``()`` or ``(1,)``, as every
    ``x[i]`` of a state), as text (``"28.0 - x"``); None if there is none.
    A TPU's emulated float64 computes it about 1.8e-8 relative off
    (:data:`EMULATED_FLOAT64`). Nested programs (``jit``, ``cond``,
    ``scan``, custom derivatives) are searched too; a constant that enters
    one as an argument is not seen."""
    closed = jax.make_jaxpr(fn)(*args)
    return _constant_minus(closed)


def _constant_minus(closed: Any) -> str | None:
    consts = dict(zip(closed.jaxpr.constvars, closed.consts, strict=True))
    for eqn in closed.jaxpr.eqns:
        if eqn.primitive.name == "sub":
            c, x = eqn.invars
            value = _scalar_constant(c, consts)
            if value is not None and not isinstance(x, jex.Literal):
                if int(np.prod(x.aval.shape)) == 1:
                    return f"{value!r} - x"
        for param in eqn.params.values():
            for inner in param if isinstance(param, tuple | list) else (param,):
                if isinstance(inner, jex.Jaxpr):
                    inner = jex.ClosedJaxpr(inner, [])
                if isinstance(inner, jex.ClosedJaxpr):
                    found = _constant_minus(inner)
                    if found is not None:
                        return found
    return None


def _scalar_constant(v: Any, consts: dict[Any, Any]) -> float | None:
    if isinstance(v, jex.Literal):
        value = np.asarray(v.val)
    elif v in consts:
        value = np.asarray(consts[v])
    else:
        return None
    if value.size != 1 or not np.issubdtype(value.dtype, np.floating):
        return None
    return float(value.reshape(()))


def emulated_float64(dtype: Any, platform: str | None = None) -> bool:
    """Whether a ``dtype`` run would compute in emulated float64: a float64
    (or complex128) state on ``platform`` (default: the one JAX places new
    arrays on), when that platform is a TPU.

    The platform is asked at every call (``jax_default_device``, else
    :func:`jax.default_backend`): JAX keeps its default backend cached until
    ``jax.clear_backends()``, so asking costs ~0.2 us, and a cache kept here
    would outlive a cleared backend."""
    if np.dtype(dtype) not in _WIDE:
        return False
    return (platform or _platform()) == "tpu"


def lands_on_cpu() -> bool:
    """Whether new arrays land on a CPU (:func:`_platform`)."""
    return _platform() == "cpu"


def _platform() -> str:
    """The platform new arrays land on (``jax_default_device``, else JAX's
    default backend)."""
    device = jax.config.jax_default_device  # type: ignore[attr-defined]
    platform = device if isinstance(device, str) else getattr(device, "platform", None)
    return platform or jax.default_backend()
