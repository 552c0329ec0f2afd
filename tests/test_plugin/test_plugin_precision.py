"""Precision as an axis: ``--jax-precision``, the ``jax_precision`` and
``jax_tolerance`` fixtures, ``extra_info["precision"]``, and results of two
precisions compared within their own error.

Unit tests of the option, the effective precisions and the comparison rule,
and one real run of a float64 and a float32 label of one CPU (fresh
processes: JAX fixes its precision when it starts).
"""

import json

import pytest

from pytest_lyapax.backends.labels import Backend
from pytest_lyapax.report import agreement
from pytest_lyapax.report.compare import compare_runs
from pytest_lyapax.report.identity import series_id
from pytest_lyapax.report.precision import Precision
from pytest_lyapax.run.precision import add_precisions, refused

CPUS = (Backend("cpu", "cpu"), Backend("cpu2", "cpu"))
CPU_TPU = (Backend("cpu", "cpu"), Backend("tpu", "tpu"))


def _x64(backend):
    return dict(backend.env)["JAX_ENABLE_X64"]


def test_one_value_sets_every_label_and_a_label_prefix_one():
    every = add_precisions("float32", CPUS)
    assert [(b.label, b.precision, _x64(b)) for b in every] == [
        ("cpu", "float32", "0"),
        ("cpu2", "float32", "0"),
    ]
    gpu = add_precisions("cuda:float32", (Backend("gpu", "cuda"),))
    assert gpu[0].precision == "float32"
    one = add_precisions("cpu2:float32", CPUS)
    assert [(b.label, b.precision, b.env) for b in one] == [
        ("cpu", "", ()),
        ("cpu2", "float32", (("JAX_ENABLE_X64", "0"),)),
    ]


def test_two_values_make_twin_labels_after_each_label():
    both = add_precisions("float64,float32", CPU_TPU)
    assert [(b.label, b.platform, b.precision) for b in both] == [
        ("cpu", "cpu", "float64"),
        ("cpu_float32", "cpu", "float32"),
        ("tpu", "tpu", "float64"),
        ("tpu_float32", "tpu", "float32"),
    ]
    assert [_x64(b) for b in both] == ["1", "0", "1", "0"]


def test_native_is_float64_on_cpu_and_float32_on_a_tpu():
    native = add_precisions("native", CPU_TPU)
    assert [(b.label, b.precision) for b in native] == [
        ("cpu", "float64"),
        ("tpu", "float32"),
    ]
    # A label's own entry wins over the entry for every label.
    mixed = add_precisions("native,tpu:float64", CPU_TPU)
    assert [b.precision for b in mixed] == ["float64", "float64"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("float16", "--jax-precision=float16: 'float16' is not a precision"),
        ("gpu:float32", "backend 'gpu' is not requested (requested: cpu, cpu2)"),
        (",", "names no precision"),
    ],
)
def test_bad_values_are_usage_errors_naming_the_option_and_value(text, message):
    with pytest.raises(pytest.UsageError, match="--jax-precision=") as info:
        add_precisions(text, CPUS)
    assert message in str(info.value)


def test_a_label_whose_own_variables_refuse_the_dtype_is_a_usage_error():
    own = (Backend("cpu", "cpu", env=(("JAX_ENABLE_X64", "0"),)),)
    with pytest.raises(pytest.UsageError, match="contradicts float64"):
        add_precisions("float64", own)
    assert add_precisions("float32", own)[0].precision == "float32"


def test_a_twin_label_that_is_already_requested_is_refused():
    taken = (Backend("cpu", "cpu"), Backend("cpu_float32", "cpu"))
    with pytest.raises(pytest.UsageError, match="already requested"):
        add_precisions("cpu:float64,cpu:float32", taken)


@pytest.mark.parametrize(
    ("dtype", "matmul", "platform", "effective"),
    [
        ("float64", "default", "tpu", "float64"),
        ("float32", "default", "cpu", "float32"),
        ("float32", "default", "tpu", "bfloat16"),
        ("float32", "high", "tpu", "bfloat16_3x"),
        ("float32", "highest", "tpu", "float32"),
        ("float32", "default", "gpu", "tensorfloat32"),
        ("float32", "highest", "gpu", "float32"),
    ],
)
def test_effective_precision_of_float32_matmuls(dtype, matmul, platform, effective):
    p = Precision(dtype, matmul, platform)
    assert p.effective == effective
    assert p.rtol >= Precision("float64").rtol


