"""Long runs that survive a kill: checkpoint files of run_until_converged and of
sweeps (atomic, fingerprinted, refused when foreign), and write faults."""

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import float64_run

import lyapax.converge
from lyapax import CheckpointError
from lyapax._internal import checkpoint as ckpt_file
from lyapax.converge import run_until_converged
from lyapax.sweep import sweep_lyapunov_spectrum
from lyapax.systems import henon_map

ROOT = Path(__file__).resolve().parents[1]
HENON = henon_map()
X0 = jnp.array([0.1, 0.1])
#: Never converges (tol far below the error bars): every run spends its budget.
RUN = dict(
    tol=1e-12, max_steps=16_000, chunk_steps=400, renorm_every=4, t_transient=8.0
)


@pytest.fixture(scope="module")
def reference():
    """The uninterrupted run every resumed run must equal."""
    return run_until_converged(HENON, X0, 1.0, **RUN)


def assert_same_run(out, ref):
    assert out.n_steps == ref.n_steps and out.reason == ref.reason
    np.testing.assert_allclose(out.result.exponents, ref.result.exponents, atol=1e-12)
    np.testing.assert_array_equal(out.result.times, ref.result.times)
    np.testing.assert_allclose(out.result.history, ref.result.history, atol=1e-12)
    np.testing.assert_allclose(out.result.stderr, ref.result.stderr, rtol=1e-12)
    for got, want in zip(out.result.checkpoint, ref.result.checkpoint, strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


CHILD = """
import sys, time
import jax
import jax.numpy as jnp
from lyapax.converge import run_until_converged
from lyapax.systems import henon_map

def slow(info):  # a long run: each chunk takes a while
    print("chunk", info.chunk, flush=True)
    time.sleep(0.1)

run_until_converged(henon_map(), jnp.array([0.1, 0.1]), 1.0, checkpoint=sys.argv[1],
                    callback=slow, **{RUN})
print("finished", flush=True)
"""


#: Tests whose child's run must equal this process's: the chip admits one
#: process, so there the child computes on the CPU and this process on the TPU.
CHILD_ON_THE_CPU = pytest.mark.not_on_tpu(
    "the child process computes on the CPU (the chip admits one process) and "
    "must leave the same run as this process's"
)


def child(code: str, *args: str, **kwargs) -> subprocess.Popen:
    """``code`` in a Python process on the CPU, in this run's precision."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JAX_PLATFORMS": "cpu",
        "JAX_ENABLE_X64": "1" if float64_run() else "0",
    }
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, text=True, **kwargs
    )


def dead_pid() -> int:
    """The process id of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=60)
    return proc.pid


def never(info):
    raise AssertionError(f"a finished run ran again: {info}")


@pytest.mark.slow
@CHILD_ON_THE_CPU
def test_sigkill_mid_run_then_the_same_call_ends_like_an_uninterrupted_run(
    tmp_path, reference
):
    path = tmp_path / "run.npz"
    proc = child(CHILD.replace("{RUN}", repr(RUN)), str(path), stdout=subprocess.PIPE)
    # Kill it once it has written a few chunks, mid-run.
    for line in proc.stdout:
        if line.startswith("chunk 2"):
            break
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    saved = int(np.load(path)["n_steps"])
    assert 400 <= saved < RUN["max_steps"]  # the kill came mid-run
    seen = []
    out = run_until_converged(
        HENON, X0, 1.0, checkpoint=path, callback=seen.append, **RUN
    )
    assert seen[0].n_steps == saved + 400  # continued, not restarted
    assert_same_run(out, reference)
    # The finished run's file returns the same result without running again.
    again = run_until_converged(HENON, X0, 1.0, checkpoint=path, callback=never, **RUN)
    assert_same_run(again, reference)


def test_ctrl_c_keeps_the_last_chunk_and_the_same_call_continues(tmp_path, reference):
    path = tmp_path / "run.npz"

    def interrupt(info):
        if info.chunk == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_until_converged(HENON, X0, 1.0, checkpoint=path, callback=interrupt, **RUN)
    assert int(np.load(path)["n_steps"]) == 1200
    out = run_until_converged(HENON, X0, 1.0, checkpoint=path, **RUN)
    assert_same_run(out, reference)


def test_the_file_is_plain_numpy_with_a_header_and_bounded(tmp_path):
    path = tmp_path / "run.npz"
    run_until_converged(HENON, X0, 1.0, checkpoint=path, **{**RUN, "max_steps": 800})
    with np.load(path, allow_pickle=False) as f:
        assert str(f["format"]) == "lyapax-checkpoint"
        assert int(f["format_version"]) == ckpt_file.FORMAT_VERSION == 2
        assert str(f["lyapax_version"]) == lyapax.__version__
        assert int(f["n_steps"]) == 800 and int(f["n_chunks"]) == 2
        # 200 blocks, one per bin: edges after blocks 0..200.
        assert f["bin_edges"].shape == (201, 2) and int(f["bin_width"]) == 1
        assert f["last_history"].shape == (100, 2)
        assert int(f["history_segments"]) == 0
        assert f["checkpoint.Y"].shape == (2, 2)
    assert ckpt_file.previous(path).exists()  # the one it replaced
    assert (tmp_path / "run.npz.lock").exists()  # the owner's lock, kept


