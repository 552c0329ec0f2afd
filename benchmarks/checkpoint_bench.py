"""Cost of one ``run_until_converged`` checkpoint save against the steps done.

For Lorenz-63 (k = 3, ``renorm_every=10``, chunks of 200 000 steps) at 10^6,
10^7 and 10^8 steps done, and for a 1000-node all-to-all Kuramoto network
(k = 20, ``renorm_every=10``, chunks of 10 000 steps) at 10^5 ... 10^7 steps,
the script times ``RunFile.save`` (the call ``run_until_converged`` makes
after every chunk, file written, flushed with fsync and renamed) and reports
the file's size.

The state of a long run is synthesised, not integrated: one real chunk is run
(its result is the engine state the file holds), and the history of the
earlier chunks is made of copies of that chunk's rows, fed chunk by chunk
through the same code the run uses (``_Chunks``: with the bounded format the
history summary, with lyapax's format 1 the list of every chunk's rows).
The save itself is the library's own code, unchanged. Run it once with
``PYTHONPATH=/work/main`` (format 1, before) and once with this tree
(bounded format, after); the script finds which one it imported.

Usage: ``python benchmarks/checkpoint_bench.py [--quick] [--repeats N]
[--json PATH]``. ``--quick`` (CI smoke): 10^4 and 10^5 steps, a 100-node
network.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import tempfile
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _timing import timed  # noqa: E402

from lyapax import converge, lyapunov_spectrum  # noqa: E402
from lyapax.core import ode_problem  # noqa: E402
from lyapax.systems import kuramoto_network, lorenz  # noqa: E402

BOUNDED = hasattr(converge, "_Summary")
#: Since the file format moved to ``lyapax._internal.converge_file``.
SPLIT = not hasattr(converge, "_RunFile")


def synthetic_state(last, chunk_rows: int, n_chunks: int, renorm_every: int):
    """The run's state after ``n_chunks`` chunks whose rows repeat ``last``'s."""
    k = np.asarray(last.history).shape[1]
    # The last chunk as long as a real one (its rows are saved).
    last = last._replace(
        history=np.resize(np.asarray(last.history), (chunk_rows, k)),
        times=np.resize(np.asarray(last.times), chunk_rows),
    )
    raw, times = converge._host(last)[:2]
    steps = n_chunks * chunk_rows * renorm_every
    if BOUNDED:
        state = converge._Chunks.fresh("last")
        for _ in range(n_chunks):
            state.extend(raw, times)
        state.last, state.done = last, steps
        return state
    cum = np.asarray(last.checkpoint.cum_log_growth)
    return converge._Chunks([(raw, times, cum)] * n_chunks, last, steps)


def store_for(problem, k: int, settings: dict, path: Path):
    """``save(state)``: one checkpoint save of the run ``state``."""
    args = (path, problem, k, settings)
    if SPLIT:
        from lyapax._internal.converge_file import RunFile

        store = RunFile(*args, "last", version=converge.__version__, bins=converge.BINS)
        every = settings["renorm_every"]
        return lambda state: store.save(state.as_saved(), state.stderr(every))
    if "history" in inspect.signature(converge._RunFile).parameters:
        return converge._RunFile(*args, "last").save
    return converge._RunFile(*args).save


def measure(name, problem, k, renorm_every, chunk_steps, steps_list, repeats, out):
    # One real chunk (short: its rows are repeated to the chunk's length).
    last = lyapunov_spectrum(
        problem, k=k, n_steps=min(chunk_steps, 500), renorm_every=renorm_every
    )
    settings = dict(
        k=k, renorm_every=renorm_every, t_transient=0.0, seed=0, chunk_steps=chunk_steps
    )
    chunk_rows = chunk_steps // renorm_every
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        path = Path(folder) / "run.npz"
        save = store_for(problem, k, settings, path)
        for steps in steps_list:
            state = synthetic_state(
                last, chunk_rows, steps // chunk_steps, renorm_every
            )
            best = min(timed(lambda state=state: save(state)) for _ in range(repeats))
            size = path.stat().st_size
            row = dict(
                case=name,
                format="bounded" if BOUNDED else "format 1",
                steps=steps,
                save_s=best,
                size_bytes=size,
                loadavg=os.getloadavg()[0],
            )
            out.append(row)
            print(
                f"{name:18s} {row['format']:9s} steps {steps:>11,d}  save "
                f"{best * 1e3:9.2f} ms  file {size / 1e6:9.3f} MB  "
                f"(load {row['loadavg']:.1f})",
                flush=True,
            )
            del state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (CI smoke)")
    parser.add_argument("--repeats", type=int, default=3, help="best of N saves")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    out: list[dict] = []
    lorenz_steps = [10**4, 10**5] if args.quick else [10**6, 10**7, 10**8]
    problem = ode_problem(lorenz(), jnp.ones(3), dt=0.01)
    chunk = 10_000 if args.quick else 200_000
    measure("lorenz63 k=3", problem, 3, 10, chunk, lorenz_steps, args.repeats, out)
    nodes = 100 if args.quick else 1000
    net_steps = [10**4, 10**5] if args.quick else [10**5, 10**6, 10**7]
    network = kuramoto_network(nodes, omega=jnp.linspace(-1, 1, nodes), K=0.5)
    name = f"kuramoto N={nodes} k=20"
    measure(name, network, 20, 10, 10_000, net_steps, args.repeats, out)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
