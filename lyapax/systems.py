"""Reference systems with known Lyapunov properties.

Flows return a vector field ``rhs(x)`` (use :func:`lyapax.core.ode_problem`);
maps return a step ``x -> x_next`` (use ``dt=1.0``). Parameters are carried as
pytree leaves (:class:`lyapax._engine.tree.Bound`), so the same builder with new numbers
reuses compiled programs and can be differentiated with respect to them.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from lyapax._engine.benettin import placement
from lyapax._engine.precision import float_cos, float_power, float_sin
from lyapax._engine.problem import ODEProblem
from lyapax._engine.tree import Bound
from lyapax._engine.validate import float_params
from lyapax._internal.sparse import check_dense_fits
from lyapax.hamiltonian.problem import SeparableHamiltonian
from lyapax.network import Network, network_problem
from lyapax.network.coupling import kuramoto_coupling
from lyapax.simulator import ModelSpec, Parameter, StateVar, build_jax_dfun

__all__ = [
    "linear_system",
    "logistic_map",
    "tent_map",
    "henon_map",
    "lorenz",
    "rossler",
    "lorenz96",
    "double_gyre",
    "kuramoto_model",
    "kuramoto_network",
    "mackey_glass",
    "linear_scalar_dde",
    "henon_heiles",
    "fput_beta",
    "n_body",
]


def _linear_rhs(x, p):
    return p["A"] @ x


def linear_system(A: Any) -> Bound:
    """Vector field ``x -> A x`` for a square ``A (d, d)``; exponents = Re eig(A).

    Raises:
        ValueError: ``A`` is not a square 2-D array.
    """
    A = jnp.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square (d, d) matrix; got shape {A.shape}")
    return Bound(_linear_rhs, {"A": A})


# Written "-x + 1.0", not "1.0 - x" (the same bits on a CPU): a TPU's
# emulated float64 computes a constant minus a one-element array 1.8e-8 off,
# and the negation's form was measured exact there (docs/method.md,
# "Precision").
def _logistic(x, p):
    return p["r"] * x * (-x + 1.0)


def logistic_map(r: float = 4.0) -> Bound:
    """Map ``x -> r x (1 - x)`` on ``(1,)`` states; exponent ln 2 at r = 4."""
    return Bound(_logistic, float_params(dict(r=r)))


def _tent(x, p):
    return jnp.where(x < 0.5, 2.0 * x, 2.0 * (-x + 1.0))  # see _logistic


def tent_map() -> Bound:
    """Map ``x -> 2 min(x, 1 - x)`` on ``(1,)`` states; exponent exactly ln 2."""
    return Bound(_tent, {})


def _henon(x, p):  # "-(...) + 1.0": see _logistic
    return jnp.stack([-(p["a"] * x[0] ** 2) + 1.0 + x[1], p["b"] * x[0]])


def henon_map(a: float = 1.4, b: float = 0.3) -> Bound:
    """Hénon map on ``(2,)`` states; exponents sum to ln|b|."""
    return Bound(_henon, float_params(dict(a=a, b=b)))


def _lorenz(x, p):
    return jnp.stack(
        [
            p["sigma"] * (x[1] - x[0]),
            x[0] * (p["rho"] - x[2]) - x[1],
            x[0] * x[1] - p["beta"] * x[2],
        ]
    )


def lorenz(sigma: float = 10.0, rho: float = 28.0, beta: float = 8.0 / 3.0) -> Bound:
    """Lorenz (1963) field; exponents sum to -(sigma + 1 + beta)."""
    return Bound(_lorenz, float_params(dict(sigma=sigma, rho=rho, beta=beta)))


def _rossler(x, p):
    return jnp.stack(
        [
            -x[1] - x[2],
            x[0] + p["a"] * x[1],
            p["b"] + x[2] * (x[0] - p["c"]),
        ]
    )


def rossler(a: float = 0.2, b: float = 0.2, c: float = 5.7) -> Bound:
    """Rössler (1976) field; exponents sum to a - c + <x> (time average)."""
    return Bound(_rossler, float_params(dict(a=a, b=b, c=c)))


def _lorenz96(x, p):
    return (jnp.roll(x, -1) - jnp.roll(x, 2)) * jnp.roll(x, 1) - x + p["F"]


def lorenz96(F: float = 8.0) -> Bound:
    """Lorenz-96 field for any N >= 4 (N = state size); exponents sum to -N."""
    return Bound(_lorenz96, float_params(dict(F=F)))


def _double_gyre(t, x, p):
    # float_sin/float_cos: jnp.sin/jnp.cos but on a TPU in float64, whose
    # own are float32-accurate for the scalars here.
    s = p["eps"] * float_sin(p["omega"] * t)
    f = s * x[0] ** 2 + (-(2.0 * s) + 1.0) * x[0]  # see _logistic
    dfdx = 2.0 * s * x[0] + 1.0 - 2.0 * s
    u = -jnp.pi * p["A"] * float_sin(jnp.pi * f) * float_cos(jnp.pi * x[1])
    v = jnp.pi * p["A"] * float_cos(jnp.pi * f) * float_sin(jnp.pi * x[1]) * dfdx
    return jnp.stack([u, v])


def double_gyre(
    A: float = 0.1, eps: float = 0.25, omega: float = 0.2 * math.pi
) -> Bound:
    """Time-dependent double gyre (Shadden, Lekien & Marsden 2005) ``rhs(t, x)``
    on ``(2,)`` states in ``[0, 2] x [0, 1]``: stream function ``A sin(pi f)
    sin(pi y)``, ``f = a(t) x^2 + b(t) x``, ``a = eps sin(omega t)``, ``b = 1 -
    2a``. Incompressible; with ``eps = 0`` the saddles ``(1, 0)``, ``(1, 1)``
    stretch at the rate ``pi^2 A`` and the centre ``(0.5, 0.5)`` rotates. Use
    with ``time_dependent=True``.
    """
    return Bound(_double_gyre, float_params(dict(A=A, eps=eps, omega=omega)))


def kuramoto_model() -> ModelSpec:
    """One Kuramoto phase oscillator as a :class:`~lyapax.simulator.ModelSpec`.

    State ``theta`` (coupled), parameter ``omega`` (default 0), equation
    ``dtheta/dt = omega + c``; with :func:`lyapax.coupling.kuramoto_coupling`
    as ``c`` this is the Kuramoto(-Sakaguchi) network.
    """
    return ModelSpec(
        name="kuramoto",
        state_variables=(StateVar("theta", default_init=0.0),),
        parameters=(Parameter("omega", 0.0),),
        cvar=("theta",),
        dfun_str={"theta": "omega + c"},
    )


#: All-to-all weights of at most this many entries are kept (8 MiB in float64).
_KEPT_WEIGHTS = 1 << 20


def _all_to_all(n: int, dtype: np.dtype, cvar_indices: tuple[int, ...]) -> Network:
    """The network of ``ones - eye`` weights of shape ``(n, n)``, built on the
    host and moved once (eager ``jnp.ones - jnp.eye`` cost 0.34 ms at N = 20,
    a quarter of a warm run); small ones are kept, so a problem rebuilt with
    new numbers reuses them (arrays and networks are immutable; building the
    network again cost ~25 us)."""
    if n * n > _KEPT_WEIGHTS:
        return Network(_ones_minus_eye(n, dtype), cvar_indices)
    return _kept_all_to_all(n, dtype, cvar_indices, placement())


def _ones_minus_eye(n: int, dtype: np.dtype) -> jax.Array:
    host = np.ones((n, n), dtype=dtype)
    np.fill_diagonal(host, 0.0)
    return jnp.asarray(host)


@functools.lru_cache(maxsize=4)
def _kept_all_to_all(
    n: int, dtype: np.dtype, cvar_indices: tuple[int, ...], where: Any
) -> Network:
    del where  # part of the key only: the array lives on that device
    return Network(_ones_minus_eye(n, dtype), cvar_indices)


def _even_phases(n: int, dtype: np.dtype) -> jax.Array:
    """``n`` phases evenly spaced on ``[0, 2 pi)``, kept per size, dtype and
    device as the all-to-all weights are (an eager ``jnp.linspace`` and its
    first host read cost ~65 us at N = 20, a quarter of a rebuilt problem)."""
    return _kept_phases(n, dtype, placement())


@functools.lru_cache(maxsize=4)
def _kept_phases(n: int, dtype: np.dtype, where: Any) -> jax.Array:
    del where  # part of the key only: the array lives on that device
    return jnp.linspace(0.0, 2 * jnp.pi, n, endpoint=False, dtype=dtype)


def _phase_coupling(alpha: Any) -> Any:
    """``kuramoto_coupling(alpha)``, kept for a Python number (modules are
    immutable; building one per rebuilt problem cost ~14 us at N = 20)."""
    if isinstance(alpha, int | float) and not isinstance(alpha, bool):
        # The hex form tells -0.0 from 0.0, which hash alike.
        return _kept_coupling(float(alpha).hex())
    return kuramoto_coupling(alpha=alpha)


@functools.lru_cache(maxsize=16)
def _kept_coupling(alpha: str) -> Any:
    return kuramoto_coupling(alpha=float.fromhex(alpha))


@functools.cache
def _kuramoto_spec() -> ModelSpec:
    # One spec for the networks built here: parsing its equation again for
    # every rebuilt problem cost ~20 us, and equal specs share programs anyway.
    return kuramoto_model()


def kuramoto_network(
    weights: Any,
    omega: Any = 0.0,
    K: float = 1.0,
    alpha: float = 0.0,
    theta0: Any = None,
    dt: float = 0.01,
    integrator: str = "heun",
) -> ODEProblem:
    """Kuramoto(-Sakaguchi) network problem, ready for ``lyapunov_spectrum``.

    ``dtheta_i/dt = omega_i + (K / N) sum_j w_ij sin(theta_j - theta_i + alpha)``
    with N the node count (see :func:`lyapax.coupling.kuramoto_coupling`),
    built the way a user builds a network: :func:`kuramoto_model` ->
    ``build_jax_dfun`` -> ``Network`` -> ``network_problem``.

    Args:
        weights: ``(N, N)`` weights ``[target, source]`` (dense, BCOO or
            ``scipy.sparse``; sparse ones become a neighbour list, see
            :class:`lyapax.network.Network`), or an int ``N`` for all-to-all
            coupling without self-loops (ones - eye, dense).
        omega: natural frequencies, scalar or ``(N,)`` (rad per time unit).
        K: coupling strength (the coupling's ``G``).
        alpha: phase lag (rad).
        theta0: initial phases ``(N,)``; default evenly spaced on [0, 2 pi).
        dt: time step. integrator: network integrator name (default Heun).

    Returns:
        :class:`lyapax.core.ODEProblem` whose state is the ``N`` phases. In
        sync with identical ``omega`` and all-to-all weights its exponents are
        ``{0, -K (N - 1 times)}``.

    Raises:
        MemoryError: an int ``N`` whose dense ``(N, N)`` weights (two copies
            while they are built) cannot fit in this machine's memory.
    """
    dtype = np.dtype(jnp.result_type(float))
    model = _kuramoto_spec()
    if isinstance(weights, int) and not isinstance(weights, bool):
        check_dense_fits(
            f"all-to-all weights for N={weights} (dense ({weights}, {weights}))",
            2 * weights * weights * dtype.itemsize,
            "pass sparse weights (BCOO or scipy.sparse) for large networks",
        )
        network = _all_to_all(weights, dtype, model.cvar_indices)
    else:
        network = Network(weights, model.cvar_indices)
    n = network.n_nodes
    if theta0 is None:
        theta0 = _even_phases(n, dtype)
    params = float_params(dict(omega=omega, G=K))
    return network_problem(
        build_jax_dfun(model),
        network,
        _phase_coupling(alpha),
        params,
        theta0,
        dt,
        integrator,
    )


def _mackey_glass(x, x_delayed, p):
    # |x|**n keeps a float exponent defined; the model lives on x > 0.
    xd = x_delayed
    return p["beta"] * xd / (1.0 + float_power(jnp.abs(xd), p["n"])) - p["gamma"] * x


def mackey_glass(beta: float = 0.2, gamma: float = 0.1, n: float = 10.0) -> Bound:
    """Mackey-Glass (1977) delayed field ``rhs(x_now, x_delayed)`` on ``(1,)`` states.

    ``dx/dt = beta x(t - tau) / (1 + x(t - tau)^n) - gamma x(t)``, for ``x > 0``;
    use with :func:`lyapax.dde.dde_problem`. At ``tau = 17`` (the usual
    benchmark) it is chaotic with one small positive exponent, one near zero and
    a Kaplan-Yorke dimension a little above 2 (Farmer 1982).
    """
    return Bound(_mackey_glass, float_params(dict(beta=beta, gamma=gamma, n=n)))


def _linear_scalar_dde(x, x_delayed, p):
    return -p["a"] * x_delayed


def linear_scalar_dde(a: float = 1.0) -> Bound:
    """Delayed field ``rhs(x_now, x_delayed) = -a x(t - tau)``.

    Its leading exponent is ``Re W0(-a tau) / tau`` (principal Lambert W branch),
    the rightmost root of ``lambda = -a exp(-lambda tau)``.
    """
    return Bound(_linear_scalar_dde, float_params(dict(a=a)))


# --- separable Hamiltonians (use lyapax.hamiltonian_problem) -----------------
def _unit_mass_grad_t(p, _params):
    return p


def _unit_mass_kinetic(p):
    return 0.5 * jnp.sum(p * p)


def _henon_heiles_grad_v(q, _params):
    x, y = q[0], q[1]
    return jnp.stack([x + 2.0 * x * y, y + x * x - y * y])


def _henon_heiles_h(q, p, _params):
    x, y = q[0], q[1]
    return _unit_mass_kinetic(p) + 0.5 * (x * x + y * y) + x * x * y - y**3 / 3.0


def henon_heiles() -> SeparableHamiltonian:
    """Hénon–Heiles: ``H = (p1² + p2²)/2 + (q1² + q2²)/2 + q1² q2 - q2³/3``
    on ``q, p (2,)``; bounded motion for ``E < 1/6``, a chaotic sea that fills
    much of the energy surface at ``E = 1/8``."""
    return SeparableHamiltonian(
        Bound(_unit_mass_grad_t, {}),
        Bound(_henon_heiles_grad_v, {}),
        Bound(_henon_heiles_h, {}),
    )


def _fput_stretch(q):
    # Bond stretches of a chain with fixed ends q_0 = q_{n+1} = 0: (n + 1,).
    zero = jnp.zeros((1,), q.dtype)
    return jnp.diff(jnp.concatenate([zero, q, zero]))


def _fput_grad_v(q, params):
    s = _fput_stretch(q)
    force = s + params["beta"] * s**3  # dV/ds of each bond
    return force[:-1] - force[1:]


def _fput_h(q, p, params):
    s = _fput_stretch(q)
    bonds = 0.5 * s * s + 0.25 * params["beta"] * s**4
    return _unit_mass_kinetic(p) + jnp.sum(bonds)


def fput_beta(n: int, beta: float = 1.0) -> SeparableHamiltonian:
    """Fermi–Pasta–Ulam–Tsingou β chain of ``n`` unit masses with fixed ends:
    ``H = sum p_j²/2 + sum_{j=0}^{n} [(q_{j+1} - q_j)²/2 + β (q_{j+1} - q_j)⁴/4]``,
    ``q_0 = q_{n+1} = 0``; ``q, p (n,)``.

    Raises:
        ValueError: ``n`` < 1.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1 (moving masses); got n={n!r}")
    params = float_params(dict(beta=beta))
    return SeparableHamiltonian(
        Bound(_unit_mass_grad_t, {}),
        Bound(_fput_grad_v, params),
        Bound(_fput_h, params),
    )


def _n_body_grad_t(p, params):
    return p / params["mass_per_coordinate"]


def _n_body_pairs(q, params):
    """``(displacements (N, N, dim), 1/r (N, N))`` with 0 on the diagonal."""
    x = q.reshape(params["masses"].shape[0], -1)
    diff = x[:, None, :] - x[None, :, :]
    eye = jnp.eye(x.shape[0], dtype=q.dtype)
    # r² + eye keeps the diagonal away from 0, where sqrt has no derivative.
    r2 = jnp.sum(diff * diff, axis=-1) + params["softening"] ** 2 + eye
    return diff, jnp.where(eye > 0, 0.0, jax.lax.rsqrt(r2))


def _n_body_grad_v(q, params):
    m = params["masses"]
    diff, inv_r = _n_body_pairs(q, params)
    weight = params["G"] * m[:, None] * m[None, :] * inv_r**3
    return jnp.sum(weight[..., None] * diff, axis=1).reshape(q.shape)


def _n_body_h(q, p, params):
    m = params["masses"]
    _, inv_r = _n_body_pairs(q, params)
    kinetic = 0.5 * jnp.sum(p * p / params["mass_per_coordinate"])
    return kinetic - 0.5 * params["G"] * jnp.sum(m[:, None] * m[None, :] * inv_r)


def n_body(
    masses: Any, G: float = 1.0, softening: float = 0.0, dim: int = 3
) -> SeparableHamiltonian:
    """Newtonian gravity of ``N`` point masses in ``dim`` dimensions:
    ``H = sum |p_i|²/(2 m_i) - G sum_{i<j} m_i m_j / sqrt(|x_i - x_j|² + ε²)``.

    ``q`` holds the positions body after body (``x_1, y_1, z_1, x_2, ...``:
    ``(N dim,)``), ``p`` the momenta ``m_i v_i`` in the same order; ``ε`` is
    the Plummer ``softening`` length (0: none). Units: those of ``G``.

    Raises:
        ValueError: ``masses`` not a 1-D array of >= 2 positive numbers;
            ``dim`` not 1, 2 or 3; ``softening`` < 0.
    """
    m = np.asarray(masses, dtype=float)
    if m.ndim != 1 or m.shape[0] < 2 or not (np.isfinite(m) & (m > 0)).all():
        raise ValueError(
            f"masses must be a 1-D array of at least 2 positive numbers; got {masses!r}"
        )
    if dim not in (1, 2, 3):
        raise ValueError(f"dim must be 1, 2 or 3; got dim={dim!r}")
    if not float(softening) >= 0:
        raise ValueError(f"softening must be >= 0; got softening={softening!r}")
    masses_j = jnp.asarray(m)
    params = {
        "masses": masses_j,
        "mass_per_coordinate": jnp.repeat(masses_j, dim),
        "G": float(G),
        "softening": float(softening),
    }
    return SeparableHamiltonian(
        Bound(_n_body_grad_t, params),
        Bound(_n_body_grad_v, params),
        Bound(_n_body_h, params),
    )
