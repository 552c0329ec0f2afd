"""Results compared across backends (``jax_results``, benchmark return values).

The end-to-end runs use two labels of one CPU (``cpu``, ``cpu2``), so every
difference is made on purpose by the test code from its backend label; the
comparison itself is tested exactly on hand-made entries.
"""

import json
import math

import numpy as np
import pytest

from pytest_lyapax.measuring import agreement as results
from pytest_lyapax.report import agreement
from pytest_lyapax.report.schema import check_report
from pytest_lyapax.run.agreement import test_key as key_of
from pytest_lyapax.views import agreement as agreement_view

# --- the comparison, on hand-made entries --------------------------------


def _entry(name, value, dtype="float64", stderr=None, kind=agreement.RESULT):
    array = np.asarray(value, dtype=float if dtype != "int64" else np.int64)
    leaf = {
        "path": "",
        "shape": list(array.shape),
        "dtype": dtype,
        "data": array.tolist(),
        "stderr": None if stderr is None else np.broadcast_to(stderr, array.shape),
    }
    return {"name": name, "kind": kind, "leaves": [leaf]}


DEFAULT = agreement.Tolerance()


def _one(ref, other, tolerance=DEFAULT):
    (verdict,) = agreement.compare_entries([ref], [other], tolerance)
    return verdict


def test_identical_values_agree_with_zero_deviation():
    v = _one(_entry("x", [1.0, 2.0]), _entry("x", [1.0, 2.0]))
    assert v.ok and v.leaves[0].max_abs == 0.0 and v.leaves[0].max_rel == 0.0


@pytest.mark.parametrize(
    ("dtype", "rel", "agrees"),
    [
        ("float64", 1e-13, True),
        ("float64", 1e-11, False),
        ("float32", 1e-6, True),
        ("float32", 1e-4, False),
        ("bfloat16", 5e-3, True),
        ("bfloat16", 5e-2, False),
    ],
)
def test_default_tolerance_by_dtype(dtype, rel, agrees):
    v = _one(_entry("x", [2.0], dtype), _entry("x", [2.0 * (1 + rel)], dtype))
    assert v.ok is agrees
    assert v.leaves[0].max_rel == pytest.approx(rel, rel=1e-3)


def test_integers_must_be_equal():
    assert _one(_entry("n", [3], "int64"), _entry("n", [3], "int64")).ok
    v = _one(_entry("n", [3, 4], "int64"), _entry("n", [3, 5], "int64"))
    assert not v.ok and v.leaves[0].index == (1,) and v.leaves[0].tolerance == "exact"


def test_marker_tolerance_replaces_the_default():
    ref, other = _entry("x", [1.0]), _entry("x", [1.001])
    assert not _one(ref, other).ok
    assert _one(ref, other, agreement.Tolerance(rtol=1e-2)).ok


def test_worst_element_index_and_values():
    ref = _entry("x", [[1.0, 2.0], [3.0, 4.0]])
    other = _entry("x", [[1.0, 2.0 + 1e-9], [3.0 + 1e-6, 4.0]])
    leaf = _one(ref, other).leaves[0]
    assert not leaf.ok and leaf.index == (1, 0)
    assert (leaf.reference, leaf.value) == (3.0, 3.0 + 1e-6)
    assert leaf.max_abs == pytest.approx(1e-6)
    assert leaf.problem == "2 of 4 element(s) beyond the tolerance"


def test_stderr_band():
    # |a - b| = 0.5, sqrt(0.1^2 + 0.1^2) = 0.1414: inside z=4, outside z=3.
    ref, other = _entry("m", [1.0], stderr=0.1), _entry("m", [1.5], stderr=0.1)
    assert _one(ref, other).ok
    assert not _one(ref, other, agreement.Tolerance(z=3.0)).ok
    # A zero error bar still allows the dtype's round-off.
    assert _one(_entry("m", [1.0], stderr=0.0), _entry("m", [1.0 + 1e-15])).ok


@pytest.mark.parametrize(
    ("a", "b", "agrees"),
    [
        ([math.nan], [math.nan], True),
        ([math.inf], [math.inf], True),
        ([math.nan], [1.0], False),
        ([1.0], [math.inf], False),
        ([math.inf], [-math.inf], False),
    ],
)
def test_non_finite_values(a, b, agrees):
    # Even an unbounded tolerance does not excuse a one-sided NaN/inf.
    v = _one(_entry("x", a), _entry("x", b), agreement.Tolerance(rtol=1e300))
    assert v.ok is agrees


