"""The Benettin/QR kernel: nested ``lax.fori_loop`` whose trip counts are data.

Benettin, Galgani, Giorgilli & Strelcyn (1980); Shimada & Nagashima (1979).
The tangent frame ``Y (d, k)`` is pushed forward matrix-free with ``jax.jvp``
batched by ``jax.vmap`` (or by a step's own fused form: see
:class:`~lyapax._engine.abstract.AbstractStep`), re-orthonormalised by QR
every ``renorm_every`` steps, and ``log|diag R|`` is accumulated.

The run lengths (:class:`Lengths`: blocks, transient blocks, steps per block,
steps per saved state) are traced arguments, the trip counts of an outer loop
over chunks of blocks (:func:`chunk_blocks`: the transient's first, then the
measured ones, whose rows are written once per chunk) and inner loops over a
chunk's blocks and a block's steps. What is compiled depends only on the
step's structure, the shapes, ``k``, the QR method and two output capacities:
the kernel writes the cumulative log-growth of each block into a buffer of
``capacity`` rows (saved states into one of ``save_capacity`` rows) and the
caller keeps the first ``n_blocks`` rows. :func:`capacity` rounds up to a
power of two, so runs of different lengths share one program. The static fast
path (``static_every``) compiles ``renorm_every`` in, for small systems whose
steps are cheap enough that the inner loop's condition test shows.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine.abstract import as_step, check_step_output
from lyapax._engine.precision import (
    draw_dtype,
    draws_on_host,
    growth_log,
    host_cpu,
    lands_on_cpu,
    on_host,
)
from lyapax._engine.qr import householder_qr, thin_qr
from lyapax._engine.tree import merge_static
from lyapax._engine.validate import under_transformation

if TYPE_CHECKING:  # shape annotations only: jaxtyping costs ~0.1 s to import
    from jaxtyping import Array, ArrayLike, Float, Int

__all__ = [
    "BenettinState",
    "KernelOutput",
    "Lengths",
    "capacity",
    "fresh_frame",
    "initial_frame",
    "placement",
    "qr_factor",
    "renormalise",
    "run_benettin",
    "tangent_step",
]

#: Smallest output buffer (rows): runs of up to this many blocks share a program.
MIN_CAPACITY = 256


class BenettinState(eqx.Module):
    """Carry of the loop: point, orthonormal frame, accumulated log-growth and
    the integer step counter (read by steps that index a delay ring buffer)."""

    state: Float[Array, " d"]
    Y: Float[Array, "d k"]
    cum: Float[Array, " k"]
    step: Int[Array, ""]


class KernelOutput(eqx.Module):
    """What :func:`run_benettin` returns: the final ``carry``; ``cum
    (capacity, k)``, whose row ``j < n_blocks`` is the accumulated log-growth
    after measured block ``j + 1`` (raw column order); ``saved (save_capacity,
    d)`` or None, whose row ``i`` is the state after ``(i + 1) * decimate``
    measured steps. Rows past those are unspecified."""

    carry: BenettinState
    cum: Float[Array, "capacity k"]
    saved: Float[Array, "save_capacity d"] | None = None


class Lengths(NamedTuple):
    """Run lengths, passed to the kernel as int32 data (changing them does
    not recompile): measured blocks, transient blocks (growth discarded),
    steps per block, and steps per saved state (when states are saved)."""

    n_blocks: Any
    n_transient_blocks: Any
    renorm_every: Any
    decimate: Any

    @classmethod
    def pack(
        cls, n_blocks: int, n_transient_blocks: int, renorm_every: int, decimate: int
    ) -> np.ndarray:
        """The lengths packed as one host int32 array ``(4,)``: one input type
        whatever the values, and one transfer per call instead of four (a
        scalar argument costs a host-to-device copy of its own)."""
        return np.array(
            [n_blocks, n_transient_blocks, renorm_every, decimate], dtype=np.int32
        )

    @classmethod
    def unpack(cls, packed: Any) -> Lengths:
        """:class:`Lengths` of an array packed by :meth:`pack` (itself unchanged)."""
        if isinstance(packed, Lengths):
            return packed
        return cls(*(packed[i] for i in range(4)))


def capacity(n: int) -> int:
    """Rows compiled for an output of ``n`` rows: the next power of two, at
    least :data:`MIN_CAPACITY`."""
    return max(MIN_CAPACITY, 1 << (int(n) - 1).bit_length())


def tangent_step(step_fn: Any, state: jax.Array, Y: jax.Array, step: jax.Array):
    """Advance ``state`` one step and push the columns of ``Y`` through its JVP
    (:meth:`~lyapax._engine.abstract.AbstractStep.tangent` of ``step_fn`` as a
    step)."""
    return as_step(step_fn).tangent(state, Y, step)


def qr_factor(Y: jax.Array, qr: str) -> tuple[jax.Array, jax.Array]:
    """Thin QR ``Y = Q R`` by the kernel method ``qr`` (``"lapack"``,
    ``"householder"``, ``"small"`` or ``"small_unrolled"``: see
    :meth:`~lyapax._engine.options.Renormalisation.method`); diagonal signs
    as the method leaves them."""
    if qr == "householder":
        return householder_qr(Y)
    if qr in ("small", "small_unrolled"):
        return thin_qr(Y, unroll=qr == "small_unrolled")
    return jnp.linalg.qr(Y)


def renormalise(Y: jax.Array, qr: str):
    """Orthonormal frame and ``log|diag R|`` by the kernel method ``qr``,
    with the engine's sign rule (a positive diagonal of ``R``)."""
    Q, R = qr_factor(Y, qr)
    diag = jnp.diagonal(R)
    # Positive diagonal keeps each column's identity continuous between blocks.
    sign = jnp.where(diag < 0, -1.0, 1.0).astype(Y.dtype)
    return Q * sign, growth_log(jnp.abs(diag))


