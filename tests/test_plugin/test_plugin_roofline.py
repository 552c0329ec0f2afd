"""The roofline: XLA's work per call, the measured peaks, each point's bound.

Work is checked against programs whose counts are known exactly: XLA counts
an ``(n, n) @ (n, n)`` matmul as ``2 n**3`` FLOPs and ``3 n**2`` elements
moved, and an elementwise ``a * x + y`` as each operand and the output once
(``3 n`` float64 values plus the 8 bytes of the scalar ``a``: the 1e-2
tolerance below covers that scalar and nothing else; float32 values in a
float32 run of the suite).  Loops: XLA counts a
``while`` body once; the plugin scales known trip counts (measuring/
roofline.py) and says ``loop_scaled: false`` where the count is a runtime
value.  Peaks are asserted by ordering only, never by a time.  One pytester
subprocess run checks the plugin path (report fields, machines, terminal
and summary.md lines).
"""

import json
import math
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from support.deadlines import timeout_s

from pytest_lyapax.measuring import roofline as measuring
from pytest_lyapax.report import roofline

N = 48
M = 7  # loop trips


def _bytes():
    """Bytes of one float of this run (8, or 4 in a float32 run)."""
    return jnp.ones(1).dtype.itemsize


def _work(function, *args):
    return measuring.cost_of_call(function, None, args, {})


def test_matmul_is_two_n_cubed_flops():
    a = jnp.ones((N, N))
    work = measuring.cost_of_compiled(jax.jit(jnp.matmul).lower(a, a).compile())
    assert work["source"] == measuring.SOURCE
    assert work["flops"] == 2 * N**3
    assert work["bytes"] == 3 * N * N * _bytes()
    assert work["while_loops"] == 0 and work["loop_scaled"] is False


def test_axpy_moves_three_n_float64_values():
    n = 1000
    x, y = jnp.ones(n), jnp.ones(n)
    work = _work(lambda a, x, y: a * x + y, 2.0, x, y)
    assert work["bytes"] == pytest.approx(3 * n * _bytes(), rel=1e-2)
    assert work["flops"] == 2 * n
    assert work["transcendentals"] == 0


def _loop(x, m):
    return jax.lax.fori_loop(0, m, lambda i, x: 2.0 * x + 1.0, x)


def test_fori_loop_with_a_known_length_is_scaled_by_its_trips():
    n = 500
    work = _work(lambda x: 3.0 * _loop(x, M), jnp.ones(n))
    assert work["loop_scaled"] is True
    assert work["trip_counts"] == [M]
    # M bodies of 2n FLOPs (+1 for the counter each), n for the final scaling.
    assert work["flops"] == pytest.approx(M * 2 * n + n, rel=1e-2)
    assert work["bytes"] >= M * 2 * n * _bytes()


def test_nested_loops_multiply_their_trips():
    n = 300

    def nested(x):
        return jax.lax.fori_loop(0, 3, lambda i, x: _loop(x, 4), x)

    work = _work(nested, jnp.ones(n))
    assert work["loop_scaled"] is True and sorted(work["trip_counts"]) == [3, 4]
    assert work["flops"] == pytest.approx(12 * 2 * n, rel=1e-2)


def test_a_runtime_trip_count_leaves_one_body_and_says_so():
    n = 400
    work = _work(_loop, jnp.ones(n), M)
    assert work["loop_scaled"] is False
    assert "trip count is not known" in work["loop_note"]
    assert work["flops"] == pytest.approx(2 * n, rel=1e-2)  # one pass


def test_a_closure_that_cannot_be_traced_is_not_available_with_the_reason():
    work = _work(lambda x: jnp.asarray(float(x.sum())), jnp.ones(3))
    assert work["source"] == measuring.NOT_AVAILABLE
    assert "cannot be lowered with jax.jit" in work["reason"]
    assert "ConcretizationTypeError" in work["reason"]


class _Broken:
    def cost_analysis(self):
        raise RuntimeError("no analysis on this backend")


class _Empty:
    def cost_analysis(self):
        return {}


