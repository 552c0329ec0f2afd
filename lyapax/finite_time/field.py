"""FTLE fields: finite-time Lyapunov exponents of a flow map at many points.

For each initial point ``x0`` the flow map ``phi`` over ``[t0, t0 + T]`` and its
Jacobian ``F = D phi(x0)`` are integrated together (``d`` forward-mode tangents,
never finite differences). With ``sigma_max >= ... >= sigma_min`` the singular
values of ``F`` (square roots of the eigenvalues of the Cauchy-Green tensor
``F^T F``), ``ftle_max = ln(sigma_max) / |T|`` and ``ftle_min = ln(sigma_min) /
|T|``. ``T < 0`` integrates backward in time (the backward FTLE whose ridges are
attracting Lagrangian coherent structures).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import PartitionSpec
from jaxtyping import Array, ArrayLike, Float

from lyapax._engine import progress as progress_bar
from lyapax._engine import validate
from lyapax._engine.blas_threads import holds_one_blas_thread
from lyapax._engine.tree import merge_static, split_static
from lyapax._internal.batching import BATCH_AXIS, Plan, host_array, resolve_devices
from lyapax.finite_time import _memory
from lyapax.finite_time._flow import (
    Autonomous,
    flow_and_jacobian,
    n_steps_for,
    singular_summary,
)
from lyapax.finite_time._shared import shared_transcendentals
from lyapax.integrators import TABLEAUS, ButcherTableau, fixed_stage_method

__all__ = ["FTLEField", "ftle_field", "ftle_grid", "grid_points"]


class FTLEField(NamedTuple):
    """An FTLE field over ``[t0, t0 + T]``.

    ``ftle_max (N,)`` / ``ftle_min (N,)``: ln of the largest / smallest
    singular value of the flow-map Jacobian, divided by ``|T|`` (1/time
    units); ``direction (N, d)``: unit stretching direction at the initial
    point (eigenvector of ``F^T F`` for its largest eigenvalue, largest entry
    positive); ``flow_map (N, d)``: the points at ``t0 + T``; ``t0``, ``T``,
    ``n_steps`` (equal steps of ``T / n_steps`` were taken). Arrays are
    NumPy (each chunk is copied to the host when it is done). From
    :func:`ftle_grid` the point axis is the image's ``(ny, nx)``.
    """

    ftle_max: Float[Array, " *grid"]
    ftle_min: Float[Array, " *grid"]
    direction: Float[Array, "*grid d"]
    flow_map: Float[Array, "*grid d"]
    t0: float
    T: float
    n_steps: int


class _Rows(NamedTuple):
    flow_map: Any
    ftle_max: Any
    ftle_min: Any
    direction: Any


def _tableau(integrator: Any) -> ButcherTableau:
    if isinstance(integrator, ButcherTableau):
        return integrator
    if not isinstance(integrator, str):
        raise TypeError(
            "integrator must be a name ('euler', 'heun', 'rk4', 'rk6') or a "
            f"lyapax.integrators.ButcherTableau; got {integrator!r}"
        )
    return TABLEAUS[fixed_stage_method(integrator, "ftle_field")]


def _finite_float(name: str, value: Any) -> float:
    value = validate.concrete_float(name, value, why="(it sets the run length)")
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite; got {name}={value!r}")
    return value


def _points(points: Any) -> np.ndarray:
    arr = np.asarray(points)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(
            "points must have shape (N, d): one initial point per row; got shape "
            f"{arr.shape}"
        )
    if not np.issubdtype(arr.dtype, np.inexact):
        arr = arr.astype(jax.numpy.result_type(float))
    bad = ~np.isfinite(arr).all(axis=1)
    if bad.any():
        raise ValueError(
            f"points must be finite; rows {np.flatnonzero(bad)[:10].tolist()} hold "
            "nan or inf"
        )
    return arr


def _check_rhs(rhs: Any, d: int, dtype: Any, time_dependent: bool) -> None:
    x = jax.ShapeDtypeStruct((d,), dtype)
    t = jax.ShapeDtypeStruct((), dtype)
    form = "rhs(t, x)" if time_dependent else "rhs(x)"
    try:
        out = jax.eval_shape(rhs, t, x)
    except Exception as err:  # the rhs's own error, reported with the shapes
        raise ValueError(
            f"{form} failed on a point of shape ({d},) (points has d={d} "
            f"columns): {type(err).__name__}: {err}. Pass points of shape (N, d) "
            "with d the size of the state rhs expects"
            + ("" if time_dependent else ", or time_dependent=True for rhs(t, x)")
        ) from err
    if getattr(out, "shape", None) != (d,):
        raise ValueError(
            f"{form} must return shape ({d},) for points with d={d} columns; it "
            f"returned shape {getattr(out, 'shape', None)}"
        )


@partial(jax.jit, static_argnames=("static", "tableau", "mesh", "share"))
def _field_kernel(dynamic, points, t0, h, n, inv_T, *, static, tableau, mesh, share):
    """Flow map, FTLEs and direction of every row of ``points`` (``share``,
    for XLA:CPU: ``"shared"``, transcendental values computed once per point
    and stage; ``"fast"``, also float64 ``sin``/``cos`` from arithmetic,
    ``nan`` beyond its range; None: as written)."""

    def rows(dyn, pts, t0, h, n, inv_T):
        rhs = merge_static(dyn, static)
        if share is not None:
            rhs = shared_transcendentals(rhs, fast_trig=share == "fast")

        def one(x0):
            x, F = flow_and_jacobian(rhs, tableau, x0, t0, h, n)
            hi, lo, v = singular_summary(F)
            return _Rows(x, hi * inv_T, lo * inv_T, v)

        return jax.vmap(one)(pts)

    if mesh is not None:
        whole, split = PartitionSpec(), PartitionSpec(BATCH_AXIS)
        rows = jax.shard_map(
            rows,
            mesh=mesh,
            in_specs=(whole, split, whole, whole, whole, whole),
            out_specs=split,
            check_vma=False,
        )
    return rows(dynamic, points, t0, h, n, inv_T)


@holds_one_blas_thread
def ftle_field(
    rhs: Any,
    points: Float[ArrayLike, "N d"],
    t0: float,
    T: float,
    dt: float,
    time_dependent: bool = False,
    integrator: str | ButcherTableau = "rk4",
    batch_size: int | None = None,
    *,
    devices: Any = None,
    memory_limit: int | None = None,
    progress: Any = False,
) -> FTLEField:
    """Finite-time Lyapunov exponents of the flow map over ``[t0, t0 + T]``.

    Args:
        rhs: velocity field ``rhs(x (d,)) -> (d,)``, or ``rhs(t, x)`` with
            ``time_dependent=True`` (evaluated at every Runge-Kutta stage's
            own time). Numbers inside an ``equinox.Module`` (such as the
            fields of :mod:`lyapax.systems`) are runtime inputs (no
            recompile); a new closure is a new program.
        points: initial points ``(N, d)``.
        t0: start time. T: integration time, ``!= 0``; ``T < 0`` runs backward.
        dt: largest step (> 0). The run takes ``n = ceil(|T| / dt)`` equal steps
            of ``T / n``, so it ends exactly at ``t0 + T``.
        time_dependent: ``rhs`` takes ``(t, x)``.
        integrator: ``"euler"``, ``"heun"``, ``"rk4"``, ``"rk6"`` or a
            :class:`~lyapax.integrators.ButcherTableau`.
        batch_size: at most this many points per compiled call (None:
            8 192 on a CPU, 32 768 elsewhere); the points are cut into
            equal chunks (on a CPU of a multiple of 8 points per device; the
            end is padded with copies of the last point, discarded), so every
            chunk reuses one program and little padding is computed.
        devices: devices to split each chunk over, as in the sweeps (None:
            all visible).
        memory_limit: bytes the run may use (None: what the device reports
            free); checked before anything runs.
        progress: True (stderr) or a text file: a bar over the points, moved
            after each chunk of ``batch_size`` (off by default).

    Returns:
        :class:`FTLEField` with ``ftle_max``, ``ftle_min`` ``(N,)``,
        ``direction`` and ``flow_map`` ``(N, d)``.

    Raises:
        ValueError: ``points`` not ``(N, d)`` or not finite, ``rhs`` failing on
            or not returning a ``(d,)`` point, ``T = 0``, ``dt <= 0``, an
            unknown integrator. TypeError: a bad ``progress``. MemoryError:
            the run would not fit (the message names a ``batch_size`` that
            would).
    """
    if not isinstance(time_dependent, bool):
        raise TypeError(f"time_dependent must be True or False; got {time_dependent!r}")
    if not callable(rhs):
        raise TypeError(f"rhs must be callable; got {type(rhs).__name__}")
    pts = _points(points)
    n, d = pts.shape
    t0 = _finite_float("t0", t0)
    T = _finite_float("T", T)
    if T == 0:
        raise ValueError(
            "T must be nonzero: the FTLE is ln(sigma) / |T| (use T > 0 forward, "
            "T < 0 backward)"
        )
    dt = float(validate.positive_dt(dt))
    tableau = _tableau(integrator)
    field = rhs if time_dependent else Autonomous(rhs)
    _check_rhs(field, d, pts.dtype, time_dependent)
    n_steps = n_steps_for(T, dt)
    devs = resolve_devices(devices)
    on_cpu = devs[0].platform == "cpu"
    size = _memory.even_chunk(
        n,
        batch_size,
        default=_memory.CPU_CHUNK if on_cpu else _memory.DEFAULT_CHUNK,
        align=_memory.CPU_ALIGN * len(devs) if on_cpu else 1,
    )
    # Whole chunks of `size` rows (copies of the last point fill the end), so
    # that every call has the aligned length; the extra rows are cut off.
    total = -(-n // size) * size
    rows = (
        pts if total == n else np.concatenate([pts, np.repeat(pts[-1:], total - n, 0)])
    )
    plan = Plan(total, size, devs, True)
    _memory.check_fits(
        total, plan.padded, d, len(tableau.a), pts.dtype, plan.devices, memory_limit
    )
    dynamic, static = split_static(field)
    scalars = [np.asarray(x, pts.dtype) for x in (t0, T / n_steps, 1.0 / abs(T))]
    kernel = partial(
        _field_kernel, dynamic, static=static, tableau=tableau, mesh=plan.mesh
    )
    count = np.int32(n_steps)

    def chunk(rows: Any) -> _Rows:
        # Each chunk's rows go to the host as they are done: no cross-device
        # gather of sharded chunks (an XLA collective, which on a loaded CPU
        # can exceed the in-process rendezvous timeout) and device memory for
        # one chunk only, whatever N is.
        args = (rows, scalars[0], scalars[1], count, scalars[2])
        out = _Rows(
            *(host_array(x) for x in kernel(*args, share="fast" if on_cpu else None))
        )
        if on_cpu:
            # A sin/cos argument beyond the fast functions' range gives nan:
            # such a chunk is computed again with the library functions.
            bad = np.isnan(out.ftle_max) | np.isnan(out.flow_map).any(axis=-1)
            if bad.any():
                again = _Rows(*(host_array(x) for x in kernel(*args, share="shared")))
                out = _Rows(
                    *(
                        np.where(_rows_mask(bad, a), b, a)
                        for a, b in zip(out, again, strict=True)
                    )
                )
        return out

    with progress_bar.Bar(progress, n, "ftle_field", "point") as bar:

        def shown(index: int, start: int, stop: int, compute: Any) -> Any:
            return bar.by_chunks(index, start, min(stop, n), compute)

        out = plan.run(chunk, (rows,), hook=shown if bar.active else None)
    if total != n:
        out = _Rows(*(x[:n] for x in out))
    return FTLEField(
        out.ftle_max, out.ftle_min, out.direction, out.flow_map, t0, T, n_steps
    )


def _rows_mask(bad: np.ndarray, field: np.ndarray) -> np.ndarray:
    return bad.reshape(bad.shape + (1,) * (field.ndim - 1))


def grid_points(x: Float[ArrayLike, " nx"], y: Float[ArrayLike, " ny"]) -> np.ndarray:
    """The points ``(ny * nx, 2)`` of the grid ``x (nx,)`` by ``y (ny,)``, row
    by row (point ``i * nx + j`` is ``(x[j], y[i])``), as an image is stored."""
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 1 or y.ndim != 1 or x.size == 0 or y.size == 0:
        raise ValueError(
            f"x and y must be non-empty 1-D arrays; got shapes {x.shape} and {y.shape}"
        )
    X, Y = np.meshgrid(x, y)
    return np.column_stack([X.ravel(), Y.ravel()])


def ftle_grid(
    rhs: Any,
    x: Float[ArrayLike, " nx"],
    y: Float[ArrayLike, " ny"],
    t0: float,
    T: float,
    dt: float,
    **options: Any,
) -> FTLEField:
    """:func:`ftle_field` on the grid ``x (nx,)`` by ``y (ny,)``, returned as
    images: ``ftle_max``, ``ftle_min`` ``(ny, nx)``, ``direction``,
    ``flow_map`` ``(ny, nx, 2)`` (row ``i`` is ``y[i]``, as ``imshow`` with
    ``origin="lower"`` draws it). ``options`` are those of :func:`ftle_field`.
    """
    ny, nx = np.size(y), np.size(x)
    field = ftle_field(rhs, grid_points(x, y), t0, T, dt, **options)
    return field._replace(
        ftle_max=field.ftle_max.reshape(ny, nx),
        ftle_min=field.ftle_min.reshape(ny, nx),
        direction=field.direction.reshape(ny, nx, -1),
        flow_map=field.flow_map.reshape(ny, nx, -1),
    )
