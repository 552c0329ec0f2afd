"""Checkpoints at scale: one owner per checkpoint (lock, temporary files),
the full history on disk, older formats migrated, kills during saves."""

import errno
import os
import random
import signal
import socket
import subprocess
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_checkpoint import (
    CHILD_ON_THE_CPU,
    HENON,
    RUN,
    X0,
    assert_same_run,
    child,
    dead_pid,
    never,
)

import lyapax
from lyapax import CheckpointError
from lyapax._internal import checkpoint as ckpt_file
from lyapax._internal import lock
from lyapax.converge import CheckpointLocked, run_until_converged
from lyapax.core import lyapunov_spectrum

ALL = {**RUN, "history": "all"}


@pytest.fixture(scope="module")
def reference():
    return run_until_converged(HENON, X0, 1.0, **RUN)


@pytest.fixture(scope="module")
def reference_all():
    return run_until_converged(HENON, X0, 1.0, **ALL)


OWNER = """
import sys, time
import jax
import jax.numpy as jnp
from lyapax.converge import run_until_converged
from lyapax.systems import henon_map

def slow(info):
    print("chunk", info.chunk, flush=True)
    time.sleep(0.05)

run_until_converged(henon_map(), jnp.array([0.1, 0.1]), 1.0, checkpoint=sys.argv[1],
                    callback=slow, **{RUN})
print("finished", flush=True)
"""


@CHILD_ON_THE_CPU
def test_a_second_process_is_refused_at_start_and_the_first_completes(
    tmp_path, reference
):
    path = tmp_path / "run.npz"
    first = child(OWNER.replace("{RUN}", repr(RUN)), str(path), stdout=subprocess.PIPE)
    try:
        for line in first.stdout:
            if line.startswith("chunk 1"):
                break
        seen = []
        with pytest.raises(CheckpointLocked) as info:
            run_until_converged(
                HENON, X0, 1.0, checkpoint=path, callback=seen.append, **RUN
            )
        message = str(info.value)
        assert f"checkpoint {str(path)!r} is in use by process {first.pid}" in message
        assert f"on host {ckpt_file.host_name()!r}, since 20" in message
        assert seen == []  # refused before any work
        # Asked to wait, the next call runs once the first has finished: it
        # finds the finished run and returns it without running again.
        out = run_until_converged(
            HENON, X0, 1.0, checkpoint=path, callback=never, lock_wait=120.0, **RUN
        )
        rest = first.stdout.read()
        assert first.wait(timeout=120) == 0 and "finished" in rest
    finally:
        first.kill()
        first.wait(timeout=60)
    assert_same_run(out, reference)


def test_a_lock_is_refused_then_free_within_one_process(tmp_path):
    target = tmp_path / "run.npz"
    with lock.hold(tmp_path / "run.npz.lock", target):
        with pytest.raises(CheckpointLocked, match=f"process {os.getpid()}"):
            with lock.hold(tmp_path / "run.npz.lock", target, wait=0.2):
                pass
    with lock.hold(tmp_path / "run.npz.lock", target):  # released
        pass


def test_where_locks_are_unsupported_the_error_names_the_fallback(
    tmp_path, monkeypatch
):
    import fcntl

    def no_locks(fd, op):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(OSError, match="LYAPAX_CHECKPOINT_LOCK=none") as info:
        run_until_converged(HENON, X0, 1.0, checkpoint=tmp_path / "r.npz", **RUN)
    assert f"cannot lock the checkpoint {str(tmp_path / 'r.npz')!r}" in str(info.value)
    monkeypatch.setenv("LYAPAX_CHECKPOINT_LOCK", "none")
    out = run_until_converged(
        HENON, X0, 1.0, checkpoint=tmp_path / "r.npz", **{**RUN, "max_steps": 800}
    )
    assert out.n_steps == 800


def test_only_dead_writers_temporary_files_on_this_host_are_removed(tmp_path):
    path = tmp_path / "run.npz"
    host, dead, live = ckpt_file.host_name(), dead_pid(), os.getppid()
    gone = [f".run.npz.{dead}@{host}.tmp", f".run.npz.{dead}@{host}.prev.tmp"]
    kept = [
        f".run.npz.{live}@{host}.tmp",  # a live writer's: never touched
        f".run.npz.{dead}@not-{host}.tmp",  # another host's: its pid says nothing
        ".run.npz.123.tmp",  # no host: not ours to judge
        ".other.npz.{dead}@{host}.tmp",  # another checkpoint's
    ]
    for name in gone + kept:
        (tmp_path / name).write_bytes(b"x")
    ckpt_file.remove_stale(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)
    assert socket.gethostname()  # the host part comes from here


