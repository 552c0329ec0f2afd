"""Timing and command-line pieces shared by the benchmark scripts.

Not a benchmark itself (CI's smoke section names each script). A script run
as ``python benchmarks/name.py`` imports it from its own folder.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax


def timed(fn: Callable[[], Any]) -> float:
    """Wall seconds of ``fn()`` up to the end of the device work it started
    (every array leaf of its result blocked on)."""
    t0 = time.perf_counter()
    jax.block_until_ready(jax.tree.leaves(fn()))
    return time.perf_counter() - t0


def best_interleaved(
    calls: Mapping[str, Callable[[], Any]], repeats: int
) -> dict[str, float]:
    """Best wall seconds of each call over ``repeats`` rounds, every round
    timing each call once, so that load from other processes hits all of
    them alike. The calls are expected to be compiled already."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, fn in calls.items():
            times[name].append(timed(fn))
    return {name: min(ts) for name, ts in times.items()}


def sizes_parser(
    description: str,
    sizes: Sequence[int],
    what: str,
    repeats: int,
    quick: str | None = None,
) -> argparse.ArgumentParser:
    """A parser with ``--sizes`` (comma-separated ``what``), ``--repeats``
    (best of N calls) and, given its help text ``quick``, ``--quick``; a
    script adds its own options."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, sizes)),
        help=f"comma-separated {what} (default: %(default)s)",
    )
    parser.add_argument("--repeats", type=int, default=repeats, help="best of N calls")
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=quick)
    return parser


def parse_sizes(text: str) -> list[int]:
    """``"20,50"`` -> ``[20, 50]`` (empty items skipped)."""
    return [int(s) for s in text.split(",") if s.strip()]
