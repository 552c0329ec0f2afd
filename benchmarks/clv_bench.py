"""Covariant Lyapunov vectors: lyapax against clvlib 0.1.5 and lyapynov 1.0.1.

Side by side in one run, on the same problems with the same step counts,
integrator (RK4) and step, QR every step:

- Lorenz-96, d = 40, all 40 vectors: 1000 transient steps, then a window of
  2000 steps whose last 1000 are the backward transient (1000 vectors);
- dense all-to-all Kuramoto network, d = 1000, k = 10: 200 steps, the last
  100 the backward transient (100 vectors).

The peers take a hand-written Jacobian of the vector field (they have no
tangent propagation of their own). Each peer runs twice: with the Jacobian a
careful user writes (Kuramoto: ``cos(tj - ti) = cos tj cos ti + sin tj sin ti``
as one rank-2 product times the weights, no ``d^2`` trig calls; Lorenz-96:
the banded Jacobian as a CSR matrix, four nonzeros per row), timed best of
``--repeats``, and with the naive one (``cos(theta[None] - theta[:, None])``;
Lorenz-96 dense), timed once. What each code computes differs: clvlib and
lyapax push the tangents through the exact RK4 tangent map (the Jacobian at
every stage), lyapynov freezes the Jacobian over each step (one per step:
cheaper, first order in the tangent map's error, see the covariance rows).
A hand-written JAX Ginelli program (one ``jit``: ``lax.scan`` forward with
``jvp``/``vmap`` tangents and QR, the engine's batched inverse of the ``R``
factors, a
backward ``lax.scan``, ``V = Q C``) is the reference for the engine's own
overhead. lyapax is timed warm (its compile time apart), every timing is
the best of ``--repeats``. Agreement: the angle between lyapax's
vector ``i`` and a peer's at the same step, median over the common steps;
covariance error: the angle between the exact RK4 tangent map of ``v_i(n)``
and ``v_i(n+1)`` along each code's own orbit. The forward pass of
``covariant_vectors`` (its segment calls, timed in a separate call) is shown
next to ``lyapunov_spectrum`` with the same arguments (the exponents alone).

``--memory`` adds the storage-mode table: peak resident memory of a fresh
process per mode (``VmHWM``), Lorenz-96 at d = 10^4 with k = 20, next to
a process that runs only ``lyapunov_spectrum``.

Install the peers into the benchmark's environment to compare
(``pip install clvlib==0.1.5 lyapynov==1.0.1``); without them their rows say
so. ``--quick`` (CI) runs small sizes.

    python benchmarks/clv_bench.py [--quick] [--repeats 3] [--memory]
        [--case l96|kuramoto|all] [--no-naive]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from typing import Any, NamedTuple

os.environ.setdefault("TQDM_DISABLE", "1")  # clvlib's progress bars

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _timing import best_interleaved  # noqa: E402

from lyapax import (  # noqa: E402
    covariant_vectors,
    lyapunov_spectrum,
    ode_problem,
    rk4_step,
)
from lyapax._engine.benettin import initial_frame  # noqa: E402
from lyapax.covariant import _run as covariant_run  # noqa: E402
from lyapax.covariant._kernels import upper_inverse  # noqa: E402
from lyapax.systems import kuramoto_network, lorenz96  # noqa: E402

DT = 0.01


def best(fn, repeats):
    """(best wall time of ``repeats`` calls, last result)."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


PEERS = ("clvlib", "lyapynov")


def peers():
    """Imported peer modules by name (None where not installed)."""
    found = {}
    try:
        from clvlib.numpy import lyap_analysis_from_ic

        found["clvlib"] = lyap_analysis_from_ic
    except ImportError:
        found["clvlib"] = None
    try:
        import lyapynov

        found["lyapynov"] = lyapynov
    except ImportError:
        found["lyapynov"] = None
    return {name: found[name] if name in PEERS else None for name in found}


