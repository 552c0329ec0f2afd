"""Devices as an axis: ``--jax-devices`` and ``@pytest.mark.jax_devices``.

Unit tests of the option, the marker, the routing of each test's copies and
the scaling arithmetic; collect-only runs (no JAX started) for which copies
exist; and one real run (slow) on 1, 2 and 4 CPU devices, in which each
worker checks that it sees exactly its count and the report holds the
scaling table with the physical core count.
"""

import os

import pytest

from pytest_lyapax.backends.labels import DEVICE_COUNT_FLAG, Backend
from pytest_lyapax.report import devices as devices_report
from pytest_lyapax.report.schema import ReportError, check_report
from pytest_lyapax.run import devices
from pytest_lyapax.run.options import parse_sizes

CPU, GPU = Backend("cpu", "cpu"), Backend("gpu", "cuda")


def test_each_local_cpu_and_gpu_label_gets_one_label_per_count():
    own = Backend("cpu32", "cpu", env=(("XLA_FLAGS", "--xla_cpu_use_thunk=true"),))
    out = devices.add_device_labels((1, 4), (CPU, GPU, own), environ={})
    assert [b.label for b in out] == [
        "cpu",
        "cpu_1dev",
        "cpu_4dev",
        "gpu",
        "gpu_1dev",
        "gpu_4dev",
        "cpu32",
        "cpu32_1dev",
        "cpu32_4dev",
    ]
    by = {b.label: b for b in out}
    assert by["cpu_4dev"] == Backend(
        "cpu_4dev",
        "cpu",
        env=(("XLA_FLAGS", f"{DEVICE_COUNT_FLAG}=4"),),
        devices_of="cpu",
        devices=4,
    )
    # The split comes after the label's own flags (and the user's), so both hold.
    assert dict(by["cpu32_1dev"].env)["XLA_FLAGS"] == (
        f"--xla_cpu_use_thunk=true {DEVICE_COUNT_FLAG}=1"
    )
    user = devices.add_device_labels((2,), (CPU,), environ={"XLA_FLAGS": "--a=1"})
    assert dict(user[1].env)["XLA_FLAGS"] == f"--a=1 {DEVICE_COUNT_FLAG}=2"
    # A GPU label keeps its environment: its worker uses its first p GPUs.
    assert by["gpu_4dev"].env == () and by["gpu_4dev"].devices == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("two", "--jax-devices: 'two' is not a positive integer; give a comma-sep"),
        ("1,0", "--jax-devices: '0' is not a positive integer"),
        ("-2", "--jax-devices: '-2' is not a positive integer"),
        ("1,2,1", "--jax-devices: device count 1 is listed twice"),
    ],
)
def test_bad_counts_are_usage_errors_naming_the_option_and_value(text, message):
    with pytest.raises(pytest.UsageError, match=message):
        parse_sizes(text, "--jax-devices", "device count", "1,2,4")


def test_a_cpu_count_above_what_the_platform_gives_is_refused():
    limit = devices.cpu_device_limit()
    assert limit == devices.CPU_DEVICES_PER_CORE * os.cpu_count()
    assert devices.add_device_labels((limit,), (CPU,))[-1].devices == limit
    with pytest.raises(pytest.UsageError, match=f"--jax-devices: {limit + 1} devices"):
        devices.add_device_labels((1, limit + 1), (CPU,))
    # GPUs are counted by the probe: fewer than asked makes the label unavailable.
    (_, gpu2) = devices.add_device_labels((2,), (GPU,))
    assert devices.missing_devices(gpu2, {"device_count": 2}) is None
    reason = devices.missing_devices(gpu2, {"device_count": 1})
    assert reason == "--jax-devices: 2 devices asked, and the 'gpu' platform has 1 here"


def test_a_label_the_split_would_add_may_not_exist_already():
    with pytest.raises(pytest.UsageError, match="'cpu_2dev' it would add"):
        devices.add_device_labels((2,), (CPU, Backend("cpu_2dev", "cpu")))


def _backend_entry(label, base, p, **hardware):
    return {"label": label, "devices_of": base, "devices": p, **hardware}


def _record(label, p, median, size=64, mode="strong", name="test_x"):
    return {
        "fullname": f"t.py::{name}[{label}-{size}]",
        "stats": {"median": median},
        "extra_info": {"backend": label, "size": size, "devices": p, "scaling": mode},
    }


