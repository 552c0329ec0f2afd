"""A backend over a real ssh gateway: an OpenSSH server on 127.0.0.1.

The test starts ``sshd`` on a free loopback port with a host key, a client
key and an ``authorized_keys`` file it generates in a temporary directory,
and an ssh client configuration beside them (``ssh -F``): nothing under
``/etc`` or ``~/.ssh`` is read or written.  ``cpu2`` is bound to
``ssh=USER@127.0.0.1//ssh_config=FILE//python=...//chdir=...``; the run must
give one report with both backends ok and their results compared.  Where
``sshd`` or ``ssh-keygen`` is missing, or the server cannot start, the test
skips with the reason.  The server is killed in a finalizer and every wait
is bounded.
"""

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.deadlines import timeout_s

SSHD = shutil.which("sshd") or shutil.which("sshd", path="/usr/sbin:/usr/local/sbin")
SSH = shutil.which("ssh")
KEYGEN = shutil.which("ssh-keygen")
# The runtime directory sshd's privilege separation needs; the package's
# service creates it at start, so a server started by hand needs it too.
PRIVSEP_DIR = Path("/run/sshd")

# cpu2's records come back over ssh: a benchmark (its returned value is
# compared by default) and an explicit record.  Each process writes whether
# it runs in an ssh session, which proves the route.
SUITE = """
import json
import os

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)


def _note(label):
    with open("events.log", "a") as fh:
        fh.write(json.dumps({"label": label,
                             "ssh": os.environ.get("SSH_CONNECTION")}) + "\\n")


def test_bench(benchmark, jax_backend):
    x = jnp.linspace(0.0, 1.0, 8)
    benchmark(jax.jit(jnp.cumsum), x)
    _note(jax_backend)


def test_record(jax_results, jax_backend):
    jax_results.record("spectrum", {"x": jnp.sort(jnp.sin(jnp.arange(6.0)))})
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _keygen(path: Path) -> None:
    subprocess.run(
        [KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        timeout=timeout_s(30),
        stdin=subprocess.DEVNULL,
    )


class SshServer:
    """``sshd -D`` on 127.0.0.1 with its keys and configuration under ``where``."""

    def __init__(self, where: Path) -> None:
        self.user = getpass.getuser()
        self.port = _free_port()
        self.log = where / "sshd.log"
        _keygen(where / "host_key")
        _keygen(where / "client_key")
        shutil.copy(where / "client_key.pub", where / "authorized_keys")
        (where / "sshd_config").write_text(
            f"Port {self.port}\n"
            "ListenAddress 127.0.0.1\n"
            f"HostKey {where / 'host_key'}\n"
            f"PidFile {where / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {where / 'authorized_keys'}\n"
            "StrictModes no\n"
            "UsePAM no\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\n"
            # CI runs as root; key-only root login on loopback.
            "PermitRootLogin prohibit-password\n"
            f"AllowUsers {self.user}\n"
        )
        host_key = (where / "host_key.pub").read_text().split()[:2]
        (where / "known_hosts").write_text(
            f"[127.0.0.1]:{self.port} {' '.join(host_key)}\n"
        )
        self.config = where / "ssh_config"
        self.config.write_text(
            "Host *\n"
            f"  Port {self.port}\n"
            f"  IdentityFile {where / 'client_key'}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {where / 'known_hosts'}\n"
            "  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n"
            "  BatchMode yes\n"
            "  ConnectTimeout 10\n"
            "  LogLevel ERROR\n"
        )
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(where / "sshd_config")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"),
            start_new_session=True,
        )

    @property
    def destination(self) -> str:
        return f"{self.user}@127.0.0.1"

    def wait_until_it_answers(self, seconds: float = 20.0) -> str | None:
        """None once a login runs a command, else why not (sshd's log)."""
        seconds = timeout_s(seconds)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return f"sshd exited ({self.proc.returncode}): {self.log_text()}"
            probe = subprocess.run(
                [SSH, "-F", str(self.config), self.destination, "echo", "up"],
                capture_output=True,
                text=True,
                timeout=timeout_s(30),
                stdin=subprocess.DEVNULL,
            )
            if probe.stdout.strip() == "up":
                return None
            time.sleep(0.2)
        return f"no ssh login within {seconds:g} s: {self.log_text()}"

    def log_text(self) -> str:
        return self.log.read_text().strip()[-2000:]

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its sessions too
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=timeout_s(10))