@partial(
    jax.jit,
    static_argnames=(
        "static",
        "capacity",
        "save_capacity",
        "qr",
        "static_lengths",
        "static_every",
    ),
)
def run_benettin(
    dynamic: list[Any],
    state0: jax.Array,
    Y0: jax.Array,
    cum0: jax.Array,
    step0: Any,
    lengths: Lengths | None = None,
    *,
    static: Any,
    capacity: int,
    save_capacity: int = 0,
    qr: str = "lapack",
    static_lengths: Lengths | None = None,
    static_every: int | None = None,
) -> KernelOutput:
    """Run ``n_transient_blocks`` blocks (growth discarded), then ``n_blocks``.

    Args:
        dynamic, static: the step split by :func:`~lyapax._engine.tree.split_static`.
        state0: start point ``(d,)``; ``Y0 (d, k)`` orthonormal frame and
            ``cum0 (k,)`` accumulated log-growth (zeros for a fresh run, a
            checkpoint's when resuming); ``step0`` the step counter at start.
        lengths: :class:`Lengths` (traced), or packed by :meth:`Lengths.pack`,
            or None with ``static_lengths``:
            Python ints compiled into the program, whose loops are then
            ``lax.scan`` (reverse-mode differentiable; used when the caller is
            itself being traced, which compiles per call anyway).
        capacity: rows of the growth buffer, ``>= n_blocks``.
        save_capacity: rows of the saved-state buffer,
            ``>= n_blocks * renorm_every // decimate``; 0 saves nothing.
        qr: kernel QR method
            (see :meth:`~lyapax._engine.options.Renormalisation.method`).
        static_every: ``renorm_every`` compiled in (the static fast path): the
            loop over a block's steps then has a known trip count, which XLA
            runs without evaluating a loop condition at every step (~25 ns
            per step on CPU, 3-9% of a 3-variable ODE's step); one program per
            value. None: the trip count is data.

    Returns:
        :class:`KernelOutput`.
    """
    step_fn = as_step(merge_static(dynamic, static))
    check_step_output(step_fn, state0)
    indexed = step_fn.uses_step_index
    traced = static_lengths is not None
    if static_lengths is not None:
        lengths = static_lengths
    else:
        lengths = Lengths.unpack(lengths)
    n_transient, n_blocks = lengths.n_transient_blocks, lengths.n_blocks
    every, decimate = lengths.renorm_every, lengths.decimate
    if static_every is not None:
        every = static_every

    def advance(_, c):
        s, Y = step_fn.tangent(c[0], c[1], c[2])
        # The counter costs a loop-carried op per step: only steps that read it
        # (ring buffers) get it incremented per step; others get it at the end.
        return s, Y, c[2] + 1 if indexed else c[2]

    def block(i, carry, saved):
        """Measured block ``i`` (negative in the transient): steps, saved
        states, QR; returns the carry with this block's growth added."""
        start = (carry.state, carry.Y, carry.step)
        if saved is None:
            state, Y, step = jax.lax.fori_loop(0, every, advance, start)
        else:
            groups = every // decimate

            def save_group(g, inner):
                c, saved = inner
                c = jax.lax.fori_loop(0, decimate, advance, c)
                # Transient blocks write row 0; the first measured group
                # overwrites it.
                row = jnp.maximum(i * groups + g, 0)
                return c, jax.lax.dynamic_update_index_in_dim(saved, c[0], row, 0)

            (state, Y, step), saved = jax.lax.fori_loop(
                0, groups, save_group, (start, saved)
            )
        Y, growth = renormalise(Y, qr)
        return BenettinState(state, Y, carry.cum + growth, step), saved

    dtype = state0.dtype
    carry = BenettinState(state0, Y0, cum0, jnp.asarray(step0, jnp.int32))
    saved = None
    if save_capacity:
        saved = jnp.zeros((save_capacity, state0.shape[0]), dtype)
    # Lengths compiled in: one block per chunk, so that every trip count is a
    # Python int and the loops are ``lax.scan`` (reverse-mode differentiable).
    size = 1 if traced else chunk_blocks(cum0.shape[0])
    carry, cum_rows, saved = _loops(block, carry, saved, lengths, cum0, capacity, size)
    if not indexed:
        total = n_transient + n_blocks
        step = carry.step + total * jnp.asarray(every, jnp.int32)
        carry = BenettinState(carry.state, carry.Y, carry.cum, step)
    return KernelOutput(carry, cum_rows, saved)