def _absent(name):
    return "not installed" if name in PEERS else "not run (--peers)"


# ------------------------------------------------------------- the problems


class Field(NamedTuple):
    """A vector field for the peers: ``f`` and its Jacobians (NumPy), and
    ``rhs`` (JAX) for the covariance check and the hand-written program."""

    f: Any
    jac_best: Any
    jac_naive: Any
    rhs: Any
    best: str  # what the careful Jacobian is
    naive: str


def l96_field(F=8.0):
    def f(x):
        return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + F

    def jac_dense(x):
        d = x.size
        i = np.arange(d)
        J = -np.eye(d)
        J[i, (i + 1) % d] += x[(i - 1) % d]
        J[i, (i - 2) % d] -= x[(i - 1) % d]
        J[i, (i - 1) % d] += x[(i + 1) % d] - x[(i - 2) % d]
        return J

    banded = {}

    def jac_banded(x):
        # Row i: columns i-2, i-1, i, i+1 (mod d); the CSR pattern is fixed,
        # only its four values per row change.
        import scipy.sparse as sp

        d = x.size
        if d not in banded:
            i = np.arange(d)
            cols = np.stack([(i - 2) % d, (i - 1) % d, i, (i + 1) % d], 1)
            banded[d] = (cols.ravel(), 4 * np.arange(d + 1))
        cols, indptr = banded[d]
        xm1, xp1, xm2 = np.roll(x, 1), np.roll(x, -1), np.roll(x, 2)
        vals = np.stack([-xm1, xp1 - xm2, -np.ones(d), xm1], 1)
        return sp.csr_matrix((vals.ravel(), cols, indptr), shape=(d, d))

    return Field(f, jac_banded, jac_dense, lorenz96(F), "banded CSR J", "dense J")


def kuramoto_field(omega, K):
    n = omega.size
    W = np.ones((n, n)) - np.eye(n)
    g = K / n

    def f(theta):
        s, c = np.sin(theta), np.cos(theta)
        return omega + g * (c * (W @ s) - s * (W @ c))

    def jac_naive(theta):
        J = g * W * np.cos(theta[None, :] - theta[:, None])
        J[np.diag_indices(n)] -= J.sum(axis=1)
        return J

    gW = g * W
    diag = np.diag_indices(n)

    def jac_rank2(theta):
        # cos(tj - ti) = cos ti cos tj + sin ti sin tj: one (n, 2) x (2, n)
        # product, no n^2 trig calls.
        A = np.stack([np.cos(theta), np.sin(theta)], axis=1)
        J = gW * (A @ A.T)
        J[diag] -= J.sum(axis=1)
        return J

    Wj, omega_j = jnp.asarray(W), jnp.asarray(omega)

    def rhs(theta):
        s, c = jnp.sin(theta), jnp.cos(theta)
        return omega_j + g * (c * (Wj @ s) - s * (Wj @ c))

    return Field(f, jac_rank2, jac_naive, rhs, "rank-2 J", "naive J (n^2 cos calls)")


def case_l96(d):
    x0 = 8.0 + 0.01 * np.sin(np.arange(d))
    problem = ode_problem(lorenz96(), jnp.asarray(x0), dt=DT)
    return problem, x0, l96_field()


def case_kuramoto(d):
    omega = np.linspace(-1.0, 1.0, d)
    theta0 = np.linspace(0.0, 2 * np.pi, d, endpoint=False)
    problem = kuramoto_network(
        d,
        omega=jnp.asarray(omega),
        K=2.0,
        theta0=jnp.asarray(theta0),
        dt=DT,
        integrator="rk4",
    )
    return problem, theta0, kuramoto_field(omega, 2.0)


# ------------------------------------------------------------- the runs


