"""Series, crossovers, verdicts and comparisons
(pytest_lyapax/report/series.py, crossover.py, compare.py, stats.py,
identity.py)."""

import math

import pytest

from pytest_lyapax.report import stats
from pytest_lyapax.report.compare import compare_runs
from pytest_lyapax.report.crossover import FEW, find_crossover
from pytest_lyapax.report.series import Point, group_sized, unsized_medians
from pytest_lyapax.run.options import CompareThreshold
from pytest_lyapax.views import tables


def samples_around(median, spread, rounds):
    """``rounds`` evenly spread samples in median * [1 - spread, 1 + spread]."""
    if rounds == 1:
        return (median,)
    return tuple(
        median * (1 - spread + 2 * spread * i / (rounds - 1)) for i in range(rounds)
    )


def points(medians, spread=0.0, rounds=stats.MIN_ROUNDS):
    """Points whose round times spread +-spread (relative) around the median."""
    return {
        size: Point(
            size,
            m,
            m * (1 - spread / 2),
            m * (1 + spread / 2),
            samples_around(m, spread, rounds),
        )
        for size, m in medians.items()
    }


def test_crossover_is_interpolated_in_log_log():
    ref = points({10: 1.0, 100: 2.0, 1000: 4.0})
    other = points({10: 2.0, 100: 1.0, 1000: 1.0})  # speedups 0.5, 2, 4
    c = find_crossover("cpu", "gpu", ref, other)
    assert c.kind == "crossover"
    (crossing,) = c.crossings
    assert crossing.between == (10, 100) and crossing.winner == "gpu"
    assert crossing.size == pytest.approx(10**1.5)
    assert c.largest == 1000 and c.speedup_at_largest == pytest.approx(4.0)
    text = c.describe("d")
    assert "gpu faster at d 100, 1000" in text and "cpu faster at d 10" in text
    assert "medians cross at d ~31.6 (between 10 and 100, gpu faster after)" in text


def test_every_crossing_is_reported():
    # Lines that visibly cross twice are not "no crossover".
    ref = points({1: 2.0, 2: 1.0, 3: 1.0})
    other = points({1: 1.0, 2: 2.0, 3: 3.0})  # speedups 2, 0.5, 1/3
    c = find_crossover("a", "b", ref, other)
    assert [x.between for x in c.crossings] == [(1, 2)]
    ref = points({1: 2.0, 2: 1.0, 3: 3.0})
    other = points({1: 1.0, 2: 2.0, 3: 1.0})  # speedups 2, 0.5, 3
    c = find_crossover("a", "b", ref, other)
    assert [(x.between, x.winner) for x in c.crossings] == [
        ((1, 2), "a"),
        ((2, 3), "b"),
    ]
    assert c.kind == "mixed"
    assert "no crossover" not in c.describe() and "cross at" in c.describe()


def test_identical_backends_are_within_noise():
    # Cpu vs an identical cpu2 is not "cpu2 faster; 1.01x".
    ref = points({10: 1.00, 100: 2.0}, spread=0.05)
    other = points({10: 0.99, 100: 1.98}, spread=0.05)
    c = find_crossover("cpu", "cpu2", ref, other)
    assert c.verdicts == ("noise", "noise") and c.kind == "within-noise"
    text = c.describe()
    assert "within noise at size 10, 100" in text and "faster" not in text


def test_a_crossing_of_medians_within_noise_calls_no_backend_faster():
    # Two identical backends whose medians cross by chance (A/A under load): the
    # crossing is reported, but no side is called faster.
    ref = points({20: 1.00, 50: 2.00}, spread=0.05)
    other = points({20: 1.01, 50: 1.98}, spread=0.05)
    c = find_crossover("cpu", "cpu2", ref, other)
    assert c.verdicts == ("noise", "noise") and len(c.crossings) == 1
    text = c.describe("n")
    assert "faster" not in text
    assert "(between 20 and 50, cpu2's median lower after, no difference" in text


def test_verdicts_with_few_rounds_say_so():
    # 3 rounds cannot carry a verdict, however far apart.
    few = find_crossover(
        "cpu", "gpu", points({1: 2.0, 2: 2.0}, rounds=3), points({1: 1.0, 2: 1.0})
    )
    assert few.verdicts == (FEW, FEW)
    assert few.kind == "too-few-rounds"
    text = few.describe()
    assert "too few rounds to judge at size 1, 2" in text and "faster" not in text
    assert few.to_json()["kind"] == "too-few-rounds"


