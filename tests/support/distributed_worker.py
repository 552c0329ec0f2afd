"""One process of the multi-process tests (``tests/test_distributed.py``).

Run as ``python tests/support/distributed_worker.py MODE OUT``; the launch
variables (``MASTER_ADDR``, ``WORLD_SIZE``, ... or ``SLURM_*``) come from the
environment, as a cluster launcher would set them. The problems are defined
here once and imported by the test, which runs them in one process for the
reference. ``MODE`` is

- ``sweeps``: the batched entry points, results gathered and saved to ``OUT``
  (an ``.npz``, one per process);
- ``die``: process 1 exits right after joining, process 0 then runs a sweep
  and gathers it (JAX's runtime must end it);
- ``join``: join and report, nothing else.
"""

from __future__ import annotations

import json
import os
import sys

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lyapax import rk4_step  # noqa: E402
from lyapax.systems import lorenz  # noqa: E402

X0 = np.array([1.0, 1.0, 1.0])
#: 64 rows below the onset of chaos (rho < 24.7): the orbits settle on a
#: fixed point or the origin, so rounding differences decay.
CALM = np.linspace(2.0, 20.0, 64)
#: 53 calm rows and 8 chaotic ones (61, odd: the last chunk is padded).
MIXED = np.concatenate([np.linspace(2.0, 20.0, 53), np.linspace(28.0, 42.0, 8)])
SWEEP = dict(dt=0.01, n_steps=2000, renorm_every=10, t_transient=5.0, batch_size=24)
FTLE_POINTS = np.linspace(-1.0, 1.0, 63 * 2).reshape(63, 2)
#: A damped rotation: the master stability function of x' = A x coupled
#: through H = I is exactly -0.5 - alpha.
ROTATION = np.array([[-0.5, 1.0], [-1.0, -0.5]])
ALPHAS = np.linspace(0.0, 2.0, 13)
#: Rows of a covariant-vector sweep: x' = diag(-a, -2a) x, exponents -a, -2a.
DECAYS = np.linspace(0.5, 1.5, 5)


def lorenz_step(x, p):
    return rk4_step(lorenz(rho=p["rho"]), 0.01)(x)


def saddle(x):
    """x' = (x, -y): every FTLE is exactly 1 (ftle_min -1)."""
    return jnp.stack([x[0], -x[1]])


def rotation(x):
    return jnp.asarray(ROTATION) @ x


def decay_problem(a):
    from lyapax import ode_problem

    return ode_problem(lambda x: jnp.stack([-a * x[0], -2 * a * x[1]]), X0[:2], 0.01)


def compute() -> dict[str, np.ndarray]:
    """Every batched entry point on the problems above, as NumPy arrays."""
    from lyapax.covariant import sweep_covariant_vectors
    from lyapax.distributed import gather
    from lyapax.finite_time import finite_time_exponents, ftle_field
    from lyapax.network import master_stability_function
    from lyapax.sweep import sweep_lyapunov_spectrum, sweep_trajectory

    out: dict[str, np.ndarray] = {}
    sweeps = {}
    for name, rhos in (("calm", CALM), ("mixed", MIXED)):
        res = sweep_lyapunov_spectrum(lorenz_step, X0, {"rho": rhos}, **SWEEP)
        sweeps[name] = res
        got = gather(res)
        out[f"{name}_exponents"] = got.exponents
        out[f"{name}_stderr"] = got.stderr
        out[f"{name}_state"] = got.checkpoint.state
        out[f"{name}_history"] = got.history
    # Host copies (trajectory_to_host) are gathered chunk by chunk.
    traj = sweep_trajectory(
        lorenz_step,
        X0,
        {"rho": MIXED},
        0.01,
        200,
        decimate=10,
        batch_size=24,
        trajectory_to_host=True,
    )
    out["trajectory"] = gather(traj).states
    # Finite-time exponents of an ensemble: windows gathered from every process.
    ft = finite_time_exponents(
        lorenz_step, X0, **SWEEP, window=5.0, params_batch={"rho": CALM}
    )
    out["ft_exponents"] = ft.exponents
    out["ft_lyapunov"] = np.asarray(ft.lyapunov)
    field = ftle_field(saddle, FTLE_POINTS, 0.0, 1.0, 0.05)
    out["ftle_max"] = np.asarray(field.ftle_max)
    out["ftle_min"] = np.asarray(field.ftle_min)
    out["flow_map"] = np.asarray(field.flow_map)
    msf = master_stability_function(
        rotation, np.eye(2), ALPHAS, X0[:2], dt=0.01, n_steps=500, renorm_every=10
    )
    out["msf"] = gather(msf).exponent
    clv = sweep_covariant_vectors(
        decay_problem,
        DECAYS,
        200,
        renorm_every=5,
        save_every=5,
        t_backward=0.5,
        t_transient=10.0,
    )
    out["clv_exponents"] = clv.exponents
    out["clv_vectors"] = clv.vectors
    # What a process holds before gathering: global arrays, spread over all.
    calm = sweeps["calm"].exponents
    out["spread_over"] = np.array(len(calm.sharding.device_set))
    out["addressable"] = np.array(calm.is_fully_addressable)
    on_zero = gather(sweeps["calm"].exponents, to=0)
    out["to0_is_none"] = np.array(on_zero is None)
    if on_zero is not None:
        out["to0"] = on_zero
    return out


def main() -> None:
    mode, path = sys.argv[1], sys.argv[2]
    from lyapax.distributed import initialize

    info = initialize(
        timeout=float(os.environ.get("TEST_TIMEOUT", "30")),
        heartbeat_timeout=float(os.environ.get("TEST_HEARTBEAT", "10")),
    )
    print(
        json.dumps(
            {
                "joined": info.process_id,
                "of": info.num_processes,
                "devices": info.global_device_count,
            }
        ),
        flush=True,
    )
    if mode == "sweeps":
        np.savez(path, **compute())
    elif mode == "die":
        if info.process_id == 1:
            os._exit(3)
        from lyapax.distributed import gather
        from lyapax.sweep import sweep_lyapunov_spectrum

        res = sweep_lyapunov_spectrum(lorenz_step, X0, {"rho": CALM[:8]}, 0.01, 100)
        gather(res.exponents)
        print("survived", flush=True)


if __name__ == "__main__":
    main()
