"""Master stability function: the largest exponent of the variational equation
transverse to the synchronous state of identical coupled nodes.

For ``N`` identical nodes ``x_i' = F(x_i) - sigma sum_j L_ij H(x_j)`` (``L =
D - W`` the Laplacian of the weights, eigenvalues ``gamma_k``, ``gamma_0 =
0``), a perturbation of the synchronous solution ``s(t)`` along the Laplacian
eigenvector ``k`` obeys ``xi' = [DF(s) - alpha DH(s)] xi`` with ``alpha =
sigma gamma_k`` (Pecora & Carroll 1998). ``Lambda(alpha)``, the largest
exponent of that equation, decides the stability of every mode of every
network of that node and coupling.

The kernel here advances one synchronous trajectory ``s`` and, for a chunk of
``alpha`` values at once, one tangent frame per ``alpha`` (all starting from
the same seeded frame): each Runge-Kutta stage evaluates ``F`` once and pushes
every column of every frame through one vmapped ``jax.jvp``. Complex ``alpha``
(the eigenvalues of a directed network) make the frames complex: a complex
``xi`` is the real ``2m``-dimensional tangent ``(Re xi, Im xi)`` and its
exponents are those of the complex frame's QR. Where complex numbers do not
exist (a TPU's emulated float64 has no complex128, and its compiler aborts
the process on one), the frames and ``alpha`` are real pairs
(:class:`~lyapax._engine.pairs.Pair`) and the complex QR is the real QR of
the frame's ``2m x 2k`` real form. Run lengths are data, as in the engine
(:mod:`lyapax._engine.benettin`): one program per structure.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec

from lyapax._engine import run, validate
from lyapax._engine.benettin import Lengths, capacity, initial_frame
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.pairs import Pair
from lyapax._engine.precision import emulated_float64, growth_log
from lyapax._engine.progress import Bar, TextSink, chunks_hook
from lyapax._engine.summary import finish
from lyapax._engine.tree import merge_static, split_static
from lyapax._internal import batching
from lyapax.integrators import TABLEAUS, fixed_stage_method, rk_stage_update

__all__ = ["MSFResult", "master_stability_function", "msf_kernel_run"]

#: ``integrator=`` value for maps: ``node_rhs`` is the map itself.
MAP = "map"


class MSFResult(NamedTuple):
    """Master stability function sampled at ``alphas``.

    Attributes:
        alphas: ``(n_alpha,)`` the coupling values (real or complex), as given.
        exponent: ``(n_alpha,)`` ``Lambda(alpha)``, the largest transversal
            exponent (1/time units).
        stderr: ``(n_alpha,)`` its batch-means standard error.
        spectrum: ``(n_alpha, k)`` the ``k`` leading exponents of
            ``DF - alpha DH`` per ``alpha``, descending (``k=1``: the
            exponent as a column).
        spectrum_stderr: ``(n_alpha, k)`` their standard errors.
    """

    alphas: Any
    exponent: Any
    stderr: Any
    spectrum: Any
    spectrum_stderr: Any


def _columns(V: Any) -> tuple[jax.Array, bool]:
    """``(a, m, k)`` frames (real, complex or a :class:`Pair`) as real
    columns ``(c, m)``; complex frames give their real and imaginary parts as
    separate columns."""

    def flat(part: jax.Array) -> jax.Array:
        a, m, k = part.shape
        return jnp.moveaxis(part, 1, 2).reshape(a * k, m)

    if isinstance(V, Pair):
        return jnp.concatenate([flat(V.re), flat(V.im)]), True
    cols = flat(V)
    if jnp.iscomplexobj(cols):
        return jnp.concatenate([cols.real, cols.imag]), True
    return cols, False


def _frames(cols: jax.Array, V: Any, is_complex: bool) -> Any:
    """Inverse of :func:`_columns`, in the form of the frames ``V``."""
    a, m, k = V.re.shape if isinstance(V, Pair) else V.shape

    def unflat(part: jax.Array) -> jax.Array:
        return jnp.moveaxis(part.reshape(a, k, m), 1, 2)

    if not is_complex:
        return unflat(cols)
    half = cols.shape[0] // 2
    if isinstance(V, Pair):
        return Pair(unflat(cols[:half]), unflat(cols[half:]))
    return unflat(cols[:half] + 1j * cols[half:])


class _Variational:
    """``(F(x), [DF(x) - alpha DH(x)] V)`` for frames ``V (a, m, k)``.

    ``F`` is ``node_rhs``; ``dh(x, v)`` is ``DH(x) v`` (linear in ``v``).
    """

    def __init__(self, F: Callable, dh: Callable, alphas: jax.Array) -> None:
        self.F, self.dh, self.alphas = F, dh, alphas

    def __call__(self, xv: tuple[jax.Array, jax.Array], _stage: int):
        x, V = xv
        cols, is_complex = _columns(V)

        def one(v):
            fx, dfv = jax.jvp(self.F, (x,), (v,))
            return fx, dfv, self.dh(x, v)

        fx, dfv, dhv = jax.vmap(one, out_axes=(None, 0, 0))(cols)
        dF = _frames(dfv, V, is_complex)
        dH = _frames(dhv, V, is_complex)
        alphas = jax.tree.map(lambda part: part[:, None, None], self.alphas)
        return fx, dF - alphas * dH


def _renormalise(V: Any):
    """Per-frame QR with a positive real diagonal; ``log|diag R| (a, k)``."""
    if isinstance(V, Pair):
        return _renormalise_pairs(V)
    Q, R = jnp.linalg.qr(V)
    diag = jnp.diagonal(R, axis1=-2, axis2=-1)
    size = jnp.abs(diag)
    phase = jnp.where(size > 0, diag / jnp.where(size > 0, size, 1.0), 1.0)
    return Q * phase[:, None, :].astype(Q.dtype), growth_log(size)


def _renormalise_pairs(V: Pair):
    """:func:`_renormalise` of complex frames held as real pairs: the real QR
    of each frame's real form, whose columns ``(v_j, i v_j)`` are
    ``[Re v_j; Im v_j]`` and ``[-Im v_j; Re v_j]``. Those two are orthogonal
    and of one length, so its ``R`` repeats ``|r_jj|`` of the complex QR and
    its column ``2j`` is the complex ``Q``'s column ``j``, parts stacked."""
    a, m, k = V.re.shape
    top = jnp.stack([V.re, -V.im], axis=-1).reshape(a, m, 2 * k)
    bottom = jnp.stack([V.im, V.re], axis=-1).reshape(a, m, 2 * k)
    Q, R = jnp.linalg.qr(jnp.concatenate([top, bottom], axis=1))
    diag = jnp.diagonal(R, axis1=-2, axis2=-1)[:, ::2]
    sign = jnp.where(diag < 0, -1.0, 1.0).astype(Q.dtype)
    Q = Q[:, :, ::2] * sign[:, None, :]
    return Pair(Q[:, :m], Q[:, m:]), growth_log(jnp.abs(diag))


