"""One method-of-steps step of a delay equation on the ring buffer.

:class:`RingStep` advances the present state ``X (n_sv, n)`` and the ring buffer
of its coupled rows (convention in :mod:`lyapax._internal.history`) by one explicit
Runge-Kutta step. The right-hand side is a *field* ``field(X, D, params)``,
where ``D`` holds the delayed coupled variables: ``(n_cvar, n)`` for one delay
shared by every node (``edges=False``) or ``(n_cvar, n_target, n_source)`` per
edge (``edges=True``).

Grid mode reads ``D`` once per step from a stored sample (the delay rounded to
whole steps) and holds it over all stages: first order in ``dt`` whatever the
integrator. Interpolated mode reads ``D`` by cubic Hermite interpolation at each
stage's own time ``t + c_i dt - tau``, so the integrator keeps its order (up to
the interpolant's fourth order). Every object here is a pytree whose numbers are
leaves, so rebuilding with new numbers reuses the compiled program.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from lyapax._engine.abstract import AbstractStep
from lyapax._internal import history as _history
from lyapax._internal.sparse import EllWeights, read_edges_ell
from lyapax.dde import _edge_sums
from lyapax.integrators import TABLEAUS, rk_stage_update

#: The present state ``(n_sv, n)`` (``(m, 1)`` for a scalar/vector DDE).
State = Float[Array, "n_sv n"]
#: The ring buffer, ``(horizon, n_cvar, n)`` or ``(horizon, 2, n_cvar, n)``.
Buffer = Float[Array, "horizon ..."]
#: Delayed coupled values: ``(n_cvar, n)`` uniform or ``(n_cvar, n, n)`` per edge.
Delayed = Float[Array, "n_cvar n *n_source"]
#: The ring-buffer step counter.
Step = Int[Array, ""]


def _cvar_rows(X: State, cvar: tuple[int, ...]) -> Float[Array, "n_cvar n"]:
    if cvar == tuple(range(X.shape[0])):
        return X
    return X[jnp.asarray(cvar)]


class ScalarField(eqx.Module):
    """``rhs(x_now (m,), x_delayed (m,)) -> (m,)`` as a field on ``(m, 1)`` states."""

    rhs: Callable[[Any, Any], Any]

    def __call__(self, X: State, D: Float[Array, "m 1"], params: Any) -> State:
        m = X.shape[0]
        out = jnp.asarray(self.rhs(X[:, 0], D[:, 0]))
        if out.shape != (m,) and not (m == 1 and out.shape == ()):
            raise ValueError(
                f"rhs_delayed(x_now, x_delayed) must return shape ({m},) like the "
                f"state; it returned shape {out.shape}"
            )
        return jnp.reshape(out, (m, 1)).astype(X.dtype)


class EdgeSums(eqx.Module):
    """Delayed input already summed over the sources: ``(C, n)`` weighted sums of
    the coupling's ``sources`` terms (see :meth:`NetworkField.edge_sums`)."""

    sums: Float[Array, "C n"]


def presum_edges(
    coupling: Any, weights: Any, horizon: int, interpolate: bool, edges: bool
) -> bool:
    """Whether per-edge delays read through :meth:`NetworkField.edge_sums`.

    It needs per-edge grid delays and a coupling of the form
    ``combine(sum_j w_ij sources(x_j))`` (the built-ins). Sparse weights
    (a neighbour list) always take it; dense ones form the source terms on all
    ``H n`` buffer entries, so they take it while ``H <= n`` (no more terms
    than the ``n^2`` edges).
    """
    if not edges or interpolate or not coupling.summable:
        return False
    if isinstance(weights, EllWeights):  # neighbour list
        return True
    return getattr(weights, "ndim", 0) == 2 and horizon <= weights.shape[0]


