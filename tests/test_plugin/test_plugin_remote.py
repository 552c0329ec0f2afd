"""Backends on other hosts (``--jax-backend-host``), on loopback only.

"Remote" hosts here are an execnet socket server on 127.0.0.1 started by the
test (``execnet/script/socketserver.py``, killed in teardown) and a second
virtual environment reached with ``popen//python=``.  Every wait is bounded.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import execnet
import pytest
from support.deadlines import timeout_s

from pytest_lyapax.backends import codeid, hosts
from pytest_lyapax.backends.labels import Backend
from pytest_lyapax.run import remote

FAST = ["-p", "no:cacheprovider", "--benchmark-min-rounds=2", "--benchmark-max-time=0"]
SERVER_SCRIPT = Path(execnet.__file__).parent / "script" / "socketserver.py"

# The test suite each run measures.  Every process that runs its tests
# appends what it is to events.log in its working directory (the same
# directory for the local worker and, through chdir=, the "remote" one).
SUITE = """
import json
import os
import sys

import pytest

AT_IMPORT = {"jax_imported": "jax" in sys.modules,
             "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS")}


@pytest.mark.jax_sizes(2, 4)
def test_sum(benchmark, jax_backend, jax_size):
    import jax
    import jax.numpy as jnp

    x = jnp.ones(jax_size)
    benchmark(jax.jit(jnp.sum), x)
    with open("events.log", "a") as fh:
        fh.write(json.dumps({
            "label": jax_backend, "pid": os.getpid(), "ppid": os.getppid(),
            "prefix": sys.prefix, "backend": jax.default_backend(), **AT_IMPORT,
        }) + "\\n")


def test_plain(jax_backend):
    assert jax_backend in ("cpu", "cpu2")
"""

# Appended for the kill case: cpu2's worker kills its host (the socket
# server's whole process group) in the middle of its tests.  Just before,
# the host's relay (the server process, which forwards the worker's
# messages) stalls for 2 s with a finished benchmark's report unforwarded:
# the report survives only if the worker waits for the controller's
# acknowledgement before starting the test that kills the host.
KILL_TEST = """

def test_zy_relay_stalls(benchmark, jax_backend):
    import signal
    import subprocess

    benchmark(lambda: 1.0)
    if jax_backend == "cpu2":
        relay = os.getppid()
        os.kill(relay, signal.SIGSTOP)
        subprocess.Popen(["sh", "-c", f"sleep 2; kill -CONT {relay}"],
                         start_new_session=True)


def test_zz_kill_the_host(jax_backend):
    import signal
    if jax_backend == "cpu2":
        os.killpg(os.getpgid(0), signal.SIGKILL)


def test_zzz_after(jax_backend):
    pass
"""

# Appended for the silent-host case: the host stops answering (SIGSTOP).
STOP_TEST = """

