"""MEGNO of planetary systems: REBOUND (WHFast, one simulation per orbit) vs lyapax.

REBOUND (Rein & Liu 2012; WHFast: Rein & Tamayo 2015) is the reference code
of celestial mechanics for MEGNO: ``sim.init_megno()``, ``sim.megno()``
(``<Y>``) and ``sim.lyapunov()`` (the least-squares slope of ``<Y>`` against
time, which tends to ``λ/2``). Its documented stability map (the "Stability
map with MEGNO and WHFast" example) runs one ``Simulation`` per grid point
and parallelises with a ``multiprocessing`` pool. Here, in one process:

1. **Same map.** The Sun, Jupiter and Saturn from fixed elements (the
   example's Jupiter, Saturn at ``a = 9.5, e = 0.05``), REBOUND's
   ``"leapfrog"`` (drift-kick-drift in Cartesian coordinates) against
   lyapax's ``leapfrog`` at the same ``dt``: the largest position
   difference after ``--steps`` steps (the same map: rounding only).
2. **MEGNO agreement** on that regular system and on a chaotic start
   (Saturn at ``a = 7.6, e = 0.35``): REBOUND WHFast against lyapax
   ``megno`` with ``leapfrog`` and ``yoshida4`` at the same ``dt`` (Kepler
   drifts in Jacobi coordinates vs Cartesian splittings: the series agree
   to the integrators' accuracy, not to rounding); ``<Y>`` at the end,
   REBOUND's ``lyapunov()`` and lyapax's ``lyapunov / 2`` (the same
   slope), and ``λ_1`` from ``lyapunov_spectrum`` on the same orbit.
3. **Stability map** over ``--grid`` x ``--grid`` values of Saturn's
   ``(a, e)`` in ``[7, 10] x [0, 0.5]`` (the example's box), integrated for
   ``--years`` years: REBOUND one WHFast simulation per point on a
   ``multiprocessing`` pool of ``--workers`` processes (its documented way;
   an escape beyond 20 AU counts as chaotic, as there) vs lyapax one
   batched ``megno(..., state0_batch=points)`` call with ``yoshida4``, split
   over ``--workers`` CPU devices. Wall times are taken one after the other
   (lyapax's second call of the same shapes; the first call's extra time is
   reported as compilation); verdict agreement: ``<Y> > 2.5`` or
   escape is chaotic for both.

Initial conditions: REBOUND's ``sim.add`` (Jacobi elements) and
``move_to_com`` when REBOUND is installed; otherwise the same Jacobi
elements-to-Cartesian conversion written here (``--quick`` runs without
REBOUND, its rows then say "not installed"). Units: G = 1, AU, years / 2 pi.

Run: ``python benchmarks/rebound_bench.py`` (100 x 100 = 10^4 orbits, 500
years) or ``--quick`` (CI smoke run). REBOUND lives in a benchmark-only
environment, e.g. ``python -m venv --system-site-packages /tmp/rebound-venv
&& /tmp/rebound-venv/bin/pip install rebound``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

SUN, JUPITER, SATURN = 1.0, 0.000954, 0.000285
JUPITER_ELEMENTS = dict(a=5.204, M=0.600, omega=0.257, e=0.048)
SATURN_ANGLES = dict(M=0.871, omega=1.616)
ESCAPE_AU = 20.0


def rebound_or_none():
    try:
        import rebound
    except ImportError:
        return None
    return rebound


# --- initial conditions -------------------------------------------------------


def _kepler_cartesian(mu, a, e, omega, mean_anomaly):
    """Planar position and velocity of an orbit of elements (a, e, omega, M)."""
    E = mean_anomaly
    for _ in range(50):  # Newton on Kepler's equation E - e sin E = M
        E = E - (E - e * np.sin(E) - mean_anomaly) / (1 - e * np.cos(E))
    x = a * (np.cos(E) - e)
    y = a * np.sqrt(1 - e * e) * np.sin(E)
    rate = np.sqrt(mu / a**3) / (1 - e * np.cos(E))
    vx = -a * np.sin(E) * rate
    vy = a * np.sqrt(1 - e * e) * np.cos(E) * rate
    c, s = np.cos(omega), np.sin(omega)
    return np.array([c * x - s * y, s * x + c * y, 0.0]), np.array(
        [c * vx - s * vy, s * vx + c * vy, 0.0]
    )


def own_state(a, e):
    """``(q, p)`` of Sun, Jupiter, Saturn (Jacobi elements, centre of mass at
    rest at the origin), as REBOUND's ``sim.add`` and ``move_to_com`` make
    them."""
    masses = np.array([SUN, JUPITER, SATURN])
    pos, vel = [np.zeros(3)], [np.zeros(3)]
    planets = [JUPITER_ELEMENTS, dict(a=a, e=e, **SATURN_ANGLES)]
    for k, el in enumerate(planets, start=1):
        m_in = masses[:k].sum()
        com_x = sum(masses[j] * pos[j] for j in range(k)) / m_in
        com_v = sum(masses[j] * vel[j] for j in range(k)) / m_in
        r, v = _kepler_cartesian(
            m_in + masses[k], el["a"], el["e"], el["omega"], el["M"]
        )
        pos.append(com_x + r)
        vel.append(com_v + v)
    x, v = np.array(pos), np.array(vel)
    x -= (masses[:, None] * x).sum(0) / masses.sum()
    v -= (masses[:, None] * v).sum(0) / masses.sum()
    return x.ravel(), (masses[:, None] * v).ravel()


def rebound_sim(rebound, a, e, dt, integrator="whfast"):
    sim = rebound.Simulation()
    # REBOUND 5 moved WHFast's safe_mode switch; its default (safe mode on)
    # is kept here, which costs REBOUND some speed.
    sim.integrator = integrator
    sim.dt = dt
    sim.add(m=SUN)
    sim.add(m=JUPITER, **JUPITER_ELEMENTS)
    sim.add(m=SATURN, a=a, e=e, **SATURN_ANGLES)
    sim.move_to_com()
    return sim


def rebound_state(sim):
    ps = [sim.particles[i] for i in range(3)]
    q = np.array([[p.x, p.y, p.z] for p in ps]).ravel()
    p = np.array([[p.m * p.vx, p.m * p.vy, p.m * p.vz] for p in ps]).ravel()
    return q, p


def rebound_megno(job):
    """One point of the map (a pool worker): REBOUND's ``<Y>`` or 10 on escape
    (the documented example's convention)."""
    a, e, dt, t_end = job
    rebound = rebound_or_none()
    sim = rebound_sim(rebound, a, e, dt)
    sim.init_megno(seed=0)
    sim.exit_max_distance = ESCAPE_AU
    try:
        sim.integrate(t_end, exact_finish_time=0)
        return sim.megno()
    except rebound.Escape:
        return 10.0


# --- lyapax ------------------------------------------------------------------


def lyapax_problem(q0, p0, dt, integrator):
    from lyapax.systems import n_body

    system = n_body([SUN, JUPITER, SATURN])
    return system.problem(q0, p0, dt, integrator)


def timed(fn):
    import jax

    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0


def same_map(rebound, dt, steps):
    q0, p0 = own_state(9.5, 0.05)
    prob = lyapax_problem(q0, p0, dt, "leapfrog")
    from lyapax.utils import simulate_trajectory

    traj = simulate_trajectory(prob.step_fn, prob.state0, steps, dt)
    z = np.asarray(traj.states)[-1]
    if rebound is None:
        print(f"| same map, {steps} leapfrog steps | not installed | - |")
        return
    sim = rebound_sim(rebound, 9.5, 0.05, dt, "leapfrog")
    q_r, p_r = rebound_state(sim)
    start = max(np.abs(q_r - q0).max(), np.abs(p_r - p0).max())
    sim.steps(steps)
    q_end, _ = rebound_state(sim)
    diff = np.abs(q_end - z[:9]).max()
    print(
        f"| same map, {steps} leapfrog steps (dt {dt}) | start states differ "
        f"by {start:.1e} | final positions differ by {diff:.1e} AU |"
    )


def agreement(rebound, dt, steps, every):
    import lyapax
    from lyapax.indicators import megno

    print("\n| orbit | code | <Y> at the end | slope of <Y> | lambda_1 |")
    print("|---|---|---|---|---|")
    for label, (a, e) in (("regular", (9.5, 0.05)), ("chaotic", (7.6, 0.35))):
        q0, p0 = own_state(a, e)
        for integrator in ("leapfrog", "yoshida4"):
            prob = lyapax_problem(q0, p0, dt, integrator)
            res = megno(prob, steps, save_every=every)
            lam = lyapax.lyapunov_spectrum(prob, steps, k=1).exponents[0]
            print(
                f"| {label} a={a} e={e} | lyapax {integrator} | "
                f"{res.mean_megno[-1]:.4f} | {res.lyapunov / 2:.3e} | {lam:.3e} |"
            )
        if rebound is None:
            print(f"| {label} a={a} e={e} | REBOUND WHFast | not installed | - | - |")
            continue
        sim = rebound_sim(rebound, a, e, dt)
        sim.init_megno(seed=0)
        series = []
        for t in res.times:
            sim.integrate(t, exact_finish_time=0)
            series.append(sim.megno())
        gap = np.abs(np.array(series) - res.mean_megno).max()
        print(
            f"| {label} a={a} e={e} | REBOUND WHFast | {sim.megno():.4f} | "
            f"{sim.lyapunov():.3e} | - (max gap of the <Y> series to lyapax "
            f"yoshida4: {gap:.3f}) |"
        )


def grid(n):
    a = np.linspace(7.0, 10.0, n)
    e = np.linspace(0.0, 0.5, n)
    return [(ai, ei) for ei in e for ai in a]


def stability_map(rebound, n, dt, years, workers, integrator, batch_size):
    import jax

    from lyapax.indicators import megno

    t_end = years * 2 * np.pi
    steps = int(np.ceil(t_end / dt))
    points = grid(n)
    states = np.stack([np.concatenate(own_state(a, e)) for a, e in points])
    prob = lyapax_problem(states[0, :9], states[0, 9:], dt, integrator)
    devices = jax.devices()[:workers]

    def run(rows):
        return megno(
            prob,
            steps,
            state0_batch=rows,
            save_every=steps,
            devices=devices,
            batch_size=batch_size,
        ).mean_megno[..., -1]

    # The first call compiles and runs, the second (same shapes) only runs:
    # compilation is reported as the difference.
    _, first_s = timed(lambda: run(states))
    mean, lyapax_s = timed(lambda: run(states))
    compile_s = max(0.0, first_s - lyapax_s)
    chaotic_l = ~(mean <= 2.5)
    print(
        f"\n| stability map {n}x{n} = {len(points)} orbits, {years} years "
        f"({steps} steps of dt {dt}) | wall s | orbits/s | chaotic |"
    )
    print("|---|---|---|---|")
    print(
        f"| lyapax megno, one batched call, {integrator}, {len(devices)} CPU "
        f"devices (compile {compile_s:.1f} s apart) | {lyapax_s:.1f} | "
        f"{len(points) / lyapax_s:.0f} | {chaotic_l.mean():.1%} |"
    )
    if rebound is None:
        print("| REBOUND WHFast, one simulation per orbit | not installed | - | - |")
        return
    import multiprocessing

    jobs = [(a, e, dt, t_end) for a, e in points]
    ctx = multiprocessing.get_context("spawn")  # jax's threads do not fork
    t0 = time.perf_counter()
    with ctx.Pool(workers) as pool:
        values = np.array(pool.map(rebound_megno, jobs, chunksize=16))
    rebound_s = time.perf_counter() - t0
    chaotic_r = values > 2.5
    print(
        f"| REBOUND WHFast, one simulation per orbit, Pool({workers}) | "
        f"{rebound_s:.1f} | {len(points) / rebound_s:.0f} | "
        f"{chaotic_r.mean():.1%} |"
    )
    agree = (chaotic_r == chaotic_l).mean()
    print(
        f"\nverdict agreement {agree:.1%} of {len(points)} orbits; wall time "
        f"REBOUND / lyapax = {rebound_s / lyapax_s:.2f} (compile excluded)"
    )


def checks(rebound, dt, steps):
    """Tables 1-2: the same map, the same initial conditions, and agreement."""
    print("\n| check | REBOUND vs lyapax | |")
    print("|---|---|---|")
    same_map(rebound, dt, min(steps, 5000))
    if rebound is not None:
        q_r, p_r = rebound_state(rebound_sim(rebound, 7.6, 0.35, dt))
        q_o, p_o = own_state(7.6, 0.35)
        gap = max(np.abs(q_r - q_o).max(), np.abs(p_r - p_o).max())
        print(f"| initial conditions (Jacobi elements) | differ by {gap:.1e} | |")
    agreement(rebound, dt, steps, max(1, steps // 20))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI)")
    parser.add_argument("--grid", type=int, default=100)
    parser.add_argument("--years", type=float, default=500.0)
    parser.add_argument("--dt", type=float, default=0.5)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--integrator", default="yoshida4", help="lyapax map step")
    parser.add_argument("--batch-size", type=int, default=None, help="map chunk")
    parser.add_argument("--map-only", action="store_true", help="skip tables 1-2")
    args = parser.parse_args()
    if args.quick:
        args.grid, args.years, args.steps = 6, 20.0, 2000
    # One CPU device per worker, set before jax is imported.
    os.environ.setdefault(
        "XLA_FLAGS", f"--xla_force_host_platform_device_count={args.workers}"
    )
    import jax

    jax.config.update("jax_enable_x64", True)
    rebound = rebound_or_none()
    version = "not installed" if rebound is None else rebound.__version__
    print(f"REBOUND {version}; jax {jax.__version__}; load {os.getloadavg()[0]:.2f}")
    if not args.map_only:
        checks(rebound, args.dt, args.steps)
    stability_map(
        rebound,
        args.grid,
        args.dt,
        args.years,
        args.workers,
        args.integrator,
        args.batch_size,
    )


if __name__ == "__main__":
    main()