CORES = {"physical_cores": 2, "logical_cores": 4}
ENTRIES = [_backend_entry(f"cpu_{p}dev", "cpu", p, **CORES) for p in (1, 2, 4)]


def test_strong_scaling_is_t1_over_p_tp_at_equal_size():
    records = [_record("cpu_1dev", 1, 8.0), _record("cpu_2dev", 2, 5.0)]
    records += [_record("cpu_4dev", 4, 4.0), _record("cpu_4dev", 4, 1.0, size=8)]
    rows = devices_report.scaling_rows(records, ENTRIES)
    got = [(r["size"], r["devices"], r["speedup"], r["efficiency"]) for r in rows]
    # size 8 has no one-device time: no speedup, rather than a wrong one.
    assert got == [
        (8, 4, None, None),
        (64, 1, 1.0, 1.0),
        (64, 2, 8.0 / 5.0, 8.0 / (2 * 5.0)),
        (64, 4, 2.0, 8.0 / (4 * 4.0)),
    ]
    assert {r["test"] for r in rows} == {"test_x"}
    assert {r["backend"] for r in rows} == {"cpu"}
    on = {r["devices"]: r["on"] for r in rows}
    assert on[2] == "2 CPU devices on 2 physical cores (4 logical)"
    assert on[4] == "4 CPU devices on 2 physical cores (4 logical) - oversubscribed"
    (note,) = devices_report.oversubscribed(rows)
    assert note.startswith("cpu: 4 CPU devices on 2 physical cores")


def test_weak_scaling_is_t1_over_tp_and_the_speedup_scaled_by_p():
    records = [
        _record(f"cpu_{p}dev", p, t, mode="weak") for p, t in ((1, 2.0), (4, 2.5))
    ]
    rows = devices_report.scaling_rows(records, ENTRIES)
    assert [(r["scaling"], r["efficiency"], r["speedup"]) for r in rows] == [
        ("weak", 1.0, 1.0),
        ("weak", 2.0 / 2.5, 4 * 2.0 / 2.5),
    ]


def test_gpu_rows_say_gpus_and_plain_labels_are_not_rows():
    entries = [_backend_entry("gpu_2dev", "gpu", 2, gpus=2, gpus_present=8)]
    records = [_record("gpu_2dev", 2, 1.0), _record("cpu", 1, 1.0)]
    (row,) = devices_report.scaling_rows(records, [*entries, {"label": "cpu"}])
    assert row["on"] == "2 GPUs" and row["speedup"] is None


def test_a_malformed_scaling_entry_is_refused_on_reading():
    row = devices_report.scaling_rows([_record("cpu_1dev", 1, 1.0)], ENTRIES)[0]
    good = {"benchmarks": [], "pytest_lyapax": {"schema": 1, "scaling": [row]}}
    check_report(good, "r.json")
    for field, value in (("devices", 0), ("scaling", "linear"), ("on", None)):
        bad = {
            "benchmarks": [],
            "pytest_lyapax": {"schema": 1, "scaling": [{**row, field: value}]},
        }
        with pytest.raises(ReportError, match="scaling #0"):
            check_report(bad, "r.json")


PROJECT = """
import os

import pytest


def _count(label):
    return int(label.split("_")[-1][: -len("dev")])


@pytest.mark.jax_devices(1, 2, 4)
def test_mesh(jax_mesh, jax_backend, jax_results):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    p = _count(jax_backend)
    assert len(jax.devices()) == p and jax_mesh.size == p
    assert jax_mesh.axis_names == ("devices",)
    assert "--xla_force_host_platform_device_count=%d" % p in os.environ["XLA_FLAGS"]
    x = jax.device_put(
        jnp.arange(8.0), NamedSharding(jax_mesh, PartitionSpec("devices"))
    )
    assert len(x.addressable_shards) == p
    jax_results.record("cumsum", jnp.cumsum(x * x))


@pytest.mark.jax_devices(1, 2)
def test_two_counts(jax_backend):
    assert _count(jax_backend) in (1, 2)


def test_plain(jax_backend):
    import jax

    assert jax_backend == "cpu" and len(jax.devices()) == 1


@pytest.mark.jax_devices(1, 2, 4)
@pytest.mark.jax_sizes(64)
def test_strong(benchmark, jax_mesh, jax_size):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    x = jax.device_put(
        jnp.ones((jax_size, 8)), NamedSharding(jax_mesh, PartitionSpec("devices"))
    )
    benchmark(jax.jit(lambda a: (a * 2.0).sum()), x)


@pytest.mark.jax_devices(1, 2, 4, scaling="weak")
@pytest.mark.jax_sizes(16)
def test_weak(benchmark, jax_mesh, jax_size):
    import jax.numpy as jnp

    x = jnp.ones(jax_size * jax_mesh.size)
    benchmark(lambda: (x + 1.0).block_until_ready())
"""


