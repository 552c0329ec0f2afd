"""Multi-process jobs on JAX's own distributed runtime (several hosts or GPUs).

lyapax has no scheduler of its own: every process of the job runs the same
script, :func:`initialize` (a checked front door to
:func:`jax.distributed.initialize`) joins them, and then the batched entry
points (:func:`~lyapax.sweep.sweep_lyapunov_spectrum`,
:func:`~lyapax.sweep.sweep_trajectory`,
:func:`~lyapax.network.master_stability_function`,
:func:`~lyapax.finite_time.ftle_field`, ...) run unchanged in every process:
``jax.devices()`` lists the devices of all processes, the batch is split over
all of them, each process places its own part and computes it, and device
results come back as global ``jax.Array`` s. :func:`gather` brings them to
NumPy on every process or on one.

What a process reads when an argument of :func:`initialize` is None, in this
order: ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``,
``JAX_PROCESS_ID``; then the ``torchrun``-style ``MASTER_ADDR`` and
``MASTER_PORT`` (``JAX_COORDINATOR_PORT`` overrides the port), ``WORLD_SIZE``,
``RANK`` (and ``LOCAL_RANK`` as the local device when ``LOCAL_WORLD_SIZE`` >
1); whatever is still unset is left to JAX's cluster detection (SLURM's
``SLURM_JOB_ID``, ``SLURM_STEP_NODELIST``, ``SLURM_NTASKS``,
``SLURM_PROCID``, ``SLURM_LOCALID``; Open MPI; Kubernetes; Cloud TPU).

Faults end in bounded time. A coordinator that does not answer raises
``TimeoutError`` after ``timeout`` seconds; a process started with a
different process count from the coordinator's raises ``ValueError``; a job
that never gathers all its processes, or loses one (killed, crashed,
pre-empted) while running, is ended by JAX's runtime in every surviving
process (SIGABRT, exit status 134) after ``timeout`` or ``heartbeat_timeout``
seconds, with a message naming the missing process (where JAX's client does
not end a process still waiting to register, lyapax does so ``max(10,
timeout)`` seconds later). Results of a sweep are
equal across layouts for non-chaotic rows (to rounding); chaotic rows are
not promised bitwise equal between a one- and a multi-process run (the
per-process program is vectorised differently, and chaos amplifies the
rounding) and agree within their ``stderr``.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax

from lyapax._engine import validate
from lyapax._internal.batching import host_array

__all__ = ["ProcessInfo", "gather", "initialize"]


class ProcessInfo(NamedTuple):
    """Where this process stands in the job.

    Attributes:
        process_id: this process's index (0 hosts the coordinator).
        num_processes: processes in the job.
        local_devices: the devices this process feeds.
        global_device_count: devices of all processes (a sweep splits its
            batch over these).
    """

    process_id: int
    num_processes: int
    local_devices: tuple
    global_device_count: int


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    local_device_ids: int | list[int] | None = None,
    timeout: float = 300.0,
    heartbeat_timeout: float = 100.0,
) -> ProcessInfo:
    """Join this process to a multi-process job (call once, before any JAX work).

    Args:
        coordinator_address: ``"host:port"`` of process 0, which serves the
            coordinator there (None: from the environment, see
            :mod:`lyapax.distributed`).
        num_processes: processes in the job (the same in every process).
        process_id: this process's index, ``0 <= process_id < num_processes``.
        local_device_ids: the local devices (GPU ordinals) this process uses
            (None: all it sees).
        timeout: seconds to wait for the coordinator and for all processes to
            register.
        heartbeat_timeout: seconds without a heartbeat after which a process
            counts as dead and the job is ended.

    Returns:
        :class:`ProcessInfo`.

    Raises:
        ValueError: a malformed address, counts or ids (each named), a process
            count that differs from the coordinator's, or nothing found in the
            environment. TimeoutError: the coordinator did not answer within
            ``timeout`` seconds. OSError: the coordinator's port is taken on
            process 0's host. RuntimeError: already initialized.
    """
    if jax.distributed.is_initialized():
        raise RuntimeError(
            "lyapax.distributed.initialize: this process already joined a job "
            f"(process {jax.process_index()} of {jax.process_count()}); call it "
            "once per process"
        )
    env = os.environ
    address, n, pid, local = _from_environment(
        coordinator_address, num_processes, process_id, local_device_ids, env
    )
    wait = _seconds("timeout", timeout)
    heartbeat = _seconds("heartbeat_timeout", heartbeat_timeout)
    if address is not None:
        host, port = _split_address(address)
        if pid == 0:
            _check_port_free(port, address)
        elif pid is not None:
            _wait_for_coordinator(host, port, address, wait, pid, n)
    watchdog = _watchdog(wait, address, n, pid)
    try:
        jax.distributed.initialize(
            address,
            n,
            pid,
            local_device_ids=local,
            initialization_timeout=math.ceil(wait),
            heartbeat_timeout_seconds=math.ceil(heartbeat),
        )
    except ValueError as err:
        if address is None or n is None or pid is None:
            raise ValueError(
                "lyapax.distributed.initialize: no coordinator_address, "
                "num_processes and process_id given, and none found in the "
                "environment (JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES, "
                "JAX_PROCESS_ID; MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK; or a "
                f"SLURM / Open MPI / Kubernetes job): {err}"
            ) from err
        raise
    finally:
        watchdog.cancel()
    count = jax.process_count()
    if n is not None and count != n:
        raise ValueError(
            f"lyapax.distributed.initialize: this process was started with "
            f"num_processes={n}, but the coordinator at {address} runs a job of "
            f"{count} processes; start every process with the same num_processes"
        )
    return ProcessInfo(
        jax.process_index(), count, tuple(jax.local_devices()), len(jax.devices())
    )


def gather(tree: Any, to: int | str = "all") -> Any:
    """Every array of ``tree`` as a NumPy array holding all its rows.

    A collective: call it in every process, with trees of the same structure
    (the results of the same call). Global ``jax.Array`` s are copied from the
    processes that hold their shards; arrays of this process, NumPy arrays
    and other leaves pass through as NumPy (or unchanged).

    Args:
        tree: a result (``LyapunovResult``, ``Trajectory``, ``MSFResult``, ...)
            or any pytree of arrays.
        to: ``"all"`` (every process gets the arrays) or a process index (that
            process gets them, the others get None; the rows still travel to
            every process, so budget host memory for the whole result).

    Returns:
        ``tree`` with NumPy leaves, or None on processes other than ``to``.

    Raises:
        ValueError: ``to`` neither ``"all"`` nor a process index.
    """
    count = jax.process_count()
    if to != "all":
        if isinstance(to, str):
            raise ValueError(f'to must be "all" or a process index; got {to!r}')
        to = validate.as_int("to", to, minimum=0)
        if to >= count:
            raise ValueError(
                f'to={to} is not a process of this job (0 to {count - 1}), or "all"'
            )
    out = jax.tree.map(host_array, tree)
    if to != "all" and jax.process_index() != to:
        return None
    return out


def _from_environment(
    address: Any, n: Any, pid: Any, local: Any, env: Mapping[str, str]
) -> tuple[str | None, int | None, int | None, Any]:
    """Arguments, else the ``JAX_*`` variables, else ``torchrun``'s; each
    checked (a bad value names where it came from)."""
    torchrun = "MASTER_ADDR" in env and "WORLD_SIZE" in env and "RANK" in env
    if address is None:
        address = env.get("JAX_COORDINATOR_ADDRESS")
        if address is None and torchrun:
            port = env.get("JAX_COORDINATOR_PORT", env.get("MASTER_PORT"))
            if port is not None:
                address = f"{env['MASTER_ADDR']}:{port}"
    if address is not None and not isinstance(address, str):
        raise TypeError(
            f'coordinator_address must be a "host:port" string; got {address!r}'
        )
    n = _int_from(
        "num_processes", n, env, ("JAX_NUM_PROCESSES", "WORLD_SIZE"), torchrun
    )
    pid = _int_from("process_id", pid, env, ("JAX_PROCESS_ID", "RANK"), torchrun)
    if n is not None and n < 1:
        raise ValueError(f"num_processes must be at least 1; got {n}")
    if n is not None and pid is not None and not 0 <= pid < n:
        raise ValueError(
            f"process_id must be between 0 and num_processes - 1 = {n - 1}; got {pid}"
        )
    if local is None and torchrun and int(env.get("LOCAL_WORLD_SIZE", "1")) > 1:
        local = [_env_int("LOCAL_RANK", env)]
    return address, n, pid, local


def _int_from(
    name: str, value: Any, env: Mapping[str, str], keys: tuple[str, str], torchrun: bool
) -> int | None:
    if value is not None:
        return validate.as_int(name, value)
    if keys[0] in env:
        return _env_int(keys[0], env)
    if torchrun:
        return _env_int(keys[1], env)
    return None


def _env_int(key: str, env: Mapping[str, str]) -> int:
    try:
        return int(env[key])
    except (KeyError, ValueError):
        raise ValueError(
            f"the environment variable {key} must hold an integer; got {env.get(key)!r}"
        ) from None


def _seconds(name: str, value: Any) -> float:
    return validate.positive_float(
        name,
        value,
        allowed="a finite number of seconds > 0",
        why="(it is a wall-clock limit)",
    )


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f'coordinator_address must be "host:port" with a port from 1 to 65535; '
            f"got {address!r}"
        )
    return host, int(port)


def _check_port_free(port: int, address: str) -> None:
    """Process 0 serves the coordinator on ``port`` of every interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError as err:
            raise OSError(
                err.errno,
                f"lyapax.distributed.initialize: process 0 serves the coordinator "
                f"{address}, but port {port} is already in use on this host "
                f"({err.strerror}); choose another port",
            ) from None