def test_the_file_size_does_not_grow_with_the_run(tmp_path):
    sizes = []
    for steps in (8_000, 16_000):  # 2000 and 4000 blocks: bins merged
        path = tmp_path / f"run{steps}.npz"
        run_until_converged(
            HENON, X0, 1.0, checkpoint=path, **{**RUN, "max_steps": steps}
        )
        with np.load(path) as f:
            assert f["bin_edges"].shape[0] - 1 <= lyapax.converge.BINS
        sizes.append(path.stat().st_size)
    assert sizes[0] == sizes[1]


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("saved") / "run.npz"
    run_until_converged(HENON, X0, 1.0, checkpoint=path, **{**RUN, "max_steps": 800})
    return path


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (dict(step=henon_map(a=1.3)), "other numbers"),
        (
            dict(
                step=lambda x: jnp.stack([1 - 1.4 * x[0] ** 2 + x[1], 0.3 * x[0]]) * 1.0
            ),
            "another problem",
        ),
        (dict(x0=jnp.array([0.2, 0.1])), "other numbers"),
        (dict(seed=1), r"other settings \(seed: 0 there, 1 here\)"),
        (dict(renorm_every=2), "other settings"),
    ],
)
def test_a_checkpoint_of_another_run_is_refused_and_kept(saved_run, change, match):
    before = saved_run.read_bytes()
    step, x0 = change.pop("step", HENON), change.pop("x0", X0)
    with pytest.raises(CheckpointError, match=match) as info:
        run_until_converged(step, x0, 1.0, checkpoint=saved_run, **{**RUN, **change})
    assert str(saved_run) in str(info.value)
    assert saved_run.read_bytes() == before


