"""The crossover explained from the roofline, and the launch floor in roofline.png.

Report-level tests (no subprocess): a hand-built two-backend report whose
numbers are chosen so every bound and fraction is exact.  Both backends do
the same work per size; with the peaks below, d=20 is launch-bound on both
(each at twice its launch floor), d=2000 bandwidth-bound on both (cpu 70 %
of 20 GB/s, gpu 35 % of 4 TB/s) and d=200 bandwidth-bound on cpu,
launch-bound on gpu.  The gpu is slower at d=20 and faster above, so the
medians cross between 20 and 200, at 20 * 10**(ln 2.5 / ln 5) ~ 74.2
(log-linear interpolation of log(t_cpu / t_gpu): ln 0.4 at 20, ln 2 at 200).
"""

import copy
import json
from html import escape as html_escape

import pytest

from pytest_lyapax.backends.labels import Backend
from pytest_lyapax.cli import main
from pytest_lyapax.report import roofline
from pytest_lyapax.report.schema import REPORT_KEY, SCHEMA_VERSION
from pytest_lyapax.run import output
from pytest_lyapax.run.options import Settings
from pytest_lyapax.run.session import CONTROLLER, BackendState, LyapaxSession
from pytest_lyapax.views import roofline as roofline_view
from pytest_lyapax.views.document import view_of
from pytest_lyapax.views.render import md_escape, report_html, summary_markdown

PEAKS = {
    "cpu": {"flops_per_s": 5e10, "bandwidth_bytes_per_s": 2e10, "launch_s": 4e-6},
    "gpu": {"flops_per_s": 5e12, "bandwidth_bytes_per_s": 4e12, "launch_s": 1e-5},
}
WORK = {20: (1e4, 1e4), 200: (1e6, 1e6), 2000: (1e8, 1.4e8)}  # flops, bytes
MEDIAN = {
    "cpu": {20: 8e-6, 200: 1e-4, 2000: 1e-2},
    "gpu": {20: 2e-5, 200: 5e-5, 2000: 1e-4},
}
CROSSOVER = (
    "gpu vs cpu: gpu faster at network size d (nodes) 200, 2000; cpu faster at "
    "network size d (nodes) 20; medians cross at network size d (nodes) ~74.2 "
    "(between 20 and 200, gpu faster after) (t_cpu/t_gpu 100x at 2000)"
)
WHY = (
    "why, from the roofline: below d ~74.2 gpu and cpu are both launch-bound "
    "(gpu 2.0x its 10 us launch floor at d=20; cpu 2.0x its 4 us launch floor "
    "at d=20), so the per-call price decides; above it: gpu launch-bound at "
    "d=200, bandwidth-bound at d=2000 (35 % of its 4 TB/s at d=2000); cpu "
    "bandwidth-bound (70 % of its 20 GB/s at d=2000)"
)
SERIES = {
    "cpu": "test_x cpu: d=20: launch-bound, 2.0x the launch floor; d=200: 50 % "
    "of measured bandwidth; d=2000: 70 % of measured bandwidth",
    "gpu": "test_x gpu: d=20: launch-bound, 2.0x the launch floor; d=200: "
    "launch-bound, 5.0x the launch floor; d=2000: 35 % of measured bandwidth",
}


def _record(label, size, work):
    median = MEDIAN[label][size]
    rounds = [median * (1 + 1e-3 * (i - 5)) for i in range(11)]
    return {
        "name": f"test_x[{label}-{size}]",
        "fullname": f"perf/test_net.py::test_x[{label}-{size}]",
        "params": {"jax_backend": label, "jax_size": size},
        "stats": {
            "median": median,
            "q1": rounds[3],
            "q3": rounds[7],
            "min": rounds[0],
            "max": rounds[-1],
            "mean": median,
            "rounds": len(rounds),
            "data": rounds,
        },
        "extra_info": {
            "backend": label,
            "size": size,
            "size_label": "network size d (nodes)",
            "roofline": dict(work),
            "peaks": dict(PEAKS[label]),
        },
    }


def _work(size):
    flops, nbytes = WORK[size]
    return {"source": "xla cost analysis", "flops": flops, "bytes": nbytes}


