"""The code run in other interpreters is plain modules: stdlib only, and it runs."""

import ast
import inspect
import json
import os
import subprocess
import sys

import execnet
import pytest
from support.deadlines import timeout_s

from pytest_lyapax.backends import _gateway_code, _probe_script
from pytest_lyapax.backends.probe import PROBE_SOURCE
from pytest_lyapax.run import _chdir_code

REMOTE_CODE = (_probe_script, _gateway_code, _chdir_code)


@pytest.mark.parametrize("module", REMOTE_CODE, ids=lambda m: m.__name__)
def test_code_sent_elsewhere_imports_only_the_standard_library(module):
    # A host may have no pytest_lyapax (that is what the probe finds out).
    tree = ast.parse(inspect.getsource(module))
    nodes = list(ast.walk(tree))
    names = {a.name for n in nodes if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in nodes if isinstance(n, ast.ImportFrom) and n.module}
    top = {name.split(".")[0] for name in names}
    # jax (the probe's subject) and cpuinfo (optional) are imported inside
    # functions that catch their absence.
    assert top - set(sys.stdlib_module_names) <= {"jax", "cpuinfo"}
    assert all(n.level == 0 for n in nodes if isinstance(n, ast.ImportFrom))


@pytest.fixture(scope="module")
def gateway():
    gw = execnet.makegateway("popen")
    yield gw
    gw.exit()


def test_the_probe_and_host_info_run_through_a_gateway(gateway, tmp_path):
    channel = gateway.remote_exec(_chdir_code)
    channel.send(str(tmp_path))
    assert channel.receive(timeout=timeout_s(30)) == str(tmp_path)
    channel = gateway.remote_exec(_gateway_code)
    channel.send(
        {
            "env": {"JAX_PLATFORMS": "cpu"},
            "chdir": str(tmp_path),
            "python": None,
            "code": PROBE_SOURCE,
            "argv": [_probe_script.HOST_INFO_FLAG, "pytest", "no-such-dist"],
            "timeout": timeout_s(120),
        }
    )
    answer = channel.receive(timeout=timeout_s(150))
    assert answer["returncode"] == 0, answer["stderr"][-2000:]
    probe, info = answer["stdout"].splitlines()
    assert probe.startswith(_probe_script.MARK)
    found = json.loads(probe[len(_probe_script.MARK) :])
    assert (found["ok"], found["backend"], found["device_count"]) == (True, "cpu", 1)
    assert info.startswith(_probe_script.INFO_MARK)
    host = json.loads(info[len(_probe_script.INFO_MARK) :])
    assert host["cwd"] == str(tmp_path)
    assert host["versions"] == {"pytest": pytest.__version__, "no-such-dist": None}


def test_the_gateway_code_reports_a_missing_directory(gateway, tmp_path):
    channel = gateway.remote_exec(_gateway_code)
    missing = str(tmp_path / "missing")
    channel.send(
        {
            "env": {},
            "chdir": missing,
            "python": None,
            "code": "",
            "argv": [],
            "timeout": 5,
        }
    )
    assert channel.receive(timeout=timeout_s(30)) == {
        "error": f"chdir={missing} is not a directory on the host"
    }


def test_the_probe_reports_what_a_platform_raised():
    env = {**os.environ, "JAX_PLATFORMS": "no_such_platform"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE_SOURCE],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s(120),
    )
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith(_probe_script.MARK)]
    found = json.loads(line[len(_probe_script.MARK) :])
    assert found["ok"] is False and found["error_type"]
