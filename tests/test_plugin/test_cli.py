"""``python -m pytest_lyapax`` on real reports.

One real plugin run (CPU, in a subprocess) makes the report every test starts
from.  A "second machine" is that report with its machine_info relabelled,
and a history is copies of it with one injected 2x slowdown -- fabricated
here, in the test, never in a shipped figure.
"""

import copy
import json
import re
import struct
import subprocess
import sys

import pytest
from support.deadlines import timeout_s

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
        timeout=timeout_s(300),
    )


@pytest.fixture(scope="module")
def real_run(tmp_path_factory, clean_environment):
    """A report written by a real (small, CPU-only) pytest-lyapax run."""
    path = tmp_path_factory.mktemp("real_run")
    # Two modules with the same test names (one must not hide the other).
    (path / "test_perf.py").write_text(SUITE)
    (path / "test_other.py").write_text(SUITE)
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
            "--benchmark-min-rounds=10",
            "--benchmark-max-time=0",
        ],
        cwd=path,
        env=clean_environment,
        capture_output=True,
        text=True,
        timeout=timeout_s(300),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((path / "lyapax-report" / "benchmark.json").read_text())
    assert report["pytest_lyapax"]["schema"] == 5
    # These tests judge the gates and steps, not the machine: on a loaded
    # runner the rounds may have been busy, which would excuse timing gates
    # (report/busy.py; tested in test_plugin_busy.py).
    for bench in report["benchmarks"]:
        bench["extra_info"].pop("machine_state", None)
    (path / "stdout.txt").write_text(proc.stdout)
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


@pytest.mark.slow
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
        timeout=timeout_s(120),
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
        bench["stats"]["data"] = [x * factor for x in bench["stats"]["data"]]
    return slow


def quiet(report):
    """The report with every benchmark's rounds spread +-10% around its median
    (fabricated here: on a shared machine a real run's spread can exceed 2x)."""
    report = copy.deepcopy(report)
    for bench in report["benchmarks"]:
        median = bench["stats"]["median"]
        data = [median * (0.9 + 0.2 * i / 11) for i in range(12)]
        bench["stats"].update(
            q1=0.95 * median, q3=1.05 * median, iqr=0.1 * median, data=data, rounds=12
        )
    return report


def test_history_flags_an_injected_2x_regression(real_run, tmp_path, clean_environment):
    _, report = real_run
    report = quiet(report)
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
    assert proc.stdout.startswith("5 runs, 4 series ->")
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
    absolute = cli("compare", base, slow, "--fail=median:1s", cwd=tmp_path, env=env)
    assert absolute.returncode == 0 and " s" in absolute.stdout
    # A bare number meant seconds; now it is a usage error showing
    # both forms.
    bare = cli("compare", base, slow, "--fail=median:25", cwd=tmp_path, env=env)
    assert bare.returncode == 2 and "has no unit" in bare.stderr
    assert "median:25%" in bare.stderr and "median:25ms" in bare.stderr
    # Several gates: the median passes, the max gate (one of them) fails.
    several = cli(
        "compare",
        base,
        slow,
        "--fail=median:150%",
        "--fail=max:50%",
        cwd=tmp_path,
        env=env,
    )
    assert several.returncode == 1, several.stdout + several.stderr
    assert "gate median:150%, max:50%: FAILED" in several.stdout
    assert "REGRESSION max:50%" in several.stdout


def test_same_named_tests_of_two_modules_stay_apart(real_run):
    # The unsized table and the bar chart showed one test_sin.
    from pytest_lyapax.report.series import group_sized, unsized_medians
    from pytest_lyapax.views.figure import BackendLegend, build_figure

    path, report = real_run
    stdout = (path / "stdout.txt").read_text()
    lines = stdout.splitlines()
    start = next(i for i, x in enumerate(lines) if "without a size axis" in x)
    rows = [x.split()[0] for x in lines[start + 3 : start + 5]]
    assert sorted(rows) == ["test_other.py::test_sin", "test_perf.py::test_sin"]
    assert "test_perf.py::test_matmul: median wall time" in stdout
    assert "test_other.py::test_matmul: median wall time" in stdout
    records, info = report["benchmarks"], report["machine_info"]
    benches = group_sized(records, ["cpu"], info)
    assert sorted(b.name for b in benches) == [
        "test_other.py::test_matmul",
        "test_perf.py::test_matmul",
    ]
    fig = build_figure(
        benches,
        [BackendLegend("cpu", "ok")],
        "m",
        unsized_medians(records, info),
    )
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert sorted(titles[:2]) == [
        "test_other.py::test_matmul",
        "test_perf.py::test_matmul",
    ]
    bars = fig.axes[2]
    names = [t.get_text().replace("\n", "") for t in bars.get_xticklabels()]
    assert sorted(names) == [
        "test_other.py::test_sin",
        "test_perf.py::test_sin",
    ]
    assert len(bars.patches) == 2


