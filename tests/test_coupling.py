"""Couplings: definitions, fused derivatives, and the one-product-per-stage cost."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import OPS, tol

from lyapax.coupling import (
    coupling_jvp,
    kuramoto_coupling,
    linear_coupling,
    sigmoidal_coupling,
)
from lyapax.network import Network, network_problem

N = 7
RNG = np.random.default_rng(3)
W = jnp.asarray(RNG.uniform(0.0, 1.0, (N, N)) * (RNG.uniform(size=(N, N)) < 0.6))
X = jnp.asarray(RNG.normal(size=(2, N)))  # two coupled variables
DX = jnp.asarray(RNG.normal(size=(2, N, 4)))  # k = 4 tangent directions
PARAMS = {"G": 1.7}


def naive_kuramoto(theta, weights, G, alpha):
    """The definition, with the (n, n) phase-difference array on purpose."""
    diff = theta[:, None, :] - theta[:, :, None]  # [cvar, i, j] = th_j - th_i
    return G / weights.shape[0] * jnp.sum(weights * jnp.sin(diff + alpha), axis=-1)


def test_kuramoto_matches_definition():
    for alpha in (0.0, 0.4):
        got = kuramoto_coupling(alpha=alpha)(X, W, PARAMS)
        want = naive_kuramoto(X, W, 1.7, alpha)
        np.testing.assert_allclose(got, want, rtol=0, atol=tol(1e-13, OPS))


def test_linear_and_sigmoidal_match_definition():
    u = (W @ X.T).T
    got = linear_coupling(a=0.5, b=0.1)(X, W, PARAMS)
    np.testing.assert_allclose(got, 1.7 * 0.5 * u + 0.1, atol=tol(1e-13, OPS))
    sig = sigmoidal_coupling(a=2.0, b=-0.3, midpoint=0.4, sigma=0.7)(X, W, PARAMS)
    want = 1.7 * 2.0 / (1.0 + jnp.exp(-(u - 0.4) / 0.7)) - 0.3
    np.testing.assert_allclose(sig, want, atol=tol(1e-13, OPS))


def test_G_default_used_without_G():
    got = linear_coupling(G_default=3.0)(X, W, {})
    np.testing.assert_allclose(got, 3.0 * (W @ X.T).T, atol=tol(1e-13, OPS))
    np.testing.assert_allclose(
        kuramoto_coupling(G_default=2.0)(X, W, None),
        naive_kuramoto(X, W, 2.0, 0.0),
        atol=tol(1e-13, OPS),
    )


@pytest.mark.parametrize(
    "coupling",
    [
        linear_coupling(a=0.5, b=0.1),
        sigmoidal_coupling(a=2.0, b=-0.3, midpoint=0.4, sigma=0.7),
        kuramoto_coupling(alpha=0.3),
    ],
    ids=["linear", "sigmoidal", "kuramoto"],
)
def test_fused_jvp_equals_jax_jvp(coupling):
    c, dc = coupling.batched_jvp(X, DX, W, PARAMS)

    def one(v):
        return jax.jvp(lambda y: coupling(y, W, PARAMS), (X,), (v,))

    c_ref, dc_ref = jax.vmap(one, in_axes=2, out_axes=(None, 2))(DX)
    np.testing.assert_allclose(c, c_ref, atol=tol(1e-13, OPS))
    np.testing.assert_allclose(dc, dc_ref, atol=tol(1e-12))


def test_coupling_jvp_falls_back_for_plain_callables():
    def user(x, weights, params):
        return params["G"] * (weights @ x.T).T

    c, dc = coupling_jvp(user, X, DX, W, PARAMS)
    c_ref, dc_ref = linear_coupling().batched_jvp(X, DX, W, PARAMS)
    np.testing.assert_allclose(c, c_ref, atol=tol(1e-13, OPS))
    np.testing.assert_allclose(dc, dc_ref, atol=tol(1e-12))


def test_couplings_are_pytrees_with_number_leaves():
    leaves = jax.tree.leaves(kuramoto_coupling(alpha=1, G_default=2))
    assert leaves == [1.0, 2.0] and all(type(x) is float for x in leaves)
    rebuilt = jax.tree.map(lambda x: x * 2, sigmoidal_coupling(a=1.0))
    assert rebuilt.a == 2.0 and rebuilt.sigma == 2.0


# --- cost structure of the compiled program ----------------------------------

TRANSCENDENTAL = {"sin", "cos", "tan", "exp", "log", "tanh", "logistic", "pow"}


def _walk(jaxpr):
    """Every equation of a closed jaxpr, recursing into sub-jaxprs (scan, jit)."""
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            subs = param if isinstance(param, list | tuple) else [param]
            for sub in subs:
                inner = getattr(sub, "jaxpr", None)
                if inner is not None and hasattr(inner, "eqns"):
                    yield from _walk(inner)
                elif hasattr(sub, "eqns"):
                    yield from _walk(sub)


def _big_transcendentals(jaxpr, n):
    return [
        (eqn.primitive.name, v.aval.shape)
        for eqn in _walk(jaxpr)
        if eqn.primitive.name in TRANSCENDENTAL
        for v in eqn.outvars
        if np.prod(v.aval.shape) >= n * n
    ]


def _weight_products(jaxpr, n):
    return [
        eqn
        for eqn in _walk(jaxpr)
        if eqn.primitive.name == "dot_general"
        and any(getattr(v.aval, "shape", None) == (n, n) for v in eqn.invars)
    ]


def _kuramoto_step(n, integrator="heun", coupling=None):
    def dfun(x, c, p):
        return p["omega"] + c

    theta = jnp.linspace(0.0, 2 * jnp.pi, n, endpoint=False)
    params = {"omega": jnp.linspace(-1.0, 1.0, n), "G": 1.0}
    net = Network(jnp.ones((n, n)) - jnp.eye(n), (0,))
    coupling = kuramoto_coupling(alpha=0.2) if coupling is None else coupling
    return network_problem(dfun, net, coupling, params, theta, 1e-2, integrator)


@pytest.mark.parametrize(
    "coupling,width",
    [(kuramoto_coupling(alpha=0.2), lambda k: 2 + 2 * k), (linear_coupling(), None)],
    ids=["kuramoto", "linear"],
)
@pytest.mark.parametrize("integrator,stages", [("heun", 2), ("rk4", 4)])
def test_fused_tangent_step_is_one_product_per_stage(
    coupling, width, integrator, stages
):
    n, k = 64, 5
    problem = _kuramoto_step(n, integrator, coupling)
    Y = jnp.eye(n)[:, :k]
    jaxpr = jax.make_jaxpr(problem.step_fn.tangent_step)(problem.state0, Y)
    products = _weight_products(jaxpr.jaxpr, n)
    assert len(products) == stages
    # Each product carries the state and all k tangents: (n, n) @ (n, m).
    m = width(k) if width else 1 + k
    for eqn in products:
        assert eqn.outvars[0].aval.shape == (n, m)
    assert _big_transcendentals(jaxpr.jaxpr, n) == []


def test_no_dxd_transcendental_in_whole_run():
    """Primal and tangents of the full Benettin program, both tangent paths."""
    from lyapax.core import lyapunov_spectrum

    n = 48
    problem = _kuramoto_step(n)

    def run(x0):
        step, dt = problem.step_fn, problem.dt
        return lyapunov_spectrum(
            step, x0, dt, n_steps=10, k=5, renorm_every=5
        ).exponents

    jaxpr = jax.make_jaxpr(run)(problem.state0)
    assert _big_transcendentals(jaxpr.jaxpr, n) == []
    # The generic path (jax.jvp batched by vmap through the plain step).
    step = problem.step_fn
    Y = jnp.eye(n)[:, :5]
    generic = jax.make_jaxpr(
        lambda x, Y: jax.vmap(
            lambda v: jax.jvp(step, (x,), (v,)), in_axes=1, out_axes=(None, 1)
        )(Y)
    )(problem.state0, Y)
    assert _big_transcendentals(generic.jaxpr, n) == []
    # And the lowered program of the run says the same.
    text = jax.jit(run).lower(problem.state0).as_text()
    assert _big_hlo_transcendentals(text, n) == []


def _big_hlo_transcendentals(text, n):
    ops = ("sine", "cosine", "tan", "exponential", "log", "tanh", "logistic")
    found = []
    for line in text.splitlines():
        match = re.search(r"stablehlo\.(\w+)", line)
        if not match or match.group(1) not in ops:
            continue
        for dims in re.findall(r"tensor<((?:\d+x)+)f", line):
            if np.prod([int(d) for d in dims.rstrip("x").split("x")]) >= n * n:
                found.append(line.strip())
    return found


def test_structure_checks_catch_a_naive_coupling():
    """The two checks above do flag a coupling that forms sin(th_j - th_i)."""
    from lyapax.core import lyapunov_spectrum

    n = 16
    problem = network_problem(
        lambda x, c, p: p["omega"] + c,
        Network(jnp.ones((n, n)), (0,)),
        lambda x, w, p: naive_kuramoto(x, w, 1.0, 0.0),
        {"omega": 0.1},
        jnp.linspace(0.0, 1.0, n),
        1e-2,
    )

    def run(x0):
        step = problem.step_fn
        return lyapunov_spectrum(
            step, x0, 1e-2, n_steps=2, k=2, renorm_every=2
        ).exponents

    assert _big_transcendentals(jax.make_jaxpr(run)(problem.state0).jaxpr, n)
    assert _big_hlo_transcendentals(jax.jit(run).lower(problem.state0).as_text(), n)