def _entry(value, dtype, stderr=None, kind=agreement.RESULT):
    return {
        "name": "x",
        "kind": kind,
        "leaves": [
            {
                "path": "(root)",
                "shape": [],
                "dtype": dtype,
                "data": value,
                "stderr": stderr,
            }
        ],
    }


F64, F32 = Precision("float64", platform="cpu"), Precision("float32", platform="cpu")
BF16 = Precision("float32", "default", "tpu")


def _judge(ref, other, precisions=(F64, F32)):
    (verdict,) = agreement.compare_entries(
        [ref], [other], agreement.Tolerance(), precisions=precisions
    )
    return verdict


def test_without_stderr_the_lower_precision_decides_and_is_named():
    ref = _entry(1.0, "float64")
    close = _entry(1.0 + 3e-6, "float32")
    verdict = _judge(ref, close)
    assert verdict.ok
    assert verdict.rule == "rounding of float32 (rtol 1e-05, atol 1e-06)"
    assert not _judge(ref, _entry(1.01, "float32")).ok
    # bfloat16 matmul passes allow more, and still catch a 1 % error.
    assert _judge(ref, _entry(1.003, "float32"), (F64, BF16)).ok
    planted = _judge(ref, _entry(1.01, "float32"), (F64, BF16))
    assert not planted.ok and planted.rule.startswith("rounding of bfloat16")


def test_with_stderr_the_error_bars_plus_the_rounding_decide():
    ref = _entry(1.718, "float64", stderr=5e-4)
    # 2e-3 apart: beyond float32's rounding, within 4 x hypot(5e-4, 5e-4).
    estimate = _entry(1.720, "float32", stderr=5e-4)
    verdict = _judge(ref, estimate)
    assert verdict.ok
    assert verdict.rule == "z 4 x stderr + rounding of float32 (rtol 1e-05, atol 1e-06)"
    planted = _judge(ref, _entry(1.718 * 1.01, "float32", stderr=5e-4))
    assert not planted.ok


def test_a_benchmark_value_of_two_precisions_is_not_compared_and_says_why():
    ref = _entry(0.9, "float64", kind=agreement.BENCHMARK)
    other = _entry(0.7, "float32", kind=agreement.BENCHMARK)
    verdict = _judge(ref, other)
    assert verdict.ok and verdict.not_compared
    data = verdict.to_json()
    assert data["compared"] is False and "has no stderr" in data["rule"]
    # The same precision on both sides: compared as before.
    assert not _judge(
        ref, _entry(0.7, "float64", kind=agreement.BENCHMARK), (F64, F64)
    ).ok


def _record(label, dtype, median=1.0):
    return {
        "name": f"test_x[{label}]",
        "fullname": f"t.py::test_x[{label}]",
        "params": {"jax_backend": label},
        "stats": {"median": median, "data": [median] * 10},
        "extra_info": {
            "backend": label,
            "precision": {"dtype": dtype, "matmul": "default"},
        },
    }


def test_two_precisions_of_one_label_are_two_series_and_never_match():
    f64, f32 = _record("cpu", "float64"), _record("cpu", "float32")
    assert series_id(f64).key() != series_id(f32).key()
    assert series_id(f32).precision == "float32"
    compared = compare_runs({"benchmarks": [f64]}, [f32])
    assert compared.new == ["t.py::test_x[cpu]"] and not compared.comparisons
    same = compare_runs({"benchmarks": [f64]}, [_record("cpu", "float64", 1.1)])
    assert len(same.comparisons) == 1
    # A saved report from before precision was recorded matches any.
    old = _record("cpu", "float64")
    del old["extra_info"]["precision"]
    assert len(compare_runs({"benchmarks": [old]}, [f32]).comparisons) == 1