@partial(jax.jit, static_argnames=("static", "method", "capacity", "pairs"))
def msf_kernel_run(
    dynamic,
    x0,
    Y0,
    alphas,
    dt,
    lengths,
    *,
    static,
    method: str,
    capacity: int,
    pairs: bool = False,
):
    """One synchronous trajectory from ``x0 (m,)`` and one frame per ``alpha``
    from ``Y0 (m, k)``: ``n_transient_blocks`` blocks (growth discarded), then
    ``n_blocks`` measured. Returns ``{"exponents", "stderr"}`` ``(a, k)``
    (descending per row) and the final state ``x``. ``pairs``: ``alphas`` is
    ``(a, 2)``, complex values as (real, imaginary) rows, and the frames are
    real pairs (where complex numbers do not exist)."""
    F, dh = merge_static(dynamic, static)
    lengths = Lengths.unpack(lengths)
    a, (m, k) = alphas.shape[0], Y0.shape
    V0: Any
    if pairs:
        alphas = Pair(alphas[:, 0], alphas[:, 1])
        real = jnp.broadcast_to(Y0.astype(x0.dtype), (a, m, k))
        V0 = Pair(real, jnp.zeros_like(real))
    else:
        frame_dtype = alphas.dtype if jnp.iscomplexobj(alphas) else x0.dtype
        V0 = jnp.broadcast_to(Y0.astype(frame_dtype), (a, m, k))
    cum0 = jnp.zeros((a, k), x0.dtype)
    rhs = _Variational(F, dh, alphas)
    n_tr = lengths.n_transient_blocks

    def advance(_, xv):
        if method == MAP:
            # x' = F(x), xi' = [DF(x) - alpha DH(x)] xi, both at the old point.
            return rhs(xv, 0)
        return rk_stage_update(TABLEAUS[method], rhs, xv, dt)

    def block(i, loop):
        x, V, cum, rows = loop
        x, V = jax.lax.fori_loop(0, lengths.renorm_every, advance, (x, V))
        V, growth = _renormalise(V)
        cum = jnp.where(i < n_tr, cum, cum + growth)
        row = jnp.maximum(i - n_tr, 0)
        rows = jax.lax.dynamic_update_index_in_dim(rows, cum, row, 0)
        return x, V, cum, rows

    rows = jnp.zeros((capacity, a, k), x0.dtype)
    total = n_tr + lengths.n_blocks
    x, _, _, rows = jax.lax.fori_loop(0, total, block, (x0, V0, cum0, rows))

    def summary(cum_rows, c0):
        return finish(cum_rows, c0, lengths.n_blocks, dt, lengths.renorm_every, 0.0)

    est = jax.vmap(summary, in_axes=(1, 0))(rows, cum0)
    return {"exponents": est.exponents, "stderr": est.stderr, "x": x}