#: Most entries of the rows gathered in the loop before one write into the
#: growth buffer (see :func:`chunk_blocks`).
CHUNK_ENTRIES = 48


def chunk_blocks(k: int) -> int:
    """Blocks per chunk of the kernel's measured loop: the largest power of
    two whose ``(blocks, k)`` rows hold at most :data:`CHUNK_ENTRIES` numbers.

    Why: XLA:CPU writes a row into a loop-carried buffer of more than ~64
    numbers at a fixed cost of ~0.7 us (3.4 ms of a 50 000-step Lorenz run,
    12%), into a smaller one at the cost of the copy; the kernel gathers a
    chunk's rows in a small buffer and writes them into the growth buffer
    once per chunk (docs/performance.md)."""
    blocks = 1
    while 2 * blocks * k <= CHUNK_ENTRIES:
        blocks *= 2
    return blocks


def _loops(block, carry, saved, lengths, cum0, capacity, size):
    """The transient and measured blocks as one loop over chunks of ``size``
    blocks: the transient's chunks first, whose growth is discarded at the end
    of each chunk (one select per chunk, not per block), then the measured
    ones, whose rows are gathered in a small buffer and written into the
    growth buffer once per chunk. One copy of the step in the program (its
    compile time counts for large steps).

    With Python-int ``lengths`` and ``size == 1`` every trip count is a
    Python int, so the loops are ``lax.scan``; with lengths as data they are
    while loops whose trip counts change without recompiling."""
    k = carry.cum.shape[0]
    n_transient, n_blocks = lengths.n_transient_blocks, lengths.n_blocks
    t_chunks = (n_transient + size - 1) // size
    chunks = t_chunks + (n_blocks + size - 1) // size

    def chunk(j, loop):
        carry, rows, pending, saved = loop
        transient = j < t_chunks
        lo = jnp.where(transient, j, j - t_chunks) * size
        first = jnp.where(transient, lo - n_transient, lo)
        if size == 1:  # every chunk holds one block
            m = 1
        else:
            m = jnp.minimum(size, jnp.where(transient, n_transient, n_blocks) - lo)

        def one(r, inner):
            carry, pending, saved = inner
            carry, saved = block(first + r, carry, saved)
            pending = jax.lax.dynamic_update_index_in_dim(pending, carry.cum, r, 0)
            return carry, pending, saved

        carry, pending, saved = jax.lax.fori_loop(0, m, one, (carry, pending, saved))
        # The transient's growth is discarded: the sum restarts from cum0.
        cum = jnp.where(transient, cum0, carry.cum)
        carry = BenettinState(carry.state, carry.Y, cum, carry.step)
        # Transient chunks write into the spare rows past ``capacity``.
        at = jnp.where(transient, capacity, lo)
        rows = jax.lax.dynamic_update_slice_in_dim(rows, pending, at, 0)
        return carry, rows, pending, saved

    dtype = carry.cum.dtype
    rows = jnp.zeros((capacity + size, k), dtype)
    pending = jnp.zeros((size, k), dtype)
    loop = (carry, rows, pending, saved)
    if size == 1:
        # Lengths compiled in: the transient's chunks and the measured ones
        # as two scans of the same body. Reverse mode sums the cotangent of a
        # value the step closes over per scan, so a gradient is rounded as a
        # transient phase's sum plus a measured phase's.
        loop = jax.lax.fori_loop(0, t_chunks, chunk, loop)
        loop = jax.lax.fori_loop(t_chunks, chunks, chunk, loop)
    else:
        loop = jax.lax.fori_loop(0, chunks, chunk, loop)
    carry, rows, _, saved = loop
    return carry, rows[:capacity], saved