def test_missing_or_empty_analysis_is_not_available():
    broken = measuring.cost_of_compiled(_Broken())
    assert broken["source"] == measuring.NOT_AVAILABLE
    assert "no analysis on this backend" in broken["reason"]
    empty = measuring.cost_of_compiled(_Empty())
    assert empty == {
        "source": "not available",
        "reason": "the backend's cost analysis is empty",
    }


@pytest.fixture(scope="module")
def peaks():
    return measuring.peaks_once()


def test_peaks_are_ordered(peaks):
    assert peaks["dtype"] == jnp.ones(1).dtype.name  # float64 but in a float32 run
    # A matmul reuses each value ~n times, a triad not at all.
    assert peaks["flops_per_s"] > peaks["triad_flops_per_s"] > 0
    assert peaks["bandwidth_bytes_per_s"] > 0
    assert 0 < peaks["launch_s"] < peaks["probe_s"]
    assert measuring.peaks_once() == peaks  # once per process
    # The machine's state while they were measured, read as rounds' are:
    # one stretch (the one that enclosed the probe), its length recorded.
    state = peaks["machine_state"]
    assert state["stretches"] == 1
    assert isinstance(state["wall_s"], float) and math.isfinite(state["wall_s"])
    assert "cores" in state["foreign_cpu"] or "unavailable" in state["foreign_cpu"]


PEAKS = {"flops_per_s": 1e10, "bandwidth_bytes_per_s": 1e10, "launch_s": 1e-5}


def test_point_bound_and_fraction():
    # Bandwidth: 1e8 bytes need 10 ms at 1e10 B/s; taking 20 ms is 50 %.
    bw = roofline.point({"flops": 1e6, "bytes": 1e8}, PEAKS, 0.02)
    assert bw["bound"] == "bandwidth" and bw["fraction"] == pytest.approx(0.5)
    assert bw["intensity"] == pytest.approx(0.01)
    assert bw["achieved_bytes_per_s"] == pytest.approx(5e9)
    compute = roofline.point({"flops": 1e9, "bytes": 1e6}, PEAKS, 0.25)
    assert compute["bound"] == "compute" and compute["fraction"] == pytest.approx(0.4)
    launch = roofline.point({"flops": 10.0, "bytes": 80.0}, PEAKS, 1.3e-5)
    assert launch["bound"] == "launch"
    assert roofline.phrase(launch) == "launch-bound, 1.3x the launch floor"
    assert roofline.phrase(bw) == "50 % of measured bandwidth"
    assert roofline.phrase(compute) == "40 % of measured FLOP/s"
    bare = roofline.point({"flops": 1.0, "bytes": 8.0}, None, 1.0)
    assert bare["bound"] is None and "peaks not measured" in bare["bound_reason"]


def _record(size, seconds, work, label="cpu"):
    return {
        "fullname": f"t.py::test_x[{label}-{size}]",
        "stats": {"median": seconds},
        "extra_info": {
            "backend": label,
            "size": size,
            "size_label": "network size d (nodes)",
            "roofline": dict(work),
            "peaks": PEAKS,
        },
    }


def test_annotate_machines_and_series_lines():
    records = [
        _record(2000, 0.02, {"source": measuring.SOURCE, "flops": 1e6, "bytes": 1e8}),
        _record(20, 2e-5, {"source": measuring.SOURCE, "flops": 1.0, "bytes": 8.0}),
        _record(50, 1.0, {"source": "not available", "reason": "why"}),
    ]
    roofline.annotate(records)
    once = json.dumps(records)
    roofline.annotate(records)
    assert json.dumps(records) == once  # idempotent
    assert roofline.machines(records) == {"cpu": {"peaks": PEAKS}}
    assert roofline.series_lines(records) == [
        "test_x cpu: d=20: launch-bound, 2.0x the launch floor; d=50: not "
        "available: why; d=2000: 50 % of measured bandwidth"
    ]


TRIAD = 1 << 23  # float64 elements per array: 64 MiB, beyond the caches

