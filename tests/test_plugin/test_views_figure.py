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


def _searched_figure(status, busy=None):
    """A panel whose crossover search ended ``status`` with bracket [80, 113]."""
    from pytest_lyapax.report import search as plan
    from pytest_lyapax.views import search as search_view

    records = [
        record(label, size, t)
        for label, times in (("cpu", (0.1, 0.2, 0.3)), ("cpu2", (0.2, 0.2, 0.2)))
        for size, t in zip((40, 80, 113), times, strict=True)
    ]
    benches = group_sized(records, ["cpu", "cpu2"])
    decision = plan.Decision(status, bracket=(80, 113), text="t", busy=busy)
    entry = plan.search_entry(
        benches[0].key, ("cpu", "cpu2"), decision, (4, 1000), [80, 113]
    )
    searched = search_view.marks({"crossover_search": [entry]})
    legends = [BackendLegend("cpu", OK), BackendLegend("cpu2", OK)]
    fig = build_figure(benches, legends, "m", searched=searched)
    (ax,) = [a for a in fig.axes if a.get_visible()]
    return fig, ax, searched[benches[0].key]


def _by_gid(artists, gid):
    return [a for a in artists if a.get_gid() == gid]


def test_a_bracket_found_is_a_grey_band_without_words():
    from pytest_lyapax.views.search import BRACKET_GID, OPEN_BRACKET_GID

    _, ax, mark = _searched_figure("bracketed")
    (band,) = _by_gid(ax.patches, BRACKET_GID)
    assert not band.get_hatch()
    assert not _by_gid([*ax.patches, *ax.texts], OPEN_BRACKET_GID)
    _, lines = _starred(mark)
    assert lines == ["* size chosen by --jax-find-crossover"]


def test_an_unreliable_busy_bracket_is_hatched_and_named_not_drawn_as_found():
    from pytest_lyapax.views.search import BRACKET_GID, OPEN_BRACKET_GID

    fig, ax, mark = _searched_figure("unreliable", busy="other processes used 1.0")
    assert not _by_gid(ax.patches, BRACKET_GID)
    (outline,) = _by_gid(ax.patches, OPEN_BRACKET_GID)
    assert outline.get_hatch() == "//"
    assert outline.get_facecolor()[3] == 0  # no fill: an outline
    assert outline.get_linestyle() == "--"
    (label,) = _by_gid(ax.texts, OPEN_BRACKET_GID)
    assert label.get_text() == "unreliable (busy)"
    assert 80 < label.get_position()[0] < 113
    assert "hatched: a bracket not found" in " ".join(fig.texts[0].get_text().split())
    # The size table's note says it too.
    rows, lines = _starred(mark)
    assert [r[0] for r in rows] == ["40", "80*", "113*"]
    assert lines == [
        "* size chosen by --jax-find-crossover; its bracket [80, 113] is not a "
        "crossing found: unreliable (busy)"
    ]


def test_a_bracket_where_the_budget_stopped_the_search_is_named_so():
    from pytest_lyapax.views.search import OPEN_BRACKET_GID

    _, ax, _ = _searched_figure("budget")
    (label,) = _by_gid(ax.texts, OPEN_BRACKET_GID)
    assert label.get_text() == "stopped by the budget"


def _starred(mark):
    from pytest_lyapax.views.search import starred

    return starred([["40", "x"], ["80", "x"], ["113", "x"]], mark)


def test_a_label_that_ran_no_test_is_left_out_not_called_incomplete():
    # On the TPU, `-k test_kuramoto_dense` left perf_tests' device-count
    # twins no test, and the figure said "INCOMPLETE RUN: cpu_1dev no
    # timings: no reason given".
    from types import SimpleNamespace

    from pytest_lyapax.views.document import ReportView

    backends = [
        {"label": "cpu", "status": "ok", "n_benchmarks": 4, "outcomes": {"passed": 3}},
        {"label": "cpu_1dev", "status": "ok", "n_benchmarks": 0, "outcomes": {}},
        {"label": "gpu", "status": "ok", "n_benchmarks": 0, "outcomes": {"failed": 3}},
    ]
    legends = ReportView.legends(SimpleNamespace(backends=backends))
    assert [(e.label, e.status) for e in legends] == [
        ("cpu", "ok"),
        ("gpu", "no timings"),  # its tests ran and timed nothing: still said
    ]
