"""The searches' decisions and report entries (report/search.py) and their
words (views/search.py), exactly."""

import pytest

from pytest_lyapax.report import search as plan
from pytest_lyapax.report.schema import ReportError, check_report
from pytest_lyapax.views import search as search_view


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


def test_within_noise_everywhere_says_so_and_adds_no_size():
    # An A/A run (two labels of one CPU) ends here.
    same = plan.next_crossover_size(
        [20, 50, 100], ["noise"] * 3, [0.01, -0.02, 0.0], "a", "b", (5, 1000), "d"
    )
    assert (same.status, same.size, same.bracket) == (plan.UNRELIABLE, None, None)
    assert same.text == (
        "no crossing in the measured range: within noise at every d measured "
        "(20, 50, 100): no verdict to search from"
    )
    none = plan.next_crossover_size([], [], [], "a", "b", (5, 1000), "d")
    assert none.text == "the noise test decided no size: no verdict to search from"
    # Too few rounds is said as such, with what gives more.
    few = plan.next_crossover_size(
        [20, 50], ["noise", "too few rounds"], [0.0, 0.1], "a", "b", (5, 1000), "d"
    )
    assert few.status == plan.UNRELIABLE and few.bracket is None
    assert few.text == (
        "too few rounds to judge at d 50: no verdict to search from (more "
        "rounds: --benchmark-max-time, --benchmark-min-rounds)"
    )


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
    # The direction comes from the medians of the undecided sizes too.
    few = plan.next_crossover_size(
        [20, 40], ["too few rounds", "a"], [-2.0, -1.0], "a", "b", (4, 1000)
    )
    assert few.size == 160
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
    assert search_view.compare_lines(saved, now) == [
        "crossover t.py::test_x (tpu vs cpu): saved bracketed [12, 16] -> now "
        "bracketed [13, 16]"
    ]
    lines = search_view.history_lines([("run 1", saved), ("run 2", {})])
    assert lines == ["run 1: crossover t.py::test_x (tpu vs cpu): bracketed [12, 16]"]


# ------------------------------------------------ verdicts of a busy machine


def test_a_busy_size_decides_nothing_and_is_measured_again():
    # 160's verdict (b) read busy rounds: a wins at every quiet size, and the
    # step up lands on 160 again.
    busy = {160: "other processes used 1.0 of 2 cores"}
    step = plan.next_crossover_size(
        [20, 40, 160],
        ["a", "a", "b"],
        [-2.0, -1.0, 1.0],
        "a",
        "b",
        (4, 1000),
        "d",
        busy,
    )
    assert (step.status, step.size, step.bracket) == (plan.SEARCHING, 160, None)
    # Measured again and still busy: the search ends, with the busy bracket.
    end = plan.next_crossover_size(
        [20, 40, 160],
        ["a", "a", "b"],
        [-2.0, -1.0, 1.0],
        "a",
        "b",
        (4, 1000),
        "d",
        busy,
        retried=[160],
    )
    assert end.status == plan.UNRELIABLE
    assert end.busy == busy[160]
    assert end.bracket == (40, 160)
    assert end.text == (
        "the machine was busy at d 160 when measured again (other processes used "
        "1.0 of 2 cores); the busy verdicts say b faster from d in [40, 160]"
    )


def test_a_bracket_from_quiet_verdicts_steps_over_a_busy_size_inside_it():
    busy = {57: "steal"}
    done = plan.next_crossover_size(
        [40, 57, 80, 113],
        ["a", "b", "a", "b"],
        [-1.0, 0.5, -0.3, 0.2],
        "a",
        "b",
        (4, 1000),
        "d",
        busy,
    )
    # 57's busy "b" would have put the crossing in [40, 57]: it is not read.
    assert (done.status, done.bracket) == (plan.BRACKETED, (80, 113))
    assert done.busy is None


def test_a_bisection_that_lands_on_a_busy_size_measures_it_again():
    busy = {80: "steal"}
    step = plan.next_crossover_size(
        [40, 80, 160],
        ["a", "a", "b"],
        [-1.0, -0.3, 1.0],
        "a",
        "b",
        (4, 1000),
        "d",
        busy,
    )
    assert (step.status, step.size, step.bracket) == (plan.SEARCHING, 80, (40, 160))


