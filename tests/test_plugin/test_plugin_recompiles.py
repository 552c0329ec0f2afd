"""Compiles during the timed rounds, and host arguments copied every call.

The observer's own tests run in this process (JAX's default backend, a
few small programs); the plugin's end to end in a fresh pytest process
with ``--jax-backend=cpu`` (the backend is fixed per process): a callable
that builds a new ``jax.jit`` closure at each call warns with its count and
"new function object", its compiled-once twin is silent, a benchmark fed
new shapes between rounds is named as such, and ``--jax-recompile=fail``
(slow) fails the test.  No timing is asserted.
"""

import json
import logging
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pytest_lyapax.measuring import measure
from pytest_lyapax.measuring.recompiles import (
    CONTEXT,
    EXPLAIN_LOGGER,
    NEW_FUNCTION,
    NEW_TYPES,
    STATIC,
    STRUCTURE,
    CompileObserver,
    HostTransferWarning,
    RecompileWarning,
    miss_reason,
    pooled,
)
from pytest_lyapax.measuring.rounds import NoTurns, RoundsWatch
from pytest_lyapax.report.recompiles import recompiles_of
from pytest_lyapax.run.options import Settings
from pytest_lyapax.run.session import CONTROLLER, LyapaxSession

FAST = ["-p", "no:cacheprovider", "--benchmark-min-rounds=3", "--benchmark-max-time=0"]
CPU = ["--jax-backend=cpu"]

SUITE = """
import itertools

import jax
import jax.numpy as jnp
import numpy as np

x = jnp.ones(8)
once = jax.jit(lambda a: a * 2.0)


def test_new_closure(benchmark, jax_backend):
    benchmark(lambda: jax.jit(lambda a: a * 2.0)(x))


def test_compiled_once(benchmark, jax_backend):
    benchmark(once, x)


def test_new_shapes(benchmark, jax_backend):
    sizes = itertools.count(2)
    total = jax.jit(lambda a: a.sum())
    benchmark.pedantic(total, setup=lambda: ((np.ones(next(sizes)),), {}), rounds=4)
"""


def _silent(observer, data=(1.0, 1.0, 1.0)):
    info = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        observer.record(info, list(data))
    return info["recompiles"]


def test_new_closures_in_the_rounds_are_counted_and_explained():
    x = jnp.ones(3)
    observer = CompileObserver("warn")
    observer.test = "t.py::test_x[cpu]"
    observer.start()
    for _ in range(3):
        jax.jit(lambda a: a * 2.0)(x).block_until_ready()
    observer.stop()
    info = {}
    with pytest.warns(RecompileWarning, match=r"t\.py::test_x\[cpu\]: 3 XLA compile"):
        observer.record(info, [1.0, 1.0])
    entry = info["recompiles"]
    assert entry["count"] == 3 and entry["kinds"] == {NEW_FUNCTION: 3}
    assert entry["reasons"][0].startswith("new function object (3x), e.g. <lambda>")
    assert "test_plugin_recompiles.py:" in entry["reasons"][0]


def test_a_function_compiled_before_the_rounds_is_silent():
    x = jnp.ones(3)
    once = jax.jit(lambda a: a + 1.0)
    once(x).block_until_ready()
    observer = CompileObserver("warn")
    observer.start()
    for _ in range(5):
        once(x).block_until_ready()
    observer.stop()
    assert _silent(observer) == {
        "count": 0,
        "reasons": [],
        "kinds": {},
        "programs": {},
        "policy": "warn",
    }


def test_the_warm_up_compile_is_not_counted():
    # pedantic's first call (its warm-up) runs inside its first round.
    observer = CompileObserver("fail")
    observer.start()
    with measure.first_call_recorder({}):
        jax.jit(lambda a: a - 1.0)(jnp.ones(2)).block_until_ready()
    observer.stop()
    assert _silent(observer)["count"] == 0


def test_explaining_is_on_only_while_the_rounds_run():
    logger = logging.getLogger(EXPLAIN_LOGGER)
    before = (jax.config.jax_explain_cache_misses, logger.propagate, logger.handlers)
    observer = CompileObserver("ignore")
    observer.start()
    assert jax.config.jax_explain_cache_misses and not logger.propagate
    observer.stop()
    after = (jax.config.jax_explain_cache_misses, logger.propagate, logger.handlers)
    assert after == before


def test_fail_fails_the_test_with_the_reasons():
    observer = CompileObserver("fail")
    observer.test = "t.py::test_y[cpu]"
    f = jax.jit(lambda a: a.sum())
    inputs = [jnp.ones(n) for n in (2, 3, 4)]
    f(inputs[0]).block_until_ready()
    observer.start()
    for x in inputs[1:]:
        f(x).block_until_ready()
    observer.stop()
    with pytest.raises(pytest.fail.Exception) as failed:
        observer.record({}, [1.0])
    text = str(failed.value)
    assert "t.py::test_y[cpu]: " in text and "(--jax-recompile=fail)" in text
    assert "new shapes or dtypes (2x)" in text


