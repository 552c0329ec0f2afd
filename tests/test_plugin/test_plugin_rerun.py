"""Run-to-run determinism: ``--jax-rerun=LABEL`` runs a label twice.

Unit tests of the option and of the bit-for-bit comparison, and one real run
of ``cpu`` with its rerun, in which one test's results differ between the two
runs by construction (by one unit in the last place, within the agreement
tolerance) and the others are identical.
"""

import numpy as np
import pytest

from pytest_lyapax.backends.labels import Backend
from pytest_lyapax.report import agreement
from pytest_lyapax.report.schema import ReportError, check_report
from pytest_lyapax.run.options import add_reruns
from pytest_lyapax.views import agreement as agreement_view

ENV = (("JAX_ENABLE_X64", "0"),)
BACKENDS = (Backend("cpu", "cpu", env=ENV), Backend("gpu", "cuda"))


def test_a_rerun_follows_its_label_with_the_same_platform_and_variables():
    out = add_reruns(["cpu", "cpu"], BACKENDS)
    assert [b.label for b in out] == ["cpu", "cpu_rerun", "gpu"]
    assert out[1] == Backend("cpu_rerun", "cpu", env=ENV, rerun_of="cpu")
    both = add_reruns(["gpu,CPU"], BACKENDS)
    assert [b.label for b in both] == ["cpu", "cpu_rerun", "gpu", "gpu_rerun"]
    assert add_reruns([], BACKENDS) == BACKENDS


@pytest.mark.parametrize(
    ("labels", "backends", "message"),
    [
        (["tpu"], BACKENDS, "--jax-rerun: 'tpu' is not a requested backend"),
        (
            ["cpu"],
            (*BACKENDS, Backend("cpu_rerun", "cpu")),
            "--jax-rerun=cpu: the label 'cpu_rerun' it would add is already",
        ),
    ],
)
def test_bad_reruns_are_usage_errors_naming_the_option(labels, backends, message):
    with pytest.raises(pytest.UsageError, match=message.replace("(", r"\(")):
        add_reruns(labels, backends)


def _entry(name, values, dtype="float64", path=""):
    array = np.asarray(values)
    leaf = {"path": path, "shape": list(array.shape), "dtype": dtype}
    return {"name": name, "leaves": [{**leaf, "data": array.tolist()}]}


def _one(first, second):
    (row,) = agreement.identical_entries([first], [second])
    return row


def test_identical_means_bit_for_bit():
    same = _one(_entry("x", [1.0, np.nan, -0.0]), _entry("x", [1.0, np.nan, -0.0]))
    assert same["identical"] and same["differing"] == 0 and same["elements"] == 3
    ulp = _one(_entry("x", [1.0, 2.0]), _entry("x", [1.0, np.nextafter(2.0, 3.0)]))
    assert not ulp["identical"] and ulp["differing"] == 1
    assert ulp["max_abs"] == pytest.approx(2.0**-51)
    # Equal as numbers, not as bits.
    zero = _one(_entry("x", [0.0]), _entry("x", [-0.0]))
    assert not zero["identical"] and zero["differing"] == 1
    ints = _one(_entry("n", [1, 2], "int64"), _entry("n", [1, 3], "int64"))
    assert (ints["identical"], ints["differing"]) == (False, 1)


def test_missing_names_and_other_shapes_are_differences_with_a_reason():
    (only_first, only_second) = agreement.identical_entries(
        [_entry("a", [1.0])], [_entry("b", [1.0])]
    )
    assert only_first["problem"] == "not recorded by the rerun"
    assert only_second["problem"] == "not recorded by the run"
    shape = _one(_entry("x", [1.0, 2.0]), _entry("x", [1.0]))
    assert not shape["identical"] and "shape/dtype" in shape["problem"]
    dtype = _one(_entry("x", [1.0]), _entry("x", [1.0], "float32"))
    assert not dtype["identical"] and "float32" in dtype["problem"]


def test_leaves_in_files_compare_their_values_or_else_their_hashes(tmp_path):
    big = np.linspace(0.0, 1.0, 5)
    np.save(tmp_path / "a.npy", big)
    np.save(tmp_path / "b.npy", big.copy())
    np.save(tmp_path / "c.npy", big + 1e-9)

    def stored(name, sha):
        file = {"path": str(tmp_path / name), "sha256": sha}
        leaf = {"path": "", "shape": [5], "dtype": "float64", "file": file}
        return {"name": "big", "leaves": [leaf]}

    load = agreement.load_file
    rows = agreement.identical_entries(
        [stored("a.npy", "1")], [stored("b.npy", "2")], load
    )
    assert rows[0]["identical"]  # the values decide where the files are readable
    rows = agreement.identical_entries(
        [stored("a.npy", "1")], [stored("c.npy", "1")], load
    )
    assert rows[0]["differing"] == 5 and rows[0]["max_abs"] == pytest.approx(1e-9)
    unreadable = agreement.identical_entries([stored("x", "1")], [stored("y", "2")])
    assert "sha256 differs" in unreadable[0]["problem"]
    assert agreement.identical_entries([stored("x", "1")], [stored("y", "1")])[0][
        "identical"
    ]