def test_history_keeps_machines_apart_unless_joined(
    real_run, tmp_path, clean_environment
):
    # Runs of two hosts were one series, and the machine change
    # was flagged as a regression.
    _, report = real_run
    laptop = quiet(report)
    server = second_machine(scaled(laptop, 0.5))
    runs = tmp_path / "both" / "runs"
    runs.mkdir(parents=True)
    for number, run in enumerate([laptop, server, laptop, server], 1):
        run = copy.deepcopy(run)
        run["commit_info"] = {"time": f"2026-01-0{number}T12:00:00+00:00"}
        write(runs / f"{number:04d}.json", run)
    env = clean_environment
    apart = cli("history", "both", "-o", "h.png", cwd=tmp_path, env=env)
    assert apart.returncode == 0, apart.stderr
    assert apart.stdout.startswith("4 runs, 8 series from 2 machines")
    assert "no step beyond the noise" in apart.stdout
    joined = cli(
        "history", "both", "-o", "j.png", "--join-machines", cwd=tmp_path, env=env
    )
    assert joined.returncode == 0, joined.stderr
    assert joined.stdout.startswith("4 runs, 4 series (machines joined)")
    steps = [x for x in joined.stdout.splitlines() if "host '" in x]
    assert len(steps) == 3 * len(report["benchmarks"])
    assert any(x.startswith("test_perf.py::test_sin [cpu]") for x in steps)
    assert any(x.startswith("test_other.py::test_sin [cpu]") for x in steps)


def with_device(report, device):
    other = copy.deepcopy(report)
    for bench in other["benchmarks"]:
        bench["extra_info"]["device"] = device
    return other


def test_compare_knows_what_it_compares(real_run, tmp_path, clean_environment):
    # Another host, device or jax version used to pass or fail as
    # if it were the same machine.
    _, report = real_run
    env = clean_environment
    base = write(tmp_path / "base.json", report)
    host = write(tmp_path / "host.json", second_machine(report))
    device = write(tmp_path / "device.json", with_device(report, "NVIDIA H200"))
    upgraded = copy.deepcopy(report)
    for bench in upgraded["benchmarks"]:
        bench["extra_info"]["jax_version"] = "99.0"
    upgraded = write(tmp_path / "upgraded.json", upgraded)

    shown = cli("compare", base, host, cwd=tmp_path, env=env)
    assert shown.returncode == 0
    assert "host " in shown.stdout and "'gpu-server'" in shown.stdout
    refused = cli("compare", base, host, "--fail=median:25%", cwd=tmp_path, env=env)
    assert refused.returncode == 2, refused.stdout
    assert "refusing to gate" in refused.stderr and "'gpu-server'" in refused.stderr
    assert "--across-machines" in refused.stderr
    anyway = cli(
        "compare",
        base,
        host,
        "--fail=median:1000%",
        "--across-machines",
        cwd=tmp_path,
        env=env,
    )
    assert anyway.returncode == 0 and "gate median:1000%: passed" in anyway.stdout
    other_device = cli(
        "compare", base, device, "--fail=median:25%", cwd=tmp_path, env=env
    )
    assert other_device.returncode == 2
    assert "device 'cpu' vs 'NVIDIA H200'" in other_device.stderr
    newer_jax = cli(
        "compare", base, upgraded, "--fail=median:1000%", cwd=tmp_path, env=env
    )
    assert newer_jax.returncode == 0, newer_jax.stderr
    assert "vs '99.0'" in newer_jax.stdout  # reported, and gated: same machine


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