class _JvpTangent:
    """``DH(x) v`` of a coupling function ``h(x) -> (m,)`` by ``jax.jvp``."""

    def __init__(self, h: Callable) -> None:
        self.h = h

    def __call__(self, x, v):
        return jax.jvp(self.h, (x,), (v,))[1]


jax.tree_util.register_pytree_node(
    _JvpTangent, lambda t: ((t.h,), None), lambda _, c: _JvpTangent(*c)
)


class _MatrixTangent:
    """``DH v = H v`` for a constant ``(m, m)`` matrix ``H``."""

    def __init__(self, H: Any) -> None:
        self.H = H

    def __call__(self, _x, v):
        return self.H @ v


jax.tree_util.register_pytree_node(
    _MatrixTangent, lambda t: ((t.H,), None), lambda _, c: _MatrixTangent(*c)
)


def as_alphas(alphas: Any, dtype: Any = None) -> np.ndarray:
    """``alphas`` as a finite 1-D host array (complex kept complex), in the
    precision of the real ``dtype`` when given (a float32 state's: a float64
    alpha made its tangent float64 where x64 is on), else the widest."""
    arr = np.asarray(alphas)
    if arr.ndim == 0:
        arr = arr[None]
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"alphas must be a non-empty 1-D array of coupling values; got shape "
            f"{arr.shape}"
        )
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_):
        raise TypeError(f"alphas must be real or complex numbers; got {arr.dtype}")
    if not np.isfinite(arr).all():
        raise ValueError("alphas must be finite; they hold nan or inf")
    x64 = bool(jax.config.jax_enable_x64)  # type: ignore[attr-defined]
    real = np.dtype(np.float64 if x64 else np.float32)
    if dtype is not None and np.issubdtype(dtype, np.floating):
        real = min(real, np.dtype(dtype), key=lambda t: t.itemsize)
    if np.iscomplexobj(arr):
        return arr.astype(np.result_type(real, np.complex64))
    return arr.astype(real)


