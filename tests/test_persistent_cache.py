"""A second process compiles nothing: lyapax's programs lower to the same
module in every process, so JAX's persistent compilation cache
(``jax_compilation_cache_dir``) serves them (docs/getting_started.md, "Compile
once: the persistent cache").

Two fresh processes run the same small problem against one temporary cache
folder; the verdict comes from JAX's own monitoring events (cache misses and
hits), never from wall time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import lyapax

#: Where this process holds a TPU its children cannot open it.
pytestmark = pytest.mark.not_on_tpu(
    "the programs are compared in two child processes, and the chip admits "
    "one process (this one)"
)

ROOT = Path(lyapax.__file__).parents[1]

_RUN = """
import json, sys
import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
counts = {}


def count(event, **kwargs):
    counts[event] = counts.get(event, 0) + 1


jax.monitoring.register_event_listener(count)
import jax.numpy as jnp
from lyapax import lyapunov_spectrum, ode_problem
from lyapax.systems import lorenz

problem = ode_problem(lorenz(), jnp.array([1.0, 1.0, 1.0]), dt=0.01)
result = lyapunov_spectrum(problem, n_steps=200, renorm_every=10, t_transient=0.5)
jax.block_until_ready(result.exponents)
print(json.dumps({k.rsplit("/", 1)[-1]: v for k, v in counts.items()}))
"""


def _run(cache: Path) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", _RUN, str(cache)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_takes_every_program_from_the_cache(tmp_path):
    first = _run(tmp_path)
    assert first.get("cache_misses", 0) >= 1, first
    assert first.get("cache_hits", 0) == 0, first
    second = _run(tmp_path)
    assert second.get("cache_misses", 0) == 0, second
    assert second["cache_hits"] == first["compile_requests_use_cache"], second
