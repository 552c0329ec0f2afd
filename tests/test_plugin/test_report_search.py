"""The searches' decisions and report entries (report/search.py), exactly."""

import pytest

from pytest_lyapax.report import search as plan
from pytest_lyapax.report.schema import ReportError, check_report


def test_a_change_of_winner_is_bisected_geometrically_until_within_25_percent():
    step = plan.next_crossover_size(
        [20, 40, 160], ["a", "a", "b"], [-2.0, -1.0, 1.0], "a", "b", (4, 1000), "d"
    )
    assert step.status == plan.SEARCHING
    assert step.size == 80  # sqrt(40 * 160)
    assert step.bracket == (40, 160)
    done = plan.next_crossover_size(
        [40, 80, 113], ["a", "a", "b"], [-1.0, -0.3, 0.2], "a", "b", (4, 1000), "d"
    )
    assert done.status == plan.BRACKETED
    assert done.bracket == (80, 113)
    assert done.text == "b faster from d in [80, 113]"


def test_sizes_within_noise_inside_the_bracket_are_stepped_over():
    step = plan.next_crossover_size(
        [10, 20, 40], ["a", "noise", "b"], [-1, 0.01, 1], "a", "b", (1, 100)
    )
    # The bracket's ends are the decided sizes; the widest gap is bisected.
    assert step.bracket == (10, 40)
    assert step.size in (14, 28)


def test_one_winner_steps_where_its_lead_shrinks_then_the_other_way():
    # a's lead (log t_b / t_a, -log(t_a / t_b)) shrinks with size: go up.
    up = plan.next_crossover_size(
        [20, 40], ["a", "a"], [-2.0, -1.0], "a", "b", (4, 1000)
    )
    assert (up.status, up.size) == (plan.SEARCHING, 160)
    # Up is done (at the bound): then down, clamped to lo.
    down = plan.next_crossover_size(
        [20, 40, 1000], ["a", "a", "a"], [-2.0, -1.0, -0.5], "a", "b", (4, 1000)
    )
    assert down.size == 5
    absent = plan.next_crossover_size(
        [4, 20, 1000], ["a", "a", "a"], [-2.0, -1.0, -0.5], "a", "b", (4, 1000)
    )
    assert absent.status == plan.ABSENT
    assert "no crossing down to 4 or up to 1000" in absent.text


def test_no_decided_size_is_unreliable():
    step = plan.next_crossover_size(
        [20, 40], ["noise", "too few rounds"], [0, 0], "a", "b", (4, 100)
    )
    assert step.status == plan.UNRELIABLE


def test_ceiling_doubles_then_bisects_to_ten_percent():
    assert plan.next_ceiling_size([100, 200], []) == 400
    assert plan.next_ceiling_size([100, 200, 400], [800]) == 566
    assert plan.next_ceiling_size([100, 566], [800]) == 673
    assert plan.next_ceiling_size([700], [760]) is None
    assert plan.next_ceiling_size([], [10]) is None
    entry = plan.ceiling_entry("t", "cpu", [100, 700], {760: "does not fit"}, [700])
    assert entry["largest_fitting"] == 700
    assert entry["first_not_fitting"] == 760
    assert entry["reason"] == "does not fit"


def _report(**section):
    return {"benchmarks": [], "pytest_lyapax": {"schema": 3, **section}}


GOOD = {
    "test": "t.py::test_x",
    "backends": ["cpu", "tpu"],
    "bracket": [12, 16],
    "status": "bracketed",
}


@pytest.mark.parametrize(
    "bad",
    [
        {**GOOD, "bracket": [16, 12]},
        {**GOOD, "bracket": [0, 12]},
        {**GOOD, "bracket": [True, 12]},
        {**GOOD, "status": "found"},
        {**GOOD, "backends": ["cpu"]},
        {**GOOD, "test": 3},
        "text",
    ],
)
def test_a_malformed_search_entry_is_refused_on_reading(bad):
    check_report(_report(crossover_search=[GOOD]), "ok.json")
    with pytest.raises(ReportError, match="crossover_search"):
        check_report(_report(crossover_search=[GOOD, bad]), "bad.json")


def test_a_malformed_ceiling_is_refused_on_reading():
    good = {
        "test": "t",
        "backend": "cpu",
        "largest_fitting": 10,
        "first_not_fitting": 11,
        "reason": "x",
    }
    check_report(_report(ceilings=[good]), "ok.json")
    for bad in (
        {**good, "first_not_fitting": 10},
        {**good, "largest_fitting": -1},
        {**good, "backend": None},
    ):
        with pytest.raises(ReportError, match="ceilings"):
            check_report(_report(ceilings=[bad]), "bad.json")


def test_compare_and_history_lines():
    saved = {"crossover_search": [GOOD]}
    now = {"crossover_search": [{**GOOD, "bracket": [13, 16]}]}
    assert plan.compare_lines(saved, now) == [
        "crossover t.py::test_x (tpu vs cpu): saved bracketed [12, 16] -> now "
        "bracketed [13, 16]"
    ]
    lines = plan.history_lines([("run 1", saved), ("run 2", {})])
    assert lines == ["run 1: crossover t.py::test_x (tpu vs cpu): bracketed [12, 16]"]
