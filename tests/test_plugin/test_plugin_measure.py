"""The untimed measurements (schema 3): warm-up split, memory, dispatch vs
device, where arguments live, out-of-memory points, ``--jax-no-extras``.

One two-backend run (cpu, and cpu2 mapped to ``JAX_PLATFORMS=cpu``) feeds
most tests; they assert structure and exact byte counts, never a timing's
value.  ``benchmarks/plugin_overhead.py`` runs the main job with and without
``--jax-no-extras`` and checks the extras are absent there.
"""

import json
import subprocess
import sys
from types import SimpleNamespace

import jax
import pytest
from support.deadlines import timeout_s

from pytest_lyapax.backends.labels import Backend
from pytest_lyapax.measuring import fixture as jax_fixture
from pytest_lyapax.measuring import measure
from pytest_lyapax.measuring.observers import observers_for
from pytest_lyapax.report import details
from pytest_lyapax.report.schema import ReportError, check_report
from pytest_lyapax.report.units import format_bytes
from pytest_lyapax.run import output as report
from pytest_lyapax.run.options import Settings, read_settings
from pytest_lyapax.run.session import CONTROLLER, BackendState, LyapaxSession

N = 24  # side of the (N, N) float64 argument
HUGE = 10_000_000  # (HUGE, HUGE) float64 is 800 TB: the allocation fails at once

MEASURED_TESTS = f"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)


def test_jitted(benchmark, jax_backend):
    x = jnp.ones(({N}, {N}), dtype=jnp.float64)
    benchmark(jax.jit(lambda a: a @ a), x)


def test_closure(benchmark, jax_backend):
    f = jax.jit(jnp.sin)
    x = jnp.ones(8)
    benchmark(lambda: f(x))


def test_host_arguments(benchmark, jax_backend):
    benchmark(jax.jit(jnp.cos), np.ones(8))


def test_pedantic(benchmark, jax_backend):
    benchmark.pedantic(jax.jit(jnp.tan), args=(jnp.ones(4),), rounds=2)


@pytest.mark.jax_sizes(8, {HUGE}, {2 * HUGE})
def test_grows(benchmark, jax_backend, jax_size):
    x = jnp.zeros((jax_size, jax_size))
    benchmark(jax.jit(lambda a: a + 1.0), x)