class NetworkField(eqx.Module):
    """``dfun(X, coupling(D, X[cvar], weights, params), params)``.

    ``coupling`` is edge-aware (:mod:`lyapax.network.edge_coupling`); with
    ``edges=False`` its ``uniform`` form receives the delayed sources
    ``(n_cvar, n)``.
    """

    dfun: Callable[..., Any]
    coupling: Any
    weights: Any
    cvar: tuple[int, ...] = eqx.field(static=True)
    edges: bool = eqx.field(static=True)
    #: Dense per-edge grid reads are summed over the sources once per step
    #: (:meth:`edge_sums`) instead of handing ``(n_cvar, n, n)`` to the coupling.
    presum: bool = eqx.field(static=True, default=False)

    def edge_sums(
        self,
        buf: Buffer,
        t: Step,
        steps: Int[Array, "n n"],
        dbuf: Float[Array, "H n_cvar n k"] | None = None,
    ) -> tuple[Float[Array, "C n"], Float[Array, "C n k"]]:
        """Weighted sums of the coupling's source terms over every delayed edge,
        and their derivatives along the buffer tangents ``dbuf`` (``k = 0``
        when not given); see :mod:`lyapax.dde._edge_sums`."""
        if isinstance(steps, SlotDelays):
            return _edge_sums.slot_edge_sums(
                self.coupling,
                self.weights.values,
                buf,
                t,
                steps.steps,
                steps.sources,
                dbuf,
            )
        return _edge_sums.edge_sums(self.coupling, self.weights, buf, t, steps, dbuf)

    def __call__(self, X: State, D: Delayed, params: Any) -> State:
        current = _cvar_rows(X, self.cvar)
        if isinstance(D, EdgeSums):
            c = self.coupling.combine(D.sums, current, self.weights, params)
        elif self.edges:
            # Sparse weights: D is (n_cvar, n, w) on the neighbour-list slots and
            # the edge forms sum over the slot axis of their (n, w) values.
            W = self.weights
            values = W.values if isinstance(W, EllWeights) else W
            c = self.coupling(D, current, values, params)
        else:
            c = self.coupling.uniform(D, current, self.weights, params)
        return self.dfun(X, c, params)


class SlotDelays(eqx.Module):
    """Per-edge grid delays of sparse weights, on their neighbour-list slots.

    ``steps (n, w)`` whole steps of delay and ``sources (n, w)`` source nodes
    (``EllWeights.indices``): a read gathers ``n * w`` values, not ``n * n``.
    """

    steps: jax.Array
    sources: jax.Array


class RingStep(eqx.Module):
    """``(X, buf, t, params) -> (X_next, buf_next)``: one step on the ring buffer.

    Args:
        field: ``field(X, D, params) -> dX`` (pytree).
        dt: step (model time units).
        delay: steps of delay. Grid mode: an int (uniform) or an integer
            ``(n, n)`` array (per edge). Interpolated: a float >= 1 or a real
            ``(n, n)`` array >= 1. ``None`` for an undelayed network (the
            coupling then reads each stage's own state; the buffer is still
            written so that the compatibility carry keeps its meaning).
        method: integrator name (key of ``TABLEAUS``).
        horizon: ring-buffer slots.
        cvar: rows of ``X`` stored in the buffer.
        interpolate: Hermite reads at every stage (buffer ``(H, 2, ...)``).
        edges: ``delay`` is per edge.
    """

    field: Any
    dt: Any
    # A delay is static when it is a Python int (grid mode, one delay) or None:
    # it then also fixes the horizon (a shape), so keeping it static costs
    # nothing. Otherwise (interpolated or per edge) it is a traced leaf.
    dynamic_delay: Any
    method: str = eqx.field(static=True)
    horizon: int = eqx.field(static=True)
    cvar: tuple[int, ...] = eqx.field(static=True)
    interpolate: bool = eqx.field(static=True)
    edges: bool = eqx.field(static=True)
    static_delay: int | None = eqx.field(static=True)

    def __init__(
        self,
        field: Any,
        dt: Any,
        delay: Any,
        method: str,
        horizon: int,
        cvar: tuple[int, ...],
        interpolate: bool,
        edges: bool,
    ) -> None:
        static = delay is None or (
            isinstance(delay, int) and not isinstance(delay, bool)
        )
        self.field, self.dt = field, dt
        self.static_delay = delay if static else None
        self.dynamic_delay = None if static else delay
        self.method, self.horizon, self.cvar = method, horizon, cvar
        self.interpolate, self.edges = interpolate, edges

    @property
    def delay(self) -> Any:
        """Steps of delay (see the class docstring); None when undelayed."""
        return self.static_delay if self.dynamic_delay is None else self.dynamic_delay

    def _read_grid(self, buf: Buffer, t: Step) -> Delayed | EdgeSums:
        if self.presummed:
            return EdgeSums(self.field.edge_sums(buf, t, self.delay)[0])
        if isinstance(self.delay, SlotDelays):
            return read_edges_ell(buf, t, self.delay.steps, self.delay.sources)
        if self.edges:
            return _history.read_edges(buf, t, self.delay)
        return _history.read_slot(buf, t, self.delay)

    @property
    def presummed(self) -> bool:
        """Grid reads of per-edge delays come as :class:`EdgeSums` (the field
        was built so by :func:`presum_edges`, which checks the delays)."""
        return isinstance(self.field, NetworkField) and self.field.presum

    def _read_at(
        self, buf: Buffer, t: Step, c: float, slope_now: Any = None
    ) -> Delayed:
        # -delay + c, not c - delay: the same bits, and a TPU's emulated float64
        # computes a constant minus a one-element array 1.8e-8 off (docs/method.md).
        position = -jnp.asarray(self.delay, dtype=buf.dtype) + c
        if self.edges:
            return _history.hermite_edges(buf, t, position, self.dt, slope_now)
        return _history.hermite_uniform(buf, t, position, self.dt, slope_now)

    def write_slots(self, t: Step) -> tuple[tuple[Int[Array, ""], int | None], ...]:
        """``(slot, part)`` of each buffer write of step ``t``, as in :meth:`advance`.

        ``part`` is None for a grid buffer, else 1 (derivative) or 0 (value).
        """
        value = (_history.value_slot(t, self.horizon), 0 if self.interpolate else None)
        if self.interpolate and self.delay is not None:
            return ((_history.slope_slot(t, self.horizon), 1), value)
        return (value,)

    def advance(
        self, X: State, buf: Buffer, t: Step, params: Any, delayed: Any = None
    ) -> tuple[State, tuple[Float[Array, "n_cvar n"], ...]]:
        """``(X_next, writes)``: the new state and the values :meth:`write_slots`
        places in the buffer (the buffer itself is only read). ``delayed``
        replaces the grid read of the buffer when given."""
        tableau = TABLEAUS[self.method]
        if self.delay is None:
            # Undelayed network: the coupling sees each stage's own state.
            def f(Y, _i):
                return self.field(Y, _cvar_rows(Y, self.cvar), params)

        elif not self.interpolate:
            # Held over the step: first order.
            D = self._read_grid(buf, t) if delayed is None else delayed

            def f(Y, _i):
                return self.field(Y, D, params)

        else:
            return self._interpolated(tableau, X, buf, t, params)
        X_next = rk_stage_update(tableau, f, X, self.dt)
        return X_next, (_cvar_rows(X_next, self.cvar),)

    def _interpolated(self, tableau, X, buf, t, params):
        # Stage 0 sits at time t*dt: its slope is x'(t), which later stages
        # read at the right end of their Hermite bracket (slope_now), before
        # it is stored in the buffer.
        k0 = self.field(X, self._read_at(buf, t, tableau.c[0]), params)
        slope = _cvar_rows(k0, self.cvar)
        reads: dict[float, Any] = {}

        def f(Y, i):
            if i == 0:
                return k0
            c = tableau.c[i]
            if c not in reads:  # stages sharing a time share one read
                reads[c] = self._read_at(buf, t, c, slope)
            return self.field(Y, reads[c], params)

        X_next = rk_stage_update(tableau, f, X, self.dt)
        return X_next, (slope, _cvar_rows(X_next, self.cvar))

    def __call__(
        self, X: State, buf: Buffer, t: Step, params: Any
    ) -> tuple[State, Buffer]:
        X_next, writes = self.advance(X, buf, t, params)
        for (slot, part), value in zip(self.write_slots(t), writes, strict=True):
            buf = _history.put(buf, slot, part, value)
        return X_next, buf