def test_verdict_does_not_depend_on_the_timer_calibration():
    # The old rule compared IQRs; a narrow IQR (many iterations per
    # round) against a wide one decided "faster" from 3 numbers.  The noise
    # test reads the samples: heavily overlapping samples are noise however
    # narrow one side is.
    narrow = {1: Point(1, 1.0, 0.999, 1.001, samples_around(1.0, 0.001, 12))}
    wide = {1: Point(1, 0.98, 0.6, 1.4, samples_around(0.98, 0.5, 12))}
    assert find_crossover("a", "b", narrow, wide).verdicts == ("noise",)


def test_mann_whitney_against_known_values():
    # Fully separated 10 vs 10: U = 0; normal approximation with continuity
    # correction: z = (50 - 0.5) / sqrt(100 * 21 / 12).
    low, high = list(range(10)), list(range(10, 20))
    p, shift = stats.mann_whitney_p(low, high)
    z = 49.5 / math.sqrt(100 * 21 / 12)
    assert p == pytest.approx(math.erfc(z / math.sqrt(2))) and shift == 1.0
    assert stats.judge(low, high).kind == stats.SLOWER
    assert stats.judge(high, low).kind == stats.FASTER
    assert stats.mann_whitney_p([1.0] * 12, [1.0] * 12) == (1.0, 0.5)
    interleaved = stats.judge(list(range(0, 24, 2)), list(range(1, 25, 2)))
    assert interleaved.kind == stats.NOISE and interleaved.p > 0.5
    assert stats.judge(low[:9], high).kind == stats.FEW


def test_crossover_other_cases():
    faster = find_crossover(
        "a", "b", points({1: 2.0, 2: 2.0}), points({1: 1.0, 2: 1.0})
    )
    assert faster.kind == "other-faster"
    slower = find_crossover(
        "a", "b", points({1: 1.0, 2: 1.0}), points({1: 2.0, 2: 3.0})
    )
    assert slower.kind == "reference-faster"
    assert "medians do not cross" in slower.describe()
    none = find_crossover("a", "b", points({1: 1.0}), points({2: 1.0}))
    assert none.kind == "no-common-sizes"


def record(label, size, median, name="test_x", **extra):
    param = label if size is None else f"{label}-{size}"
    stats = {k: median for k in ("min", "max", "mean", "median", "q1", "q3")}
    stats.update(stddev=0.0, iqr=0.0, rounds=3, data=[median] * 3, iterations=1)
    for key in (
        "iqr_outliers",
        "stddev_outliers",
        "ld15iqr",
        "hd15iqr",
        "ops",
        "total",
    ):
        stats[key] = 0
    stats["outliers"] = "0;0"
    return {
        "group": None,
        "name": f"{name}[{param}]",
        "fullname": f"t.py::{name}[{param}]",
        "params": {"jax_backend": label, "jax_size": size},
        "param": param,
        "extra_info": {"backend": label, "size": size, **extra},
        "options": {},
        "stats": stats,
    }


def test_group_sized_and_tables():
    records = [
        record("gpu", 100, 0.5),
        record("cpu", 10, 0.1, size_label="d (nodes)"),
        record("cpu", 100, 1.0),
        record("gpu", 10, 0.2),
        record("cpu", None, 0.003, name="test_lorenz"),
    ]
    (bench,) = group_sized(records, ["cpu", "gpu"])
    assert list(bench.series) == ["cpu", "gpu"]
    assert bench.sizes == [10, 100]
    assert bench.size_label == "d (nodes)"
    table = tables.sized_table(bench, ["cpu", "gpu", "tpu"], {"tpu": "unavailable"})
    assert table[0].split() == ["size", "cpu", "gpu", "tpu", "gpu", "speedup"]
    assert table[2].split() == ["10", "100", "ms", "200", "ms", "unavailable", "0.5x"]
    assert table[3].split() == ["100", "1", "s", "500", "ms", "unavailable", "2x"]
    unsized = tables.unsized_table(unsized_medians(records), ["cpu", "gpu"], {})
    assert unsized[2].split() == ["test_lorenz", "3", "ms", "-"]


