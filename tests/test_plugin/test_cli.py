"""``python -m pytest_lyapax`` on real reports (issue 15).

One real plugin run (CPU, in a subprocess) makes the report every test starts
from.  A "second machine" is that report with its machine_info relabelled,
and a history is copies of it with one injected 2x slowdown -- fabricated
here, in the test, never in a shipped figure.
"""

import copy
import json
import struct
import subprocess
import sys

import pytest

SUITE = """
import jax
import jax.numpy as jnp
import pytest


@pytest.mark.jax_sizes(4, 16)
def test_matmul(benchmark, jax_backend, jax_size):
    x = jnp.ones((jax_size, jax_size))
    benchmark(jax.jit(lambda a: a @ a), x)


def test_sin(benchmark, jax_backend):
    benchmark(jax.jit(jnp.sin), jnp.ones(4))
"""


def cli(*args, cwd, env):
    return subprocess.run(
        [sys.executable, "-m", "pytest_lyapax", *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, clean_environment):
    """A report written by a real (small, CPU-only) pytest-lyapax run."""
    path = tmp_path_factory.mktemp("real_run")
    (path / "test_perf.py").write_text(SUITE)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--jax-backend=cpu",
            "--benchmark-min-rounds=5",
            "--benchmark-max-time=0",
        ],
        cwd=path,
        env=clean_environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((path / "lyapax-report" / "benchmark.json").read_text())
    assert report["pytest_lyapax"]["schema"] == 1
    return path, report


def second_machine(report):
    """The same run as if made on another host (machine_info relabelled)."""
    other = copy.deepcopy(report)
    other["machine_info"]["node"] = "gpu-server"
    other["machine_info"].setdefault("cpu", {})["brand_raw"] = "Other CPU"
    return other


def write(path, data):
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def png_size(path):
    return struct.unpack(">II", path.read_bytes()[16:24])


