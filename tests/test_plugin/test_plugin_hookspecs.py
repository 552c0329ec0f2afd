"""The plugin's own hooks (``pytest_lyapax/hookspecs.py``), implemented in a
project's conftest: the backends it selects run, in its order, and the
machine description it gives is what a benchmark records.

A JAX backend is fixed per process, so the runs go through real pytest
processes (``run_pytest``, ``runpytest_subprocess``).
"""

import pytest

FAST = ("-p", "no:cacheprovider", "--benchmark-max-time=0", "--benchmark-min-rounds=2")
PLATFORMS = ("--jax-backend-platform=cpu2=cpu", "--jax-backend-platform=cpu3=cpu")

TESTS = """
import jax
import jax.numpy as jnp


def test_bench(benchmark, jax_backend):
    x = jnp.ones(8)
    benchmark(lambda: (x * 2).block_until_ready())
"""

CONFTEST = """
def pytest_lyapax_select_backends(config, backends):
    # cpu3 never runs here, and cpu2 runs first.
    labels = [b.label for b in backends]
    assert labels == ["cpu", "cpu2", "cpu3"], labels
    return ["cpu2", "cpu"]


def pytest_lyapax_machine_info(config, backend):
    if backend.label == "cpu2":
        return {"rack": "r1"}  # replaces the description
    return None  # the plugin's own description


def pytest_lyapax_update_machine_info(config, backend, machine_info):
    machine_info["described_for"] = backend.label
"""


@pytest.fixture(scope="module")
def hooked_run(run_pytest, tmp_path_factory):
    path = tmp_path_factory.mktemp("hooks")
    (path / "test_hooks.py").write_text(TESTS)
    (path / "conftest.py").write_text(CONFTEST)
    report = path / "report"
    backends = ["--jax-backend=cpu,cpu2,cpu3", *PLATFORMS]
    proc, data = run_pytest(
        path, report, *FAST, *backends, f"--jax-report-dir={report}"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, data


def test_the_selected_backends_run_in_the_selected_order(hooked_run):
    proc, data = hooked_run
    assert "2 passed" in proc.stdout
    run = data["pytest_lyapax"]
    assert [b["label"] for b in run["backends"]] == ["cpu2", "cpu"]
    assert run["run_order"] == ["cpu2", "cpu"]
    labels = sorted(b["extra_info"]["backend"] for b in data["benchmarks"])
    assert labels == ["cpu", "cpu2"]


def test_the_machine_description_is_the_hooks(hooked_run):
    _, data = hooked_run
    info = {b["extra_info"]["backend"]: b["extra_info"] for b in data["benchmarks"]}
    # Replaced on cpu2, the plugin's own on cpu; updated on both.
    assert info["cpu2"]["rack"] == "r1"
    assert "jax_version" not in info["cpu2"] and "device" not in info["cpu2"]
    assert info["cpu"]["jax_backend"] == "cpu" and "jax_version" in info["cpu"]
    assert "rack" not in info["cpu"]
    assert info["cpu"]["described_for"] == "cpu"
    assert info["cpu2"]["described_for"] == "cpu2"


@pytest.mark.parametrize(
    "returned", ["[]", "['gpu']", "['cpu', 'cpu']", "'cpu'"], ids=str
)
def test_a_selection_that_is_not_of_the_requested_labels_is_a_usage_error(
    pytester, returned
):
    pytester.makeconftest(
        f"def pytest_lyapax_select_backends(config, backends):\n    return {returned}\n"
    )
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--jax-backend=cpu,cpu2", PLATFORMS[0])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*pytest_lyapax_select_backends returned *; return a non-empty list of "
            "the requested labels (cpu, cpu2), each at most once*"
        ]
    )


def test_without_an_implementation_every_backend_runs_in_the_given_order(pytester):
    # The plugin's own implementations: all labels, in the order given.
    from pytest_lyapax.run.options import read_settings

    config = pytester.parseconfig(
        "--jax-backend=cpu2,cpu", "--jax-backend-platform=cpu2=cpu"
    )
    assert read_settings(config, check_paths=False).labels == ("cpu2", "cpu")
    hook = config.hook
    assert hook.pytest_lyapax_select_backends(config=config, backends=()) == []