def test_format_seconds():
    assert tables.format_seconds(2.5) == "2.5 s"
    assert tables.format_seconds(0.0125) == "12.5 ms"
    assert tables.format_seconds(3e-6) == "3 us"
    assert tables.format_seconds(4e-9) == "4 ns"
    assert tables.format_seconds(None) == "-"
    assert tables.format_seconds(math.nan) == "-"


def test_compare_runs():
    saved = {"benchmarks": [record("cpu", 10, 1.0), record("cpu", 20, 1.0)]}
    now = [record("cpu", 10, 1.2), record("cpu", 20, 1.5), record("cpu", 30, 9.0)]
    threshold = CompareThreshold("median", 25.0, relative=True)
    result = compare_runs(saved, now, [threshold]).comparisons
    assert [(c.size, bool(c.failed)) for c in result] == [(10, False), (20, True)]
    assert result[1].failed == ("median:25%",)
    table = tables.comparison_table(result, [threshold])
    assert "REGRESSION" in table[-1] and "REGRESSION" not in table[-2]
    assert "+50.0%" in table[-1]
    # 3 rounds each: the noise test does not pretend to know.
    assert "too few rounds" in table[-1]
    rule = CompareThreshold("median", 0.3, False)
    absolute = compare_runs(saved, now, [rule])
    assert [bool(c.failed) for c in absolute.comparisons] == [False, True]
    plain = compare_runs(saved, now)
    assert not any(c.failed for c in plain.comparisons)


def test_several_gates_each_judge_their_own_field():
    saved = {"benchmarks": [record("cpu", 10, 1.0)]}
    slow_max = record("cpu", 10, 1.05)
    slow_max["stats"]["max"] = 3.0
    gates = [
        CompareThreshold("median", 10.0, relative=True),
        CompareThreshold("max", 50.0, relative=True),
    ]
    (c,) = compare_runs(saved, [slow_max], gates).comparisons
    assert c.failed == ("max:50%",)
    table = tables.comparison_table([c], gates)
    assert table[0].split()[:7] == [
        "benchmark",
        "saved",
        "median",
        "now",
        "median",
        "change",
        "saved",
    ]
    assert "+200.0%" in table[-1] and "REGRESSION max:50%" in table[-1]


def on_machine(rec, host, device="cpu", jax="0.10.2"):
    rec = dict(rec, extra_info=dict(rec["extra_info"]))
    rec["extra_info"].update(host=host, cpu="Some CPU", device=device, jax_version=jax)
    return rec


def test_compare_reports_machines_and_refuses_across_hosts_and_devices():
    # A comparison knows what it compares.
    saved = {"benchmarks": [on_machine(record("gpu", 10, 1.0), "a", "NVIDIA A100")]}
    same = compare_runs(
        saved, [on_machine(record("gpu", 10, 1.0), "a", "NVIDIA A100", "0.11.2")]
    )
    (match,) = same.machines
    assert match.differences == ["jax '0.10.2' vs '0.11.2'"]
    assert same.refusal() is None  # a jax upgrade is what a gate is for
    device = compare_runs(
        saved, [on_machine(record("gpu", 10, 1.0), "a", "NVIDIA H200")]
    )
    assert device.refusal() == "backend 'gpu': device 'NVIDIA A100' vs 'NVIDIA H200'"
    host = compare_runs(saved, [on_machine(record("gpu", 10, 1.0), "b")])
    assert "host 'a' vs 'b'" in host.refusal()
    assert host.to_json()["machines"][0]["match"] is False
    lines = tables.machine_lines(host.machines)
    assert lines[0].split() == [
        "backend",
        "saved",
        "run",
        "on",
        "this",
        "run",
        "on",
        "machine",
    ]
    assert "host 'a' vs 'b'" in lines[-1]