def _coupling_tangent(coupling_jacobian: Any, m: int, x0: jax.Array) -> Any:
    """``DH(x) v`` from a matrix ``H (m, m)`` or a function ``h(x) -> (m,)``."""
    if callable(coupling_jacobian) and not hasattr(coupling_jacobian, "shape"):
        out = jax.eval_shape(coupling_jacobian, x0)
        if getattr(out, "shape", None) != (m,):
            raise ValueError(
                f"coupling_jacobian(x) must return shape ({m},) (the coupling "
                f"function h of the node state); it returned "
                f"{getattr(out, 'shape', out)}"
            )
        return _JvpTangent(coupling_jacobian)
    H = jnp.asarray(coupling_jacobian, dtype=x0.dtype)
    if H.shape != (m, m):
        raise ValueError(
            f"coupling_jacobian must be an ({m}, {m}) matrix H or a callable "
            f"h(x) -> ({m},); got an array of shape {H.shape}"
        )
    if not np.isfinite(np.asarray(H)).all():
        raise ValueError("coupling_jacobian must be finite; it holds nan or inf")
    return _MatrixTangent(H)


def _check_node(node_rhs: Any, x0: jax.Array) -> None:
    if not callable(node_rhs):
        raise TypeError(
            f"node_rhs must be a callable x (m,) -> (m,); got {type(node_rhs).__name__}"
        )
    out = jax.eval_shape(node_rhs, x0)
    if getattr(out, "shape", None) != x0.shape:
        raise ValueError(
            f"node_rhs(x) must return the shape of state0 {x0.shape}; it returned "
            f"{getattr(out, 'shape', out)}"
        )


def _spread(f: Callable, mesh: Any) -> Callable:
    """``f(alphas)`` split over ``mesh`` along the alpha axis (each device
    integrates the synchronous trajectory itself)."""
    if mesh is None:
        return f
    rows = PartitionSpec(batching.BATCH_AXIS)
    return jax.shard_map(
        f, mesh=mesh, in_specs=(rows,), out_specs=rows, check_vma=False
    )


def run_msf(
    F: Any,
    dh: Any,
    alphas: Any,
    state0: Any,
    dt: Any,
    n_steps: Any,
    *,
    k: int,
    renorm_every: int,
    t_transient: float,
    seed: int,
    integrator: str,
    batch_size: Any,
    devices: Any,
    progress: Any = False,
) -> MSFResult:
    """:func:`master_stability_function` once ``F`` and ``DH`` are built
    (``dh(x, v) = DH(x) v``, a pytree); also used by the network modes."""
    x0 = validate.as_state("state0", state0)
    m = int(x0.shape[0])
    alpha_rows = as_alphas(alphas, x0.dtype)
    if integrator == MAP:
        method = MAP
    else:
        method = fixed_stage_method(integrator, "master_stability_function")
    options = run.RunOptions.of(k=k, renorm_every=renorm_every, t_transient=t_transient)
    args = run.run_args(options, d=m, dt=dt, n_steps=n_steps, k=k, dtype=x0.dtype)
    dt = validate.as_dt(dt)
    dynamic, static = split_static((F, dh))
    Y0, _ = initial_frame(seed, d=m, k=args.k, dtype=x0.dtype)
    lengths = Lengths.pack(args.n_blocks, args.n_transient_blocks, args.renorm_every, 1)
    plan = batching.Plan(alpha_rows.shape[0], batch_size, devices, True)
    # No complex128 where float64 is emulated: complex alphas go as pairs on
    # the devices the rows run on (not only where new arrays land).
    pairs = np.iscomplexobj(alpha_rows) and any(
        emulated_float64(x0.dtype, device.platform) for device in plan.devices
    )
    kernel = partial(
        msf_kernel_run,
        static=static,
        method=method,
        capacity=capacity(args.n_blocks),
        pairs=pairs,
    )
    given = np.stack([alpha_rows.real, alpha_rows.imag], -1) if pairs else alpha_rows

    def chunk(rows):
        out = kernel(dynamic, x0, Y0, rows, dt, lengths)
        return out["exponents"], out["stderr"]

    spread = _spread(chunk, plan.mesh)
    with Bar(progress, plan.n, "master_stability_function", "alpha") as bar:
        hook = chunks_hook(bar)
        exponents, stderr = plan.run(lambda rows: spread(rows), (given,), (), hook)
    return MSFResult(alpha_rows, exponents[:, 0], stderr[:, 0], exponents, stderr)