def test_ignore_records_without_a_warning():
    observer = CompileObserver("ignore")
    observer.start()
    jax.jit(lambda a: a * 3.0)(jnp.ones(2)).block_until_ready()
    observer.stop()
    assert _silent(observer)["count"] == 1


@pytest.mark.parametrize(
    ("message", "kind", "example"),
    [
        (
            "TRACING CACHE MISS at /p/t.py:9:4 (f):\n  never seen function:\n"
            "    <lambda> id=1403 defined at /p/t.py:9",
            NEW_FUNCTION,
            "<lambda> defined at t.py:9",
        ),
        (
            "TRACING CACHE MISS at /p/t.py:9:4 (f):\n  for g defined at /p/t.py:3\n"
            "  all previously seen cache keys differ. For the closest previous key:\n"
            "  different input types:\n  * at a, now f32[4] and before f32[3]",
            NEW_TYPES,
            "g at a, now f32[4] and before f32[3]",
        ),
        (
            "TRACING CACHE MISS at /p/t.py:9:4 (f):\n  for g defined at /p/t.py:3\n"
            "  different input pytree:\n  * at input path [0][1], now <class "
            "'Static'> with pytree metadata Static(val=2) and before <class "
            "'Static'> with pytree metadata Static(val=1), so the pytree node "
            "metadata does not match",
            STATIC,
            "g at input path [0][1]: now 2, before 1",
        ),
        (
            "TRACING CACHE MISS at /p/t.py:9:4 (f):\n  for g defined at /p/t.py:3\n"
            "  different input pytree:\n  * at input path [0], now a tuple",
            STRUCTURE,
            "g at input path [0], now a tuple",
        ),
        (
            "TRACING CACHE MISS at /p/t.py:9:4 (f):\n  for g\n  Tracing context "
            "doesn't match, e.g. due to config or context manager.\n"
            "  * jax_enable_x64 differs: now True and before False",
            CONTEXT,
            "g jax_enable_x64 differs: now True and before False",
        ),
        (
            "TRACING CACHE MISS at /p/t.py:9:4 (f):\n  something new",
            "something new",
            "",
        ),
    ],
)
def test_each_explanation_is_classified(message, kind, example):
    assert miss_reason(message) == (kind, example)


def test_numpy_arguments_are_found_from_their_types():
    big = np.ones(10_000)  # 80 kB
    found = measure.host_transfers((big, jnp.ones(3)), {"b": np.ones(2)})
    assert found is not None
    assert (found["host_arrays"], found["host_bytes"]) == (2, 80_016)
    assert measure.host_transfers((jnp.ones(3), 2.0), {}) is None


@pytest.mark.parametrize(
    ("platform", "size", "warned"),
    [("gpu", 80_000, True), ("gpu", 1_000, False), ("cpu", 80_000, False)],
)
def test_host_copies_warn_on_a_device_only_above_the_threshold(platform, size, warned):
    observer = CompileObserver("warn")
    observer.test = "t.py::test_z[gpu]"
    info = {
        "transfers": {
            "host_arrays": 1,
            "host_bytes": size,
            "platform": platform,
            "copied_every_call": platform != "cpu",
        }
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        observer.record(info, [1.0])
    messages = [str(w.message) for w in caught if w.category is HostTransferWarning]
    assert bool(messages) is warned
    if warned:
        assert messages[0].startswith(
            "t.py::test_z[gpu]: 1 NumPy argument(s), 78.1 KiB"
        )


def test_processes_pool_their_counts():
    a = {"count": 2, "reasons": ["r1"], "kinds": {"k": 2}, "programs": {"p": 2}}
    b = {"count": 3, "reasons": ["r1", "r2"], "kinds": {"k": 3}, "programs": {}}
    merged = pooled(a, b)
    assert merged["count"] == 5 and merged["reasons"] == ["r1", "r2"]
    assert merged["kinds"] == {"k": 5} and merged["programs"] == {"p": 2}


@pytest.mark.parametrize("entry", [None, {}, {"count": -1}, {"count": True}])
def test_a_malformed_entry_reads_as_not_recorded(entry):
    assert recompiles_of({"extra_info": {"recompiles": entry}}) is None


def test_the_policy_travels_to_the_workers():
    settings = Settings(recompile="fail")
    payload = LyapaxSession(settings, CONTROLLER, {}).worker_payload("cpu")
    assert LyapaxSession.for_worker(payload).settings.recompile == "fail"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--jax-backend=cpu", "--jax-recompile=loud"],
            "--jax-recompile: 'loud' is not one of warn, fail, ignore; write it like "
            "--jax-recompile=fail",
        ),
        (["--jax-recompile=fail"], "--jax-recompile needs --jax-backend=LIST"),
    ],
)
def test_a_bad_policy_is_a_usage_error(pytester, args, message):
    with pytest.raises(pytest.UsageError, match=message.replace("[", r"\[")):
        pytester.parseconfigure(*args)