class CarryStep(eqx.Module):
    """The compatibility step ``step(carry, _) -> (new_carry, new_state)``.

    ``carry = (state (n_sv, n), buf, t (int32 step counter), params)``; the
    returned ``new_state`` is the new present state.
    """

    ring: RingStep

    # jax.lax.scan(step, ...) hashes its function; the default hash of an
    # equinox module hashes its array leaves, which fails. Identity is enough.
    __hash__ = object.__hash__

    @property
    def horizon(self) -> int:
        return self.ring.horizon

    def __call__(self, carry, _=None):
        X, buf, t, params = carry
        X_next, buf_next = self.ring(X, buf, t, params)
        return (X_next, buf_next, t + 1, params), X_next


class FlatStep(AbstractStep):
    """A carry step seen by the Benettin kernel: flat phase point -> flat point.

    The phase point is ``concat(state.ravel(), buf.ravel())`` (Farmer 1982: the
    discretised history is part of the phase space) and the kernel's step
    counter is the ring-buffer index ``t``. For the steps built by this
    package (:class:`CarryStep`) a step rewrites only the state and one or two
    buffer slots, so only those rows of the flat point and of the tangent
    frame are written (one in-place scatter) instead of rebuilding both: the
    per-step cost does not grow with the buffer length. Any other carry step
    goes through the generic split / step / concatenate path.
    """

    uses_step_index: ClassVar[bool] = True

    step: Any
    params: Any
    state_shape: tuple[int, ...] = eqx.field(static=True, converter=tuple)
    buf_shape: tuple[int, ...] = eqx.field(static=True, converter=tuple)

    @property
    def n_state(self) -> int:
        return _size(self.state_shape)

    def split(self, z: Float[Array, " d"]) -> tuple[State, Buffer]:
        n = self.n_state
        return z[:n].reshape(self.state_shape), z[n:].reshape(self.buf_shape)

    def _ring(self) -> RingStep | None:
        return self.step.ring if isinstance(self.step, CarryStep) else None

    def _advance(self, X, buf, t):
        carry, _ = self.step((X, buf, t, self.params), None)
        X_next, buf_next = carry[0], carry[1]
        _check_carry(X_next, X, "state")
        _check_carry(buf_next, buf, "buffer")
        return X_next, buf_next

    def _rows(self, ring: RingStep, t, writes):
        """Flat indices of the present state and of the buffer slots written."""
        n = self.n_state
        rows = [jnp.arange(n, dtype=jnp.int32)]
        for (slot, part), w in zip(ring.write_slots(t), writes, strict=True):
            start = n + _history.flat_offset(self.buf_shape, slot, part)
            rows.append(start + jnp.arange(w.size, dtype=jnp.int32))
        return jnp.concatenate(rows)

    def __call__(self, z: Float[Array, " d"], t: Step) -> Float[Array, " d"]:
        ring = self._ring()
        X, buf = self.split(z)
        if ring is None:
            X_next, buf_next = self._advance(X, buf, t)
            return jnp.concatenate([X_next.ravel(), buf_next.ravel()]).astype(z.dtype)
        X_next, writes = ring.advance(X, buf, t, self.params)
        return _put_rows(z, self._rows(ring, t, writes), (X_next, *writes))

    def tangent_step(
        self, z: Float[Array, " d"], Y: Float[Array, "d k"], t: Step
    ) -> tuple[Float[Array, " d"], Float[Array, "d k"]]:
        """``(z_next, J Y)`` for the frame ``Y (d, k)``: ``jax.jvp`` batched by vmap.

        The tangents enter the structured step as ``(state, buf)`` with the
        batch axis last, so the frame is never transposed; with a ring step
        only the rows that change are written back.
        """
        k = Y.shape[1]
        n = self.n_state
        X, buf = self.split(z)
        dX = Y[:n].reshape(self.state_shape + (k,))
        dB = Y[n:].reshape(self.buf_shape + (k,))
        ring = self._ring()
        if ring is not None and ring.presummed:
            # All k tangents of the delayed edge sums come from one gather; the
            # step is then differentiated in (state, sums).
            sums, d_sums = ring.field.edge_sums(buf, t, ring.delay, dB)

            def summed(x, s):
                return ring.advance(x, buf, t, self.params, EdgeSums(s))

            def one(vx, vs):
                return jax.jvp(summed, (X, sums), (vx, vs))

            tangents = (dX, d_sums)
        else:
            if ring is None:
                move = self._advance
            else:

                def move(x, b, t):
                    return ring.advance(x, b, t, self.params)

            def one(vx, vb):
                return jax.jvp(lambda x, b: move(x, b, t), (X, buf), (vx, vb))

            tangents = (dX, dB)
        out, d_out = jax.vmap(one, in_axes=(-1, -1), out_axes=(None, -1))(*tangents)
        if ring is None:
            (X1, buf1), (dX1, dB1) = out, d_out
            z1 = jnp.concatenate([X1.ravel(), buf1.ravel()]).astype(z.dtype)
            Y1 = jnp.concatenate([dX1.reshape(n, k), dB1.reshape(-1, k)], axis=0)
            return z1, Y1.astype(Y.dtype)
        (X1, writes), (dX1, d_writes) = out, d_out
        rows = self._rows(ring, t, writes)
        return _put_rows(z, rows, (X1, *writes)), _put_rows(Y, rows, (dX1, *d_writes))

    def tangent(
        self, z: Float[Array, " d"], Y: Float[Array, "d k"], step: Step
    ) -> tuple[Float[Array, " d"], Float[Array, "d k"]]:
        """The engine's tangent step: :meth:`tangent_step`."""
        return self.tangent_step(z, Y, step)


def _put_rows(target, rows, parts):
    """``target[rows] = concat(parts)`` along axis 0; ``target`` is (d,) or (d, k).

    One scatter with unique indices: XLA updates the loop-carried phase point
    and frame in place, where two slice updates made it copy the whole frame
    every step.
    """
    tail = target.shape[1:]
    values = jnp.concatenate([jnp.reshape(p, (-1, *tail)) for p in parts])
    return target.at[rows].set(
        values.astype(target.dtype), unique_indices=True, mode="promise_in_bounds"
    )


def _size(shape: tuple[int, ...]) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def _check_carry(new, old, what: str) -> None:
    # Trace time only: a step that changes shapes would otherwise fail deep in
    # the kernel with a reshape error.
    if jnp.shape(new) != old.shape:
        raise ValueError(
            f"the DDE step returned a {what} of shape {jnp.shape(new)}, but the "
            f"carry holds shape {old.shape}; step(carry, _) must return "
            "((state, buf, t, params), state) with unchanged shapes"
        )
