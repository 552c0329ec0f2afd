"""Synchronisation of networks of identical nodes through Laplacian eigenmodes.

* :func:`laplacian_spectrum`: eigenvalues ``gamma_k`` of ``L = D - W`` (``D``
  the in-degrees, ``W[target, source]``), dense or sparse weights.
* :func:`synchronisation`: a sampled master stability function read at
  ``alpha = sigma gamma_k``: a verdict per mode and the coupling interval in
  which every transversal mode is stable.
* :func:`transversal_exponents`: the exponents of every Laplacian mode of a
  ``network_problem`` started on its synchronous state, one ``m``-dimensional
  variational problem per mode (``O(N m)`` work per step for ``N`` modes),
  instead of the ``N m``-dimensional spectrum of the whole network.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine.precision import float_cos, float_sin
from lyapax._engine.problem import ODEProblem
from lyapax._internal.checks import as_weights
from lyapax.network._couplings import (
    KuramotoCoupling,
    LinearCoupling,
    SigmoidalCoupling,
    read_G,
)
from lyapax.network._msf import MSFResult, run_msf
from lyapax.network._step import NetworkStep, take_rows

__all__ = [
    "ModeExponents",
    "SyncReport",
    "laplacian_spectrum",
    "synchronisation",
    "transversal_exponents",
]

#: Largest node count whose Laplacian is diagonalised as a dense matrix.
MAX_DENSE_NODES = 20_000


def _dense_weights(network_or_weights: Any) -> np.ndarray:
    weights = getattr(network_or_weights, "weights", network_or_weights)
    n = int(weights.shape[0])
    if n > MAX_DENSE_NODES:
        raise ValueError(
            f"the network has {n} nodes; laplacian_spectrum diagonalises the "
            f"Laplacian densely, up to {MAX_DENSE_NODES} nodes ({n} x {n} floats "
            "would be needed)"
        )
    return np.asarray(as_weights(weights, dense=True), dtype=float)


def laplacian_spectrum(network_or_weights: Any) -> np.ndarray:
    """Eigenvalues of the Laplacian ``L = D - W`` of a network's weights.

    ``D_ii = sum_j W_ij`` (in-degree; ``W[target, source]``). Symmetric weights
    give real eigenvalues (``eigvalsh``), others complex ones; both sorted by
    real part, then imaginary part (``gamma_0 = 0``, the synchronous mode).

    Args:
        network_or_weights: a :class:`lyapax.network.Network` or ``(n, n)``
            weights (dense, BCOO or ``scipy.sparse``).

    Returns:
        ``(n,)`` NumPy array (float, or complex for directed weights).

    Raises:
        ValueError: not square, or more than ``MAX_DENSE_NODES`` nodes.
    """
    W = _dense_weights(network_or_weights)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        raise ValueError(f"weights must be square (n, n); got shape {W.shape}")
    L = np.diag(W.sum(axis=1)) - W
    if np.allclose(W, W.T, rtol=0.0, atol=1e-12 * max(1.0, np.abs(W).max())):
        return np.linalg.eigvalsh(0.5 * (L + L.T))
    gammas = np.linalg.eigvals(L)
    return gammas[np.lexsort((gammas.imag, gammas.real))]


class SyncReport(NamedTuple):
    """Stability of the synchronous state of a network, mode by mode.

    Attributes:
        gammas: ``(n,)`` Laplacian eigenvalues (:func:`laplacian_spectrum`).
        sigma: the coupling strength asked about (None: only the interval).
        exponent: ``(n,)`` ``Lambda(sigma gamma_k)`` interpolated from the
            sampled MSF (NaN outside its ``alpha`` range or without ``sigma``).
        stable: ``(n,)`` bool, ``exponent < 0`` (mode 0 is the synchronous
            manifold itself and is reported, not judged).
        synchronised: every transversal mode stable at ``sigma`` (None
            without ``sigma``, or when a mode falls outside the sampled MSF).
        sigma_intervals: list of ``(low, high)``: couplings for which every
            transversal mode lies in one interval where the MSF is negative.
        open_ended: per interval, True when its upper end is the end of the
            ``alpha`` grid (the MSF was not sampled beyond it).
    """

    gammas: np.ndarray
    sigma: float | None
    exponent: np.ndarray
    stable: np.ndarray
    synchronised: bool | None
    sigma_intervals: list[tuple[float, float]]
    open_ended: list[bool]

    @property
    def sigma_interval(self) -> tuple[float, float] | None:
        """The first synchronisable interval, or None."""
        return self.sigma_intervals[0] if self.sigma_intervals else None


def negative_intervals(alphas: np.ndarray, values: np.ndarray):
    """``[(low, high, open_end)]`` where the sampled curve is negative, ends
    found by linear interpolation between samples."""
    out = []
    neg = values < 0
    i, n = 0, len(alphas)
    while i < n:
        if not neg[i]:
            i += 1
            continue
        j = i
        while j + 1 < n and neg[j + 1]:
            j += 1
        lo = alphas[i]
        if i > 0:
            a0, a1, v0, v1 = alphas[i - 1], alphas[i], values[i - 1], values[i]
            lo = a0 + (a1 - a0) * v0 / (v0 - v1)
        hi, open_end = alphas[j], j == n - 1
        if not open_end:
            a0, a1, v0, v1 = alphas[j], alphas[j + 1], values[j], values[j + 1]
            hi = a0 + (a1 - a0) * v0 / (v0 - v1)
        out.append((float(lo), float(hi), bool(open_end)))
        i = j + 1
    return out


def synchronisation(
    msf: MSFResult, network: Any, sigma: float | None = None
) -> SyncReport:
    """Read a sampled master stability function on a network's Laplacian.

    Args:
        msf: :class:`MSFResult` on real ``alphas`` (sorted here), e.g. from
            ``master_stability_function(..., alphas=np.linspace(0, 10, 200))``.
        network: :class:`lyapax.network.Network`, ``(n, n)`` weights, or the
            ``(n,)`` Laplacian eigenvalues from :func:`laplacian_spectrum`
            (to compute them once for many calls).
        sigma: coupling strength for the per-mode verdict (optional).

    Returns:
        :class:`SyncReport`.

    Raises:
        ValueError: complex ``alphas`` or complex Laplacian eigenvalues (for a
            directed network evaluate ``master_stability_function`` at
            ``alphas = sigma * laplacian_spectrum(network)`` instead).
    """
    alphas = np.asarray(msf.alphas)
    if np.iscomplexobj(alphas) and np.any(alphas.imag != 0):
        raise ValueError(
            "synchronisation reads an MSF sampled on real alphas; for complex "
            "alphas evaluate master_stability_function at sigma * gammas directly"
        )
    given = network if isinstance(network, np.ndarray | jax.Array) else None
    if given is not None and np.ndim(given) == 1:
        gammas = np.sort(np.asarray(given))
    else:
        gammas = laplacian_spectrum(network)
    if np.iscomplexobj(gammas):
        raise ValueError(
            "the network's Laplacian has complex eigenvalues (directed weights); "
            "call master_stability_function(..., alphas=sigma * "
            "laplacian_spectrum(network)) to evaluate its modes"
        )
    order = np.argsort(alphas.real)
    a = alphas.real[order]
    lam = np.asarray(msf.exponent)[order]
    n = gammas.shape[0]
    exponent = np.full(n, np.nan)
    stable = np.zeros(n, dtype=bool)
    synchronised = None
    if sigma is not None:
        sigma = float(sigma)
        x = sigma * gammas
        slack = 1e-9 * max(1.0, float(np.abs(a).max()))  # gamma_0 ~ -1e-16
        inside = (x >= a[0] - slack) & (x <= a[-1] + slack)
        exponent[inside] = np.interp(x[inside], a, lam)
        stable = exponent < 0
        if np.all(inside[1:]):
            synchronised = bool(np.all(stable[1:]))
    intervals, open_ended = [], []
    g_low, g_high = (gammas[1], gammas[-1]) if n > 1 else (np.inf, np.inf)
    if g_low > 1e-12 * max(1.0, abs(g_high)):
        for lo, hi, open_end in negative_intervals(a, lam):
            s_lo, s_hi = float(max(lo, 0.0) / g_low), float(hi / g_high)
            if s_hi > s_lo:
                intervals.append((s_lo, s_hi))
                open_ended.append(open_end)
    return SyncReport(
        gammas, sigma, exponent, stable, synchronised, intervals, open_ended
    )


class ModeExponents(NamedTuple):
    """Exponents of the Laplacian modes of a synchronised network.

    Attributes:
        gammas: ``(n,)`` Laplacian eigenvalues (mode 0: the synchronous one).
        exponents: ``(n, k)`` per mode, descending (mode 0: the node's own
            spectrum on the synchronisation manifold; the others are the
            transversal exponents).
        stderr: ``(n, k)`` standard errors.
        transversal_max: the largest exponent over the transversal modes
            (negative: the synchronous state is stable).
    """

    gammas: np.ndarray
    exponents: Any
    stderr: Any
    transversal_max: float


def _node_params(params: Any, n: int) -> Any:
    """Parameters of one node: per-node arrays must hold one value."""

    def one(leaf):
        arr = np.asarray(leaf) if not isinstance(leaf, jax.Array) else leaf
        if getattr(arr, "ndim", 0) >= 1 and arr.shape[-1] == n and n > 1:
            host = np.asarray(arr)
            if not np.allclose(host, host[..., :1], rtol=0.0, atol=0.0):
                raise ValueError(
                    "transversal_exponents needs identical nodes; a parameter "
                    f"differs between nodes (shape {host.shape})"
                )
            return jnp.asarray(host[..., :1])
        return leaf

    if isinstance(params, Mapping):
        return {key: one(value) for key, value in params.items()}
    return jax.tree.map(one, params)


class _NodeOfNetwork:
    """One node of a synchronised network: ``F(s)`` with the coupling of the
    synchronous state, and ``DH(s) v`` with ``alpha = gamma_k`` (see
    :func:`transversal_exponents`)."""

    def __init__(self, dfun, cvar_indices, params, coupling, n, row_sum):
        self.dfun, self.cvar, self.params = dfun, cvar_indices, params
        self.coupling_fn, self.n, self.row_sum = coupling, n, row_sum

    def _rows(self, x):
        return take_rows(x[:, None], self.cvar)[:, 0]

    def coupling(self, s):
        return synchronous_coupling(
            self.coupling_fn, self.params, self.n, self.row_sum, self._rows(s)
        )

    def node(self, s, c):
        return self.dfun(s[:, None], c[:, None], self.params)[:, 0]

    def __call__(self, s):
        return self.node(s, self.coupling(s)[0])

    def tangent(self, s, v):
        c0, q = self.coupling(s)
        return jax.jvp(lambda c: self.node(s, c), (c0,), (q * self._rows(v),))[1]


def _node_flatten(t):
    return (t.params, t.coupling_fn, t.row_sum), (t.dfun, t.cvar, t.n)


jax.tree_util.register_pytree_node(
    _NodeOfNetwork,
    _node_flatten,
    lambda aux, ch: _NodeOfNetwork(aux[0], aux[1], ch[0], ch[1], aux[2], ch[2]),
)


class _TangentOf:
    """``dh(x, v)`` = ``node.tangent(x, v)`` as a pytree."""

    def __init__(self, node: _NodeOfNetwork) -> None:
        self.node = node

    def __call__(self, x, v):
        return self.node.tangent(x, v)


jax.tree_util.register_pytree_node(
    _TangentOf, lambda t: ((t.node,), None), lambda _, c: _TangentOf(*c)
)


def synchronous_coupling(coupling: Any, params: Any, n: int, r: Any, s_cvar: Any):
    """``(c0, q)``: the coupling at the synchronous state ``s`` (coupled rows
    ``s_cvar``) of a network with row sums ``r``, and ``q`` such that a
    perturbation ``v`` along a weight eigenvector of eigenvalue ``mu`` changes
    it by ``(q (mu - r) + dc0/ds) v``, i.e. ``-gamma q v`` beyond what
    ``c0(s)`` already carries.

    Linear: ``c0 = G a r s + b``, ``q = G a``. Sigmoidal: ``c0 = G a
    sigmoid((r s - midpoint) / sigma) + b`` and ``q`` its slope in the summed
    input. Kuramoto: ``c0 = r (G / N) sin(lag)`` (constant), ``q = (G / N)
    cos(lag)``.
    """
    if isinstance(coupling, LinearCoupling):
        q = read_G(params, coupling.G_default) * coupling.a
        return q * r * s_cvar + coupling.b, q * jnp.ones_like(s_cvar)
    if isinstance(coupling, SigmoidalCoupling):
        return coupling._out(r * s_cvar, params)
    if isinstance(coupling, KuramotoCoupling):
        g = read_G(params, coupling.G_default) / n
        value = r * g * float_sin(coupling.alpha) * jnp.ones_like(s_cvar)
        return value, g * float_cos(coupling.alpha) * jnp.ones_like(s_cvar)
    raise TypeError(
        "transversal_exponents supports the built-in linear_coupling, "
        "sigmoidal_coupling and kuramoto_coupling (whose linearisation at a "
        f"synchronous state is known); got {type(coupling).__name__}. For another "
        "coupling use master_stability_function with its coupling function"
    )


def transversal_exponents(
    problem: Any,
    n_steps: int,
    *,
    k: int | None = None,
    renorm_every: int = 10,
    t_transient: float = 0.0,
    seed: int = 0,
    batch_size: int | None = None,
) -> ModeExponents:
    """Exponents of every Laplacian mode of a synchronised network problem.

    For a ``network_problem`` of identical nodes with ``linear_coupling``,
    ``sigmoidal_coupling`` or ``kuramoto_coupling`` on weights of equal row
    sums ``r`` (so that the synchronous state is invariant), started on a
    synchronous state (every node equal), a perturbation along the weight
    eigenvector of eigenvalue ``mu_k = r - gamma_k`` evolves by the node's
    variational equation with coupling ``gamma_k``. Each mode is one
    ``m``-dimensional problem along one node trajectory, run with the
    network's own integrator and ``dt`` as a master stability function at
    ``alpha = gamma_k``: the union of the modes' spectra is the spectrum of
    the whole network from that state.

    Args:
        problem: from :func:`lyapax.network.network_problem`.
        n_steps, renorm_every, t_transient, seed: as in ``lyapunov_spectrum``.
        k: exponents per mode (default: all ``n_sv`` of a node).
        batch_size: modes per call.

    Returns:
        :class:`ModeExponents`.

    Raises:
        TypeError: not a network problem, or another coupling.
        ValueError: unequal row sums, a state that is not synchronous, or
            node parameters that differ between nodes.
    """
    step = problem.step_fn if isinstance(problem, ODEProblem) else None
    if not isinstance(step, NetworkStep):
        raise TypeError(
            "transversal_exponents needs a problem from lyapax.network."
            f"network_problem; got {type(problem).__name__} with step "
            f"{type(step).__name__}"
        )
    W = _dense_weights(step.weights)
    n = W.shape[0]
    rows = W.sum(axis=1)
    if not np.allclose(rows, rows[0], rtol=1e-12, atol=1e-12):
        raise ValueError(
            "the weights' row sums (in-degrees) differ between nodes "
            f"(from {rows.min()} to {rows.max()}): the synchronous state is not "
            "invariant; normalise the rows or use equal in-degrees"
        )
    x = np.asarray(problem.state0).reshape(-1, n)
    if not np.allclose(x, x[:, :1], rtol=1e-12, atol=1e-12):
        raise ValueError(
            "problem.state0 is not synchronous: every node must start in the "
            "same state (columns of the (n_sv, n_nodes) state equal)"
        )
    # raises TypeError for a coupling whose synchronous form is not known
    synchronous_coupling(step.coupling, step.params, n, 1.0, jnp.zeros(1))
    node = _NodeOfNetwork(
        step.dfun,
        step.cvar_indices,
        _node_params(step.params, n),
        step.coupling,
        n,
        float(rows[0]),
    )
    gammas = laplacian_spectrum(W)
    m = x.shape[0]
    res = run_msf(
        node,
        _TangentOf(node),
        gammas,
        jnp.asarray(x[:, 0]),
        step.dt,
        n_steps,
        k=m if k is None else k,
        renorm_every=renorm_every,
        t_transient=t_transient,
        seed=seed,
        integrator=step.integrator,
        batch_size=batch_size,
        devices=None,
    )
    transversal = np.asarray(res.exponent)[1:]
    top = float(transversal.max()) if transversal.size else float("nan")
    return ModeExponents(gammas, res.spectrum, res.spectrum_stderr, top)
