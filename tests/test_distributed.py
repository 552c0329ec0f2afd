"""Multi-process jobs for real: two processes on 127.0.0.1 (CPU, gloo).

Each job is launched as a cluster launcher would (``torchrun``-style or
SLURM-style variables), every subprocess is bounded by a timeout, and the
coordinator's port is picked free on the loopback interface. The one-process
reference runs here, in the test process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from support import distributed_worker as worker

from lyapax.distributed import gather, initialize

WORKER = str(Path(worker.__file__))
ROOT = str(Path(__file__).resolve().parents[1])


#: jax.distributed's processes meet over TCP, on 127.0.0.1 here.
TCP = pytest.mark.needs_ip_socket("jax.distributed's processes meet over TCP")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS",)}
    # The tree first, and whatever path this process was given (where JAX
    # itself is found through PYTHONPATH, as on the lent TPU's machine).
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env.update(JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(path), **extra)
    return env


def _launch(mode: str, per_process: list[dict[str, str]], tmp_path, limit: float):
    """Start one worker per environment, wait at most ``limit`` seconds for all
    (killing what is left), return ``[(returncode, stdout, stderr, seconds)]``."""
    start = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, mode, str(tmp_path / f"out{i}.npz")],
            env=_env(extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, extra in enumerate(per_process)
    ]
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(
                timeout=max(1.0, limit - (time.monotonic() - start))
            )
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            out, err = proc.communicate()
            pytest.fail(f"a worker hung past {limit} s:\n{err[-3000:]}")
        results.append((proc.returncode, out, err, time.monotonic() - start))
    return results


def _torchrun(n: int, port: int, **common: str) -> list[dict[str, str]]:
    base = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(n)}
    return [{**base, **common, "RANK": str(r)} for r in range(n)]


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("distributed")
    results = _launch("sweeps", _torchrun(2, _free_port()), tmp, limit=400)
    for code, _, err, _ in results:
        assert code == 0, err[-3000:]
    joined = [json.loads(out.splitlines()[0]) for _, out, _, _ in results]
    return joined, [dict(np.load(tmp / f"out{i}.npz")) for i in range(2)]


@pytest.fixture(scope="module")
def one_process_run():
    return worker.compute()


@pytest.mark.slow
@TCP
def test_two_processes_split_the_batch_and_match_one_process(
    two_process_run, one_process_run
):
    joined, (p0, p1) = two_process_run
    assert joined == [{"joined": i, "of": 2, "devices": 2} for i in range(2)]
    # Before gathering, a result is a global array spread over both processes.
    assert p0["spread_over"] == 2 and not p0["addressable"]
    ref = one_process_run
    assert ref["calm_exponents"].shape == (64, 3)
    for key in ("calm_exponents", "calm_stderr", "calm_state", "calm_history"):
        np.testing.assert_allclose(p0[key], ref[key], rtol=0, atol=1e-10, err_msg=key)
    # Calm rows of the odd-sized mixed batch (61 rows, chunks of 24, the last
    # one padded) are equal as well; the trajectories too.
    calm = slice(0, 53)
    for key in ("mixed_exponents", "mixed_state"):
        np.testing.assert_allclose(p0[key][calm], ref[key][calm], rtol=0, atol=1e-10)
    np.testing.assert_allclose(p0["trajectory"], ref["trajectory"], rtol=0, atol=1e-8)
    # Chaotic rows: equal within their error bars (3 combined standard errors),
    # not bitwise.
    chaos = slice(53, 61)
    lam0, lam1 = p0["mixed_exponents"][chaos], ref["mixed_exponents"][chaos]
    assert (lam1[:, 0] > 0.2).all()  # chaotic (a 15-time-unit estimate)
    bar = np.hypot(p0["mixed_stderr"][chaos], ref["mixed_stderr"][chaos])
    print("chaotic rows, two - one process:", lam0 - lam1, "stderr", bar)
    assert (np.abs(lam0 - lam1) <= 3 * bar).all(), (lam0 - lam1, bar)
    # Master stability function and covariant vectors of linear problems.
    np.testing.assert_allclose(p0["msf"], ref["msf"], rtol=0, atol=1e-10)
    np.testing.assert_allclose(p0["msf"], -0.5 - worker.ALPHAS, atol=1e-6)
    np.testing.assert_allclose(p0["clv_exponents"], ref["clv_exponents"], atol=1e-10)
    np.testing.assert_allclose(p0["clv_vectors"], ref["clv_vectors"], atol=1e-10)
    exact = -np.outer(worker.DECAYS, [1.0, 2.0])
    np.testing.assert_allclose(p0["clv_exponents"], exact, atol=2e-3)
    # Finite-time exponents of the calm ensemble: 64 rows of 4 windows.
    assert p0["ft_exponents"].shape == (64, 4, 3)
    for key in ("ft_exponents", "ft_lyapunov"):
        np.testing.assert_allclose(p0[key], ref[key], rtol=0, atol=1e-10, err_msg=key)
    np.testing.assert_allclose(p0["ft_lyapunov"], p0["calm_exponents"], atol=1e-10)
    # FTLE field of the saddle: exact, and the same in every process.
    np.testing.assert_allclose(p0["ftle_max"], 1.0, atol=1e-6)
    np.testing.assert_allclose(p0["ftle_min"], -1.0, atol=1e-6)
    np.testing.assert_allclose(p0["flow_map"], ref["flow_map"], rtol=0, atol=1e-12)


@pytest.mark.slow
@TCP
def test_gather_gives_every_process_or_one_the_whole_result(two_process_run):
    _, (p0, p1) = two_process_run
    for key in p1:
        if key != "to0_is_none":
            np.testing.assert_array_equal(p0[key], p1[key], err_msg=key)
    assert not p0["to0_is_none"] and p1["to0_is_none"] and "to0" not in p1
    np.testing.assert_array_equal(p0["to0"], p0["calm_exponents"])


def test_gather_in_one_process_returns_numpy():
    import jax.numpy as jnp

    out = gather({"a": jnp.arange(3.0), "b": None, "c": 2})
    assert isinstance(out["a"], np.ndarray) and out["b"] is None and out["c"] == 2
    assert gather(jnp.ones(2), to=0).tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="to=1 is not a process"):
        gather(jnp.ones(2), to=1)
    with pytest.raises(ValueError, match='"all" or a process index'):
        gather(jnp.ones(2), to="everyone")


@TCP
def test_a_coordinator_that_does_not_answer_raises_within_the_timeout():
    port = _free_port()  # nothing listens there
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=f"no coordinator at 127.0.0.1:{port}"):
        initialize(f"127.0.0.1:{port}", 2, 1, timeout=1.0)
    assert time.monotonic() - start < 30


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("127.0.0.1:1234", 2, 2), {}, ValueError, "process_id must be between 0"),
        (("127.0.0.1:1234", 0, 0), {}, ValueError, "num_processes must be at least 1"),
        (("127.0.0.1", 2, 1), {}, ValueError, '"host:port"'),
        (("127.0.0.1:99999", 2, 1), {}, ValueError, "port from 1 to 65535"),
        (("127.0.0.1:1234", 2, 1), {"timeout": -1}, ValueError, "timeout must be"),
        ((1234, 2, 1), {}, TypeError, "coordinator_address"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        initialize(*args, **kwargs)


def test_bad_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "127.0.0.1:1234")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "two")
    with pytest.raises(ValueError, match="JAX_NUM_PROCESSES must hold an integer"):
        initialize()


@pytest.mark.needs_ip_socket("binds the coordinator's port on 127.0.0.1")
def test_a_taken_coordinator_port_is_refused_on_process_zero():
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(OSError, match=f"port {port} is already in use"):
            initialize(f"127.0.0.1:{port}", 2, 0)


@pytest.mark.slow
@TCP
def test_a_process_with_another_process_count_fails_clearly(tmp_path):
    port = _free_port()
    envs = _torchrun(2, port, TEST_TIMEOUT="20", TEST_HEARTBEAT="3")
    envs[1]["JAX_NUM_PROCESSES"] = "3"  # the coordinator's count is 2
    results = _launch("join", envs, tmp_path, limit=120)
    code, _, err, _ = results[1]
    assert code == 1
    assert "started with num_processes=3" in err and "job of 2 processes" in err


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
@TCP
def test_a_job_missing_a_process_ends_after_the_timeout(tmp_path):
    envs = _torchrun(3, _free_port(), TEST_TIMEOUT="3", TEST_HEARTBEAT="3")[:2]
    results = _launch("join", envs, tmp_path, limit=120)
    for code, _, err, _ in results:
        assert code != 0
        assert "for all 3 processes to register" in err, err[-2000:]


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
@TCP
def test_a_process_that_dies_ends_the_other_with_a_clear_error(tmp_path):
    # SLURM-style launch: JAX's cluster detection reads these variables.
    port = _free_port()
    envs = [
        {
            "SLURM_JOB_ID": "4242",
            "SLURM_STEP_NODELIST": "127.0.0.1",
            "SLURM_NTASKS": "2",
            "SLURM_PROCID": str(r),
            "SLURM_LOCALID": "0",
            "JAX_COORDINATOR_PORT": str(port),
            "TEST_TIMEOUT": "30",
            "TEST_HEARTBEAT": "3",
        }
        for r in range(2)
    ]
    results = _launch("die", envs, tmp_path, limit=120)
    survivor, dead = results
    assert dead[0] == 3
    assert survivor[0] != 0 and "survived" not in survivor[1]
    assert "stopped sending heartbeats" in survivor[2], survivor[2][-2000:]


def test_the_registration_watchdog_ends_a_process_jax_leaves_waiting():
    # JAX's client does not always end a process whose job never gathers; the
    # watchdog explains after `wait` and ends it itself after `grace` more.
    code = (
        "import time; from lyapax.distributed import _Watchdog; "
        "_Watchdog(0.2, 0.3, '127.0.0.1:1', 3, 1); time.sleep(30)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_env({}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    # SIGABRT, not exit 0: the watchdog ended the process inside its 30 s
    # sleep. No wall-clock bound: under load the child's import of jax alone
    # took over 20 s (suite on Python 3.12, load 15), and that is not the
    # watchdog's doing.
    assert proc.returncode == -6, proc.stderr[-2000:]
    assert "for all 3 processes to register" in proc.stderr
    assert "ending it (SIGABRT)" in proc.stderr


def test_a_cancelled_watchdog_leaves_the_process_alone():
    code = (
        "import time; from lyapax.distributed import _Watchdog; "
        "w = _Watchdog(0.2, 0.2, None, None, None); w.cancel(); time.sleep(0.8); "
        "print('alive')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_env({}),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "alive", proc.stderr
    assert "register" not in proc.stderr
