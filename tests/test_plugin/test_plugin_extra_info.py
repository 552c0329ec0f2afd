"""Each ``extra_info`` field of a benchmark record has one reader."""

import pytest

from pytest_lyapax.report import details
from pytest_lyapax.report.identity import (
    extra_info,
    record_label,
    record_size,
    size_label,
    worker_fields,
)
from pytest_lyapax.report.series import point_of

STATS = {"median": 2.0, "q1": 1.0, "q3": 3.0, "data": [1.0, 2.0, 3.0]}
RECORD = {
    "stats": STATS,
    "extra_info": {
        "backend": "cpu2",
        "size": 20,
        "size_label": "n",
        "first_call_s": 0.5,
        "warmup": {"kind": "compile", "compile_s": 0.25, "first_call_s": 0.5},
        "memory": {"device_peak_bytes": None, "host_peak_rss_bytes": 4096},
        "args_on": "device",
        "device": "cpu",
        "jax_version": "0.10.2",
        "jax_backend": "cpu",
        "no_array_leaves": True,
    },
}


def test_each_field_reads_from_its_accessor():
    assert record_label(RECORD) == "cpu2" and record_size(RECORD) == 20
    assert size_label(RECORD) == "n"
    assert details.first_call_s(RECORD) == 0.5
    assert details.args_on(RECORD) == "device"
    assert details.peak_memory(RECORD) == (4096, True)
    assert details.no_array_leaves(RECORD) is True
    assert worker_fields(RECORD) == {
        "device": "cpu",
        "jax_version": "0.10.2",
        "jax_backend": "cpu",
    }
    point = point_of(RECORD, 20)
    assert (point.compile_s, point.peak_bytes, point.peak_is_rss) == (0.25, 4096, True)


@pytest.mark.parametrize("info", [None, "broken", {}])
def test_a_record_without_usable_extra_info_reads_as_nothing_recorded(info):
    record = {"stats": STATS, "extra_info": info}
    assert extra_info(record) == {}
    assert (record_label(record), record_size(record), size_label(record)) == (
        None,
        None,
        None,
    )
    assert details.first_call_s(record) is None and details.args_on(record) is None
    assert details.peak_memory(record) == (None, False)
    assert details.no_array_leaves(record) is False and worker_fields(record) == {}
    point = point_of(record, 1)
    assert (point.compile_s, point.peak_bytes) == (None, None)


def test_the_device_peak_wins_over_the_host_rss():
    memory = {"device_peak_bytes": 1024, "host_peak_rss_bytes": 4096}
    assert details.peak_memory({"extra_info": {"memory": memory}}) == (1024, False)