def test_shape_dtype_missing_name_and_structure():
    shape = _one(_entry("x", [1.0, 2.0]), _entry("x", [1.0, 2.0, 3.0]))
    assert not shape.ok and "shape/dtype (3,) float64" in shape.leaves[0].problem
    dtype = _one(_entry("x", [1.0]), _entry("x", [1.0], "float32"))
    assert not dtype.ok
    verdicts = agreement.compare_entries(
        [_entry("x", [1.0])], [_entry("y", [1.0])], DEFAULT
    )
    assert [(v.name, v.problem) for v in verdicts] == [
        ("x", "not recorded on this backend"),
        ("y", "not recorded on reference"),
    ]
    two = {**_entry("x", [1.0]), "leaves": [_entry("x", [1.0])["leaves"][0]] * 2}
    assert "pytree leaves" in _one(_entry("x", [1.0]), two).problem


def test_failure_table_names_every_column():
    verdicts = agreement.compare_entries(
        [_entry("x", [1.0])], [_entry("x", [2.0])], DEFAULT
    )
    text = agreement_view.failure_text("t.py::test", "cpu2", "cpu", verdicts)
    head, columns, row = text.splitlines()
    assert head == (
        "t.py::test: results on backend 'cpu2' disagree with the reference backend "
        "'cpu'"
    )
    assert columns.split() == [
        "name", "leaf", "shape", "max", "abs", "dev", "max", "rel", "dev", "worst",
        "index", "reference", "this", "backend", "tolerance",
    ]  # fmt: skip
    assert row.split()[:8] == ["x", "(root)", "(1,)", "1", "1", "(0,)", "1", "2"]


def test_marker_keywords_are_checked():
    assert agreement.check_tolerance({"rtol": 1e-3}) == agreement.Tolerance(1e-3)
    with pytest.raises(ValueError, match="allowed keywords: rtol, atol, z"):
        agreement.check_tolerance({"rtl": 1e-3})
    with pytest.raises(ValueError, match=r"atol=-1.*finite number >= 0"):
        agreement.check_tolerance({"atol": -1})
    with pytest.raises(ValueError, match=r"z=0.*> 0"):
        agreement.check_tolerance({"z": 0})


def test_test_key_drops_the_backend_only():
    assert key_of("t.py::f[cpu2]", "cpu2") == "t.py::f"
    assert key_of("t.py::f[8-cpu2]", "cpu2") == "t.py::f[8]"
    assert key_of("t.py::f[cpu-8]", "cpu") == "t.py::f[8]"


# --- encoding in the worker ----------------------------------------------


def test_encoding_is_exact_and_checks_its_input(tmp_path):
    import jax.numpy as jnp

    value = {"a": jnp.asarray([0.1, 1 / 3], dtype=jnp.float32), "b": 7}
    entry = results.encode_value("v", value, None, tmp_path)
    a, b = entry["leaves"]
    assert (a["path"], a["dtype"], a["shape"]) == ("['a']", "float32", [2])
    assert a["data"] == np.asarray(value["a"]).tolist()  # float32 values, exactly
    assert (b["path"], b["data"]) == ("['b']", 7)
    with pytest.raises(ValueError, match="stderr has leaves"):
        results.encode_value("v", value, {"a": 0.1}, tmp_path)
    with pytest.raises(TypeError, match="dtype '<U1'|dtype 'str"):
        results.encode_value("v", np.asarray(["x"]), None, tmp_path)
    recorder = results.ResultsRecorder(None)
    recorder.record("v", 1.0)
    with pytest.raises(ValueError, match="'v' was already recorded"):
        recorder.record("v", 2.0)