def _document(gpu_work=_work):
    """The report as a run writes it (the per-point fields by annotate)."""
    records = [_record("cpu", s, _work(s)) for s in WORK]
    records += [_record("gpu", s, gpu_work(s)) for s in WORK]
    roofline.annotate(records)
    backends = [{"label": label, "status": "ok", "n_benchmarks": 3} for label in PEAKS]
    return {
        "machine_info": {"node": "testhost"},
        "benchmarks": records,
        "datetime": "2026-12-02T00:00:00+00:00",
        REPORT_KEY: {
            "schema": SCHEMA_VERSION,
            "backends": backends,
            "run_order": list(PEAKS),
            "machines": roofline.machines(records),
        },
    }


def _why(document):
    view = view_of(document)
    (bench,) = view.benches
    return roofline_view.crossover_lines(bench, roofline_view.index(view.records))


def test_two_backends_give_the_crossover_and_its_reason():
    assert _why(_document()) == [CROSSOVER, WHY]


def test_a_side_without_roofline_is_named_with_the_recorded_reason():
    reason = "the callable cannot be lowered with jax.jit: TypeError: x"

    def untraceable(size):
        return {"source": "not available", "reason": reason}

    assert _why(_document(untraceable))[1] == (
        f"why, from the roofline: not available for gpu ({reason}); below d "
        "~74.2: cpu launch-bound (2.0x its 4 us launch floor at d=20); above "
        "it: cpu bandwidth-bound (70 % of its 20 GB/s at d=2000)"
    )


def test_no_peaks_on_both_sides_says_so_and_guesses_nothing():
    document = _document()
    for record in document["benchmarks"]:
        record["extra_info"].pop("peaks")
        for key in ("bound", "fraction"):
            record["extra_info"]["roofline"].pop(key)
    roofline.annotate(document["benchmarks"])
    why = _why(document)[1]
    assert why == (
        "why, from the roofline: not available for gpu (peaks not measured "
        "(--jax-no-peaks or a failed probe)); not available for cpu (peaks not "
        "measured (--jax-no-peaks or a failed probe))"
    )


def test_a_report_without_roofline_entries_keeps_its_crossover_line_alone():
    document = _document()
    for record in document["benchmarks"]:
        del record["extra_info"]["roofline"]
    assert _why(document) == [CROSSOVER]


def test_no_crossing_is_one_stretch_quoted_at_the_largest_size():
    document = _document()
    for record in document["benchmarks"]:  # gpu faster everywhere
        if record["extra_info"]["backend"] == "cpu":
            record["stats"]["median"] *= 10
            record["stats"]["data"] = [10 * t for t in record["stats"]["data"]]
    roofline.annotate(document["benchmarks"])
    why = _why(document)[1]
    assert why.startswith(
        "why, from the roofline: at every common size: gpu launch-bound at "
        "d=20, 200, bandwidth-bound at d=2000 (35 % of its 4 TB/s at d=2000); "
        "cpu launch-bound at d=20, bandwidth-bound at d=200, 2000 ("
    )


def test_two_crossings_give_three_stretches_and_small_fractions_stay_visible():
    document = _document()
    for record in document["benchmarks"]:  # gpu slower again at d=2000
        info = record["extra_info"]
        if (info["backend"], info["size"]) == ("gpu", 2000):
            record["stats"]["median"] = 1.2e-2
            record["stats"]["data"] = [1.2e-2 * (1 + 1e-3 * i) for i in range(11)]
    roofline.annotate(document["benchmarks"])
    # log(t_cpu / t_gpu): ln 2 at 200, ln(1 / 1.2) at 2000: crossing at
    # 200 * 10**(ln 2 / ln 2.4) ~ 1.24e3.
    assert _why(document)[1] == (
        "why, from the roofline: below d ~74.2 gpu and cpu are both "
        "launch-bound (gpu 2.0x its 10 us launch floor at d=20; cpu 2.0x its 4 "
        "us launch floor at d=20), so the per-call price decides; between d "
        "~74.2 and ~1.24e+03: gpu launch-bound (5.0x its 10 us launch floor at "
        "d=200); cpu bandwidth-bound (50 % of its 20 GB/s at d=200); above d "
        "~1.24e+03 gpu and cpu are both bandwidth-bound (gpu 0.3 % of its 4 "
        "TB/s at d=2000; cpu 70 % of its 20 GB/s at d=2000), so the memory "
        "bandwidth each reaches decides"
    )


def test_launch_floor_markers_are_flops_over_launch_s():
    points = roofline.figure_points(_document()["benchmarks"])
    ceilings = {
        (label, m.size): m.launch_ceiling for label, v in points.items() for m in v
    }
    assert ceilings[("cpu", 20)] == pytest.approx(1e4 / 4e-6)
    assert ceilings[("gpu", 200)] == pytest.approx(1e6 / 1e-5)
    assert ceilings[("cpu", 2000)] is None  # bandwidth-bound: no floor drawn


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("rooftext") / "benchmark.json"
    document = _document()
    path.write_text(json.dumps(document))
    return path, document