@pytest.mark.slow  # long; the functions it calls keep quick plain tests
def test_ten_thousand_benchmarks_give_a_bounded_figure(
    real_run, tmp_path, clean_environment
):
    _, report = real_run
    sized = [b for b in report["benchmarks"] if b["extra_info"]["size"] is not None]
    big = copy.deepcopy(report)
    big["benchmarks"] = []
    for i in range(2500):
        for bench in sized:
            entry = copy.deepcopy(bench)
            entry["fullname"] = entry["fullname"].replace("test_matmul", f"test_m{i}")
            entry["name"] = entry["name"].replace("test_matmul", f"test_m{i}")
            big["benchmarks"].append(entry)
    assert len(big["benchmarks"]) == 10_000  # 2 modules x 2 sizes x 2500
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


def _sections(lines):
    """Lines with each title line reduced to its title (the rule's length
    follows the terminal's width)."""
    return [re.sub(r"^[-=!]+ (.*) [-=!]+$", r"\1", line) for line in lines]


def test_summary_terminal_reprints_what_the_run_printed(
    real_run, tmp_path, clean_environment
):
    """``summary --terminal`` renders the saved report as the run's terminal
    summary did: every section from the backends to the files written (which
    only the run knows), line for line."""
    path, _ = real_run
    saved = path / "lyapax-report" / "benchmark.json"
    proc = cli("summary", "--terminal", saved, cwd=tmp_path, env=clean_environment)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = (path / "stdout.txt").read_text().splitlines()
    start = next(i for i, x in enumerate(printed) if "pytest-lyapax: backends" in x)
    end = next(i for i, x in enumerate(printed) if "pytest-lyapax: reports" in x)
    assert "median wall time per call" in proc.stdout
    assert _sections(proc.stdout.splitlines()) == _sections(printed[start:end])


def test_summary_and_html_regenerated_equal_what_the_run_wrote(
    real_run, tmp_path, clean_environment
):
    path, report = real_run
    written = path / "lyapax-report"
    saved = written / "benchmark.json"
    for command, name in (("summary", "summary.md"), ("html", "report.html")):
        out = tmp_path / name
        proc = cli(command, saved, "-o", out, cwd=tmp_path, env=clean_environment)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert out.read_bytes() == (written / name).read_bytes(), name
    md = (written / "summary.md").read_text()
    # Two modules hold a test_matmul: each is named by its full id.
    assert "## test\\_perf.py::test\\_matmul: median wall time per call" in md
    assert "cost model needs 4 sizes per backend (2 measured)" in md
    assert "| warm-up (untimed) |" in md
    html = (written / "report.html").read_text()
    assert html.count("<table>") >= 4 and "data:image/png;base64," in html
    # The run's JSON holds the cost model and its terminal summary says it.
    models = report["pytest_lyapax"]["cost_model"]
    assert {m["name"] for m in models} == {
        "test_perf.py::test_matmul",
        "test_other.py::test_matmul",
    }
    assert {s["status"] for m in models for s in m["series"]} == {"too-few-sizes"}
    assert "cost model needs 4 sizes" in (path / "stdout.txt").read_text()
    proc = cli("plot", saved, "-o", "p.png", cwd=tmp_path, env=clean_environment)
    assert "test_perf.py::test_matmul: cost model needs 4 sizes" in proc.stdout
    # A merged report (two machines) gets a summary too.
    a = write(tmp_path / "a.json", report)
    b = write(tmp_path / "b.json", second_machine(report))
    proc = cli("summary", a, b, "-o", "m.md", cwd=tmp_path, env=clean_environment)
    assert proc.returncode == 0, proc.stderr
    assert "cpu @ gpu-server" in (tmp_path / "m.md").read_text()


def test_plot_of_one_report_draws_the_figure_its_run_drew(tmp_path, monkeypatch):
    # One report: the run's own figure (the sizes a search chose, its bracket
    # and the memory ceilings live in the report's section, not the records).
    from pathlib import Path

    from pytest_lyapax import cli as cli_module
    from pytest_lyapax.views.document import ReportView

    saved = Path(__file__).parents[2] / "docs/_static/measured/tpu-v5e/benchmark.json"
    monkeypatch.setattr(ReportView, "figure_png", lambda self: b"the run's figure")
    assert cli_module.main(["plot", str(saved), "-o", str(tmp_path / "one.png")]) == 0
    assert (tmp_path / "one.png").read_bytes() == b"the run's figure"
    args = ["plot", str(saved), str(saved), "-o", str(tmp_path / "two.png")]
    assert cli_module.main(args) == 0
    assert (tmp_path / "two.png").read_bytes().startswith(b"\x89PNG")  # merged
