"""Stability of a benchmark's rounds: each rule on synthetic round times, the
reader of the recorded verdict, and the report's sections (terminal,
summary.md) when few or many benchmarks are unstable."""

import math
import statistics

import pytest

from pytest_lyapax.report.stability import (
    RULE_TEXT,
    STABLE,
    UNSTABLE,
    stability,
    stability_of,
)
from pytest_lyapax.views import explain, roundchecks
from pytest_lyapax.views.document import Lines, RunFacts, Table, view_of

STEADY = [1.0 + 0.001 * ((i % 5) - 2) for i in range(50)]  # cv 0.14 %, 1 s calls


def test_steady_rounds_of_long_calls_are_stable():
    judged = stability(STEADY, iterations=1)
    assert judged["verdict"] == STABLE
    assert judged["reasons"] == [] and judged["rules"] == []
    assert judged["rounds"] == 50 and judged["cv"] < 0.01


def test_a_spread_of_ten_percent_is_unstable():
    data = [1.0, 1.3] * 20  # std 0.152 = 13.2 % of the mean 1.15, max 13 % above
    judged = stability(data, iterations=1)
    cv = statistics.stdev(data) / statistics.fmean(data)
    assert cv >= 0.10
    assert judged["verdict"] == UNSTABLE and judged["rules"] == ["spread"]
    assert judged["reasons"] == [f"std {100 * cv:.0f}% of mean (>= 10%)"]
    assert judged["reasons"] == ["std 13% of mean (>= 10%)"]


@pytest.mark.parametrize(
    ("extreme", "reason"),
    [
        (1.6, "max 59% above the mean (>= 50%)"),  # mean 1.006
        (0.4, "min 60% below the mean (>= 50%)"),  # mean 0.994
    ],
)
def test_one_round_half_the_mean_away_is_unstable(extreme, reason):
    data = [1.0] * 99 + [extreme]  # std 6 % of the mean: only the extreme breaks
    judged = stability(data, iterations=1)
    assert judged["rules"] == ["outlier"]
    assert judged["reasons"] == [reason]


def test_calls_under_a_millisecond_timed_singly_are_unstable():
    data = [20e-6] * 50
    judged = stability(data, iterations=1)
    assert judged["rules"] == ["short"]
    assert judged["reasons"] == ["calls of 20 us timed singly (< 1 ms)"]
    # The same calls looped within each round are not.
    assert stability(data, iterations=50)["verdict"] == STABLE


def test_too_few_rounds_are_unstable():
    judged = stability([1.0] * 5, iterations=1)
    assert judged["rules"] == ["rounds"]
    assert judged["reasons"] == ["only 5 rounds (< 10)"]
    assert stability([], iterations=1)["reasons"] == ["only 0 rounds (< 10)"]
    assert stability([1.0], iterations=1)["reasons"] == ["only 1 round (< 10)"]


def test_a_mean_not_known_to_five_percent_is_unstable():
    # n = 12, mean 1.1, sample std 0.1044 (9.5 % of the mean: under the
    # spread rule), 95 % margin 1.96 * 0.1044 / sqrt(12) / 1.1 = 5.37 %.
    data = [1.0, 1.2] * 6
    margin = 1.959964 * statistics.stdev(data) / math.sqrt(12) / 1.1
    assert 0.0536 < margin < 0.0538
    judged = stability(data, iterations=1)
    assert judged["rules"] == ["rounds"]
    assert judged["reasons"] == [
        "mean known to ±5.4% after 12 rounds (95% margin > 5%)"
    ]
    assert judged["margin"] == pytest.approx(margin, rel=1e-6)


def test_every_broken_rule_is_listed_in_order():
    judged = stability([10e-6, 30e-6, 10e-6], iterations=1)
    assert judged["rules"] == ["rounds", "spread", "outlier", "short"]
    assert len(judged["reasons"]) == 4