PROJECT = """
import jax
import jax.numpy as jnp
import numpy as np

N = 1_000_000


def _mean_exp(key):
    u = jax.random.uniform(key, (N,))
    v = jnp.exp(u)
    return jnp.mean(v), jnp.std(v) / np.sqrt(N)


def test_fixtures(jax_backend, jax_precision, jax_tolerance):
    with open(f"precision-{jax_backend}.json", "w") as f:
        f.write(
            '{"fixture": "%s", "array": "%s", "rtol": %r, "atol": %r}'
            % (jax_precision, jnp.ones(2).dtype, jax_tolerance.rtol, jax_tolerance.atol)
        )


def test_estimate(jax_results):
    # E[exp(U)] = e - 1, estimated in each precision (their own draws).
    mean, stderr = _mean_exp(jax.random.PRNGKey(1))
    jax_results.record("mean", mean, stderr=stderr)


def test_estimate_planted(jax_results, jax_backend):
    mean, stderr = _mean_exp(jax.random.PRNGKey(2))
    if jax_backend == "cpu2":
        mean = mean * 1.01
    jax_results.record("mean", mean, stderr=stderr)


def _positive_product():
    m = jnp.asarray(np.random.default_rng(0).uniform(size=(32, 32)))
    return jnp.ones(32) @ m


def test_rounding(jax_results):
    jax_results.record("product", _positive_product())


def test_rounding_planted(jax_results, jax_backend):
    scale = 1.01 if jax_backend == "cpu2" else 1.0
    jax_results.record("product", _positive_product() * scale)


def test_bench(benchmark, jax_backend):
    x = jnp.linspace(0.0, 1.0, 16)
    benchmark(lambda: jnp.sin(x * 3.1).block_until_ready())
"""


@pytest.fixture(scope="module")
def precision_run(run_pytest, tmp_path_factory):
    path = tmp_path_factory.mktemp("precision")
    (path / "test_precision.py").write_text(PROJECT)
    report = path / "report"
    proc, data = run_pytest(
        path,
        report,
        "-p",
        "no:cacheprovider",
        "--benchmark-max-time=0",
        "-rf",
        "--jax-backend=cpu,cpu2",
        "--jax-backend-platform=cpu2=cpu",
        "--jax-precision=cpu:float64,cpu2:float32",
        f"--jax-report-dir={report}",
    )
    return proc, data, path


def test_each_label_computes_in_its_precision_and_the_fixtures_say_so(precision_run):
    proc, _, path = precision_run
    cpu = json.loads((path / "precision-cpu.json").read_text())
    cpu2 = json.loads((path / "precision-cpu2.json").read_text())
    assert cpu["fixture"] == cpu["array"] == "float64", proc.stdout + proc.stderr
    assert cpu2["fixture"] == cpu2["array"] == "float32"
    assert (cpu["rtol"], cpu2["rtol"]) == (1e-12, 1e-5)


def test_float32_against_float64_no_false_disagreement_a_planted_one_caught(
    precision_run,
):
    proc, data, _ = precision_run
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    failed = sorted(
        line.split()[1] for line in out.splitlines() if line.startswith("FAILED ")
    )
    assert failed == [
        "test_precision.py::test_estimate_planted[cpu2]",
        "test_precision.py::test_rounding_planted[cpu2]",
    ], out
    agree = {e["test"].split("::")[1]: e for e in data["pytest_lyapax"]["agreement"]}
    assert agree["test_estimate"]["agree"] is True
    assert agree["test_rounding"]["agree"] is True
    (estimate,) = agree["test_estimate"]["names"]
    assert estimate["rule"].startswith("z 4 x stderr + rounding of float32")
    (product,) = agree["test_rounding"]["names"]
    assert product["rule"] == "rounding of float32 (rtol 1e-05, atol 1e-06)"
    (bench,) = agree["test_bench"]["names"]
    assert bench["compared"] is False


def test_precision_in_the_report_the_backends_table_and_extra_info(precision_run):
    proc, data, _ = precision_run
    backends = {b["label"]: b for b in data["pytest_lyapax"]["backends"]}
    assert backends["cpu2"]["precision"] == {"dtype": "float32", "matmul": "default"}
    assert backends["cpu2"]["precision_asked"] == "float32"
    assert backends["cpu"]["precision"]["dtype"] == "float64"
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert ["cpu2", "JAX_PLATFORMS=cpu", "JAX_ENABLE_X64=0", "ok", "float32"] in [
        r[:5] for r in rows
    ]
    bench = {b["extra_info"]["backend"]: b for b in data["benchmarks"]}
    assert bench["cpu2"]["extra_info"]["precision"] == {
        "dtype": "float32",
        "matmul": "default",
    }
    assert bench["cpu"]["extra_info"]["precision"]["dtype"] == "float64"