def test_the_policy_is_read_in_any_case(pytester):
    config = pytester.parseconfigure("--jax-backend=cpu", "--jax-recompile=IGNORE")
    from pytest_lyapax.run.session import get_session

    assert get_session(config).settings.recompile == "ignore"


@pytest.mark.slow
def test_compiles_in_the_rounds_warn_and_show_in_every_report(pytester):
    pytester.makepyfile(test_rc=SUITE)
    result = pytester.runpytest_subprocess(*FAST, *CPU)
    assert result.ret == pytest.ExitCode.OK
    out = result.stdout.str()
    report = pytester.path / "lyapax-report"
    records = {
        b["name"]: b
        for b in json.loads((report / "benchmark.json").read_text())["benchmarks"]
    }
    closure = records["test_new_closure[cpu]"]
    entry = closure["extra_info"]["recompiles"]
    assert entry["count"] >= closure["stats"]["rounds"] >= 3
    assert entry["kinds"] == {NEW_FUNCTION: entry["count"]}
    warned = (
        f"RecompileWarning: test_rc.py::test_new_closure[cpu]: {entry['count']} XLA "
        "compile(s) during its rounds (3 timed), so the timings include the "
        "compiler. Why: new function object"
    )
    assert warned in out
    once = records["test_compiled_once[cpu]"]["extra_info"]["recompiles"]
    assert once["count"] == 0
    assert "RecompileWarning: test_rc.py::test_compiled_once" not in out
    assert "test_compiled_once[cpu]: 0 compile" not in out
    shapes = records["test_new_shapes[cpu]"]["extra_info"]["recompiles"]
    # Rounds 2..4 see a new shape each (the first is pedantic's first call).
    assert shapes["kinds"] == {NEW_TYPES: 3} and shapes["count"] == 3
    assert shapes["reasons"] == [
        "new shapes or dtypes (3x), e.g. <lambda> at a, now f32[3] and before f32[2]"
    ]
    for record in records.values():
        assert record["extra_info"]["stability"]["verdict"] in ("stable", "unstable")
    lines = out.splitlines()
    start = next(
        i for i, line in enumerate(lines) if "compiles during the rounds" in line
    )
    assert lines[start + 1].startswith("2 benchmark(s) compiled during their timed")
    assert lines[start + 2] == (
        f"  test_rc.py::test_new_closure[cpu]: {entry['count']} compile(s): "
        f"{entry['reasons'][0]}"
    )
    assert lines[start + 3].startswith(
        "  test_rc.py::test_new_shapes[cpu]: 3 compile(s): new shapes or dtypes (3x)"
    )
    assert "pytest-lyapax: unstable timings" in out
    summary = (report / "summary.md").read_text()
    html = (report / "report.html").read_text()
    for text in (summary, html):
        assert "Compiles during the timed rounds" in text
        assert "Stability of the timed rounds" in text


@pytest.mark.slow
def test_fail_policy_and_error_filters_fail_only_the_recompiling_test(pytester):
    pytester.makepyfile(test_rc=SUITE)
    chosen = ["-k", "new_closure or compiled_once"]
    result = pytester.runpytest_subprocess(*FAST, *CPU, *chosen, "--jax-recompile=fail")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes() == {"failed": 1, "passed": 1}
    out = result.stdout.str()
    assert "test_rc.py::test_new_closure[cpu]: " in out
    assert "XLA compile(s) during its rounds" in out
    assert "\n(--jax-recompile=fail)\n" in out
    # A project that turns warnings into errors sees the same test fail.
    pytester.makeini("[pytest]\nfilterwarnings = error\n")
    result = pytester.runpytest_subprocess(*FAST, *CPU, *chosen)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes() == {"failed": 1, "passed": 1}
    assert (
        "RecompileWarning: test_rc.py::test_new_closure[cpu]: " in result.stdout.str()
    )
    # And ignore leaves it alone, with the count still recorded.
    result = pytester.runpytest_subprocess(
        *FAST, *CPU, *chosen, "--jax-recompile=ignore"
    )
    assert result.ret == pytest.ExitCode.OK


def test_a_bad_policy_exits_with_a_usage_error(pytester):
    result = pytester.runpytest_subprocess("--jax-backend=cpu", "--jax-recompile=no")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--jax-recompile: 'no' is not one of warn, fail, ignore*"]
    )


def test_rounds_that_raise_leave_jax_as_they_found_it():
    logger = logging.getLogger(EXPLAIN_LOGGER)
    before = (jax.config.jax_explain_cache_misses, logger.propagate, logger.handlers)
    watch = RoundsWatch(NoTurns(), [CompileObserver()])
    failing = watch.wrap(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failing()
    watch.close()
    after = (jax.config.jax_explain_cache_misses, logger.propagate, logger.handlers)
    assert after == before