def run_case(
    name, problem, x0, field, *, k, n_tr, n_window, n_back, repeats, naive=True
):
    """One comparison; returns rows ``(who, seconds, note)`` and agreement."""
    kw = dict(k=k, renorm_every=1, t_transient=n_tr * DT)

    def ours_call():
        return jax.block_until_ready(
            covariant_vectors(problem, n_window, t_backward=n_back * DT, **kw)
        )

    def spectrum_call():
        return jax.block_until_ready(lyapunov_spectrum(problem, n_window, **kw))

    t0 = time.perf_counter()
    ours = ours_call()
    first = time.perf_counter() - t0
    with forward_timer() as spent:
        ours_call()
    spec = spectrum_call()
    hand = handwritten_ginelli(field.rhs, k, n_tr, n_window, n_back)
    Y0, _ = initial_frame(0, d=x0.size, k=k, dtype=jnp.float64)  # lyapax's frame
    hand_args = (jnp.asarray(x0), Y0)
    hand_out = jax.block_until_ready(hand(*hand_args))
    # Interleaved rounds: load from other processes hits the three alike.
    bests = best_interleaved(
        {
            "ours": ours_call,
            "spectrum": spectrum_call,
            "hand": lambda: jax.block_until_ready(hand(*hand_args)),
        },
        repeats,
    )
    ours_t, fwd_t, hand_t = bests["ours"], bests["spectrum"], bests["hand"]
    rows = [
        ("lyapax covariant_vectors", ours_t, f"first call {first:.2f} s"),
        ("  of which the forward pass", spent[0], "its segment calls"),
        ("lyapax lyapunov_spectrum (exponents only)", fwd_t, ""),
        ("hand-written JAX Ginelli (one jit)", hand_t, "exact RK4 tangents"),
    ]
    # lyapax vector i sits at step n_tr + i + 1 from x0.
    steps = n_tr + 1 + np.arange(ours.vectors.shape[0])
    agree = {"hand-written": _angles(ours.vectors, np.asarray(hand_out[1]))}
    covariance = {"lyapax": _covariance(field.rhs, ours.states, ours.vectors)}
    found = peers()
    total = n_tr + n_window
    jacobians = [(field.best, field.jac_best, repeats)]
    if naive:
        jacobians.append((field.naive, field.jac_naive, 1))
    if found["clvlib"] is None:
        rows.append(("clvlib 0.1.5", None, _absent("clvlib")))
    else:
        t = DT * np.arange(total + 1)
        for label, jac, times in jacobians:

            def clvlib_run(jac=jac):
                return found["clvlib"](
                    lambda t, x: field.f(x),
                    lambda t, x: jac(x),
                    np.array(x0),
                    t,
                    stepper="rk4",
                    n_lyap=k,
                )

            secs, out = best(clvlib_run, times)
            rows.append((f"clvlib 0.1.5, {label}", secs, "J at every RK4 stage"))
            if label == field.best:
                agree["clvlib"] = _angles(ours.vectors, out[4][steps])
                covariance["clvlib"] = _covariance(
                    field.rhs, out[6][steps], out[4][steps]
                )
    if found["lyapynov"] is None:
        rows.append(("lyapynov 1.0.1", None, _absent("lyapynov")))
    else:
        lp = found["lyapynov"]
        for label, jac, times in jacobians:

            def lyapynov_run(jac=jac):
                system = lp.ContinuousDS(
                    np.array(x0), 0.0, lambda x, t: field.f(x), lambda x, t: jac(x), DT
                )
                return lp.CLV(system, k, 0, n_tr, n_window - n_back, n_back, True)

            secs, (out, history) = best(lyapynov_run, times)
            rows.append((f"lyapynov 1.0.1, {label}", secs, "J frozen over each step"))
            if label == field.best:
                clv = np.stack(out)  # vector m at step n_tr + m, at history[m]
                agree["lyapynov"] = _angles(ours.vectors, clv[steps - n_tr])
                covariance["lyapynov"] = _covariance(
                    field.rhs, history[steps - n_tr], clv[steps - n_tr]
                )
    print(
        f"\n{name}: {len(steps)} vectors, k={k}, exponents[:3] "
        f"{np.asarray(ours.exponents)[:3]} (spectrum {np.asarray(spec.exponents)[:3]})"
    )
    print(f"  {'who':42s} {'seconds':>9s} {'vs lyapax':>10s}")
    for who, secs, note in rows:
        if secs is None:
            print(f"  {who:42s} {'-':>9s} {'':>10s}  {note}")
        else:
            print(f"  {who:42s} {secs:9.3f} {secs / ours_t:9.2f}x  {note}")
    print(
        f"  forward pass / lyapunov_spectrum: {spent[0] / fwd_t:.2f}x; "
        f"covariant_vectors / hand-written: {ours_t / hand_t:.2f}x"
    )
    picks = sorted({0, 1, k // 4, k // 2, k - 1})
    for who, ang in agree.items():
        text = ", ".join(f"v{i + 1}: {np.degrees(ang[i]):.2e}" for i in picks)
        print(f"  angle lyapax-{who} (deg, median over steps): {text}")
    print("  covariance error: angle of J v_i(n) to v_i(n+1) along each code's own")
    print("  orbit, J the exact RK4 tangent map (deg, median over steps):")
    for who, err in covariance.items():
        text = ", ".join(f"v{i + 1}: {np.degrees(err[i]):.1e}" for i in picks)
        print(f"    {who:9s} {text}")
    return rows, agree, covariance


def handwritten_ginelli(rhs, k, n_tr, n_window, n_back):
    """Ginelli's method as one jitted JAX program, written for this problem
    size: ``(x0, Y0) -> (states, vectors)`` of the ``n_window - n_back``
    saved steps (the reference for the engine's overhead). The ``R`` factors
    are inverted by the engine's own batched triangular inverse (XLA's CPU
    ``inv`` and triangular solve of 2000 small factors take ~0.5 s), so the
    ratio measures the engine's bookkeeping, not that choice."""
    step = rk4_step(rhs, DT)
    n_saved = n_window - n_back

    def forward(carry, _):
        x, Q = carry
        x, V = jax.vmap(lambda v: jax.jvp(step, (x,), (v,)), 1, (None, 1))(Q)
        Q, R = jnp.linalg.qr(V)
        sign = jnp.sign(jnp.diagonal(R))
        return (x, Q * sign), (x, Q * sign, R * sign[:, None])

    def backward(C, R_inv):
        # C_{j-1} = R_j^{-1} C_j, columns normalised; emit C_j.
        B = R_inv @ C
        return B / jnp.linalg.norm(B, axis=0), C

    @jax.jit
    def program(x0, Y0):
        carry, _ = jax.lax.scan(
            lambda c, _: (forward(c, _)[0], None), (x0, Y0), None, n_tr
        )
        carry, (X, Qs, R1) = jax.lax.scan(forward, carry, None, n_saved)
        _, (_, _, R2) = jax.lax.scan(forward, carry, None, n_back)
        R = jnp.concatenate([R1, R2])
        _, Cs = jax.lax.scan(
            backward, jnp.eye(k, dtype=Y0.dtype), upper_inverse(R)[::-1]
        )
        Cs = Cs[::-1][:n_saved]  # Cs[i] = C at saved step i + 1
        # Columns in descending order of the exponents, as lyapax gives them.
        growth = jnp.sum(jnp.log(jnp.diagonal(R, axis1=1, axis2=2)), axis=0)
        order = jnp.argsort(-growth)
        return X, jnp.einsum("ndk,nkl->ndl", Qs, Cs)[:, :, order]

    return program


@contextlib.contextmanager
def forward_timer():
    """Seconds spent in the forward pass of ``covariant_vectors`` (its segment
    calls, each waited for), accumulated in the yielded list."""
    spent = [0.0]
    inner = covariant_run.forward_segment

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        out = jax.block_until_ready(inner(*args, **kwargs))
        spent[0] += time.perf_counter() - t0
        return out

    covariant_run.forward_segment = timed
    try:
        yield spent
    finally:
        covariant_run.forward_segment = inner


def _covariance(rhs, states, vectors):
    """Median over steps of the angle between the RK4 tangent map applied to
    ``vectors[n]`` at ``states[n]`` and ``vectors[n + 1]`` (radians, per vector)."""
    step = rk4_step(rhs, DT)

    def push(x, V):
        return jax.vmap(lambda v: jax.jvp(step, (x,), (v,))[1], 1, 1)(V)

    pushed = np.asarray(
        jax.jit(jax.vmap(push))(jnp.asarray(states[:-1]), jnp.asarray(vectors[:-1]))
    )
    return _angles(pushed, vectors[1:])


def _angles(ours, theirs, reduce=np.median):
    """``reduce`` over steps of the angle between column i of both (radians)."""
    a = ours / np.linalg.norm(ours, axis=1, keepdims=True)
    b = theirs / np.linalg.norm(theirs, axis=1, keepdims=True)
    cos = np.abs(np.sum(a * b, axis=1))
    sin = np.linalg.norm(
        a - np.sign(np.sum(a * b, axis=1))[:, None] * cos[:, None] * b, axis=1
    )
    return reduce(np.arctan2(sin, cos), axis=0)


def exact_case(n_tr=3000, n_window=4000, n_back=3000):
    """Each code against the exact answer: ``dx/dt = A x`` with the non-normal
    ``A = [[-1, 5], [0, -2]]``, whose CLVs are A's eigenvectors (11.31 deg
    apart). Largest angle to them over the saved steps (deg)."""
    A = np.array([[-1.0, 5.0], [0.0, -2.0]])
    w, V = np.linalg.eig(A)
    V = V[:, np.argsort(-w)]
    x0 = np.array([1.0, 1.0])
    Aj = jnp.asarray(A)
    problem = ode_problem(lambda x: Aj @ x, jnp.asarray(x0), dt=DT)
    res = covariant_vectors(
        problem, n_window, renorm_every=1, t_transient=n_tr * DT, t_backward=n_back * DT
    )
    got = {"lyapax": res.vectors}
    found = peers()
    if found["clvlib"] is not None:
        t = DT * np.arange(n_tr + n_window + 1)
        out = found["clvlib"](
            lambda t, x: A @ x, lambda t, x: A, x0, t, stepper="rk4", n_lyap=2
        )
        got["clvlib"] = out[4][n_tr + 1 : n_tr + 1 + res.vectors.shape[0]]
    if found["lyapynov"] is not None:
        lp = found["lyapynov"]
        system = lp.ContinuousDS(x0, 0.0, lambda x, t: A @ x, lambda x, t: A, DT)
        clv = np.stack(lp.CLV(system, 2, 0, n_tr, n_window - n_back, n_back, False))
        got["lyapynov"] = clv[1 : 1 + res.vectors.shape[0]]
    print("\nexact oracle: dx/dt = A x, A = [[-1, 5], [0, -2]] (CLVs = eigenvectors),")
    print("  largest angle to the exact vectors over the saved steps (deg):")
    for who, vecs in got.items():
        exact = np.broadcast_to(V, vecs.shape)
        err = np.degrees(_angles(vecs, exact, reduce=np.max))
        print(f"    {who:9s} v1: {err[0]:.1e}, v2: {err[1]:.1e}")
    for who in ("clvlib", "lyapynov"):
        if who not in got:
            print(f"    {who:9s} not installed")


# ------------------------------------------------------------- memory table

MEMORY_CHILD = """
import json, resource, sys, time
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from lyapax import covariant_vectors, lyapunov_spectrum, ode_problem
from lyapax.systems import lorenz96
d, k, n_steps, mode = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
x0 = 8.0 + 0.01 * jnp.sin(jnp.arange(d))
problem = ode_problem(lorenz96(), x0, dt=0.01)
kw = dict(k=k, renorm_every=10, t_transient=1.0)
t0 = time.perf_counter()
if mode == "spectrum":
    jax.block_until_ready(lyapunov_spectrum(problem, n_steps, **kw).exponents)
    n_saved, chose = 0, "-"
else:
    res = covariant_vectors(
        problem, n_steps, save_every=10, t_backward=n_steps * 0.0025, storage=mode, **kw
    )
    n_saved, chose = res.vectors.shape[0], res.storage
secs = time.perf_counter() - t0
# VmHWM: this process's own peak (ru_maxrss keeps the parent's across exec).
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
try:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            rss = int(line.split()[1]) * 1024
except OSError:
    pass
print(json.dumps(dict(rss=rss, secs=secs, n_saved=n_saved, chose=chose)))
"""


def memory_table(d, k, n_steps):
    print(
        f"\nstorage modes: Lorenz-96 d={d}, k={k}, {n_steps} RK4 steps, QR every "
        "10, a vector every 10 steps (peak RSS, VmHWM, of a fresh process per mode)"
    )
    rows = []
    for mode in ("spectrum", "device", "host", "recompute", "auto"):
        out = subprocess.run(
            [sys.executable, "-c", MEMORY_CHILD, str(d), str(k), str(n_steps), mode],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append((mode, json.loads(out.stdout.strip().splitlines()[-1])))
    base = rows[0][1]["rss"]
    frames = rows[1][1]["n_saved"] * d * (k + 1) * 8
    print(f"  saved frames (vectors + states): {frames / 2**20:.1f} MiB")
    print(
        f"  {'mode':12s} {'peak RSS MiB':>12s} {'minus spectrum':>15s} {'seconds':>8s}"
    )
    for mode, r in rows:
        label = "spectrum" if mode == "spectrum" else mode
        if mode == "auto":
            label = f"auto->{r['chose']}"
        print(
            f"  {label:12s} {r['rss'] / 2**20:12.1f} "
            f"{(r['rss'] - base) / 2**20:15.1f} {r['secs']:8.2f}"
        )
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--memory", action="store_true", help="storage-mode table")
    parser.add_argument("--case", choices=("all", "l96", "kuramoto"), default="all")
    parser.add_argument(
        "--no-naive", action="store_true", help="peers with their best Jacobian only"
    )
    parser.add_argument(
        "--peers", default="clvlib,lyapynov", help="comma-separated peers to run"
    )
    args = parser.parse_args()
    global PEERS
    PEERS = tuple(args.peers.split(","))
    repeats = 1 if args.quick else args.repeats
    print(f"jax {jax.__version__}, backend {jax.default_backend()}")
    # (name, builder, d, k, transient, window, backward) per mode
    quick = [
        ("Lorenz-96 d=10 (quick)", case_l96, 10, 10, 100, 200, 100),
        ("Kuramoto d=50 (quick)", case_kuramoto, 50, 5, 0, 40, 20),
    ]
    full = [
        ("Lorenz-96 d=40", case_l96, 40, 40, 1000, 2000, 1000),
        ("Kuramoto d=1000 (dense, all-to-all)", case_kuramoto, 1000, 10, 0, 200, 100),
    ]
    for name, build, d, k, n_tr, n_window, n_back in quick if args.quick else full:
        if args.case != "all" and (args.case == "l96") != (build is case_l96):
            continue
        problem, x0, field = build(d)
        run_case(
            name,
            problem,
            x0,
            field,
            k=k,
            n_tr=n_tr,
            n_window=n_window,
            n_back=n_back,
            repeats=repeats,
            naive=not args.no_naive,
        )
    exact_case()
    if args.memory:
        memory_table(*((500, 5, 400) if args.quick else (10_000, 20, 600)))


if __name__ == "__main__":
    main()