def initial_basis(
    seed: Int[ArrayLike, ""], *, d: int, k: int, dtype: Any
) -> Float[Array, "d k"]:
    """Orthonormal ``(d, k)`` frame: QR of a standard-normal matrix from ``seed``,
    drawn and factored in float64 where x64 is on and rounded to ``dtype`` (one
    frame per seed for every dtype; see :mod:`~lyapax._engine.precision`), on
    the host's CPU where that float64 would be emulated (:func:`on_host`)."""
    if draws_on_host(dtype):
        out = jax.ShapeDtypeStruct((d, k), np.dtype(dtype))
        return on_host(_basis, out, seed, static=(d, k, np.dtype(dtype)))
    return _basis(seed, d, k, dtype)


def _basis(seed: Any, d: int, k: int, dtype: Any) -> Any:
    M = jax.random.normal(jax.random.PRNGKey(seed), (d, k), dtype=draw_dtype(dtype))
    Q, _ = jnp.linalg.qr(M)
    return Q.astype(dtype)


@partial(jax.jit, static_argnames=("d", "k", "dtype"))
def initial_frame(seed: Any, *, d: int, k: int, dtype: Any):
    """``(Y0 (d, k), zeros (k,))`` of a fresh run: a program of its own, so a
    new step function compiles only its loop (this one is cached by shape)."""
    return initial_basis(seed, d=d, k=k, dtype=dtype), jnp.zeros((k,), dtype)


#: Frames of at most this many entries (d * k) are memoised by
#: :func:`fresh_frame`: 512 KiB each in float64, 16 of them at most.
MEMO_FRAME_ENTRIES = 1 << 16