def test_collect_only_lists_marked_tests_once_per_count_and_the_others_once(
    pytester,
):
    pytester.makepyfile(test_dev=PROJECT)
    result = pytester.runpytest_subprocess(
        "--collect-only", "-q", "--jax-backend=cpu", "--jax-devices=1,2,4"
    )
    ids = [line for line in result.outlines if "::" in line]
    assert ids == [
        "test_dev.py::test_mesh[cpu_1dev]",
        "test_dev.py::test_mesh[cpu_2dev]",
        "test_dev.py::test_mesh[cpu_4dev]",
        "test_dev.py::test_two_counts[cpu_1dev]",
        "test_dev.py::test_two_counts[cpu_2dev]",
        "test_dev.py::test_plain[cpu]",
        "test_dev.py::test_strong[cpu_1dev-64]",
        "test_dev.py::test_strong[cpu_2dev-64]",
        "test_dev.py::test_strong[cpu_4dev-64]",
        "test_dev.py::test_weak[cpu_1dev-16]",
        "test_dev.py::test_weak[cpu_2dev-16]",
        "test_dev.py::test_weak[cpu_4dev-16]",
    ], result.outlines


TWIN_PROJECT = """
import pytest

@pytest.mark.jax_devices(1, 2)
def test_mesh(jax_mesh):
    pass

def test_plain(jax_backend):
    pass
"""


@pytest.mark.parametrize(
    ("args", "twins"),
    [
        (("--jax-ab=other",), ("cpu_1dev_b", "cpu_2dev_b", "cpu_b")),
        (("--jax-rerun=cpu",), ("cpu_rerun",)),
        (("--jax-rerun=cpu_2dev",), ("cpu_2dev_rerun",)),
    ],
)
def test_the_twins_of_a_split_label_keep_its_tests_per_count(pytester, args, twins):
    # B of an A/B run and a rerun copy their label's tests: a marked test
    # runs on the twins of the device-count labels, not on the plain twin.
    pytester.makepyfile(tinypkg="V = 'a'\n", test_dev=TWIN_PROJECT)
    pytester.mkdir("other").joinpath("tinypkg.py").write_text("V = 'b'\n")
    result = pytester.runpytest_subprocess(
        "--collect-only", "-q", "--jax-backend=cpu", "--jax-devices=1,2", *args
    )
    ids = {line for line in result.outlines if "::" in line}
    expected = {
        "test_dev.py::test_mesh[cpu_1dev]",
        "test_dev.py::test_mesh[cpu_2dev]",
        "test_dev.py::test_plain[cpu]",
    }
    for twin in twins:
        test = "test_plain" if twin.count("_") == 1 else "test_mesh"
        expected.add(f"test_dev.py::{test}[{twin}]")
    assert ids == expected, result.outlines


def test_without_the_option_a_marked_test_says_how_to_run_it(pytester):
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.jax_devices(1, 2)\n"
        "def test_x(jax_mesh):\n    pass\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:xdist", "--jax-backend=cpu", "-rs")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "*marked jax_devices(1, 2): runs on one worker per device count; add "
            "--jax-devices=1,2*"
        ]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--jax-devices=1,100000",), "*--jax-devices: 100000 devices is more than*"),
        (
            ("--jax-devices=1,x",),
            "*--jax-devices: 'x' is not a positive integer; give a comma-separated"
            " list of device counts, e.g. --jax-devices=1,2,4",
        ),
        (("-p", "no:xdist", "--jax-devices=2"), "*--jax-devices=2 needs each device*"),
    ],
)
def test_refused_counts_are_usage_errors(pytester, args, message):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("--jax-backend=cpu", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_a_bad_marker_count_is_a_collection_error_naming_it(pytester):
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.jax_devices(1, 0)\ndef test_x():\n    pass\n"
    )
    result = pytester.runpytest_subprocess(
        "--collect-only", "--jax-backend=cpu", "--jax-devices=1"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*@pytest.mark.jax_devices: 0 is not a positive integer device count*"]
    )