def test_compare_gate_fails_on_nothing_compared_and_on_missing_backends():
    saved = {
        "benchmarks": [
            record("cpu", 10, 1.0),
            record("gpu", 10, 1.0),
            record("gpu", 20, 1.0),
        ]
    }
    threshold = CompareThreshold("median", 25.0, relative=True)
    result = compare_runs(saved, [record("cpu", 10, 1.0)], [threshold])
    assert result.missing == ["t.py::test_x[gpu-10]", "t.py::test_x[gpu-20]"]
    failures = result.gate_failures(allow_missing=False)
    assert failures == [
        "t.py::test_x[gpu-10] is missing from this run",
        "t.py::test_x[gpu-20] is missing from this run",
    ]
    assert result.gate_failures(allow_missing=True) == []
    other_ids = {"benchmarks": [dict(record("cpu", 10, 1.0), fullname="x.py::y")]}
    nothing = compare_runs(other_ids, [record("cpu", 10, 1.0)], [threshold])
    assert not nothing.comparisons
    assert any("nothing was compared" in f for f in nothing.gate_failures(False))


def test_absolute_thresholds_print_readable_units():
    # Not "-4.74e-06 s".
    rule = CompareThreshold("median", 1e-5, relative=False)
    assert rule.format_change(-4.74e-6) == "-4.74 us"
    assert rule.format_change(0.0125) == "+12.5 ms"
    assert str(rule) == "median:10us"
    saved = {"benchmarks": [record("cpu", None, 1e-5)]}
    result = compare_runs(saved, [record("cpu", None, 5.26e-6)], [rule])
    assert "-4.74 us" in tables.comparison_table(result.comparisons, [rule])[-1]


def test_same_named_tests_of_two_modules_are_two_series():
    # Unsized_medians keyed by name merged a.py::test_x and
    # b.py::test_x into one row (one of them lost).
    a = record("cpu", None, 0.0108)
    b = dict(record("cpu", None, 12.5e-6), fullname="sub/b.py::test_x[cpu]")
    medians = unsized_medians([a, b])
    assert {name: v["cpu"].median for name, v in medians.items()} == {
        "t.py::test_x": 0.0108,
        "sub/b.py::test_x": 12.5e-6,
    }
    rows = tables.unsized_table(medians, ["cpu"], {})[2:]
    assert [r.split()[0] for r in rows] == ["t.py::test_x", "sub/b.py::test_x"]
    sized = [record("cpu", 10, 1.0), record("cpu", 20, 2.0)]
    sized += [
        dict(r, fullname=r["fullname"].replace("t.py", "u.py"))
        for r in (record("cpu", 10, 5.0), record("cpu", 20, 6.0))
    ]
    benches = group_sized(sized, ["cpu"])
    assert [(b.name, b.medians("cpu")) for b in benches] == [
        ("t.py::test_x", {10: 1.0, 20: 2.0}),
        ("u.py::test_x", {10: 5.0, 20: 6.0}),
    ]
    # A name used once keeps its short form.
    assert list(unsized_medians([a])) == ["test_x"]


def test_series_per_other_parameter():
    # Dtype x size gives one series per dtype, not a mixture.
    records = []
    for dtype, scale in (("float32", 1.0), ("float64", 10.0)):
        for label in ("cpu", "gpu"):
            for size in (10, 100):
                r = record(label, size, scale * size / (100 if label == "gpu" else 1))
                r["params"]["dtype"] = dtype
                r["fullname"] = f"t.py::test_x[{label}-{dtype}-{size}]"
                r["name"] = f"test_x[{label}-{dtype}-{size}]"
                records.append(r)
    benches = group_sized(records, ["cpu", "gpu"])
    assert [b.name for b in benches] == [
        "test_x[dtype=float32]",
        "test_x[dtype=float64]",
    ]
    assert benches[0].medians("cpu") == {10: 10.0, 100: 100.0}
    assert benches[1].medians("cpu") == {10: 100.0, 100: 1000.0}


def test_a_size_of_true_or_false_is_no_size():
    """``True`` is an int to ``isinstance``: a report (untrusted input) with
    ``size: true`` has an unsized point, not a point at size 1."""
    from pytest_lyapax.views.ab import ratio_series

    for flag in (True, False):
        records = [record("cpu", flag, 1e-3)]
        assert group_sized(records, ["cpu"]) == []
        assert unsized_medians(records)["test_x"]["cpu"].median == 1e-3
    entries = [
        {"benchmark": "t.py::test_f", "backend": "cpu", "size": s, "ratio": 1.5}
        for s in (True, False, 8)
    ]
    assert ratio_series(entries) == {"test_f [cpu]": [(8, 1.5, 1.5, 1.5)]}
