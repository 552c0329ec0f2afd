"""Execution variants as labels: ``--jax-backend-env=LABEL:VAR=VALUE``.

Unit tests of the option's validation, the worker spec, the series identity
and the agreement of two precision variants, and one real run of a float64
and a float32 label of one CPU (a fresh process: JAX fixes its precision when
it starts).
"""

import json

import execnet
import pytest

from pytest_lyapax.backends.labels import Backend
from pytest_lyapax.report import agreement
from pytest_lyapax.report.identity import backend_env, series_id
from pytest_lyapax.run.options import Settings, parse_backend_envs
from pytest_lyapax.run.scheduling import worker_spec
from pytest_lyapax.run.session import CONTROLLER, BackendState, LyapaxSession

BACKENDS = (Backend("cpu", "cpu"), Backend("cpu32", "cpu"))


def test_entries_attach_to_their_label_in_the_order_given():
    out = parse_backend_envs(
        ["cpu32:JAX_ENABLE_X64=0", "cpu32:XLA_FLAGS=--xla_cpu_a=1 --b=2", "CPU:A="],
        BACKENDS,
    )
    assert out[0].env == (("A", ""),)
    assert out[1].env == (
        ("JAX_ENABLE_X64", "0"),
        ("XLA_FLAGS", "--xla_cpu_a=1 --b=2"),
    )
    assert out[1].env_text == "JAX_ENABLE_X64=0 XLA_FLAGS=--xla_cpu_a=1 --b=2"
    assert parse_backend_envs([], BACKENDS) == BACKENDS


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("cpu32-JAX_ENABLE_X64=0", "is not LABEL:VAR=VALUE"),
        ("cpu32:JAX_ENABLE_X64", "is not LABEL:VAR=VALUE"),
        (":A=1", "is not LABEL:VAR=VALUE"),
        ("gpu:A=1", "backend 'gpu' in 'gpu:A=1' is not requested"),
        ("cpu32:1A=0", "'1A' in 'cpu32:1A=0' is not an environment variable name"),
        ("cpu32:A-B=0", "is not an environment variable name"),
        ("cpu32:JAX_PLATFORMS=cuda", "use --jax-backend-platform=cpu32=PLATFORM"),
        ("cpu32:A=x//y", "holds '//' or a line break"),
    ],
)
def test_bad_entries_are_usage_errors_naming_the_option_and_value(entry, message):
    with pytest.raises(pytest.UsageError, match="--jax-backend-env") as info:
        parse_backend_envs([entry], BACKENDS)
    assert message in str(info.value)


def test_a_variable_set_twice_to_two_values_is_refused_once_is_fine():
    same = parse_backend_envs(["cpu:A=1", "cpu:A=1"], BACKENDS)
    assert same[0].env == (("A", "1"),)
    with pytest.raises(pytest.UsageError, match="A is set twice for 'cpu'"):
        parse_backend_envs(["cpu:A=1", "cpu:A=2"], BACKENDS)


def test_the_worker_spec_sets_the_variables_before_the_worker_starts():
    (_, variant) = parse_backend_envs(
        ["cpu32:JAX_ENABLE_X64=0", "cpu32:XLA_FLAGS=--a=1 --b"], BACKENDS
    )
    spec = execnet.XSpec(worker_spec(variant, environ={}))
    assert spec.env == {
        "JAX_PLATFORMS": "cpu",
        "JAX_ENABLE_X64": "0",
        "XLA_FLAGS": "--a=1 --b",
    }
    gpu = Backend("gpu", "cuda", env=(("XLA_PYTHON_CLIENT_PREALLOCATE", "true"),))
    # The label's own choice wins over the plugin's GPU default.
    assert execnet.XSpec(worker_spec(gpu, environ={})).env == {
        "JAX_PLATFORMS": "cuda",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "true",
    }


def test_the_variables_reach_the_worker_and_the_report():
    backends = parse_backend_envs(["cpu32:JAX_ENABLE_X64=0"], BACKENDS)
    states = {b.label: BackendState(b) for b in backends}
    session = LyapaxSession(Settings(backends=backends), CONTROLLER, states)
    worker = LyapaxSession.for_worker(session.worker_payload("cpu32"))
    assert worker.backend("cpu32").env == (("JAX_ENABLE_X64", "0"),)
    assert worker.backend("cpu").env == ()
    assert states["cpu32"].to_json()["env"] == {"JAX_ENABLE_X64": "0"}
    assert "env" not in states["cpu"].to_json()


def _record(env=None):
    info = {"backend": "cpu", "size": 20}
    if env is not None:
        info["backend_env"] = env
    return {"fullname": "t.py::test_x[cpu-20]", "extra_info": info}


def test_two_variants_of_one_label_are_two_series():
    f64 = series_id(_record({"JAX_ENABLE_X64": "1"}))
    f32 = series_id(_record({"JAX_ENABLE_X64": "0"}))
    plain = series_id(_record())
    assert len({f64.key(), f32.key(), plain.key()}) == 3
    assert f32.env == "JAX_ENABLE_X64=0" and f32.to_json()["env"] == f32.env
    assert "env" not in plain.to_json()
    # A report is untrusted input: odd shapes give no variant, not an error.
    for odd in ("JAX_ENABLE_X64=0", ["A"], {"A": 1}):
        assert backend_env(_record(odd)) == ""


def _entry(values, dtype):
    return {
        "name": "x",
        "kind": agreement.RESULT,
        "leaves": [
            {"path": "(root)", "shape": [len(values)], "dtype": dtype, "data": values}
        ],
    }