@pytest.fixture(scope="module")
def devices_run(run_pytest, tmp_path_factory):
    path = tmp_path_factory.mktemp("devices")
    (path / "test_dev.py").write_text(PROJECT)
    (path / "pytest.ini").write_text("[pytest]\njax_devices = 1,2,4\n")
    report = path / "report"
    proc, data = run_pytest(
        path,
        report,
        "-p",
        "no:cacheprovider",
        "--benchmark-max-time=0",
        "--benchmark-min-rounds=3",
        "-v",
        "--jax-backend=cpu",
        f"--jax-report-dir={report}",
    )
    return proc, data, report


@pytest.mark.slow
def test_each_worker_sees_its_count_of_devices_and_plain_tests_run_once(
    devices_run,
):
    proc, data, _ = devices_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "12 passed" in proc.stdout
    backends = {b["label"]: b for b in data["pytest_lyapax"]["backends"]}
    assert list(backends) == ["cpu", "cpu_1dev", "cpu_2dev", "cpu_4dev"]
    assert backends["cpu_4dev"]["devices"] == 4
    assert backends["cpu_4dev"]["devices_of"] == "cpu"
    assert backends["cpu_4dev"]["device_count"] == 4  # as its probe saw it
    assert backends["cpu"]["outcomes"] == {"passed": 1}
    assert backends["cpu_1dev"]["outcomes"] == {"passed": 4}
    assert backends["cpu_4dev"]["outcomes"] == {"passed": 3}
    # Each count's results against the first count's: the sharded sum agrees.
    agreed = {
        (e["test"].split("::")[1], e["backend"]): e
        for e in data["pytest_lyapax"]["agreement"]
    }
    for p in (2, 4):
        entry = agreed[("test_mesh", f"cpu_{p}dev")]
        assert entry["reference"] == "cpu_1dev" and entry["agree"] is True, entry


def test_without_an_active_run_the_mesh_holds_every_device(pytester):
    pytester.makepyfile(
        "import jax, pytest\n\n@pytest.mark.jax_devices(1, 2)\n"
        "def test_x(jax_mesh):\n"
        "    assert jax_mesh.size == len(jax.devices())\n"
        "    assert jax_mesh.axis_names == ('devices',)\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:xdist")
    result.assert_outcomes(passed=1)


@pytest.mark.slow
def test_the_scaling_table_states_the_physical_cores(devices_run, tmp_path):
    proc, data, report = devices_run
    medians = {
        (r["name"].split("[")[0], r["extra_info"]["devices"]): r["stats"]["median"]
        for r in data["benchmarks"]
    }
    rows = {(r["test"], r["devices"]): r for r in data["pytest_lyapax"]["scaling"]}
    assert set(rows) == set(medians)
    cores = devices.physical_cores()
    for (test, p), row in rows.items():
        t1, tp = medians[(test, 1)], medians[(test, p)]
        if test == "test_strong":
            assert row["scaling"] == "strong" and row["size"] == 64
            assert row["efficiency"] == pytest.approx(t1 / (p * tp), rel=1e-12)
        else:
            assert row["scaling"] == "weak" and row["size"] == 16
            assert row["efficiency"] == pytest.approx(t1 / tp, rel=1e-12)
        assert row["speedup"] == pytest.approx(p * row["efficiency"], rel=1e-12)
        assert row["on"].startswith(f"{p} CPU device{'s' if p > 1 else ''} on {cores} ")
    assert "pytest-lyapax: device scaling" in proc.stdout
    summary = (report / "summary.md").read_text()
    assert "## Device scaling" in summary
    assert f"| 4 CPU devices on {cores} physical core" in summary
    assert "Device scaling" in (report / "report.html").read_text()
    assert (report / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Drawn from the JSON alone: the report tools regenerate the same bytes.
    from pytest_lyapax.cli import main

    saved = str(report / "benchmark.json")
    assert main(["html", saved, "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_bytes()
    assert page == (report / "report.html").read_bytes()
    assert b'<img id="scaling-figure"' in page
