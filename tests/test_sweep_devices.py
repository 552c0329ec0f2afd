"""Sweeps split over two (forced) CPU devices return single-device numbers.

The device count is fixed when JAX starts its backend, so the check runs in a
fresh interpreter with ``XLA_FLAGS=--xla_force_host_platform_device_count=2``
set before jax is imported.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import json
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np
    from lyapax.sweep import sweep_lyapunov_spectrum, sweep_trajectory
    from lyapax.systems import henon_map

    def step(x, p):
        return henon_map(p["a"], p["b"])(x)

    x0 = jnp.array([0.1, 0.1])
    p4 = {"a": jnp.array([1.2, 1.3, 1.35, 1.4]), "b": jnp.array([0.3, 0.3, 0.2, 0.3])}
    # Row 4 repeats row 3, so it must reproduce row 3 of the 4-row sweep.
    p5 = {k: jnp.concatenate([v, v[3:]]) for k, v in p4.items()}
    kw = dict(renorm_every=4, save_states=True, decimate=2)

    def diff(a, b):
        return max(
            float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
            for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
        )

    two = sweep_lyapunov_spectrum(step, x0, p4, 1.0, 200, **kw)
    one = sweep_lyapunov_spectrum(step, x0, p4, 1.0, 200, devices=1, **kw)
    chunked = sweep_lyapunov_spectrum(step, x0, p5, 1.0, 200, batch_size=3, **kw)
    traj = sweep_trajectory(step, x0, p4, 1.0, 200, renorm_every=4, decimate=2)
    try:
        sweep_lyapunov_spectrum(step, x0, p5, 1.0, 200, pad=False, **kw)
        pad_error = ""
    except ValueError as err:
        pad_error = str(err)
    sharding = two.exponents.sharding
    print(json.dumps({
        "devices": len(jax.devices()),
        "sharded_over": len(sharding.device_set),
        "replicated": bool(sharding.is_fully_replicated),
        "two_vs_one": diff(two, one),
        "chunked_vs_one": diff(jax.tree.map(lambda v: v[:4], chunked), one),
        "padded_row": diff(jax.tree.map(lambda v: v[4], chunked),
                           jax.tree.map(lambda v: v[3], one)),
        "trajectory": diff(traj.states, one.trajectory),
        "pad_error": pad_error,
    }))
    """
)


@pytest.mark.slow
def test_two_devices_split_the_batch_and_return_single_device_numbers():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["devices"] == 2
    # The 4 rows were split 2 + 2: the result lives on both devices.
    assert out["sharded_over"] == 2 and not out["replicated"]
    # Same numbers up to the last bits of vectorised reductions (seen: 3e-18).
    assert out["two_vs_one"] < 1e-12
    # 5 rows in chunks of 3, each padded to 4 for the 2 devices.
    assert out["chunked_vs_one"] < 1e-12 and out["padded_row"] < 1e-12
    assert out["trajectory"] < 1e-12
    assert "do not split evenly over 2 devices" in out["pad_error"]
    assert "pad=True" in out["pad_error"]