def test_merge_two_machines_and_plot_the_merged_report(
    real_run, tmp_path, clean_environment
):
    path, report = real_run
    a = write(tmp_path / "laptop.json", report)
    b = write(tmp_path / "server.json", second_machine(report))
    proc = cli("merge", a, b, "-o", "merged.json", cwd=tmp_path, env=clean_environment)
    assert proc.returncode == 0, proc.stderr
    merged = json.loads((tmp_path / "merged.json").read_text())
    host = report["machine_info"]["node"]
    labels = {bench["extra_info"]["backend"] for bench in merged["benchmarks"]}
    assert labels == {f"cpu @ {host}", "cpu @ gpu-server"}
    assert len(merged["benchmarks"]) == 2 * len(report["benchmarks"])
    fullnames = [bench["fullname"] for bench in merged["benchmarks"]]
    assert len(set(fullnames)) == len(fullnames)
    sources = merged["pytest_lyapax"]["merged_from"]
    assert [s["machine"].split(" ")[0] for s in sources] == [host, "gpu-server"]
    # Still a pytest-benchmark report.
    compare = subprocess.run(
        [sys.executable, "-m", "pytest_benchmark", "compare", "merged.json"],
        cwd=tmp_path,
        env=clean_environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compare.returncode == 0, compare.stderr

    proc = cli(
        "plot", "merged.json", "-o", "fig.png", cwd=tmp_path, env=clean_environment
    )
    assert proc.returncode == 0, proc.stderr
    assert "gpu-server" in proc.stdout
    assert f"cpu @ gpu-server vs cpu @ {host}" in proc.stdout
    width, height = png_size(tmp_path / "fig.png")
    assert width <= 1500 and height <= 3400


def test_duplicates_are_reported_not_overwritten(real_run, tmp_path, clean_environment):
    _, report = real_run
    a = write(tmp_path / "a.json", report)
    b = write(tmp_path / "b.json", report)
    proc = cli("merge", a, b, "-o", "m.json", cwd=tmp_path, env=clean_environment)
    assert proc.returncode == 0, proc.stderr
    n = len(report["benchmarks"])
    assert f"{n} conflicting duplicate(s) not merged" in proc.stdout
    assert proc.stderr.count("conflict:") == n
    merged = json.loads((tmp_path / "m.json").read_text())
    assert len(merged["benchmarks"]) == n
    assert len(merged["pytest_lyapax"]["conflicts"]) == n


def scaled(report, factor):
    slow = copy.deepcopy(report)
    for bench in slow["benchmarks"]:
        for key in ("min", "max", "mean", "median", "q1", "q3", "iqr", "stddev"):
            bench["stats"][key] *= factor
    return slow


def test_history_flags_an_injected_2x_regression(real_run, tmp_path, clean_environment):
    _, report = real_run
    # On a shared machine a real run's interquartile range can be wider than
    # 2x, which history rightly calls noise; give the copies a +-10% range.
    report = copy.deepcopy(report)
    for bench in report["benchmarks"]:
        median = bench["stats"]["median"]
        bench["stats"].update(q1=0.9 * median, q3=1.1 * median, iqr=0.2 * median)
    runs = tmp_path / "lyapax-report" / "runs"
    runs.mkdir(parents=True)
    # Written out of order on purpose: history orders by commit time.
    for number, day in [(1, 5), (2, 1), (3, 2), (4, 3)]:
        run = copy.deepcopy(report)
        run["commit_info"] = {"id": f"c{day}", "time": f"2026-01-0{day}T12:00:00+00:00"}
        write(runs / f"{number:04d}.json", run)
    slow = scaled(report, 2.0)
    slow["commit_info"] = {"id": "c4", "time": "2026-01-04T12:00:00+00:00"}
    write(runs / "0005.json", slow)
    proc = cli(
        "history", "lyapax-report", "-o", "h.png", cwd=tmp_path, env=clean_environment
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("5 runs, 2 series")
    slower = [line for line in proc.stdout.splitlines() if line.endswith("SLOWER")]
    faster = [line for line in proc.stdout.splitlines() if line.endswith("FASTER")]
    n = len(report["benchmarks"])
    # Commit order 2,3,4,5(slow),1: the step 0004 -> 0005 is slower, 0005 -> 0001
    # faster again, and nothing else is flagged.
    assert len(slower) == n and all("0004.json  0005.json" in s for s in slower)
    assert len(faster) == n and all("0005.json  0001.json" in s for s in faster)
    assert all("2.00x" in line for line in slower)
    assert png_size(tmp_path / "h.png")[0] <= 1500


def test_compare_exit_codes(real_run, tmp_path, clean_environment):
    _, report = real_run
    base = write(tmp_path / "base.json", report)
    slow = write(tmp_path / "slow.json", scaled(report, 2.0))
    fewer = copy.deepcopy(report)
    fewer["benchmarks"] = fewer["benchmarks"][:1]
    fewer = write(tmp_path / "fewer.json", fewer)
    env = clean_environment
    assert (
        cli(
            "compare", base, base, "--fail=median:25%", cwd=tmp_path, env=env
        ).returncode
        == 0
    )
    regressed = cli("compare", base, slow, "--fail=median:25%", cwd=tmp_path, env=env)
    assert regressed.returncode == 1 and "REGRESSION" in regressed.stdout
    assert "gate median:25%: FAILED" in regressed.stdout
    assert cli("compare", base, slow, cwd=tmp_path, env=env).returncode == 0
    missing = cli("compare", base, fewer, "--fail=median:25%", cwd=tmp_path, env=env)
    assert missing.returncode == 1 and "missing from this run" in missing.stdout
    allowed = cli(
        "compare",
        base,
        fewer,
        "--fail=median:25%",
        "--allow-missing",
        cwd=tmp_path,
        env=env,
    )
    assert allowed.returncode == 0
    absolute = cli("compare", base, slow, "--fail=median:1", cwd=tmp_path, env=env)
    assert absolute.returncode == 0 and " s" in absolute.stdout


BAD_INPUTS = {
    "not-a-report": ({"hello": "world"}, "not a pytest-benchmark report"),
    "a-list": ([1, 2, 3], "not a pytest-benchmark report"),
    "newer-plugin": (None, "written by a newer pytest-lyapax (report schema 99)"),
    "truncated": (None, "not valid JSON"),
    "non-numeric": (None, "non-numeric or negative stats.median ('fast')"),
    "empty": ("", "not valid JSON"),
}


@pytest.mark.parametrize(
    ("kind", "command"),
    [(kind, "plot") for kind in BAD_INPUTS]
    + [("truncated", "merge"), ("newer-plugin", "history"), ("non-numeric", "compare")],
)
def test_bad_inputs_give_one_line_and_exit_code_2(
    real_run, tmp_path, clean_environment, kind, command
):
    _, report = real_run
    data, message = BAD_INPUTS[kind]
    if kind == "newer-plugin":
        data = copy.deepcopy(report)
        data["pytest_lyapax"]["schema"] = 99
    elif kind == "truncated":
        data = json.dumps(report)[: len(json.dumps(report)) // 2]
    elif kind == "non-numeric":
        data = copy.deepcopy(report)
        data["benchmarks"][0]["stats"]["median"] = "fast"
    bad = write(tmp_path / "bad.json", data)
    good = write(tmp_path / "good.json", report)
    args = {
        "plot": ["plot", bad, "-o", "x.png"],
        "merge": ["merge", good, bad, "-o", "x.json"],
        "history": ["history", good, bad, "-o", "x.png"],
        "compare": ["compare", good, bad, "--fail=median:10%"],
    }[command]
    proc = cli(*args, cwd=tmp_path, env=clean_environment)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["bogus"],
        ["plot"],
        ["compare", "a.json"],
        ["compare", "a", "b", "--fail=p99:5%"],
    ],
    ids=["nothing", "unknown", "plot-no-file", "compare-one-file", "bad-threshold"],
)
def test_usage_errors_exit_2(tmp_path, clean_environment, args):
    write(tmp_path / "a", "{}")
    write(tmp_path / "b", "{}")
    proc = cli(*args, cwd=tmp_path, env=clean_environment)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_ten_thousand_benchmarks_give_a_bounded_figure(
    real_run, tmp_path, clean_environment
):
    _, report = real_run
    sized = [b for b in report["benchmarks"] if b["extra_info"]["size"] is not None]
    big = copy.deepcopy(report)
    big["benchmarks"] = []
    for i in range(5000):
        for bench in sized:
            entry = copy.deepcopy(bench)
            entry["fullname"] = entry["fullname"].replace("test_matmul", f"test_m{i}")
            entry["name"] = entry["name"].replace("test_matmul", f"test_m{i}")
            big["benchmarks"].append(entry)
    assert len(big["benchmarks"]) == 10_000
    write(tmp_path / "big.json", big)
    proc = cli("plot", "big.json", "-o", "big.png", cwd=tmp_path, env=clean_environment)
    assert proc.returncode == 0, proc.stderr
    width, height = png_size(tmp_path / "big.png")
    assert width <= 1500 and height <= 3400
    assert len(proc.stdout.splitlines()) <= 60  # the listing is bounded too
    proc = cli(
        "compare",
        "big.json",
        "big.json",
        "--fail=median:5%",
        cwd=tmp_path,
        env=clean_environment,
    )
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) <= 60


def test_the_docs_reference_figure_is_redrawn_from_its_committed_report(
    tmp_path, clean_environment
):
    # The stored GPU-page figure must be reproducible from the committed JSON.
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs" / "_static"
    report = docs / "gpu_acceleration_reference.json"
    out = tmp_path / "reference.png"
    proc = cli("plot", report, "-o", out, cwd=tmp_path, env=clean_environment)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png_size(out) == png_size(docs / "gpu_acceleration_reference.png")
    data = json.loads(report.read_text())
    measured = {b["extra_info"]["backend"] for b in data["benchmarks"]}
    statuses = {b["label"]: b["status"] for b in data["pytest_lyapax"]["backends"]}
    # Every timing in the stored report was measured on a backend marked ok.
    assert measured and all(statuses[label] == "ok" for label in measured)