def test_with_only_busy_verdicts_the_smallest_is_measured_again_once():
    busy = {20: "x", 40: "y"}
    args = ([20, 40], ["a", "a"], [-2.0, -1.0], "a", "b", (4, 1000), "d", busy)
    assert plan.next_crossover_size(*args).size == 20
    for retried, why in (([20], "x"), ([40], "y")):
        end = plan.next_crossover_size(*args, retried=retried)
        assert (end.status, end.bracket, end.busy) == (plan.UNRELIABLE, None, why)
        assert end.text.startswith("the machine was busy at d ")


def test_an_unreliable_busy_entry_is_written_read_back_and_said_so():
    decision = plan.Decision(
        plan.UNRELIABLE, bracket=(80, 113), text="the machine was busy", busy="steal"
    )
    entry = plan.search_entry(
        "t.py::test_x", ("cpu", "cpu2"), decision, (4, 1000), [80, 113], [80]
    )
    (back,) = plan.read_searches({"crossover_search": [entry]})
    assert back == entry
    assert back["busy"] == "steal" and back["remeasured"] == [80]
    line = search_view.search_line(back)
    assert line.startswith("t.py::test_x (cpu2 vs cpu): unreliable (busy): ")
    assert "measured again (busy machine): 80" in line
    saved = {"crossover_search": [entry]}
    assert search_view.compare_lines(saved, {}) == [
        "crossover t.py::test_x (cpu2 vs cpu): saved unreliable (busy) [80, 113] "
        "-> now not searched"
    ]


# ------------------------------------------------ starting from a saved run


def _record(label, size, dtype="float64", test="t.py::test_x"):
    return {
        "fullname": f"{test}[{label}-{size}]",
        "params": {"jax_backend": label, "jax_size": size},
        "stats": {"median": 1.0},
        "extra_info": {
            "backend": label,
            "size": size,
            "precision": {"dtype": dtype, "matmul": "default"},
        },
    }


def _saved(entry=None, records=None):
    entry = {**GOOD, "backends": ["cpu", "cpu2"], "bracket": [80, 113]} | (entry or {})
    if records is None:
        records = [_record(label, 80) for label in ("cpu", "cpu2")]
    return {"benchmarks": records, "pytest_lyapax": {"crossover_search": [entry]}}


SAME = {"cpu": "float64", "cpu2": "float64"}


def test_a_saved_bracket_of_the_same_test_backends_and_precision_is_the_start():
    found = plan.saved_bracket(
        _saved(), "t.py::test_x", ("cpu", "cpu2"), SAME, (4, 1000)
    )
    assert found == (80, 113)
    # A search that ended unreliable or by the budget left a bracket too.
    budget = _saved({"status": "budget", "bracket": [40, 160]})
    assert plan.saved_bracket(budget, "t.py::test_x", ("cpu", "cpu2"), SAME, (4, 1000))


@pytest.mark.parametrize(
    ("saved", "test", "backends", "precisions", "bounds"),
    [
        # Another test, other backends, the pair the other way round.
        (_saved(), "t.py::test_y", ("cpu", "cpu2"), SAME, (4, 1000)),
        (_saved(), "t.py::test_x", ("cpu", "gpu"), SAME, (4, 1000)),
        (_saved(), "t.py::test_x", ("cpu2", "cpu"), SAME, (4, 1000)),
        # Another precision now, or none recorded then.
        (
            _saved(),
            "t.py::test_x",
            ("cpu", "cpu2"),
            {"cpu": "float32", "cpu2": "float64"},
            (4, 1000),
        ),
        (_saved(records=[]), "t.py::test_x", ("cpu", "cpu2"), SAME, (4, 1000)),
        # Outside this run's bounds; no bracket saved.
        (_saved(), "t.py::test_x", ("cpu", "cpu2"), SAME, (100, 1000)),
        (
            _saved({"status": "absent", "bracket": None}),
            "t.py::test_x",
            ("cpu", "cpu2"),
            SAME,
            (4, 1000),
        ),
    ],
)
def test_a_saved_bracket_of_another_search_is_not_the_start(
    saved, test, backends, precisions, bounds
):
    assert plan.saved_bracket(saved, test, backends, precisions, bounds) is None


@pytest.mark.parametrize(
    "saved",
    [
        None,
        "text",
        [],
        {"benchmarks": "x", "pytest_lyapax": {}},
        {"benchmarks": [], "pytest_lyapax": "x"},
        _saved({"bracket": [113, 80]}),
        _saved({"bracket": [0, 80]}),
        _saved({"bracket": ["80", 113]}),
        _saved({"backends": "cpu,cpu2"}),
        _saved({"status": "found"}),
        {**_saved(), "benchmarks": [None, 3, {"extra_info": "x"}]},
    ],
)
def test_a_malformed_saved_report_gives_no_start(saved):
    assert (
        plan.saved_bracket(saved, "t.py::test_x", ("cpu", "cpu2"), SAME, (4, 1000))
        is None
    )