PLUGIN_TESTS = f"""
import jax
import jax.numpy as jnp
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.mark.jax_sizes(16, 64, label="side n")
def test_matmul(benchmark, jax_backend, jax_size):
    a = jnp.ones((jax_size, jax_size))
    benchmark(jax.jit(jnp.matmul), a, a)


def test_triad(benchmark, jax_backend):
    a, b = jnp.ones({TRIAD}), jnp.ones({TRIAD})
    benchmark(jax.jit(lambda a, b: a + 3.0 * b), a, b)


def test_untraceable(benchmark, jax_backend):
    x = jnp.ones(3)
    benchmark(lambda: jnp.asarray(float(x.sum())))
"""


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory, clean_environment):
    path = tmp_path_factory.mktemp("roofline")
    (path / "test_roof.py").write_text(PLUGIN_TESTS)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--benchmark-min-rounds=5",
            "--benchmark-max-time=0",
            "--jax-backend=cpu",
        ],
        cwd=path,
        env=clean_environment,
        capture_output=True,
        text=True,
        timeout=timeout_s(300),
    )
    report = path / "lyapax-report"
    data = json.loads((report / "benchmark.json").read_text())
    by_name = {b["fullname"].split("::")[1]: b for b in data["benchmarks"]}
    return proc, data, by_name, report


def test_plugin_records_work_peaks_and_bounds(plugin_run):
    proc, data, by_name, _ = plugin_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    peaks = data["pytest_lyapax"]["machines"]["cpu"]["peaks"]
    assert peaks["flops_per_s"] > peaks["triad_flops_per_s"]
    work = by_name["test_matmul[cpu-64]"]["extra_info"]["roofline"]
    assert work["source"] == "xla cost analysis" and work["flops"] == 2 * 64**3
    for key in ("achieved_flops_per_s", "achieved_bytes_per_s", "intensity"):
        assert work[key] > 0
    assert work["bound"] in roofline.BOUNDS
    assert 0 < work["fraction"] <= 1 + roofline.SLACK
    triad = by_name["test_triad[cpu]"]["extra_info"]["roofline"]
    assert triad["bound"] == "bandwidth"
    assert 0 < triad["fraction"] <= 1 + roofline.SLACK
    # jax.jit cannot trace it: the programs its first call compiled, summed.
    untraceable = by_name["test_untraceable[cpu]"]["extra_info"]["roofline"]
    assert untraceable["source"] == "xla cost analysis", untraceable
    assert untraceable["programs"] >= 1
    assert "ConcretizationTypeError" in untraceable["programs_note"]


def test_plugin_prints_and_writes_a_line_per_series(plugin_run):
    proc, _, _, report = plugin_run
    summary = (report / "summary.md").read_text()
    assert "pytest-lyapax: roofline (XLA cost analysis)" in proc.stdout
    assert "test_matmul cpu: n=16: " in proc.stdout
    assert "## Roofline (XLA cost analysis)" in summary
    assert "test\\_matmul cpu: n=16: " in summary


def test_no_peaks_option(pytester):
    from pytest_lyapax.run.options import read_settings

    settings = read_settings(
        pytester.parseconfig("--jax-backend=cpu", "--jax-no-peaks")
    )
    assert settings.peaks is False and settings.extras is True
    assert read_settings(pytester.parseconfig("--jax-backend=cpu")).peaks is True
    with pytest.raises(pytest.UsageError, match="--jax-no-peaks needs --jax-backend"):
        read_settings(pytester.parseconfig("--jax-no-peaks"))


def test_figure_and_html_regenerate_byte_equal(plugin_run, tmp_path):
    from pytest_lyapax.cli import main

    _, _, _, report = plugin_run
    png = (report / "roofline.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    saved = str(report / "benchmark.json")
    assert main(["plot", "--roofline", saved, "-o", str(tmp_path / "r.png")]) == 0
    assert (tmp_path / "r.png").read_bytes() == png
    assert main(["html", saved, "-o", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_bytes()
    assert page == (report / "report.html").read_bytes()
    assert b'<img id="roofline-figure"' in page