def _missing() -> str | None:
    for name, found in (("sshd", SSHD), ("ssh", SSH), ("ssh-keygen", KEYGEN)):
        if found is None:
            return (
                f"{name} is not installed (apt-get install openssh-server "
                "openssh-client)"
            )
    if not PRIVSEP_DIR.is_dir():
        return (
            f"sshd needs its privilege separation directory {PRIVSEP_DIR}, which "
            "the ssh service creates at start; create it (mkdir -p /run/sshd) as "
            "root to run this test"
        )
    return None


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    why = _missing()
    if why is not None:
        pytest.skip(why)
    server = SshServer(tmp_path_factory.mktemp("sshd"))
    try:
        why = server.wait_until_it_answers()
        if why is not None and server.proc.poll() is not None:
            pytest.skip(f"the OpenSSH server could not start: {why}")
        assert why is None, why  # it runs but refuses our key: a real failure
        yield server
    finally:
        server.kill()


@pytest.fixture(scope="module")
def ssh_run(sshd, tmp_path_factory, clean_environment):
    path = tmp_path_factory.mktemp("ssh_suite")
    (path / "test_ssh_suite.py").write_text(SUITE)
    spec = (
        f"ssh={sshd.destination}//ssh_config={sshd.config}"
        f"//python={sys.executable}//chdir={path}"
    )
    # A login shell does not carry this environment's PYTHONPATH (it points
    # at the checkout under test); the host gets it as the spec's env.
    if clean_environment.get("PYTHONPATH"):
        spec += f"//env:PYTHONPATH={clean_environment['PYTHONPATH']}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--benchmark-min-rounds=2",
            "--benchmark-max-time=0",
            "--jax-backend=cpu,cpu2",
            "--jax-backend-platform=cpu2=cpu",
            f"--jax-backend-host=cpu2={spec}",
            "--jax-backend-host-timeout=60",
        ],
        cwd=path,
        env=clean_environment,
        capture_output=True,
        text=True,
        timeout=timeout_s(300),
    )
    return path, proc, sshd


@pytest.mark.slow
def test_cpu2_over_ssh_makes_one_report_with_results_compared(ssh_run):
    path, proc, server = ssh_run
    output = proc.stdout + proc.stderr + "\nsshd: " + server.log_text()
    assert proc.returncode == pytest.ExitCode.OK, output
    runs = {e["label"]: e for e in map(json.loads, (path / "events.log").open())}
    # cpu2 ran in a session of this server, cpu here.
    assert runs["cpu2"]["ssh"].split()[2:4] == ["127.0.0.1", str(server.port)]
    assert runs["cpu"]["ssh"] is None
    report = json.loads((path / "lyapax-report" / "benchmark.json").read_text())
    lyapax = report["pytest_lyapax"]
    states = {b["label"]: b for b in lyapax["backends"]}
    assert [states[k]["status"] for k in ("cpu", "cpu2")] == ["ok", "ok"], output
    assert states["cpu2"]["gateway"] == f"ssh {server.destination}"
    assert states["cpu2"]["code"]["files"] >= 1  # the code check ran over ssh
    assert {r["extra_info"]["backend"] for r in report["benchmarks"]} == {
        "cpu",
        "cpu2",
    }
    compared = {e["test"].split("::")[1]: e for e in lyapax["agreement"]}
    assert set(compared) == {"test_bench", "test_record"}, compared
    for entry in compared.values():
        assert entry["agree"] and not entry["failed"], entry
        assert (entry["reference"], entry["backend"]) == ("cpu", "cpu2"), entry
    names = {e["names"][0]["name"] for e in compared.values()}
    assert names == {"benchmark", "spectrum"}
    assert "esults across backends" in proc.stdout