@holds_one_blas_thread
def master_stability_function(
    node_rhs: Callable[[Any], Any],
    coupling_jacobian: Any,
    alphas: Any,
    state0: Any,
    dt: float,
    n_steps: int,
    *,
    k: int = 1,
    renorm_every: int = 10,
    t_transient: float = 0.0,
    seed: int = 0,
    integrator: str = "rk4",
    batch_size: int | None = None,
    devices: Any = None,
    progress: bool | TextSink = False,
) -> MSFResult:
    """Master stability function ``Lambda(alpha)`` of identical coupled nodes.

    The largest Lyapunov exponent of ``xi' = [DF(s) - alpha DH(s)] xi`` along
    the synchronous trajectory ``s' = F(s)`` from ``state0``, for each
    ``alpha``. For ``x_i' = F(x_i) - sigma sum_j L_ij H(x_j)`` (``L`` the
    Laplacian ``D - W``, eigenvalues ``gamma_k``) the mode ``k`` of the
    synchronous state is stable when ``Lambda(sigma gamma_k) < 0``
    (:func:`lyapax.network.synchronisation` evaluates that on a network).

    Every ``alpha`` shares one trajectory and one initial frame (QR of a
    standard-normal ``(m, k)`` matrix from ``seed``); the ``alpha`` values run
    in one vmapped program, ``batch_size`` at a time (same numbers), split
    over the devices when several are visible (like sweeps).

    Args:
        node_rhs: ``F(x (m,)) -> (m,)``, the uncoupled node.
        coupling_jacobian: ``H (m, m)`` (linear coupling of the node states),
            or a coupling function ``h(x (m,)) -> (m,)``, whose Jacobian
            ``DH(s)`` is applied by ``jax.jvp`` along ``s(t)``.
        alphas: ``(n_alpha,)`` real or complex coupling values ``sigma
            gamma``; complex ones give complex tangent frames (the real
            ``2m``-dimensional problem).
        state0: ``(m,)`` start of the synchronous trajectory.
        dt: time step; n_steps: measured steps (multiple of ``renorm_every``).
        k: exponents per ``alpha`` (``1 <= k <= m``): the transversal spectrum.
        renorm_every, t_transient, seed: as in :func:`lyapax.lyapunov_spectrum`.
        integrator: ``"rk4"`` (default), ``"euler"``, ``"heun"``, ``"rk6"``,
            or ``"map"``: ``node_rhs`` is a map ``x -> F(x)`` (use ``dt=1.0``)
            and the tangent map is ``xi -> [DF(s) - alpha DH(s)] xi``.
        batch_size: at most this many ``alpha`` per call (bounds memory).
        devices: as in :func:`lyapax.sweep.sweep_lyapunov_spectrum`.
        progress: True for a progress bar (tqdm) on stderr, or a text file to
            draw it in, moved after each chunk of ``batch_size`` values.

    Returns:
        :class:`MSFResult`.

    Raises:
        ValueError / TypeError: bad shapes of ``node_rhs``, ``coupling_jacobian``,
            ``alphas`` or ``state0``, and the run-length checks of
            ``lyapunov_spectrum``, each naming the argument.
    """
    x0 = validate.as_state("state0", state0)
    _check_node(node_rhs, x0)
    dh = _coupling_tangent(coupling_jacobian, int(x0.shape[0]), x0)
    return run_msf(
        node_rhs,
        dh,
        alphas,
        x0,
        dt,
        n_steps,
        k=k,
        renorm_every=renorm_every,
        t_transient=t_transient,
        seed=seed,
        integrator=integrator,
        batch_size=batch_size,
        devices=devices,
        progress=progress,
    )