def test_an_unknown_precision_is_a_usage_error(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--jax-backend=cpu", "--jax-precision=f32")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--jax-precision=f32: 'f32' is not a precision*"])


def test_a_platform_that_computes_in_another_dtype_refuses_the_precision():
    (asked,) = add_precisions("float64", (Backend("cpu", "cpu"),))
    ok = {"precision": {"dtype": "float64", "matmul": "default"}}
    assert refused(asked, ok) is None
    assert refused(asked, {}) is None
    why = refused(asked, {"precision": {"dtype": "float32", "matmul": "default"}})
    assert why is not None and why.startswith("--jax-precision: 'cpu' asked float64")


def test_without_worker_processes_the_label_s_precision_is_set_in_process(pytester):
    pytester.makepyfile(
        """
        import jax.numpy as jnp

        def test_x(jax_backend, jax_precision):
            assert jax_precision == "float64"
            assert jnp.ones(2).dtype == jnp.float64
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:xdist", "--jax-backend=cpu", "--jax-precision=float64"
    )
    result.assert_outcomes(passed=1)


def test_the_ini_default_yields_to_a_label_s_own_x64_variable():
    own = (Backend("cpu", "cpu"), Backend("tpu", "tpu", env=(("JAX_ENABLE_X64", "1"),)))
    kept = add_precisions("native", own, "jax_precision (ini)", env_wins=True)
    assert [(b.label, b.precision, b.env) for b in kept] == [
        ("cpu", "float64", (("JAX_ENABLE_X64", "1"),)),
        ("tpu", "", (("JAX_ENABLE_X64", "1"),)),
    ]


# --- without --jax-backend: the dtype of this process ---------------------------

SUITE = {
    # A suite that enables x64 for itself, as this repository's root conftest.
    "conftest": "import jax\njax.config.update('jax_enable_x64', True)\n",
    # A module that enables it again when imported.
    "test_a": """
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)


def test_a(jax_precision):
    assert jax_precision == jnp.ones(2).dtype.name == "float32"
    jax.config.update("jax_enable_x64", True)  # a test that flips it
""",
    # Collected after it: its constants and tests still see the asked dtype.
    "test_b": """
import jax.numpy as jnp

MADE_ON_IMPORT = jnp.ones(2)


def test_b(jax_precision):
    assert MADE_ON_IMPORT.dtype.name == jax_precision == "float32"
    assert jnp.ones(1).dtype.name == "float32"
""",
}


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist"])
def test_without_a_backend_float32_sets_this_process_and_holds_it(pytester, workers):
    pytester.makepyfile(**SUITE)
    result = pytester.runpytest_subprocess("--jax-precision=float32", *workers)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["pytest-lyapax: the tests compute in float32 (--jax-precision*"]
    )


def test_without_a_backend_only_one_dtype_is_accepted(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    for value in ("native", "cpu:float32", "float64,float32"):
        result = pytester.runpytest_subprocess(f"--jax-precision={value}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, value
        result.stderr.fnmatch_lines(
            [f"*--jax-precision={value}: without --jax-backend it sets the dtype*"]
        )
    result = pytester.runpytest_subprocess("--jax-precision=float64")
    result.assert_outcomes(passed=1)


def test_a_module_collected_last_that_enables_x64_leaves_the_asked_dtype(pytester):
    """The suite's own hooks that read the dtype once collection has ended
    (this repository's skip markers) see the run's dtype, not the flag of
    the last module imported."""
    pytester.makeconftest(
        """
import pathlib

import jax

jax.config.update("jax_enable_x64", True)


def pytest_collection_modifyitems(items):
    pathlib.Path("x64_after_collection").write_text(str(jax.config.jax_enable_x64))
"""
    )
    pytester.makepyfile(
        test_a="def test_a():\n    pass\n",
        test_z="import jax\njax.config.update('jax_enable_x64', True)\n\n\n"
        "def test_z():\n    pass\n",
    )
    result = pytester.runpytest_subprocess("--jax-precision=float32", "-p", "no:xdist")
    result.assert_outcomes(passed=2)
    assert (pytester.path / "x64_after_collection").read_text() == "False"
    result = pytester.runpytest_subprocess("--jax-precision=float64", "-p", "no:xdist")
    assert (pytester.path / "x64_after_collection").read_text() == "True"
