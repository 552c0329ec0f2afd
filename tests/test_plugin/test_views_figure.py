"""The crossover figure and the terminal tables
(pytest_lyapax/views/figure.py, tables.py)."""

import pytest
from test_report_analysis import record

from pytest_lyapax.backends.labels import (
    OK,
    UNAVAILABLE,
)
from pytest_lyapax.report.series import group_sized, unsized_medians
from pytest_lyapax.views.figure import BackendLegend, build_figure, render_png


def test_figure_marks_unavailable_backend_without_a_curve():
    records = [record("cpu", 10, 0.1), record("cpu", 100, 1.0)]
    benches = group_sized(records, ["cpu", "gpu"])
    legends = [
        BackendLegend("cpu", OK, "cpu"),
        BackendLegend("gpu", UNAVAILABLE, None, "JAX could not start platform 'cuda'"),
    ]
    fig = build_figure(benches, legends, "host (CPU model)")
    (ax,) = [a for a in fig.axes if a.get_visible()]
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == ["cpu (cpu)", "gpu [unavailable]"]
    drawn = [c for c in ax.containers]
    assert len(drawn) == 1 and len(drawn[0].lines[0].get_xdata()) == 2
    assert ax.get_xscale() == ax.get_yscale() == "log"
    header = " ".join(fig.texts[0].get_text().split())
    assert "host (CPU model)" in header
    assert "gpu unavailable: JAX could not start" in header
    assert "INCOMPLETE" not in header  # unavailable is reported, not a partial run
    # The legend sits below the header text, never on top of it.
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    text_box = fig.texts[0].get_window_extent(renderer)
    legend_box = fig.legends[0].get_window_extent(renderer)
    assert legend_box.y1 <= text_box.y0 + 1
    assert render_png(benches, legends, "m").startswith(b"\x89PNG")


def test_figure_marks_a_crashed_backend_as_an_incomplete_run():
    records = [record("cpu", 10, 0.1), record("cpu", 100, 1.0)]
    benches = group_sized(records, ["cpu", "cpu2"])
    legends = [
        BackendLegend("cpu", OK, "cpu"),
        BackendLegend("cpu2", "crashed", None, "worker died"),
    ]
    header = build_figure(benches, legends, "m").texts[0].get_text()
    assert "INCOMPLETE RUN: cpu2 crashed: worker died" in " ".join(header.split())


def test_figure_without_sized_benchmarks_draws_bars():
    # Only unsized benchmarks -> a per-backend bar chart.
    records = [
        record("cpu", None, 0.1, name="t1"),
        record("gpu", None, 0.01, name="t1"),
    ]
    legends = [BackendLegend("cpu", OK), BackendLegend("gpu", OK)]
    fig = build_figure([], legends, "m", unsized_medians(records))
    (ax,) = [a for a in fig.axes if a.get_visible()]
    bars = [p.get_height() for p in ax.patches]
    assert bars == [pytest.approx(0.1), pytest.approx(0.01)]
    assert "without a size axis" in ax.get_title()


def test_figure_single_size_draws_points_with_error_bars():
    r = record("cpu", 10, 0.5)
    r["stats"].update(q1=0.4, q3=0.7)
    benches = group_sized([r], ["cpu"])
    fig = build_figure(benches, [BackendLegend("cpu", OK)], "m")
    (ax,) = [a for a in fig.axes if a.get_visible()]
    (container,) = ax.containers
    line, caps, (bars,) = container.lines
    assert list(line.get_xdata()) == [10] and line.get_linestyle() == "None"
    (segment,) = bars.get_segments()
    assert [y for _, y in segment] == [pytest.approx(0.4), pytest.approx(0.7)]


def test_figure_size_is_bounded():
    # 150 sized benchmarks used to give an 825 x 75,900 px PNG.
    records = [
        record(label, size, 0.1 * size, name=f"test_{i}")
        for i in range(150)
        for label in ("cpu", "gpu")
        for size in (10, 100)
    ]
    benches = group_sized(records, ["cpu", "gpu"])
    assert len(benches) == 150
    fig = build_figure(
        benches, [BackendLegend("cpu", OK), BackendLegend("gpu", OK)], "m"
    )
    width, height = fig.get_size_inches() * fig.dpi
    assert width <= 1500 and height <= 3400
    assert "24 of 150 sized benchmarks drawn" in fig.texts[0].get_text()


def test_a_size_not_run_on_one_backend_but_measured_on_another_is_named():
    from pytest_lyapax.report.details import FailedPoint
    from pytest_lyapax.report.series import Point, SizedBenchmark
    from pytest_lyapax.views.figure import _measured_elsewhere

    bench = SizedBenchmark(
        "t.py::test_x",
        "test_x",
        series={
            "cpu": [Point(n, 1e-3 * n, 1e-3 * n, 1e-3 * n) for n in (1, 16, 128)],
            "tpu": [Point(n, 2e-2, 2e-2, 2e-2) for n in (1, 16)],
        },
    )

    def point(label, size):
        return FailedPoint(
            "t.py::test_x", "t.py::test_x", label, size, "over_budget", "", (1, 1, 2)
        )

    assert _measured_elsewhere(bench, point("tpu", 128))
    assert not _measured_elsewhere(bench, point("tpu", 1024))