"""

FAST = ["-p", "no:cacheprovider", "--benchmark-min-rounds=2", "--benchmark-max-time=0"]


def _pytest(path, env, *args):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *FAST, *args],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s(300),
    )
    data = path / "lyapax-report" / "benchmark.json"
    return proc, json.loads(data.read_text()) if data.exists() else None


@pytest.fixture(scope="module")
def measured(tmp_path_factory, clean_environment):
    path = tmp_path_factory.mktemp("measured")
    (path / "test_measured.py").write_text(MEASURED_TESTS)
    proc, data = _pytest(
        path,
        clean_environment,
        "-rs",
        "--jax-backend=cpu,cpu2",
        "--jax-backend-platform=cpu2=cpu",
    )
    by_name = {
        b["fullname"].split("::")[1]: b for b in (data or {}).get("benchmarks", [])
    }
    return proc, data, by_name


def test_run_passes_and_report_is_schema_4(measured):
    proc, data, _ = measured
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["pytest_lyapax"]["schema"] == 5
    assert check_report(data, "run") == data["benchmarks"]


def test_jitted_benchmark_gets_trace_lower_and_compile_times(measured):
    _, _, by_name = measured
    for label in ("cpu", "cpu2"):
        info = by_name[f"test_jitted[{label}]"]["extra_info"]
        warmup = info["warmup"]
        assert warmup["kind"] == "compile"
        assert warmup["trace_lower_s"] > 0 and warmup["compile_s"] > 0
        assert warmup["first_call_s"] > 0
        # The persistent compilation cache is on by default (--jax-compile-cache)
        # and was looked up (the workers keep every program: threshold 0).
        cache = warmup["cache"]
        assert cache["enabled"] is True and cache["lookups"] >= 1
        assert 0 <= cache["hits"] <= cache["lookups"]
        # The whole untimed warm-up, as before schema 3.
        assert info["first_call_s"] >= warmup["trace_lower_s"] + warmup["compile_s"]
        assert "compile_s" not in info  # the clamped key of schema 1-2 is gone


def test_memory_fields_match_the_argument_and_output(measured):
    _, _, by_name = measured
    memory = by_name["test_jitted[cpu]"]["extra_info"]["memory"]
    assert memory["argument_bytes"] >= 8 * N * N  # one (N, N) float64 argument
    assert memory["output_bytes"] >= 8 * N * N
    assert memory["temp_bytes"] >= 0
    assert memory["device_peak_bytes"] is None  # the CPU does not report it
    assert memory["host_peak_rss_bytes"] > 8 * N * N


def test_non_lowerable_benchmark_gets_first_call_overhead(measured):
    _, _, by_name = measured
    info = by_name["test_closure[cpu]"]["extra_info"]
    warmup = info["warmup"]
    assert warmup["kind"] == "first_call" and warmup["first_call_s"] > 0
    # JAX's own compile events during that call: the closure compiled jnp.sin.
    assert warmup["compile_s"] > 0
    assert info["memory"]["argument_bytes"] is None  # no program to analyse
    assert info["args_on"] == "none"


def test_dispatch_device_split_and_argument_location(measured):
    _, _, by_name = measured
    for name, where in [
        ("test_jitted[cpu]", "device"),
        ("test_host_arguments[cpu2]", "host"),
    ]:
        info = by_name[name]["extra_info"]
        split = info["time_split"]
        # From the timed calls themselves: at least every round's.
        assert split["calls"] >= by_name[name]["stats"]["rounds"]
        assert split["dispatch_s"] > 0 and split["device_s"] >= 0
        assert info["args_on"] == where, name
    pedantic = by_name["test_pedantic[cpu]"]["extra_info"]
    assert pedantic["warmup"]["kind"] == "first_call"
    assert pedantic["memory"]["argument_bytes"] == 4 * 8  # lowered after the rounds
    assert pedantic["args_on"] == "device"
    # Its two rounds are its calls: the first is the warm-up entry, the second
    # gives the split (no extra call).
    assert pedantic["time_split"]["calls"] == 1


def test_split_keeps_the_last_calls_and_counts_them_all():
    split = measure.SplitSamples()
    for i in range(measure.MAX_SPLIT_SAMPLES + 5):
        split.add(float(i), 1.0)
    entry = measure.time_split(split)
    assert entry["calls"] == measure.MAX_SPLIT_SAMPLES + 5
    assert len(split.samples) == measure.MAX_SPLIT_SAMPLES
    assert entry["dispatch_s"] == 5 + (measure.MAX_SPLIT_SAMPLES - 1) / 2
    assert entry["device_s"] == 1.0


def test_no_host_argument_warning_where_the_worker_ran_on_the_cpu(measured):
    proc, _, _ = measured
    # cpu2 is a label of the cpu platform: no copy to a device, no warning.
    assert "host arguments" not in proc.stdout


def test_out_of_memory_is_a_point_and_larger_sizes_are_skipped(measured):
    proc, data, by_name = measured
    points = {(p["backend"], p["size"]): p for p in data["pytest_lyapax"]["points"]}
    assert set(points) == {(b, s) for b in ("cpu", "cpu2") for s in (HUGE, 2 * HUGE)}
    for label in ("cpu", "cpu2"):
        oom, after = points[(label, HUGE)], points[(label, 2 * HUGE)]
        assert oom["status"] == "oom" and "RESOURCE_EXHAUSTED" in oom["message"]
        assert oom["fullname"] == f"test_measured.py::test_grows[{label}-{HUGE}]"
        assert after["status"] == "skipped_after_oom"
        assert oom["fullname"] in after["message"]
        assert f"test_grows[{label}-8]" in by_name  # the size that fit is timed
    assert "[crashed]" not in proc.stdout and data["pytest_lyapax"]["complete"]
    out = proc.stdout
    assert f"out of memory on backend 'cpu' at size {HUGE}: RESOURCE_EXHAUSTED" in out
    assert "skipped after out of memory: test_measured.py::test_grows[cpu-" in out
    assert "10 passed, 4 skipped" in out
    # The sized table shows compile time and peak memory per backend.
    header = next(line for line in out.splitlines() if "compile (cpu/cpu2)" in line)
    assert header.split()[-5:] == [
        "compile",
        "(cpu/cpu2)",
        "peak",
        "memory",
        "(cpu/cpu2)",
    ]
    assert " rss / " in out


def test_no_extras_reaches_the_workers_and_times_the_first_call_only(pytester):
    config = pytester.parseconfig(
        "--jax-backend=cpu,cpu2", "--jax-backend-platform=cpu2=cpu"
    )
    assert read_settings(config, check_paths=False).extras
    config = pytester.parseconfig("--jax-backend=cpu", "--jax-no-extras")
    settings = read_settings(config, check_paths=False)
    assert not settings.extras
    session = LyapaxSession(
        settings, CONTROLLER, {"cpu": BackendState(settings.backends[0])}
    )
    assert not LyapaxSession.for_worker(session.worker_payload("cpu")).settings.extras
    fixture = SimpleNamespace(extra_info={}, _pytest_lyapax_extras=False)
    calls = []
    jax_fixture._warm_up(fixture, jax.jit(abs), calls.append, (1.0,), {})
    assert calls == [1.0] and set(fixture.extra_info) == {"first_call_s"}
    # No machine state or stability judgement either; the compile check stays.
    kinds = {type(o).__name__ for o in observers_for(settings)}
    assert kinds == {"CompileObserver"}
    full = {type(o).__name__ for o in observers_for(SimpleNamespace(extras=True))}
    assert full == {"CompileObserver", "MachineObserver", "StabilityObserver"}
    with pytest.raises(pytest.UsageError, match="--jax-no-extras needs --jax-backend"):
        read_settings(pytester.parseconfig("--jax-no-extras"))


def _record(**extra):
    stats = {"median": 1e-3, "q1": 1e-3, "q3": 1e-3, "min": 1e-3, "max": 1e-3}
    return {"fullname": "t.py::test_x[gpu]", "stats": stats, "extra_info": extra}


def test_host_argument_warning_for_a_non_cpu_platform():
    gpu = _record(backend="gpu", jax_backend="gpu", args_on="host")
    assert details.host_argument_benchmarks([gpu]) == ["t.py::test_x[gpu]"]
    on_cpu = _record(backend="cpu2", jax_backend="cpu", args_on="host")
    resident = _record(backend="gpu", jax_backend="gpu", args_on="device")
    assert details.host_argument_benchmarks([on_cpu, resident]) == []
    backend = Backend("gpu", "cuda")
    session = LyapaxSession(
        Settings(backends=(backend,)),
        CONTROLLER,
        {"gpu": BackendState(backend)},
        records=[gpu],
    )
    sections = dict(report.summary_lines(session, None, []))
    (warning, name) = sections["pytest-lyapax: host arguments"]
    assert warning.startswith("warning: timed with NumPy (host) arguments")
    assert "jax.device_put" in warning and name == "  t.py::test_x[gpu]"


def test_byte_counts_are_formatted_in_binary_units():
    sizes = (None, 512, 1000, 1536, 3 * 2**30, 5 * 2**40)
    assert [format_bytes(n) for n in sizes] == [
        "-",
        "512 B",
        "1000 B",  # whole bytes, not 1e+03 B
        "1.5 KiB",
        "3 GiB",
        "5 TiB",
    ]


def test_out_of_memory_errors_are_recognised():
    assert measure.out_of_memory(
        jax.errors.JaxRuntimeError(
            "RESOURCE_EXHAUSTED: Out of memory allocating 8 bytes"
        )
    )
    assert measure.out_of_memory(MemoryError("dense weights need 80 GB"))
    assert not measure.out_of_memory(jax.errors.JaxRuntimeError("INTERNAL: failed"))
    assert not measure.out_of_memory(RuntimeError("RESOURCE_EXHAUSTED"))


@pytest.mark.parametrize(
    ("where", "value", "problem"),
    [
        ("warmup", {"kind": "jit"}, "malformed 'kind'"),
        (
            "warmup",
            {
                "kind": "compile",
                "first_call_s": 0.1,
                "trace_lower_s": -1.0,
                "compile_s": None,
                "cache": {"enabled": False, "hit": None},
            },
            "malformed 'trace_lower_s'",
        ),
        ("memory", {"device_peak_bytes": 1}, "no 'argument_bytes'"),
        (
            "time_split",
            {"dispatch_s": 1e-6, "device_s": float("nan"), "calls": 3},
            "'device_s'",
        ),
        ("args_on", "gpu", "expected one of"),
    ],
)
def test_check_report_refuses_malformed_measurements(measured, where, value, problem):
    _, data, _ = measured
    bad = json.loads(json.dumps(data))
    bad["benchmarks"][0]["extra_info"][where] = value
    with pytest.raises(ReportError, match=problem):
        check_report(bad, "bad.json")


def test_check_report_refuses_malformed_points_and_reads_older_schemas(measured):
    _, data, _ = measured
    bad = json.loads(json.dumps(data))
    bad["pytest_lyapax"]["points"][0]["status"] = "crashed"
    with pytest.raises(ReportError, match="points #0 has a malformed 'status'"):
        check_report(bad, "bad.json")
    old = json.loads(json.dumps(data))
    old["pytest_lyapax"]["schema"] = 2
    del old["pytest_lyapax"]["points"]
    for bench in old["benchmarks"]:
        for key in ("warmup", "memory", "time_split", "args_on"):
            bench["extra_info"].pop(key, None)
        bench["extra_info"]["compile_s"] = 0.5
    assert len(check_report(old, "old.json")) == len(data["benchmarks"])