def test_history_all_keeps_every_row_on_disk_and_resumes(tmp_path, reference_all):
    path = tmp_path / "run.npz"

    def interrupt(info):
        if info.chunk == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_until_converged(HENON, X0, 1.0, checkpoint=path, callback=interrupt, **ALL)
    segments = path.with_name("run.npz.history")
    assert sorted(p.name for p in segments.iterdir()) == [
        f"segment-{i:06d}.npz" for i in range(3)
    ]
    # A kill between a segment and the checkpoint naming it: a segment the
    # checkpoint does not name is written again.
    (segments / "segment-000003.npz").write_bytes(b"half a file")
    out = run_until_converged(HENON, X0, 1.0, checkpoint=path, **ALL)
    assert_same_run(out, reference_all)
    assert out.result.history.shape == (4000, 2)
    assert len(list(segments.iterdir())) == 40
    # The default keeps the last chunk's rows: the same numbers.
    last = run_until_converged(HENON, X0, 1.0, checkpoint=tmp_path / "l.npz", **RUN)
    want = reference_all.result.history[-100:]
    np.testing.assert_array_equal(last.result.history, want)
    with pytest.raises(CheckpointError, match=r"history: 'all' there, 'last' here"):
        run_until_converged(HENON, X0, 1.0, checkpoint=path, **RUN)
    (segments / "segment-000007.npz").unlink()
    with pytest.raises(CheckpointError, match="segment-000007.npz.*missing"):
        run_until_converged(HENON, X0, 1.0, checkpoint=path, **ALL)


def write_v1(path, chunks):
    """A format-1 checkpoint (lyapax before the bounded format: the whole
    history, raw column order) after ``chunks`` chunks of ``RUN``."""
    res, raws, times, cums, blocks = None, [], [], [], []
    for i in range(chunks):
        res = lyapunov_spectrum(
            HENON,
            X0,
            1.0,
            RUN["chunk_steps"],
            renorm_every=RUN["renorm_every"],
            t_transient=RUN["t_transient"] if i == 0 else 0.0,
            resume=None if res is None else res.checkpoint,
        )
        cum = np.asarray(res.checkpoint.cum_log_growth)
        inverse = np.argsort(np.argsort(-cum, kind="stable"), kind="stable")
        raws.append(np.asarray(res.history)[:, inverse])
        times.append(np.asarray(res.times))
        cums.append(cum)
        blocks.append(raws[-1].shape[0])
    arrays = {
        "n_steps": np.int64(chunks * RUN["chunk_steps"]),
        "history": np.concatenate(raws),
        "times": np.concatenate(times),
        "chunk_blocks": np.array(blocks, np.int64),
        "chunk_cum": np.stack(cums),
        "exponents": np.asarray(res.exponents),
        "stderr": np.asarray(res.stderr),
    }
    for name, value in res.checkpoint._asdict().items():
        if value is not None:
            arrays[f"checkpoint.{name}"] = np.asarray(value)
    return arrays


def test_a_format_1_checkpoint_is_migrated_and_a_newer_one_refused(
    tmp_path, monkeypatch, reference
):
    path = tmp_path / "run.npz"
    # The header of format 1, as lyapax wrote it then.
    monkeypatch.setattr(ckpt_file, "FORMAT_VERSION", 1)
    probe = tmp_path / "probe.npz"
    run_until_converged(HENON, X0, 1.0, checkpoint=probe, **{**RUN, "max_steps": 400})
    with np.load(probe) as f:
        header = {key: f[key] for key in ckpt_file._HEADER}
    monkeypatch.undo()
    assert int(header["format_version"]) == 1
    np.savez(path, **header, **write_v1(path, 3))
    out = run_until_converged(HENON, X0, 1.0, checkpoint=path, **RUN)
    assert_same_run(out, reference)  # continued bit-equal
    with np.load(path) as f:
        assert int(f["format_version"]) == 2  # rewritten in the bounded format
    arrays = dict(np.load(path))
    arrays["format_version"] = np.asarray(3)
    np.savez(path, **arrays)
    with pytest.raises(
        CheckpointError, match="format version 3; this lyapax reads"
    ) as info:
        run_until_converged(HENON, X0, 1.0, checkpoint=path, **RUN)
    assert "Continue it with the lyapax that wrote it, or delete the file" in str(
        info.value
    )


def test_a_multi_process_job_names_one_file_per_process(tmp_path, monkeypatch):
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(jax, "process_index", lambda: 1)
    with pytest.raises(ValueError, match=r"put '\{process\}' in the path"):
        run_until_converged(HENON, X0, 1.0, checkpoint=tmp_path / "run.npz", **RUN)
    short = {**RUN, "max_steps": 400}
    run_until_converged(
        HENON, X0, 1.0, checkpoint=tmp_path / "run-{process}.npz", **short
    )
    assert (tmp_path / "run-1.npz").exists()


def test_bad_history_and_lock_wait_are_clear_errors():
    with pytest.raises(ValueError, match=r"history must be one of \('last', 'all'\)"):
        run_until_converged(HENON, X0, 1.0, history="some", **RUN)
    with pytest.raises(ValueError, match="lock_wait must be >= 0"):
        run_until_converged(HENON, X0, 1.0, lock_wait=-1, **RUN)