def _wait_for_coordinator(
    host: str, port: int, address: str, wait: float, pid: int, n: int | None
) -> None:
    """Connect to the coordinator's port until it answers or ``wait`` passes
    (JAX's own client would abort the process instead of raising)."""
    deadline = time.monotonic() + wait
    last: OSError | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            with socket.create_connection((host, port), timeout=min(2.0, left)):
                return
        except OSError as err:
            last = err
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    of = "" if n is None else f" of {n}"
    raise TimeoutError(
        f"lyapax.distributed.initialize: process {pid}{of} found no coordinator "
        f"at {address} within {wait:g} s ({last}); start process 0 with the "
        "same address, check host and port, or raise timeout"
    )


class _Watchdog:
    """Explains, then enforces, the registration deadline.

    After ``wait`` seconds it prints one line saying what JAX's runtime is
    about to do; JAX then ends the process with a terse DEADLINE_EXCEEDED.
    Its client does not always do so (a coordinator that itself went away
    first can leave a client retrying for minutes), so after a further
    ``grace`` seconds the watchdog ends the process the same way
    (SIGABRT, exit status 134): the deadline holds whatever JAX does."""

    def __init__(self, wait: float, grace: float, address: Any, n: Any, pid: Any):
        who = "this process" if pid is None else f"process {pid}"
        where = "" if address is None else f" {address}"
        every = "all processes" if n is None else f"all {n} processes"
        self._line = (
            f"lyapax.distributed.initialize: {who} waited {wait:g} s at the "
            f"coordinator{where} for {every} to register; some "
            "never arrived (not started, started with another num_processes or "
            "coordinator address, or unreachable). JAX's runtime ends the "
            "process now."
        )
        self._wait, self._grace = wait, grace
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        if self._done.wait(self._wait):
            return
        print(self._line, file=sys.stderr, flush=True)
        if self._done.wait(self._grace):
            return
        print(
            "lyapax.distributed.initialize: JAX's runtime did not end the "
            f"process within {self._grace:g} s more; ending it (SIGABRT).",
            file=sys.stderr,
            flush=True,
        )
        os.abort()

    def cancel(self) -> None:
        self._done.set()


def _watchdog(wait: float, address: Any, n: Any, pid: Any) -> _Watchdog:
    """The registration watchdog, with a grace of ``max(10, wait)`` seconds
    for JAX's own deadline before it ends the process itself."""
    return _Watchdog(wait, max(10.0, wait), address, n, pid)
