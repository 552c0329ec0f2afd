"""JAX's persistent compilation cache in the workers (--jax-compile-cache).

Two runs of one small suite, each a fresh pytest process with its xdist
worker, share the default cache folder under the report folder: the second
loads its programs from it (counted by JAX's monitoring events, never by a
clock).  JAX writes only programs that compiled for at least
``jax_persistent_cache_min_compile_time_secs`` (1 s by default); the CPU
compiles these in milliseconds, and the runs leave that threshold unset: the
workers lower it to 0 themselves.  The same runs check that
``--jax-no-peaks`` reaches the workers.
"""

import json
import os
import subprocess
import sys

import pytest
from support.deadlines import timeout_s

from pytest_lyapax.measuring import compilecache
from pytest_lyapax.run.options import read_settings

SUITE = """
import jax
import jax.numpy as jnp
import pytest


@jax.jit
def work(x):
    return jnp.sin(x) @ x


@pytest.mark.jax_sizes(8, 16)
def test_work(benchmark, jax_backend, jax_size):
    benchmark(work, jnp.ones((jax_size, jax_size)))
"""


def _run(path, env):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--jax-backend=cpu",
            "--jax-no-peaks",
            "--benchmark-max-time=0",
            "--benchmark-min-rounds=2",
        ],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s(300),
    )


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, clean_environment):
    path = tmp_path_factory.mktemp("compile_cache")
    (path / "test_work.py").write_text(SUITE)
    env = dict(clean_environment)
    env.pop(compilecache.ENV, None)
    env.pop(compilecache.MIN_TIME_ENV, None)
    reports = []
    for _ in range(2):
        proc = _run(path, env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        report = json.loads((path / "lyapax-report" / "benchmark.json").read_text())
        reports.append((proc.stdout, report))
    return path, reports


def _caches(report):
    return [b["extra_info"]["warmup"]["cache"] for b in report["benchmarks"]]


def test_the_second_run_loads_its_programs_from_the_cache(two_runs):
    path, [(_, first), (out, second)] = two_runs
    assert any(path.glob(f"lyapax-report/{compilecache.FOLDER}/*-cache"))
    assert all(c["enabled"] for c in _caches(first) + _caches(second))
    hits = [c["hits"] for c in _caches(second)]
    assert len(hits) == 2 and all(h > 0 for h in hits)
    assert sum(c["hits"] for c in _caches(first)) < sum(hits)
    assert "(cached)" in out
    assert "keeps every program" in out
    assert "compile: cpu" in out and "(cache: 2 of 2 hit)" in out


def test_no_peaks_is_honoured_in_the_workers(two_runs):
    _, [(_, first), _] = two_runs
    assert first["benchmarks"]
    assert all("peaks" not in b["extra_info"] for b in first["benchmarks"])


def test_the_cache_folder_option(pytester, monkeypatch):
    monkeypatch.delenv(compilecache.ENV, raising=False)
    default = read_settings(
        pytester.parseconfig("--jax-backend=cpu"), check_paths=False
    )
    assert default.compile_cache == default.report_dir / compilecache.FOLDER
    off = pytester.parseconfig("--jax-backend=cpu", "--jax-compile-cache=none")
    assert read_settings(off, check_paths=False).compile_cache is None
    given = pytester.parseconfig("--jax-backend=cpu", "--jax-compile-cache=c")
    assert (
        read_settings(given, check_paths=False).compile_cache
        == (pytester.path / "c").resolve()
    )
    monkeypatch.setenv(compilecache.ENV, str(pytester.path / "mine"))
    mine = read_settings(pytester.parseconfig("--jax-backend=cpu"), check_paths=False)
    assert mine.compile_cache == (pytester.path / "mine").resolve()
    pytester.makeini("[pytest]\njax_compile_cache = none\n")
    ini = read_settings(pytester.parseconfig("--jax-backend=cpu"), check_paths=False)
    assert ini.compile_cache is None
    with pytest.raises(pytest.UsageError, match="--jax-compile-cache needs"):
        read_settings(pytester.parseconfig("--jax-compile-cache=c"))
    with pytest.raises(pytest.UsageError, match="empty path"):
        read_settings(
            pytester.parseconfig("--jax-backend=cpu", "--jax-compile-cache= "),
            check_paths=False,
        )


def test_use_sets_the_environment_and_jax(tmp_path, monkeypatch):
    import jax

    monkeypatch.delenv(compilecache.ENV, raising=False)
    before = jax.config.jax_compilation_cache_dir
    try:
        restore = compilecache.use(tmp_path / "cache")
        assert os.environ[compilecache.ENV] == str(tmp_path / "cache")
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "cache")
        assert (tmp_path / "cache").is_dir()
        compilecache.use(None)
        assert compilecache.ENV not in os.environ
        assert jax.config.jax_compilation_cache_dir is None
        restore()  # as the process was before the first use
        assert compilecache.ENV not in os.environ
        assert jax.config.jax_compilation_cache_dir == before
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_a_run_that_reported_nothing_takes_only_its_own_default_cache_away(tmp_path):
    from pytest_lyapax.measuring import compilecache

    report = tmp_path / "lyapax-report"
    cache = report / compilecache.FOLDER
    cache.mkdir(parents=True)
    (cache / "entry").write_text("x")
    # A report folder that was there before keeps its cache (the next run's).
    compilecache.tidy_unreported(cache, report, report_existed=True)
    assert (cache / "entry").exists()
    # A folder the user named is theirs.
    compilecache.tidy_unreported(tmp_path / "mine", report, report_existed=False)
    assert (cache / "entry").exists()
    # The default one inside a report folder this run made goes, with it.
    compilecache.tidy_unreported(cache, report, report_existed=False)
    assert not report.exists()


def test_use_keeps_every_program_unless_the_user_chose_a_threshold(
    tmp_path, monkeypatch
):
    import jax

    monkeypatch.delenv(compilecache.ENV, raising=False)
    monkeypatch.delenv(compilecache.MIN_TIME_ENV, raising=False)
    before = jax.config.jax_persistent_cache_min_compile_time_secs
    restore = compilecache.use(tmp_path / "cache")
    try:
        assert os.environ[compilecache.MIN_TIME_ENV] == "0"
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0
    finally:
        restore()
    assert compilecache.MIN_TIME_ENV not in os.environ
    assert jax.config.jax_persistent_cache_min_compile_time_secs == before
    assert "keeps every program" in compilecache.describe(tmp_path)

    monkeypatch.setenv(compilecache.MIN_TIME_ENV, "2.5")
    restore = compilecache.use(tmp_path / "cache")
    try:
        assert os.environ[compilecache.MIN_TIME_ENV] == "2.5"
        assert jax.config.jax_persistent_cache_min_compile_time_secs == before
    finally:
        restore()
    assert "compiled for 2.5 s or more" in compilecache.describe(tmp_path)