def test_zz_host_goes_quiet(jax_backend):
    import signal
    if jax_backend == "cpu2":
        os.killpg(os.getpgid(0), signal.SIGSTOP)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SocketServer:
    """execnet's socket server on 127.0.0.1, in its own process group."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER_SCRIPT), f"127.0.0.1:{self.port}"],
            env=env,
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s(20)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"socket server exited ({self.proc.returncode})")
            try:
                # An empty connection: the server reads an empty line, fails
                # to run it and goes back to accepting.
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"socket server did not start within {timeout_s(20):g} s")

    @property
    def spec(self) -> str:
        return f"socket=127.0.0.1:{self.port}"

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # also its worker processes
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=timeout_s(10))


@pytest.fixture
def server(clean_environment, tmp_path):
    started = SocketServer(clean_environment, tmp_path)
    yield started
    started.kill()


@pytest.fixture(scope="session")
def second_venv(tmp_path_factory) -> Path:
    """A second environment (sharing this one's packages): another interpreter.

    Not ``--system-site-packages``: where this process runs in a virtual
    environment, that would share the base interpreter's packages (other
    versions) instead of these. A ``.pth`` file adds this environment's
    site directories (their own ``.pth`` files, editable installs, included).
    """
    where = tmp_path_factory.mktemp("venv2") / "env"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", where],
        check=True,
        timeout=timeout_s(120),
    )
    ours = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    prefix = {"base": str(where), "platbase": str(where)}
    theirs = sysconfig.get_path("purelib", vars=prefix)
    Path(theirs, "_shared_with_the_suite.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in ours)
    )
    return where / "bin" / "python"


def run(path: Path, env: dict[str, str], *args: str, timeout: float = 240):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *FAST, "-rs", *args],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s(timeout),
    )
    return pytest.RunResult(
        proc.returncode, proc.stdout.splitlines(), proc.stderr.splitlines(), 0.0
    )


def cpu2_on(spec: str) -> list[str]:
    return [
        "--jax-backend=cpu,cpu2",
        "--jax-backend-platform=cpu2=cpu",
        f"--jax-backend-host=cpu2={spec}",
    ]


def report_of(path: Path) -> dict:
    return json.loads((path / "lyapax-report" / "benchmark.json").read_text())


def backends_of(report: dict) -> dict[str, dict]:
    return {b["label"]: b for b in report["pytest_lyapax"]["backends"]}


def events(path: Path) -> list[dict]:
    lines = (path / "events.log").read_text().splitlines()
    return [json.loads(line) for line in lines]


def suite(path: Path, extra: str = "") -> Path:
    (path / "test_remote_suite.py").write_text(SUITE + extra)
    return path


# -- pure parts ---------------------------------------------------------------
def test_host_specs_parse_into_worker_and_connection_specs():
    bound = hosts.parse_host_bindings(
        [
            "gpu=ssh=me@server//python=/opt/venv/bin/python//chdir=/srv/co",
            "cpu2=socket=127.0.0.1:8888//env:OMP_NUM_THREADS=1",
            "cpu3=popen//python=/v/bin/python//chdir=/x",
        ]
    )
    gpu, cpu2, cpu3 = bound["gpu"], bound["cpu2"], bound["cpu3"]
    assert (gpu.kind, gpu.address, gpu.python, gpu.chdir) == (
        "ssh",
        "me@server",
        "/opt/venv/bin/python",
        "/srv/co",
    )
    assert gpu.connect_spec() == (
        "ssh=me@server//execmodel=thread//python=/opt/venv/bin/python"
    )
    assert cpu2.connect_spec() == "socket=127.0.0.1:8888//execmodel=thread"
    backend = Backend("gpu", "cuda", gpu)
    # A popen spec through the host's gateway, no chdir (no rsync, no path
    # rewriting by xdist), JAX_PLATFORMS and the GPU memory setting in env.
    assert remote.worker_spec(backend) == (
        "popen//via=lyapax-gpu//python=/opt/venv/bin/python"
        "//env:JAX_PLATFORMS=cuda//env:XLA_PYTHON_CLIENT_PREALLOCATE=false"
    )
    assert remote.worker_spec(Backend("cpu2", "cpu", cpu2)) == (
        "popen//via=lyapax-cpu2//env:OMP_NUM_THREADS=1//env:JAX_PLATFORMS=cpu"
    )
    assert remote.worker_spec(Backend("cpu3", "cpu", cpu3)) == (
        "popen//python=/v/bin/python//env:JAX_PLATFORMS=cpu"
    )
    assert cpu3.chdir == "/x"
    for spec in map(execnet.XSpec, [remote.worker_spec(backend)]):
        assert spec.popen and spec.via == "lyapax-gpu" and not spec.chdir


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("gpu", "not LABEL=SPEC"),
        ("gpu=server", "unknown key 'server'"),
        ("gpu=ssh=h//env:JAX_PLATFORMS=cpu", "JAX_PLATFORMS is set by the plugin"),
        ("gpu=socket=localhost", "is not HOST:PORT"),
        ("gpu=socket=h:1//ssh=h", "exactly one of"),
        ("gpu=popen", "popen without python="),
        ("gpu=ssh=h//via=x", "'via' is chosen by the plugin"),
        ("GPU!=ssh=h", "must start with a lowercase letter"),
        ("gpu=ssh=h//chdir", "chdir= needs a value"),
    ],
)
def test_bad_host_bindings_are_usage_errors(value, message):
    with pytest.raises(pytest.UsageError, match="--jax-backend-host") as info:
        hosts.parse_host_bindings([value])
    assert message in str(info.value)


def test_a_host_for_an_unrequested_label_is_refused():
    bound = hosts.parse_host_bindings(["gpu2=socket=h:1"])
    with pytest.raises(pytest.UsageError, match="--jax-backend-platform=gpu2="):
        hosts.bind_hosts([Backend("cpu", "cpu")], bound)
    with pytest.raises(pytest.UsageError, match="bound to two hosts"):
        hosts.parse_host_bindings(["gpu=socket=h:1", "gpu=socket=h:2"])


def test_code_differences_name_each_file_and_version():
    here = {
        "commit": "a" * 40,
        "files": {"t.py": "1", "gone.py": "2"},
        "packages": {"jaxopt": "0.8"},
        "tools": {"jax": "0.10.2"},
    }
    there = {
        "commit": "b" * 40,
        "files": {"t.py": "9", "new.py": "3"},
        "packages": {"jaxopt": "0.9"},
        "tools": {"jax": "0.10.2"},
    }
    assert codeid.differences(here, there, "srv") == [
        "commit aaaaaaaaaaaa here, bbbbbbbbbbbb on srv",
        "gone.py: not on srv",
        "new.py: on srv, not in this checkout",
        "t.py differs",
        "jaxopt 0.8 here, 0.9 on srv",
    ]
    assert codeid.differences(here, here, "srv") == []


def test_code_identity_hashes_loaded_files_under_the_root(tmp_path):
    (tmp_path / "mod_under_root.py").write_text("X = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import mod_under_root  # noqa: F401

        identity = codeid.code_identity(tmp_path, [], [])
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("mod_under_root", None)
    assert list(identity["files"]) == ["mod_under_root.py"]
    assert identity["files"]["mod_under_root.py"] == codeid.file_hash(
        tmp_path / "mod_under_root.py"
    )
    assert set(identity["tools"]) == set(codeid.TOOLS)


def test_host_lost_between_probe_and_start_runs_a_skipping_local_worker():
    """The master gateway of a host that answered its probe cannot be made
    when xdist starts the workers: that backend is unavailable and its worker
    becomes a local one that skips its tests, so nothing else is lost."""
    from types import SimpleNamespace

    from pytest_lyapax.run.options import Settings
    from pytest_lyapax.run.session import BackendState, LyapaxSession

    backends = (
        Backend("cpu", "cpu"),
        Backend("cpu2", "cpu", hosts.parse_host_spec("x", "socket=127.0.0.1:1")),
    )
    settings = Settings(backends=backends, host_timeout=5.0)
    session = LyapaxSession(
        settings, "controller", {b.label: BackendState(b) for b in backends}
    )

    class Group:
        def makegateway(self, spec):
            raise ConnectionRefusedError(111, "Connection refused")

    plugins = {
        "pytest-lyapax-xdist": SimpleNamespace(order=["cpu", "cpu2"]),
        "dsession": SimpleNamespace(nodemanager=SimpleNamespace(group=Group())),
    }
    config = SimpleNamespace(
        pluginmanager=SimpleNamespace(getplugin=plugins.__getitem__)
    )
    hooks = remote.RemoteHooks(config, session)
    specs = [execnet.XSpec(remote.worker_spec(b)) for b in backends]
    hooks.pytest_xdist_setupnodes(config, specs)
    assert specs[1].via is None and specs[1].popen
    assert specs[1].env == {"JAX_PLATFORMS": "cpu"}
    state = session.states["cpu2"]
    assert state.status == "unavailable"
    assert "then not when its worker was started: connection refused" in state.reason
    assert session.skip_reason("cpu2").startswith("jax backend 'cpu2' unavailable")


class FakeChannel:
    """The link channel's two ends in one object: what was sent, and the
    callback a message from the other side is delivered to."""

    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.callback = None

    def send(self, message: str) -> None:
        self.sent.append(json.loads(message))

    def setcallback(self, callback) -> None:
        self.callback = callback


def test_remote_worker_waits_for_each_tests_acknowledgement():
    """A remote worker does not start its next test before the controller
    acknowledged the last one: a host that dies then loses at most the test
    it was running (its relay may die holding unforwarded messages)."""
    import threading

    from pytest_lyapax.backends.remoteworker import WorkerLink

    channel = FakeChannel()
    link = WorkerLink(None, {"channel": channel, "beat_s": 0.0, "ack_s": 600.0})
    done = threading.Event()

    def finish() -> None:
        link.pytest_runtest_logfinish("t.py::test_a")
        done.set()

    waiter = threading.Thread(target=finish, daemon=True)
    waiter.start()
    channel.callback(json.dumps({"ack": "t.py::test_other"}))
    channel.callback("not json")
    assert not done.wait(0.3)  # still waiting: not its acknowledgement
    channel.callback(json.dumps({"ack": "t.py::test_a"}))
    assert done.wait(timeout_s(30))
    # Bounded: no acknowledgement within ack_s, the worker goes on; a local
    # worker (ack_s 0) never waits and takes no callback.
    WorkerLink(
        None, {"channel": FakeChannel(), "ack_s": 0.05}
    ).pytest_runtest_logfinish("t.py::test_b")
    local = FakeChannel()
    WorkerLink(None, {"channel": local, "ack_s": 0.0}).pytest_runtest_logfinish("x")
    assert local.callback is None


def test_controller_acknowledges_a_remote_tests_last_report():
    from types import SimpleNamespace

    from pytest_lyapax.run.options import Settings
    from pytest_lyapax.run.session import BackendState, LyapaxSession

    backends = (
        Backend("cpu", "cpu"),
        Backend("cpu2", "cpu", hosts.parse_host_spec("x", "socket=127.0.0.1:1")),
    )
    session = LyapaxSession(
        Settings(backends=backends),
        "controller",
        {b.label: BackendState(b) for b in backends},
    )
    hooks = remote.RemoteHooks(SimpleNamespace(), session)
    remote_node, local_node, channel = object(), object(), FakeChannel()
    hooks.links[remote_node] = channel
    for node in (local_node, remote_node):
        for when in ("setup", "call", "teardown"):
            report = SimpleNamespace(nodeid=f"t.py::test[{when}]", when=when, node=node)
            handling = hooks.pytest_runtest_logreport(report)
            next(handling)  # the other plugins handle the report now
            assert channel.sent == []
            with pytest.raises(StopIteration):
                handling.send(None)
    # One acknowledgement, after the remote test's teardown report was handled.
    assert channel.sent == [{"ack": "t.py::test[teardown]"}]


# -- runs -------------------------------------------------------------------
def test_typed_tx_with_jax_backend_is_a_usage_error(pytester, clean_environment):
    suite(pytester.path)
    result = run(pytester.path, clean_environment, "--jax-backend=cpu", "--tx", "popen")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--tx cannot be combined with --jax-backend*--jax-backend-host=gpu=ssh=*"]
    )


@pytest.mark.slow
def test_local_cpu_and_socket_served_cpu2_make_one_report(
    pytester, clean_environment, server
):
    path = suite(pytester.path)
    result = run(path, clean_environment, *cpu2_on(f"{server.spec}//chdir={path}"))
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    runs = {e["label"]: e for e in events(path)}
    # cpu2 ran in a fresh interpreter started by the socket server, with
    # JAX_PLATFORMS set before JAX was imported; cpu ran here.
    assert runs["cpu2"]["ppid"] == server.proc.pid
    assert runs["cpu"]["ppid"] != server.proc.pid
    for entry in runs.values():
        assert entry["JAX_PLATFORMS"] == "cpu" and entry["backend"] == "cpu"
        assert entry["jax_imported"] is False
    report = report_of(path)
    states = backends_of(report)
    assert [states[k]["status"] for k in ("cpu", "cpu2")] == ["ok", "ok"]
    assert states["cpu2"]["gateway"] == f"socket 127.0.0.1:{server.port}"
    assert states["cpu2"]["code"]["files"] >= 1
    remote_records = [
        r for r in report["benchmarks"] if r["extra_info"]["backend"] == "cpu2"
    ]
    assert len(remote_records) == 2
    assert {r["extra_info"]["host"] for r in remote_records} == {states["cpu2"]["host"]}
    assert (path / "lyapax-report" / "crossover.png").read_bytes()[:4] == b"\x89PNG"
    result.stdout.fnmatch_lines(["*cpu2*JAX_PLATFORMS=cpu*ok*3 passed*2*"])


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_other_code_on_the_host_is_a_mismatch(
    pytester, clean_environment, server, tmp_path
):
    path = suite(pytester.path)
    checkout = tmp_path / "host-checkout"
    shutil.copytree(path, checkout)
    with open(checkout / "test_remote_suite.py", "a") as fh:
        fh.write("\n# edited on the host only\n")
    result = run(path, clean_environment, *cpu2_on(f"{server.spec}//chdir={checkout}"))
    assert result.ret == remote.MISMATCH_EXIT, result.stdout.str()
    states = backends_of(report_of(path))
    assert states["cpu"]["status"] == "ok"
    assert states["cpu"]["outcomes"] == {"passed": 3}
    assert states["cpu2"]["status"] == "mismatch"
    assert "test_remote_suite.py differs" in states["cpu2"]["reason"]
    assert not (checkout / "events.log").exists()  # nothing ran there
    result.stdout.fnmatch_lines(["*code mismatch on cpu2*exit code 4*"])


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_refused_connection_makes_the_backend_unavailable(pytester, clean_environment):
    path = suite(pytester.path)
    # The binding and the timeout from the ini file this time.
    (path / "pytest.ini").write_text(
        "[pytest]\n"
        f"jax_backend_host = cpu2=socket=127.0.0.1:{free_port()}\n"
        "jax_backend_host_timeout = 5\n"
    )
    args = ["--jax-backend=cpu,cpu2", "--jax-backend-platform=cpu2=cpu"]
    result = run(path, clean_environment, *args, "-k", "test_plain")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*cpu2*unavailable*1 skipped*",
            "*cpu2: host socket 127.0.0.1:* unreachable: connection refused*",
        ]
    )


@pytest.mark.slow
def test_second_environment_through_popen_python(
    pytester, clean_environment, second_venv, tmp_path
):
    """A backend in another virtual environment, whose checkout differs but
    is allowed to (--jax-allow-code-mismatch): it runs, and the differences
    are in the report."""
    path = suite(pytester.path)
    checkout = tmp_path / "venv-checkout"
    shutil.copytree(path, checkout)
    with open(checkout / "test_remote_suite.py", "a") as fh:
        fh.write("\n# edited in the other environment only\n")
    result = run(
        path,
        clean_environment,
        *cpu2_on(f"popen//python={second_venv}//chdir={checkout}"),
        "--jax-allow-code-mismatch",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    (entry,) = events(checkout)[-1:]
    assert entry["label"] == "cpu2"
    assert Path(entry["prefix"]) == second_venv.parent.parent
    states = backends_of(report_of(path))
    assert states["cpu2"]["status"] == "ok"
    assert states["cpu2"]["python"] == str(second_venv)
    assert states["cpu2"]["code_differences"] == ["test_remote_suite.py differs"]


@pytest.mark.slow
def test_host_killed_mid_run_keeps_the_other_results(
    pytester, clean_environment, server
):
    path = suite(pytester.path, KILL_TEST)
    # cpu2 first: cpu still runs after its host is gone.
    args = cpu2_on(f"{server.spec}//chdir={path}")
    args[0] = "--jax-backend=cpu2,cpu"
    result = run(path, clean_environment, *args)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    states = backends_of(report_of(path))
    assert states["cpu"]["status"] == "ok"
    assert states["cpu"]["outcomes"] == {"passed": 6}
    assert states["cpu2"]["status"] == "crashed"
    assert "was lost mid-run" in states["cpu2"]["reason"]
    assert states["cpu2"]["n_benchmarks"] == 3  # measured before the kill
    result.stdout.fnmatch_lines(["*backend(s) crashed: cpu2*"])


@pytest.mark.slow
def test_quiet_host_is_cut_off_after_the_timeout(pytester, clean_environment, server):
    path = suite(pytester.path, STOP_TEST)
    args = cpu2_on(f"{server.spec}//chdir={path}")
    result = run(path, clean_environment, *args, "--jax-backend-host-timeout=3")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    states = backends_of(report_of(path))
    assert states["cpu"]["status"] == "ok"
    assert states["cpu2"]["status"] == "crashed"
    assert "no answer from host" in states["cpu2"]["reason"]
    assert "for 3 s (--jax-backend-host-timeout)" in states["cpu2"]["reason"]


@pytest.mark.slow
def test_host_that_never_answers_is_unavailable_after_the_timeout(
    pytester, clean_environment
):
    """A listener that accepts the connection and stays silent (a hung host):
    the connect step gives up after --jax-backend-host-timeout."""
    import threading

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    accepted, stop = [], threading.Event()

    def accept_and_stay_silent() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept_and_stay_silent, daemon=True)
    thread.start()
    try:
        path = suite(pytester.path)
        spec = f"socket=127.0.0.1:{listener.getsockname()[1]}"
        result = run(
            path,
            clean_environment,
            *cpu2_on(spec),
            "--jax-backend-host-timeout=2",
            "-k",
            "test_plain",
        )
    finally:
        stop.set()
        thread.join(timeout=timeout_s(5))
        for conn in accepted:
            conn.close()
        listener.close()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert accepted  # it did connect
    result.stdout.fnmatch_lines(
        ["*cpu2: host socket 127.0.0.1:* unreachable: no answer within 2 s (connect)*"]
    )