def fresh_frame(seed: Any, *, d: int, k: int, dtype: Any, sums: Any = None):
    """:func:`initial_frame`, memoised for integer seeds and small frames;
    ``sums`` (a mixed run's float64) is the dtype of the returned zero sums,
    made once with the frame rather than cast at every call.

    The frame of a fresh run is a pure function of the seed, the shape, the
    dtype and the device it lands on; recomputing it costs a warm call of a
    small problem a program launch on its critical path (0.14 ms, 7-10% of
    a d=20, 200-step Kuramoto run on CPU). Arrays are immutable and the
    kernel does not donate its inputs, so sharing the cached ones is safe.
    """
    if (
        isinstance(seed, int | np.integer)
        and not isinstance(seed, bool)
        # Under a caller's trace the frame is a tracer: keeping it would leak.
        and not under_transformation()
    ):
        if d * k <= MEMO_FRAME_ENTRIES:
            # The draw's dtype is part of the key: with x64 turned off in the
            # same process a float32 frame is another (drawn in float32).
            drawn = np.dtype(draw_dtype(dtype))
            where = (drawn, placement())
            return _memo_frame(int(seed), d, k, np.dtype(dtype), where, _dtype(sums))
        return _with_sums(_placed_frame(int(seed), d, k, np.dtype(dtype)), sums)
    return _with_sums(initial_frame(seed, d=d, k=k, dtype=dtype), sums)


def _dtype(dtype: Any) -> np.dtype | None:
    return None if dtype is None else np.dtype(dtype)


def _with_sums(frame: tuple[Any, Any], sums: Any) -> tuple[Any, Any]:
    Y0, cum0 = frame
    return (Y0, cum0) if sums is None else (Y0, cum0.astype(sums))


def _placed_frame(seed: int, d: int, k: int, dtype: np.dtype):
    """:func:`initial_frame` on the default device. A float64 draw on a backend
    that emulates float64 is made on the host's CPU and moved: on the lent TPU
    v5e the frame's float64 QR compiled for ~20 s at every new ``d`` (a
    float32 run's first call 22 s against 3 s from the cache), and drawn on
    the CPU the frame is the CPU's, bit for bit, so runs on either start from
    the same frame."""
    host = draws_on_host(dtype)
    if host or lands_on_cpu():
        drawn = np.dtype(draw_dtype(dtype))
        small = d * k <= MEMO_FRAME_ENTRIES  # larger QRs block differently
        if drawn == np.float64 and dtype in _HOST_QR_DTYPES and small:
            with jax.default_device(host_cpu()):
                M = np.asarray(_normal_draw(seed, d=d, k=k, dtype=drawn))
            # NumPy's LAPACK QR of the float64 draw: the same geqrf/orgqr as
            # JAX's CPU QR (bit for bit on the builds tried), and it needs
            # neither a lowering of LAPACK's custom calls nor SciPy's import,
            # which a second process paid on its first call even with the
            # compile cache on.
            Y0 = np.linalg.qr(M)[0].astype(dtype)
            return jax.device_put(Y0), jax.device_put(np.zeros((k,), dtype))
    if not host:
        return initial_frame(seed, d=d, k=k, dtype=dtype)
    with jax.default_device(host_cpu()):
        Y0, cum0 = initial_frame(seed, d=d, k=k, dtype=dtype)
    return jax.device_put(np.asarray(Y0)), jax.device_put(np.asarray(cum0))


#: Frames taken from NumPy's QR by :func:`_placed_frame` (IEEE rounding of
#: the float64 frame by NumPy's ``astype``, as by XLA's convert).
_HOST_QR_DTYPES = frozenset({np.dtype(np.float64), np.dtype(np.float32)})


@partial(jax.jit, static_argnames=("d", "k", "dtype"))
def _normal_draw(seed: Any, *, d: int, k: int, dtype: Any) -> Any:
    return jax.random.normal(jax.random.PRNGKey(seed), (d, k), dtype=dtype)


def placement() -> tuple[Any, str]:
    """Where a new array lands (the default device and backend): part of the
    key of every memo of arrays, which live on one device."""
    return (jax.config.jax_default_device, jax.default_backend())  # type: ignore[attr-defined]


@lru_cache(maxsize=16)
def _memo_frame(
    seed: int, d: int, k: int, dtype: np.dtype, where: Any, sums: np.dtype | None
):
    del where  # part of the key only: the draw's dtype and the arrays' device
    return _with_sums(_placed_frame(seed, d, k, dtype), sums)
