"""Drawing time and size of pytest-lyapax's crossover figure for many benchmarks.

Builds synthetic records (no timing involved: fixed medians) for N sized
benchmarks on two backends plus N unsized ones, then times
``pytest_lyapax.views.figure.render_png`` and reports the PNG's pixel size and
bytes, with the CPU time of this process next to the wall time (on a shared
machine the wall time includes waiting). The figure is bounded (at most 24
panels), so the time should not grow with N.

    python benchmarks/plugin_figure.py [--benchmarks 150] [--repeats 3]

"""

from __future__ import annotations

import argparse
import statistics
import struct
import time

from pytest_lyapax.report.series import group_sized, unsized_medians
from pytest_lyapax.views.figure import BackendLegend, render_png


def _record(label: str, size: int | None, median: float, name: str) -> dict:
    stats = {"median": median, "q1": 0.9 * median, "q3": 1.1 * median}
    return {
        "name": f"{name}[{label}-{size}]",
        "fullname": f"perf.py::{name}[{label}-{size}]",
        "params": {"jax_backend": label, "jax_size": size},
        "extra_info": {"backend": label, "size": size},
        "stats": stats,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    records = []
    for i in range(args.benchmarks):
        for label, scale in (("cpu", 1e-6), ("gpu", 1e-4)):
            for size in (10, 100, 1000, 10000):
                records.append(
                    _record(label, size, scale * size ** (1 + i % 3 / 4), f"test_{i}")
                )
            records.append(_record(label, None, scale, f"test_unsized_{i}"))
    benches = group_sized(records, ["cpu", "gpu"])
    unsized = unsized_medians(records)
    legends = [BackendLegend("cpu", "ok", "cpu"), BackendLegend("gpu", "ok", "H200")]
    times, cpu = [], []
    for _ in range(args.repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        png = render_png(benches, legends, "synthetic machine", unsized)
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    width, height = struct.unpack(">II", png[16:24])
    print(
        f"{len(benches)} sized + {len(unsized)} unsized benchmarks: "
        f"draw wall min {min(times):.2f} s, median {statistics.median(times):.2f} s "
        f"(CPU time min {min(cpu):.2f} s: the wall time includes waiting for a "
        "shared CPU); "
        f"PNG {width} x {height} px, {len(png) / 1e3:.0f} kB"
    )


if __name__ == "__main__":
    main()