def test_the_table_rows_read_a_saved_report_defensively():
    entries = [
        {
            "test": "t.py::a",
            "backend": "cpu",
            "rerun": "cpu_rerun",
            "identical": False,
            "names": [
                {"name": "x", "identical": False, "differing": 2, "elements": 9},
                {"name": "y", "identical": True},
                "not a mapping",
            ],
        },
        {"test": "t.py::b", "names": "not a list"},
    ]
    rows = agreement_view.determinism_rows(entries)
    assert rows == [
        ("t.py::a", "cpu", "cpu_rerun", "x", "differs: 2 of 9 elements", "-"),
        ("t.py::a", "cpu", "cpu_rerun", "y", "bit-identical", "-"),
    ]
    assert len(agreement_view.determinism_rows(entries, only_differing=True)) == 1
    assert agreement_view.determinism_headline(entries) == (
        "2 test(s) run twice on one backend: 2 differ"
    )


def test_a_malformed_determinism_section_is_refused():
    report = {"benchmarks": [], "pytest_lyapax": {"schema": 1, "determinism": [{}]}}
    with pytest.raises(ReportError, match="determinism #0"):
        check_report(report, "r.json")


# --- end to end: cpu and its rerun ---------------------------------------

PROJECT = """
import jax
import jax.numpy as jnp
import pytest

jax.config.update("jax_enable_x64", True)


def test_same(jax_results):
    jax_results.record("x", jnp.cumsum(jnp.linspace(0.0, 1.0, 50) ** 3))


def test_one_ulp(jax_results, jax_backend):
    # Differs between the two runs on purpose: one unit in the last place.
    x = jnp.asarray([1.0, 2.0])
    if jax_backend == "cpu_rerun":
        x = x.at[1].set(jnp.nextafter(2.0, 3.0))
    jax_results.record("x", x)


@pytest.mark.jax_backend("cpu")
def test_marked_for_cpu(jax_results):
    jax_results.record("n", jnp.arange(3))


def test_bench(benchmark):
    x = jnp.ones(8)
    return benchmark(lambda: (x * 2).block_until_ready())
"""


@pytest.fixture(scope="module")
def rerun_run(run_pytest, tmp_path_factory):
    path = tmp_path_factory.mktemp("rerun")
    (path / "test_rerun.py").write_text(PROJECT)
    report = path / "report"
    proc, data = run_pytest(
        path,
        report,
        "-p",
        "no:cacheprovider",
        "--benchmark-max-time=0",
        "-rs",
        "--jax-backend=cpu",
        "--jax-rerun=cpu",
        f"--jax-report-dir={report}",
    )
    return proc, data, report


def test_the_rerun_runs_every_test_of_its_label_and_differences_are_no_failure(
    rerun_run,
):
    proc, data, _ = rerun_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "8 passed" in proc.stdout  # the marked test runs on the rerun too
    backends = {b["label"]: b for b in data["pytest_lyapax"]["backends"]}
    assert backends["cpu_rerun"]["rerun_of"] == "cpu"
    assert backends["cpu_rerun"]["status"] == "ok"
    assert "rerun_of" not in backends["cpu"]
    assert data["pytest_lyapax"]["run_order"] == ["cpu", "cpu_rerun"]


def test_the_determinism_table_says_which_results_are_bit_identical(rerun_run):
    proc, data, report = rerun_run
    rows = {
        (e["test"].split("::")[1], n["name"]): n
        for e in data["pytest_lyapax"]["determinism"]
        for n in e["names"]
    }
    assert set(rows) == {
        ("test_same", "x"),
        ("test_one_ulp", "x"),
        ("test_marked_for_cpu", "n"),
        ("test_bench", "benchmark"),
    }, rows
    assert rows[("test_one_ulp", "x")]["identical"] is False
    assert rows[("test_one_ulp", "x")]["differing"] == 1
    assert rows[("test_one_ulp", "x")]["max_abs"] == pytest.approx(2.0**-51)
    others = [n for k, n in rows.items() if k[0] != "test_one_ulp"]
    assert all(n["identical"] for n in others), others
    out = proc.stdout
    assert "run-to-run determinism" in out
    assert "4 test(s) run twice on one backend: 1 differ" in out
    assert "differs: 1 of 2 elements" in out
    summary = (report / "summary.md").read_text()
    assert "Run-to-run determinism" in summary and "bit-identical" in summary
    # Within the agreement tolerance: the rerun agrees with the reference.
    agree = {e["test"].split("::")[1]: e for e in data["pytest_lyapax"]["agreement"]}
    assert agree["test_one_ulp"]["agree"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--jax-rerun=cpu",), "--jax-rerun=cpu needs each backend"),
        (("--jax-devices=1,2",), "--jax-devices=1 needs each device count"),
        (
            ("--jax-backend-env=cpu:JAX_ENABLE_X64=0",),
            "--jax-backend-env (for 'cpu') needs each backend",
        ),
    ],
)
def test_without_worker_processes_a_label_of_its_own_is_a_usage_error(
    pytester, args, message
):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--jax-backend=cpu", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{message} in its own worker process*"])