def test_precision_variants_compare_float32_with_float64_at_float32_tolerance():
    f64 = [_entry([1.0, 2.0, 3.0], "float64")]
    close = [_entry([1.0 + 1e-7, 2.0, 3.0], "float32")]
    far = [_entry([1.0 + 1e-3, 2.0, 3.0], "float32")]
    (strict,) = agreement.compare_entries(f64, close, agreement.Tolerance())
    assert not strict.ok and "shape/dtype" in strict.leaves[0].problem
    (loose,) = agreement.compare_entries(
        f64, close, agreement.Tolerance(), widths_may_differ=True
    )
    assert loose.ok
    assert loose.leaves[0].tolerance == "rounding of float32 (rtol 1e-05, atol 1e-06)"
    (wrong,) = agreement.compare_entries(
        f64, far, agreement.Tolerance(), widths_may_differ=True
    )
    assert not wrong.ok
    # Real against complex, or a float against an integer, stays a mismatch.
    (kinds,) = agreement.compare_entries(
        f64, [_entry([1, 2, 3], "int32")], agreement.Tolerance(), widths_may_differ=True
    )
    assert not kinds.ok and "shape/dtype" in kinds.leaves[0].problem


def test_precision_differs_reads_the_width_variables_only():
    assert agreement.precision_differs([("JAX_ENABLE_X64", "0")], [])
    assert agreement.precision_differs({"JAX_DEFAULT_DTYPE_BITS": "32"}, {})
    assert not agreement.precision_differs([("XLA_FLAGS", "--a")], [])
    assert not agreement.precision_differs(
        {"JAX_ENABLE_X64": "1"}, [("JAX_ENABLE_X64", "1")]
    )


PROJECT = """
import jax.numpy as jnp


def test_dtype(jax_backend):
    with open(f"dtype-{jax_backend}.txt", "w") as f:
        f.write(str(jnp.ones(3).dtype))


def test_same_within_float32(jax_results):
    jax_results.record("x", jnp.linspace(0.0, 1.0, 7) ** 2)


def test_differs(jax_results, jax_backend):
    jax_results.record("x", jnp.ones(3) + (1e-3 if jax_backend == "cpu32" else 0.0))


def test_bench(benchmark):
    x = jnp.ones(8)
    benchmark(lambda: (x * 2).block_until_ready())
"""


@pytest.fixture(scope="module")
def variant_run(run_pytest, tmp_path_factory):
    path = tmp_path_factory.mktemp("variants")
    (path / "test_variants.py").write_text(PROJECT)
    report = path / "report"
    proc, data = run_pytest(
        path,
        report,
        "-p",
        "no:cacheprovider",
        "--benchmark-max-time=0",
        "-rf",
        "--jax-backend=cpu,cpu32",
        "--jax-backend-platform=cpu32=cpu",
        "--jax-backend-env=cpu:JAX_ENABLE_X64=1",
        "--jax-backend-env=cpu32:JAX_ENABLE_X64=0",
        f"--jax-report-dir={report}",
    )
    return proc, data, path


def test_each_label_runs_with_its_own_precision(variant_run):
    proc, _, path = variant_run
    assert (path / "dtype-cpu.txt").read_text() == "float64", proc.stdout
    assert (path / "dtype-cpu32.txt").read_text() == "float32"


def test_float32_agrees_within_its_tolerance_and_a_real_difference_fails(variant_run):
    proc, data, _ = variant_run
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    assert len(failed) == 1 and failed[0].startswith(
        "FAILED test_variants.py::test_differs[cpu32]"
    ), failed
    agree = {e["test"].split("::")[1]: e for e in data["pytest_lyapax"]["agreement"]}
    assert agree["test_same_within_float32"]["agree"] is True
    assert agree["test_differs"]["agree"] is False


def test_the_variables_show_in_the_report_and_the_backends_table(variant_run):
    proc, data, _ = variant_run
    backends = {b["label"]: b for b in data["pytest_lyapax"]["backends"]}
    assert backends["cpu32"]["env"] == {"JAX_ENABLE_X64": "0"}
    assert backends["cpu"]["env"] == {"JAX_ENABLE_X64": "1"}
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert ["cpu32", "JAX_PLATFORMS=cpu", "JAX_ENABLE_X64=0", "ok"] in [
        r[:4] for r in rows
    ]
    bench = {b["extra_info"]["backend"]: b for b in data["benchmarks"]}
    assert bench["cpu32"]["extra_info"]["backend_env"] == {"JAX_ENABLE_X64": "0"}
    keys = {series_id(b).key() for b in data["benchmarks"]}
    assert len(keys) == 2
    json.dumps(data)  # the report stays plain JSON


def test_without_worker_processes_the_variables_are_a_usage_error(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "-p",
        "no:xdist",
        "--jax-backend=cpu",
        "--jax-backend-env=cpu:JAX_ENABLE_X64=0",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--jax-backend-env (for 'cpu') needs each backend in its own worker "
            "process*-p no:xdist*"
        ]
    )


def test_a_cpu_variant_is_probed_with_its_variables_a_plain_cpu_is_not():
    from pytest_lyapax.backends.labels import OK, UNAVAILABLE
    from pytest_lyapax.backends.probe import probe_backends

    broken = Backend("cpuz", "cpu", env=(("XLA_FLAGS", "--xla_not_a_flag=1"),))
    results = probe_backends([Backend("cpu", "cpu"), broken])
    assert results["cpu"].status == OK and results["cpu"].reason == ""
    assert results["cpuz"].status == UNAVAILABLE
    assert "--xla_not_a_flag" in results["cpuz"].reason