# ------------------------------------------------ starting from a saved ceiling


def _fill(label="cpu", device="cpu", env=None, dtype="float64", test="t.py::test_x"):
    record = _record(label, 1000, dtype, test)
    record["extra_info"].update(jax_backend="cpu", device=device)
    if env is not None:
        record["extra_info"]["backend_env"] = env
    return record


LIMIT = {"PYTEST_LYAPAX_MEMORY_LIMIT": "100000"}
NOW = plan.ceiling_conditions(_fill(env=LIMIT))


def _saved_ceiling(entry=None, records=None):
    entry = {
        "test": "t.py::test_x",
        "backend": "cpu",
        "largest_fitting": 12338,
        "first_not_fitting": 13454,
        "reason": "does not fit",
    } | (entry or {})
    records = [_fill(env=LIMIT)] if records is None else records
    return {"benchmarks": records, "pytest_lyapax": {"ceilings": [entry]}}


def test_the_ceiling_conditions_name_platform_precision_device_and_variables():
    assert NOW == (
        "platform cpu, float64, device cpu, PYTEST_LYAPAX_MEMORY_LIMIT=100000"
    )
    bare = {"extra_info": {"backend": "cpu"}}
    assert plan.ceiling_conditions(bare) == "platform ?, precision not recorded"


def test_a_saved_ceiling_of_the_same_test_backend_and_conditions_is_the_start():
    assert plan.saved_ceiling(_saved_ceiling(), "t.py::test_x", "cpu", NOW) == (
        (12338, 13454),
        "",
    )
    # A search stopped while doubling left only the size that fit.
    doubling = _saved_ceiling({"first_not_fitting": None})
    assert plan.saved_ceiling(doubling, "t.py::test_x", "cpu", NOW) == ((12338,), "")


@pytest.mark.parametrize(
    ("records", "then"),
    [
        ([_fill(env={"PYTEST_LYAPAX_MEMORY_LIMIT": "50000"})], "LIMIT=50000"),
        ([_fill(device="TPU v5 lite", env=LIMIT)], "device TPU v5 lite"),
        ([_fill(dtype="float32", env=LIMIT)], "float32"),
        ([_fill(env=LIMIT), _fill(env={})], "float64, device cpu; platform"),
        ([], "no record of its conditions"),
    ],
)
def test_a_saved_ceiling_measured_otherwise_is_not_the_start_and_says_so(records, then):
    start, note = plan.saved_ceiling(
        _saved_ceiling(records=records), "t.py::test_x", "cpu", NOW
    )
    assert start is None
    assert note.startswith("not started from the saved ceiling [12338, 13454]: ")
    assert then in note and note.endswith(f"now with {NOW}")


@pytest.mark.parametrize(
    "saved",
    [
        _saved_ceiling({"test": "t.py::test_y"}),
        _saved_ceiling({"backend": "cpu2"}),
        _saved_ceiling({"largest_fitting": None}),  # nothing fit: no start
        # Malformed: no start, and no note (a file that does not load has
        # its note from the loader).
        _saved_ceiling({"largest_fitting": -1}),
        _saved_ceiling({"first_not_fitting": 12338}),
        _saved_ceiling({"backend": 3}),
        {"benchmarks": "x", "pytest_lyapax": {"ceilings": []}},
        {"benchmarks": [], "pytest_lyapax": None},
        None,
        [],
    ],
)
def test_no_saved_ceiling_of_this_search_gives_no_start(saved):
    assert plan.saved_ceiling(saved, "t.py::test_x", "cpu", NOW) == (None, "")


def test_a_ceiling_entry_with_its_start_is_written_read_back_and_said():
    entry = plan.ceiling_entry(
        "t.py::test_x",
        "cpu",
        [1000, 12338],
        {13454: "does not fit"},
        [12338, 13454],
        started_from=[12338, 13454],
    )
    (back,) = plan.read_ceilings({"ceilings": [entry]})
    assert back == entry
    noted = {**entry, "started_from": [], "start_note": "not started from ..."}
    assert search_view.ceiling_lines({"ceilings": [entry, noted]}) == (
        "memory ceiling t.py::test_x on cpu: started from the saved ceiling "
        "[12338, 13454]",
        "memory ceiling t.py::test_x on cpu: not started from ...",
    )