def test_large_leaves_go_to_a_file(tmp_path):
    big = np.linspace(0.0, 1.0, results.INLINE_BYTES // 8 + 1)
    (leaf,) = results.encode_value("big", big, None, tmp_path)["leaves"]
    assert "data" not in leaf
    stored = leaf["file"]
    assert (stored["min"], stored["max"]) == (0.0, 1.0)
    np.testing.assert_array_equal(np.load(stored["path"]), big)
    entry = {"name": "big", "kind": "result", "leaves": [leaf]}
    shifted = results.encode_value("big", big + 1e-9, None, tmp_path)

    def load(leaf):
        return np.load(leaf["file"]["path"])

    tol = agreement.Tolerance()
    assert agreement.compare_entries([entry], [entry], tol, load)[0].ok
    worse = agreement.compare_entries([entry], [shifted], tol, load)[0]
    assert not worse.ok and worse.leaves[0].max_abs == pytest.approx(1e-9)
    # Not readable here: the hashes decide.
    assert agreement.compare_entries([entry], [entry], tol)[0].ok
    assert not agreement.compare_entries([entry], [shifted], tol)[0].ok


# --- end to end: two labels of one CPU -----------------------------------

TESTS = """
import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_enable_x64", True)


def test_same(jax_results, jax_backend):
    jax_results.record("tree", {"x": jnp.arange(3.0), "n": jnp.arange(2)})


def test_depends_on_backend(jax_results, jax_backend):
    scale = 1.0 if jax_backend == "cpu" else 1.001
    jax_results.record("x", jnp.arange(4.0) * scale)


def test_float32_round_off(jax_results, jax_backend):
    # 1e-6 relative: within float32's default, beyond float64's.
    scale = 1.0 if jax_backend == "cpu" else 1.000001
    jax_results.record("f32", jnp.asarray([1.0, 2.0], jnp.float32) * scale)


@pytest.mark.jax_agree(rtol=1e-2)
def test_marker_loosens(jax_results, jax_backend):
    jax_results.record("x", 1.0 if jax_backend == "cpu" else 1.001)


@pytest.mark.parametrize("shift", [0.0, 1.0])
def test_mean_with_stderr(jax_results, jax_backend, shift):
    seed = 0 if jax_backend == "cpu" else 1
    x = np.random.default_rng(seed).normal(size=400)
    mean = x.mean() + (shift if jax_backend == "cpu2" else 0.0)
    jax_results.record("mean", mean, stderr=x.std() / np.sqrt(x.size))


def test_shape(jax_results, jax_backend):
    jax_results.record("x", jnp.zeros(2 if jax_backend == "cpu" else 3))


def test_missing(jax_results, jax_backend):
    if jax_backend == "cpu":
        jax_results.record("only_on_cpu", 1.0)


def test_nan(jax_results, jax_backend):
    last = jnp.nan if jax_backend == "cpu2" else 2.0
    jax_results.record("x", jnp.asarray([1.0, last]))


def test_large(jax_results, jax_backend):
    big = jnp.linspace(0.0, 1.0, 20000)
    jax_results.record("big", big.at[123].add(0.0 if jax_backend == "cpu" else 1e-6))


def test_bench(benchmark, jax_backend):
    x = jnp.ones(3) * (1.0 if jax_backend == "cpu" else 2.0)
    benchmark(lambda: x + 1)


def test_bench_same(benchmark, jax_backend):
    x = jnp.ones(3)
    benchmark(lambda: x + 1)
"""

FAST = ["-p", "no:cacheprovider", "--benchmark-max-time=0", "-rfs"]
BACKENDS = ["--jax-backend=cpu,cpu2", "--jax-backend-platform=cpu2=cpu"]
FAILING = {
    "test_depends_on_backend",
    "test_mean_with_stderr[1.0]",
    "test_shape",
    "test_missing",
    "test_nan",
    "test_large",
}


def _run(run_pytest, path, name, *args):
    report = path / name
    proc, data = run_pytest(
        path, report, *FAST, *BACKENDS, f"--jax-report-dir={report}", *args
    )
    return proc, data, report


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    path = tmp_path_factory.mktemp("agree")
    (path / "test_results.py").write_text(TESTS)
    return path


@pytest.fixture(scope="module")
def default_run(run_pytest, project):
    return _run(run_pytest, project, "default")


def _by_test(data):
    return {e["test"].split("::")[1]: e for e in data["pytest_lyapax"]["agreement"]}


def _cpu2_id(name):
    if name.endswith("]"):  # the backend's parameter comes first
        head, _, params = name.partition("[")
        return f"test_results.py::{head}[cpu2-{params}"
    return f"test_results.py::{name}[cpu2]"


def test_disagreements_fail_the_non_reference_test(default_run):
    proc, _, _ = default_run
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    assert len(failed) == len(FAILING), failed
    for name in FAILING:
        assert any(line.startswith(f"FAILED {_cpu2_id(name)} ") for line in failed)
    assert f"{len(FAILING)} failed" in out


def test_failure_shows_the_table(default_run):
    out = default_run[0].stdout
    assert (
        "test_results.py::test_depends_on_backend: results on backend 'cpu2' "
        "disagree with the reference backend 'cpu'"
    ) in out
    row = next(line for line in out.splitlines() if line.startswith("x     (root)"))
    assert row.split()[:8] == ["x", "(root)", "(4,)", "0.003", "0.001", "(3,)", "3"] + [
        "3.003"
    ]
    assert "rounding of float64 (rtol 1e-12, atol 1e-14)" in row


def test_agreement_section_of_the_report(default_run):
    proc, data, report = default_run
    assert check_report(data, "run") == data["benchmarks"]
    assert data["pytest_lyapax"]["schema"] == 5
    entries = _by_test(data)
    agreeing = {"test_same", "test_float32_round_off", "test_marker_loosens"}
    for name in agreeing | {"test_mean_with_stderr[0.0]", "test_bench_same"}:
        assert entries[name]["agree"], entries[name]
    for name in FAILING:
        assert not entries[name]["agree"] and entries[name]["failed"], name
    assert entries["test_nan"]["names"][0]["leaves"][0]["index"] == [1]
    assert entries["test_nan"]["names"][0]["leaves"][0]["value"] == "nan"
    (big,) = entries["test_large"]["names"][0]["leaves"]
    assert big["index"] == [123] and big["max_abs"] == pytest.approx(1e-6)
    assert len(list((report / "results").glob("*.npy"))) == 2
    missing = entries["test_missing"]["names"][0]
    assert missing["problem"] == "not recorded on this backend"
    for text in (proc.stdout, (report / "summary.md").read_text()):
        assert "esults across backends" in text
        assert f"{len(entries)} comparison(s) with the reference backend" in text


def test_benchmark_result_disagreement_is_a_warning(default_run):
    proc, data, _ = default_run
    bench = _by_test(data)["test_bench"]
    assert not bench["agree"] and not bench["failed"]
    assert bench["names"][0]["name"] == "benchmark"
    assert "test_results.py::test_bench on 'cpu2': benchmark result" in proc.stdout
    assert "FAILED test_results.py::test_bench" not in proc.stdout


@pytest.mark.slow
def test_strict_later_reference_and_no_agree(project, run_pytest):
    # The reference runs second: the comparison waits for it, and a strict
    # benchmark disagreement then fails the session. One backend after the
    # other, so that it is second for certain: with rounds interleaved, which
    # of two tests ends first follows the turns, which a load can reorder.
    proc, data, _ = _run(
        run_pytest,
        project,
        "strict",
        "-k",
        "bench",
        "--jax-agree-strict",
        "--jax-reference-backend=cpu2",
        "--jax-sequential",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "disagreement found after the test ran" in proc.stdout
    assert "results on backend 'cpu' disagree with the reference backend 'cpu2'" in (
        proc.stdout
    )
    assert _by_test(data)["test_bench"]["failed"]
    proc, data, _ = _run(run_pytest, project, "off", "-k", "bench", "--jax-no-agree")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["pytest_lyapax"]["agreement"] == []
    assert "results across backends" not in proc.stdout
    proc, _, _ = _run(run_pytest, project, "bad", "--jax-reference-backend=gpu")
    assert proc.returncode == 4
    assert (
        "--jax-reference-backend='gpu' is not one of the backends of --jax-backend "
        "(cpu, cpu2)"
    ) in proc.stderr


def test_cross_machine_cli_on_saved_reports(default_run, tmp_path, capsys):
    from pytest_lyapax.cli import main

    _, data, report = default_run
    saved = report / "benchmark.json"
    assert main(["agree", str(saved), str(saved)]) == 0
    assert "all agree" in capsys.readouterr().out
    # The same run relabelled, as if cpu2 had been measured on another machine.
    relabelled = json.loads(saved.read_text())
    for entry in relabelled["pytest_lyapax"]["results"]:
        entry["backend"] = {"cpu": "laptop", "cpu2": "server"}[entry["backend"]]
    other = tmp_path / "server.json"
    other.write_text(json.dumps(relabelled))
    assert main(["agree", str(saved), str(other), "--pair", "cpu:server"]) == 1
    out = capsys.readouterr().out
    disagreeing = {"test_depends_on_backend", "test_mean_with_stderr[1.0]"}
    disagreeing |= {"test_shape", "test_nan", "test_large", "test_bench"}
    for name in disagreeing:
        row = next(line for line in out.splitlines() if f"::{name} " in line)
        assert " FAIL" in row, row
    assert "6 disagree" in out
    assert main(["agree", str(saved), str(other)]) == 2  # no common label
    assert "--pair LABEL:LABEL" in capsys.readouterr().err