def test_truncated_foreign_version_and_pickled_files_are_refused(
    tmp_path, saved_run, monkeypatch
):
    data = saved_run.read_bytes()
    path = tmp_path / "run.npz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated") as info:
        run_until_converged(HENON, X0, 1.0, checkpoint=path, **RUN)
    assert str(path) in str(info.value)
    assert path.read_bytes() == data[: len(data) // 2]  # left as it was
    # An object array would need pickle to load: refused, never unpickled.
    arrays = dict(np.load(saved_run))
    arrays["bin_edges"] = np.array([object()], dtype=object)
    np.savez(path, **arrays)
    with pytest.raises(CheckpointError, match="cannot be read"):
        run_until_converged(HENON, X0, 1.0, checkpoint=path, **RUN)
    # Shapes that do not fit the problem.
    arrays = dict(np.load(saved_run))
    arrays["checkpoint.Y"] = np.zeros((3, 2))
    np.savez(path, **arrays)
    with pytest.raises(CheckpointError, match=r"checkpoint.Y has shape \(3, 2\)"):
        run_until_converged(HENON, X0, 1.0, checkpoint=path, **RUN)
    arrays = dict(np.load(saved_run))
    arrays["last_times"] = arrays["last_times"][:-1]
    np.savez(path, **arrays)
    with pytest.raises(CheckpointError, match="do not fit together"):
        run_until_converged(HENON, X0, 1.0, checkpoint=path, **RUN)
    monkeypatch.setattr(lyapax.converge, "__version__", "0.0.1")
    with pytest.raises(
        CheckpointError, match="written by lyapax 0.4.0, this is lyapax 0.0.1"
    ):
        run_until_converged(HENON, X0, 1.0, checkpoint=saved_run, **RUN)


def test_a_folder_that_cannot_take_files_fails_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        run_until_converged(HENON, X0, 1.0, checkpoint=tmp_path / "no" / "r.npz", **RUN)
    with pytest.raises(ValueError, match="is a directory"):
        run_until_converged(HENON, X0, 1.0, checkpoint=tmp_path, **RUN)
    if not Path("/proc").is_dir():
        pytest.skip("needs /proc, a folder where no file can be created")
    with pytest.raises(OSError, match="cannot write checkpoints in '/proc'"):
        run_until_converged(HENON, X0, 1.0, checkpoint="/proc/run.npz", **RUN)


def test_a_failed_write_keeps_the_last_good_checkpoint(
    tmp_path, monkeypatch, reference
):
    path = tmp_path / "run.npz"
    run_until_converged(HENON, X0, 1.0, checkpoint=path, **{**RUN, "max_steps": 800})
    good = path.read_bytes()
    real = np.savez

    def disk_full(f, **arrays):  # half a file, then the disk is full
        real(f, **{k: arrays[k] for k in list(arrays)[:3]})
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ckpt_file.np, "savez", disk_full)
    with pytest.raises(OSError, match="No space left on device") as info:
        run_until_converged(HENON, X0, 1.0, checkpoint=path, **RUN)
    assert "the previous file is unchanged" in str(info.value)
    assert "the run stopped after 1200 steps" in str(info.value)
    assert "still holds the run's first 800 steps" in str(info.value)
    assert info.value.errno == errno.ENOSPC
    assert path.read_bytes() == good
    names = ["run.npz", "run.npz.lock", "run.npz.prev"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    # The kept file is valid: the same call continues from it.
    monkeypatch.undo()
    out = run_until_converged(HENON, X0, 1.0, checkpoint=path, **RUN)
    assert_same_run(out, reference)


FSIZE_CHILD = """
import resource, signal, sys
import jax
import jax.numpy as jnp
from lyapax.converge import run_until_converged
from lyapax.systems import henon_map

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    run_until_converged(henon_map(), jnp.array([0.1, 0.1]), 1.0,
                        checkpoint=sys.argv[1], **{RUN})
except OSError as e:
    print("OSError", e.errno, e)
"""


@pytest.mark.slow
def test_a_file_size_limit_is_a_clear_error_and_leaves_no_file(tmp_path):
    path = tmp_path / "run.npz"
    proc = child(
        FSIZE_CHILD.replace("{RUN}", repr(RUN)), str(path), stdout=subprocess.PIPE
    )
    out, _ = proc.communicate(timeout=120)
    assert (
        f"OSError {errno.EFBIG}" in out
        and f"could not write the checkpoint '{path}'" in out
    )
    # Nothing half-written left behind: only the (empty-bodied) lock file.
    assert [p.name for p in tmp_path.iterdir()] == ["run.npz.lock"]


# -- sweeps: one file per chunk of rows --


def henon_rows(x, p):
    return henon_map(a=p["a"])(x)


SWEEP = dict(dt=1.0, n_steps=400, renorm_every=4, batch_size=3)
A = {"a": jnp.linspace(1.2, 1.4, 8)}


@pytest.fixture(scope="module")
def sweep_reference():
    return sweep_lyapunov_spectrum(henon_rows, X0, A, **SWEEP)


def test_a_sweep_resumes_from_its_chunk_files(tmp_path, sweep_reference):
    folder = tmp_path / "sweep"
    first = sweep_lyapunov_spectrum(henon_rows, X0, A, checkpoint=folder, **SWEEP)
    names = sorted(p.name for p in folder.iterdir())
    assert names == [".lock", "chunk-00000.npz", "chunk-00001.npz", "chunk-00002.npz"]
    # A kill after chunk 0: the later chunks are missing, one left half-written
    # by that dead process; a live process's temporary file and another
    # host's are never removed.
    (folder / "chunk-00001.npz").unlink()
    host, dead = ckpt_file.host_name(), dead_pid()
    (folder / "chunk-00002.npz").rename(folder / f".chunk-00002.npz.{dead}@{host}.tmp")
    kept = [f".chunk-00002.npz.{os.getppid()}@{host}.tmp"]
    kept += [f".chunk-00002.npz.{dead}@elsewhere.example.org.tmp"]
    for name in kept:
        (folder / name).write_bytes(b"")
    before = (folder / "chunk-00000.npz").stat().st_mtime_ns
    out = sweep_lyapunov_spectrum(henon_rows, X0, A, checkpoint=folder, **SWEEP)
    assert (folder / "chunk-00000.npz").stat().st_mtime_ns == before  # loaded
    # The dead process's .tmp is gone.
    assert sorted(p.name for p in folder.iterdir()) == sorted(names + kept)
    for res in (first, out):
        leaves = zip(
            jax.tree.leaves(res), jax.tree.leaves(sweep_reference), strict=True
        )
        for got, want in leaves:
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    other = {"a": jnp.linspace(1.2, 1.41, 8)}
    with pytest.raises(CheckpointError, match="chunk-00000.npz.*other numbers"):
        sweep_lyapunov_spectrum(henon_rows, X0, other, checkpoint=folder, **SWEEP)
    with pytest.raises(CheckpointError, match="other settings"):
        sweep_lyapunov_spectrum(
            henon_rows,
            X0,
            A,
            checkpoint=folder,
            **{**SWEEP, "batch_size": 4},
        )
    with pytest.raises(ValueError, match="is a file"):
        sweep_lyapunov_spectrum(
            henon_rows,
            X0,
            A,
            checkpoint=folder / "chunk-00000.npz",
            **SWEEP,
        )