@pytest.mark.parametrize(
    "entry",
    [None, "unstable", {}, {"verdict": "shaky"}, {"verdict": 1, "reasons": []}],
)
def test_a_missing_or_malformed_verdict_reads_as_not_recorded(entry):
    assert stability_of({"extra_info": {"stability": entry}}) is None


def test_the_recorded_verdict_reads_back():
    record = {"extra_info": {"stability": stability([1.0] * 5, 1)}}
    read = stability_of(record)
    assert read is not None and read.unstable
    assert read.reasons == ("only 5 rounds (< 10)",) and read.rules == ("rounds",)


def _document(n_unstable, n_stable=2):
    def record(i, data):
        return {
            "name": f"test_b{i}[cpu]",
            "fullname": f"t.py::test_b{i}[cpu]",
            "stats": {
                "median": statistics.median(data),
                "q1": min(data),
                "q3": max(data),
                "data": data,
            },
            "extra_info": {"backend": "cpu", "stability": stability(data, 1)},
        }

    records = [record(i, [1.0, 1.3] * 20) for i in range(n_unstable)]
    records += [record(n_unstable + i, STEADY) for i in range(n_stable)]
    return {"benchmarks": records}


def _lines(section):
    return [line for b in section.blocks if isinstance(b, Lines) for line in b.lines]


def test_the_terminal_lists_unstable_benchmarks_with_a_count_per_rule():
    view = view_of(_document(n_unstable=3))
    section = roundchecks.stability_section(view, text=True)
    lines = _lines(section)
    assert lines[0] == f"3 of 5 benchmark(s) unstable ({RULE_TEXT['spread']}: 3):"
    assert lines[1] == "  t.py::test_b0[cpu]: std 13% of mean (>= 10%)"
    assert len(lines) == 5  # head, three benchmarks, advice
    titles = [s.title for s in explain.report_sections(view, run=RunFacts())]
    assert "pytest-lyapax: unstable timings" in titles


def test_many_unstable_benchmarks_stay_readable():
    view = view_of(_document(n_unstable=25))
    lines = _lines(roundchecks.stability_section(view, text=True))
    shown = [line for line in lines if line.startswith("  t.py::")]
    assert len(shown) == roundchecks.SHOWN
    assert "  ... and 5 more (summary.md lists every one)" in lines
    # summary.md and report.html list every one, with the rules.
    section = roundchecks.stability_section(view, text=False)
    (table,) = [b for b in section.blocks if isinstance(b, Table)]
    assert len(table.rows) == 25
    assert table.rows[0] == ("test_b0", "cpu", "-", "std 13% of mean (>= 10%)")
    assert _lines(section)[1].startswith("rules: ")


def test_a_stable_run_says_nothing_in_the_terminal_and_so_in_the_files():
    view = view_of(_document(n_unstable=0))
    assert roundchecks.stability_section(view, text=True) is None
    section = roundchecks.stability_section(view, text=False)
    assert _lines(section)[0] == "0 of 2 benchmark(s) unstable"
    assert not [b for b in section.blocks if isinstance(b, Table)]
    # A report without verdicts (older schema) has no such section at all.
    assert roundchecks.stability_section(view_of({"benchmarks": []}), False) is None


def test_processes_are_judged_on_their_pooled_rounds():
    from pytest_lyapax.measuring.benchmarks import fold_process

    def record(data):
        info = {"stability": stability(data, 1), "recompiles": {"count": 1}}
        return {"stats": {"median": 1.0, "rounds": len(data), "data": data}} | {
            "extra_info": info
        }

    first, second = record([1.0] * 6), record([1.0] * 6)
    assert first["extra_info"]["stability"]["rules"] == ["rounds"]
    fold_process(first, second)
    assert first["extra_info"]["stability"]["verdict"] == STABLE
    assert first["extra_info"]["stability"]["rounds"] == 12
    assert first["extra_info"]["recompiles"]["count"] == 2