def test_summary_html_and_figure_regenerate_byte_equal(saved, tmp_path):
    path, document = saved
    view = view_of(document)
    summary, page, png = summary_markdown(view), report_html(view), view.roofline_png()
    assert png is not None and png.startswith(b"\x89PNG")
    assert main(["summary", str(path), "-o", str(tmp_path / "s.md")]) == 0
    assert main(["html", str(path), "-o", str(tmp_path / "r.html")]) == 0
    assert main(["plot", "--roofline", str(path), "-o", str(tmp_path / "r.png")]) == 0
    assert (tmp_path / "s.md").read_bytes() == summary
    assert (tmp_path / "r.html").read_bytes() == page
    assert (tmp_path / "r.png").read_bytes() == png
    markdown, html = summary.decode(), page.decode()
    for line in (WHY, *SERIES.values()):
        assert html_escape(line) in html
        assert md_escape(line) in markdown


def test_plot_prints_the_reason_with_the_crossover(saved, tmp_path, capsys):
    path, _ = saved
    assert main(["plot", str(path), "-o", str(tmp_path / "c.png")]) == 0
    out = capsys.readouterr().out
    assert f"test_x: {CROSSOVER}\ntest_x: {WHY}\n" in out


def test_terminal_tells_the_reason_and_the_series_lines():
    document = copy.deepcopy(_document())
    backends = (Backend("cpu", "cpu"), Backend("gpu", "cuda"))
    session = LyapaxSession(
        Settings(backends=backends),
        CONTROLLER,
        {b.label: BackendState(b) for b in backends},
        records=document["benchmarks"],
    )
    sections = dict(output.summary_lines(session, None, []))
    assert WHY in sections["test_x: median wall time per call"]
    assert sections["pytest-lyapax: roofline (XLA cost analysis)"] == [
        SERIES["cpu"],
        SERIES["gpu"],
    ]


def test_a_crossover_and_its_reason_read_from_busy_rounds_are_marked():
    from pytest_lyapax.report import busy

    document = _document()
    for record in document["benchmarks"]:
        if record["extra_info"]["backend"] == "gpu" and record["extra_info"]["size"]:
            if record["extra_info"]["size"] == 2000:
                record["extra_info"]["machine_state"] = {
                    "wall_s": 10.0,
                    "stretches": 40,
                    "cpus": 2,
                    "foreign_cpu": {"cores": 1.6, "own_cores": 1.0, "tick_s": 0.01},
                }
    view = view_of(document)
    (bench,) = view.benches
    roof = roofline_view.index(view.records)
    lines = roofline_view.crossover_lines(bench, roof, busy.index(view.records))
    assert lines == [busy.MARK + CROSSOVER, busy.MARK + WHY]
    summary = summary_markdown(view).decode()
    for line in summary.splitlines():
        if "gpu vs cpu: gpu faster" in line or "why, from the roofline" in line:
            assert "UNRELIABLE (busy machine): " in line, line
    # Without busy rounds, nothing is marked.
    assert _why(_document()) == [CROSSOVER, WHY]


def test_a_reason_read_from_peaks_measured_on_a_busy_machine_is_marked():
    from pytest_lyapax.report import busy

    document = _document()
    for record in document["benchmarks"]:
        if record["extra_info"]["backend"] == "cpu":
            record["extra_info"]["peaks"]["machine_state"] = {
                "wall_s": 10.0,
                "stretches": 40,
                "cpus": 2,
                "foreign_cpu": {"cores": 1.6, "own_cores": 1.0, "tick_s": 0.01},
            }
    view = view_of(document)
    (bench,) = view.benches
    peaks = busy.peaks_index(view.records)
    assert peaks == {
        "cpu": "other processes used 1.6 of 2 cores during cpu's peak measurement"
    }
    lines = roofline_view.crossover_lines(
        bench, roofline_view.index(view.records), busy.index(view.records), peaks
    )
    # The measured verdict read quiet rounds; its reason read busy peaks.
    assert lines == [
        CROSSOVER,
        f"{busy.MARK}{WHY} (peaks measured on a busy machine: {peaks['cpu']})",
    ]
    summary = summary_markdown(view).decode()
    assert "UNRELIABLE (busy machine): why, from the roofline" in summary
