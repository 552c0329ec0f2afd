"""Which runs of this suite get worker processes
(``tests/support/suite_workers.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from support import suite_workers
from support.suite_workers import (
    TESTS,
    WORKERS_ENV,
    apply_default_workers,
    default_workers,
)


def _config(args=(str(TESTS),), markexpr="not slow", xdist=True, **option):
    defaults = dict(
        markexpr=markexpr,
        usepdb=False,
        collectonly=False,
        numprocesses=None,
        dist="no",
        tx=[],
    )
    defaults.update(option)
    return SimpleNamespace(
        args=list(args),
        option=SimpleNamespace(**defaults),
        pluginmanager=SimpleNamespace(hasplugin=lambda name: xdist and name == "xdist"),
    )


@pytest.fixture
def cpus(monkeypatch):
    def set_cpus(n):
        monkeypatch.setattr(suite_workers, "_cpus", lambda: n)

    set_cpus(2)
    return set_cpus


@pytest.mark.parametrize("markexpr", ["not slow", "slow"])
def test_either_run_of_the_whole_folder_gets_one_worker_per_cpu(markexpr, cpus):
    config = _config(markexpr=markexpr)
    apply_default_workers(config, environ={})
    assert (config.option.numprocesses, config.option.dist) == (2, "loadfile")
    # pytest-benchmark is off under workers anyway: said once, not warned.
    config = _config(benchmark_disable=False)
    apply_default_workers(config, environ={})
    assert config.option.benchmark_disable is True
    cpus(64)
    assert default_workers(_config(), environ={}) == suite_workers.MAX_WORKERS
    cpus(1)
    assert default_workers(_config(), environ={}) == 0


@pytest.mark.parametrize(
    "config",
    [
        _config(args=[str(TESTS / "test_sparse.py")]),
        _config(args=[str(TESTS / "test_sparse.py::test_x")]),
        _config(args=[]),
        _config(markexpr=""),
        _config(markexpr="slow and not remote"),
        _config(usepdb=True),
        _config(collectonly=True),
    ],
    ids=[
        "one-file",
        "one-test",
        "no-args",
        "every-test",
        "part-of-slow",
        "pdb",
        "collect",
    ],
)
def test_narrower_or_debugging_runs_stay_in_one_process(config, cpus):
    assert default_workers(config, environ={}) == 0
    apply_default_workers(config, environ={})
    assert (config.option.numprocesses, config.option.dist) == (None, "no")


@pytest.mark.parametrize(
    "config",
    [
        _config(numprocesses=0),
        _config(numprocesses=3),
        _config(dist="load"),
        _config(tx=["popen"]),
        _config(xdist=False),
        _config(jax_backend="cpu,gpu"),
    ],
    ids=["n0", "n3", "dist", "tx", "no-xdist", "per-backend"],
)
def test_the_runs_own_choice_or_no_xdist_is_left_alone(config, cpus):
    before = vars(config.option).copy()
    apply_default_workers(config, environ={WORKERS_ENV: "2"})
    assert vars(config.option) == before


def test_a_worker_process_gets_no_workers_and_no_benchmark_warning(cpus):
    config = _config(benchmark_disable=False)
    config.workerinput = {}
    apply_default_workers(config, environ={})
    assert config.option.numprocesses is None
    # pytest-benchmark would switch itself off in a worker, with a warning.
    assert config.option.benchmark_disable is True
    # The plugin's per-backend workers measure: left as they are.
    config = _config(benchmark_disable=False, jax_backend="cpu,cpu2")
    config.workerinput = {}
    apply_default_workers(config, environ={})
    assert config.option.benchmark_disable is False


def test_the_environment_variable_sets_the_count_for_any_run(cpus):
    narrow = _config(args=[str(TESTS / "test_sparse.py")])
    assert default_workers(narrow, environ={WORKERS_ENV: "3"}) == 3
    assert default_workers(_config(), environ={WORKERS_ENV: "0"}) == 0
    config = _config()
    apply_default_workers(config, environ={WORKERS_ENV: "0"})
    assert config.option.numprocesses is None


@pytest.mark.parametrize("raw", ["two", "-1", "1.5", ""])
def test_a_bad_environment_variable_names_itself_and_the_value(raw, cpus):
    with pytest.raises(pytest.UsageError, match=rf"{WORKERS_ENV}={raw!r}.*>= 0"):
        default_workers(_config(), environ={WORKERS_ENV: raw})
