"""
Benchmark your own JAX code per backend with pytest-lyapax
==========================================================

The ``pytest_lyapax`` plugin is installed with lyapax and works for any JAX
project, not only for Lyapunov exponents. A test that takes the
``benchmark`` fixture (from pytest-benchmark) and the plugin's ``jax_size``
fixture is run once per backend and size; ``--jax-backend=cpu,gpu`` starts one
worker per backend with ``JAX_PLATFORMS`` set before JAX starts, prints a size
x backend table, and writes ``benchmark.json`` and ``crossover.png`` to the
report directory. A backend that is not usable here (no GPU, say) is reported
as unavailable, with the reason -- never with made-up numbers.

This script writes a tiny test file into a temporary directory, runs pytest
on it in a subprocess (``--jax-backend=cpu``, the backend every machine has;
add ``gpu`` on a machine with one), and shows the outputs.

Run ``python examples/25_pytest_plugin.py`` (``--quick`` for fewer timing
rounds, ``--out FILE`` for the figure's path).
"""

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are written to files
import matplotlib.pyplot as plt
from _common import example_args

args = example_args(
    "pytest-lyapax on your project",
    "25_pytest_plugin.png",
    quick_help="fewer rounds (CI, docs)",
)

# %%
# The test file
# -------------
# ``jax_sizes`` gives the sizes (and the figure's axis label); the
# ``jax_backend`` fixture names the backend this worker runs. Compile before
# timing, and wait for the result inside the timed call.
TEST_FILE = textwrap.dedent(
    """
    import jax
    import jax.numpy as jnp
    import pytest


    @pytest.mark.jax_sizes(64, 256, 1024, label="n (matrix side)")
    def test_matmul(benchmark, jax_backend, jax_size):
        x = jnp.ones((jax_size, jax_size))
        f = jax.jit(lambda a: a @ a)
        f(x).block_until_ready()  # compile outside the timed rounds
        benchmark(lambda: f(x).block_until_ready())
    """
)

# %%
# Run it
# ------
# ``-p no:cacheprovider`` keeps pytest from writing a cache directory; the
# benchmark options make the quick mode quick.
work = Path(tempfile.mkdtemp(prefix="lyapax-plugin-"))
(work / "test_my_kernel.py").write_text(TEST_FILE)
report = work / "report"
cmd = [
    sys.executable,
    "-m",
    "pytest",
    "test_my_kernel.py",
    "-p",
    "no:cacheprovider",
    "--jax-backend=cpu",
    f"--jax-report-dir={report}",
    "--benchmark-columns=min,median,rounds",
]
if args.quick:  # two sizes, few rounds
    cmd += ["--jax-sizes=64,256", "--benchmark-min-rounds=1"]
    cmd += ["--benchmark-max-time=0.05"]
print("$", " ".join(cmd[2:]))
proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
print(proc.stdout[-4000:])
if proc.returncode != 0:
    print(proc.stderr[-2000:])
    raise SystemExit(f"pytest exited with {proc.returncode}")

# %%
# The report
# ----------
# ``benchmark.json`` is pytest-benchmark's format (``pytest-benchmark compare``
# reads it) with each backend's status under the ``pytest_lyapax`` key.
data = json.loads((report / "benchmark.json").read_text())
for bench in data["benchmarks"]:
    info = bench["extra_info"]
    print(
        f"{bench['name']:40s} median {bench['stats']['median'] * 1e3:8.3f} ms "
        f"({info.get('backend')})"
    )
print("backend status:", json.dumps(data.get("pytest_lyapax", {}), indent=1)[:600])

# %%
# The plugin's figure
# -------------------
img = plt.imread(report / "crossover.png")
fig, ax = plt.subplots(figsize=(8, 5))
ax.imshow(img)
ax.axis("off")
fig.tight_layout()
args.out.parent.mkdir(parents=True, exist_ok=True)
fig.savefig(args.out, dpi=110)
print(f"figure written to {args.out} (the plugin's own: {report / 'crossover.png'})")