KILLED = """
import os, random, sys, time
import jax
import jax.numpy as jnp
from lyapax._internal import checkpoint
from lyapax.converge import run_until_converged
from lyapax.systems import henon_map

real = os.replace
def slow_replace(src, dst):  # a save in progress, for the parent to kill
    print("saving", flush=True)
    time.sleep(random.uniform(0.0, 0.02))
    real(src, dst)
checkpoint.os.replace = slow_replace
run_until_converged(henon_map(), jnp.array([0.1, 0.1]), 1.0, checkpoint=sys.argv[1],
                    **{RUN})
print("finished", flush=True)
"""


@pytest.mark.slow
@CHILD_ON_THE_CPU
def test_twenty_sigkills_during_saves_then_the_run_equals_an_uninterrupted_one(
    tmp_path,
):
    run = {**ALL, "chunk_steps": 200}
    ref = run_until_converged(HENON, X0, 1.0, **run)
    path, rng = tmp_path / "run.npz", random.Random(55)
    code = KILLED.replace("{RUN}", repr(run))
    done = []
    for _ in range(20):
        proc = child(code, str(path), stdout=subprocess.PIPE)
        try:
            saves = rng.randint(1, 4)  # save segment + checkpoint: 2 per chunk
            for line in proc.stdout:
                assert line.startswith("saving"), line
                saves -= 1
                if saves == 0:
                    break
            time.sleep(rng.uniform(0.0, 0.02))
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(timeout=60) == -signal.SIGKILL
        finally:
            proc.kill()
            proc.wait(timeout=60)
        if path.exists():  # every kill leaves a valid checkpoint (or none yet)
            done.append(int(np.load(path)["n_steps"]))
    # A kill before the first chunk was saved leaves no file; every later one
    # leaves a valid file (the next child resumed from it: killed, not failed).
    assert len(done) >= 15 and done == sorted(done) and done[-1] < run["max_steps"]
    out = run_until_converged(HENON, X0, 1.0, checkpoint=path, **run)
    assert_same_run(out, ref)
    assert lyapax.__version__  # the files were of this version throughout


def test_a_sweep_folder_has_one_owner(tmp_path):
    from test_checkpoint import SWEEP, A, henon_rows

    from lyapax.sweep import sweep_lyapunov_spectrum

    folder = tmp_path / "sweep"
    folder.mkdir()
    with lock.hold(folder / ".lock", folder):  # another sweep is running
        with pytest.raises(CheckpointLocked, match=f"{str(folder)!r} is in use"):
            sweep_lyapunov_spectrum(henon_rows, X0, A, checkpoint=folder, **SWEEP)
    assert sorted(p.name for p in folder.iterdir()) == [".lock"]  # no work done


def test_a_delay_run_resumes_from_its_checkpoint_under_the_same_rules(tmp_path):
    from lyapax.dde import dde_problem, lyapunov_spectrum_dde
    from lyapax.systems import mackey_glass

    problem = dde_problem(mackey_glass(), jnp.array([1.1]), tau=17.0, dt=0.5)
    run = dict(
        tol=1e-12, max_steps=600, chunk_steps=200, renorm_every=4, k=2,
        spectrum_fn=lyapunov_spectrum_dde,
    )  # fmt: skip
    ref = run_until_converged(problem, **run)
    path = tmp_path / "mg.npz"

    def interrupt(info):
        if info.chunk == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_until_converged(problem, checkpoint=path, callback=interrupt, **run)
    with lock.hold(tmp_path / "mg.npz.lock", path):
        with pytest.raises(CheckpointLocked):
            run_until_converged(problem, checkpoint=path, **run)
    assert_same_run(run_until_converged(problem, checkpoint=path, **run), ref)


def test_a_full_disk_during_a_history_segment_keeps_the_checkpoint_valid(
    tmp_path, monkeypatch, reference_all
):
    path = tmp_path / "run.npz"
    run_until_converged(HENON, X0, 1.0, checkpoint=path, **{**ALL, "max_steps": 800})
    good = path.read_bytes()
    real = ckpt_file.np.savez

    def disk_full(f, **arrays):
        if "index" in arrays:  # a segment: half written, then the disk is full
            real(f, **{k: arrays[k] for k in list(arrays)[:3]})
            raise OSError(errno.ENOSPC, "No space left on device")
        real(f, **arrays)

    monkeypatch.setattr(ckpt_file.np, "savez", disk_full)
    with pytest.raises(OSError, match="No space left on device") as info:
        run_until_converged(HENON, X0, 1.0, checkpoint=path, **ALL)
    assert info.value.errno == errno.ENOSPC
    assert f"{str(path)!r} still holds the run's first 800 steps" in str(info.value)
    assert path.read_bytes() == good
    segments = sorted(p.name for p in (tmp_path / "run.npz.history").iterdir())
    assert segments == ["segment-000000.npz", "segment-000001.npz"]
    monkeypatch.undo()
    assert_same_run(
        run_until_converged(HENON, X0, 1.0, checkpoint=path, **ALL), reference_all
    )
