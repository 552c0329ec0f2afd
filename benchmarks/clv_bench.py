"""Covariant Lyapunov vectors: lyapax against clvlib 0.1.5 and lyapynov 1.0.1.

Side by side in one run, on the same problems with the same step counts,
integrator (RK4) and step, QR every step:

- Lorenz-96, d = 40, all 40 vectors: 1000 transient steps, then a window of
  2000 steps whose last 1000 are the backward transient (1000 vectors);
- dense all-to-all Kuramoto network, d = 1000, k = 10: 200 steps, the last
  100 the backward transient (100 vectors).

The peers take a hand-written Jacobian of the vector field (they have no
tangent propagation of their own): they get analytic NumPy Jacobians here,
their fastest form. lyapax is timed warm (its compile time apart), every
timing is the best of ``--repeats``. Agreement: the angle between lyapax's
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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TQDM_DISABLE", "1")  # clvlib's progress bars

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lyapax import (  # noqa: E402
    covariant_vectors,
    lyapunov_spectrum,
    ode_problem,
    rk4_step,
)
from lyapax.covariant import _run as covariant_run  # noqa: E402
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
    return found


# ------------------------------------------------------------- the problems


def l96_field(F=8.0):
    def f(x):
        return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + F

    def jac(x):
        d = x.size
        i = np.arange(d)
        J = -np.eye(d)
        J[i, (i + 1) % d] += x[(i - 1) % d]
        J[i, (i - 2) % d] -= x[(i - 1) % d]
        J[i, (i - 1) % d] += x[(i + 1) % d] - x[(i - 2) % d]
        return J

    return f, jac, lorenz96(F)


def kuramoto_field(omega, K):
    n = omega.size
    W = np.ones((n, n)) - np.eye(n)
    g = K / n

    def f(theta):
        s, c = np.sin(theta), np.cos(theta)
        return omega + g * (c * (W @ s) - s * (W @ c))

    def jac(theta):
        J = g * W * np.cos(theta[None, :] - theta[:, None])
        J[np.diag_indices(n)] -= J.sum(axis=1)
        return J

    Wj, omega_j = jnp.asarray(W), jnp.asarray(omega)

    def rhs(theta):
        s, c = jnp.sin(theta), jnp.cos(theta)
        return omega_j + g * (c * (Wj @ s) - s * (Wj @ c))

    return f, jac, rhs


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


def run_case(name, problem, x0, field, *, k, n_tr, n_window, n_back, repeats):
    """One comparison; returns rows ``(who, seconds, note)`` and agreement."""
    kw = dict(k=k, renorm_every=1, t_transient=n_tr * DT)
    t0 = time.perf_counter()
    covariant_vectors(problem, n_window, t_backward=n_back * DT, **kw)
    first = time.perf_counter() - t0
    ours_t, ours = best(
        lambda: covariant_vectors(problem, n_window, t_backward=n_back * DT, **kw),
        repeats,
    )
    with forward_timer() as spent:
        covariant_vectors(problem, n_window, t_backward=n_back * DT, **kw)
    lyapunov_spectrum(problem, n_window, **kw)
    fwd_t, spec = best(
        lambda: jax.block_until_ready(lyapunov_spectrum(problem, n_window, **kw)),
        repeats,
    )
    rows = [
        ("lyapax covariant_vectors", ours_t, f"first call {first:.2f} s"),
        ("  of which the forward pass", spent[0], "its segment calls"),
        ("lyapax lyapunov_spectrum (exponents only)", fwd_t, ""),
    ]
    # lyapax vector i sits at step n_tr + i + 1 from x0.
    steps = n_tr + 1 + np.arange(ours.vectors.shape[0])
    agree = {}
    f, jac, rhs = field
    covariance = {"lyapax": _covariance(rhs, ours.states, ours.vectors)}
    found = peers()
    total = n_tr + n_window
    if found["clvlib"] is None:
        rows.append(("clvlib 0.1.5", None, "not installed"))
    else:
        t = DT * np.arange(total + 1)

        def clvlib_run():
            return found["clvlib"](
                lambda t, x: f(x),
                lambda t, x: jac(x),
                np.array(x0),
                t,
                stepper="rk4",
                n_lyap=k,
            )

        secs, out = best(clvlib_run, repeats)
        rows.append(("clvlib 0.1.5", secs, "lyap_analysis_from_ic"))
        agree["clvlib"] = _angles(ours.vectors, out[4][steps])
        covariance["clvlib"] = _covariance(rhs, out[6][steps], out[4][steps])
    if found["lyapynov"] is None:
        rows.append(("lyapynov 1.0.1", None, "not installed"))
    else:
        lp = found["lyapynov"]

        def lyapynov_run():
            system = lp.ContinuousDS(
                np.array(x0), 0.0, lambda x, t: f(x), lambda x, t: jac(x), DT
            )
            return lp.CLV(system, k, 0, n_tr, n_window - n_back, n_back, True)

        secs, (out, history) = best(lyapynov_run, repeats)
        rows.append(("lyapynov 1.0.1", secs, "CLV (exponents need LCE)"))
        clv = np.stack(out)  # vector m at step n_tr + m, at history[m]
        agree["lyapynov"] = _angles(ours.vectors, clv[steps - n_tr])
        covariance["lyapynov"] = _covariance(
            rhs, history[steps - n_tr], clv[steps - n_tr]
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
    args = parser.parse_args()
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
        )
    exact_case()
    if args.memory:
        memory_table(*((500, 5, 400) if args.quick else (10_000, 20, 600)))


if __name__ == "__main__":
    main()
