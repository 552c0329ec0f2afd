"""``--jax-backend=auto`` (run/options.py) and the hint of an unavailable GPU
label on a machine with a TPU (backends/probe.py)."""

from types import SimpleNamespace

import pytest

from pytest_lyapax.backends import probe
from pytest_lyapax.backends.labels import OK, UNAVAILABLE, Backend
from pytest_lyapax.run import options


def _found(**statuses):
    def discover():
        return {
            b.label: probe.ProbeResult(statuses.get(b.label, UNAVAILABLE), "no")
            for b in probe.AUTO_CANDIDATES
        }

    return discover


def test_auto_is_the_cpu_then_every_platform_found(monkeypatch):
    monkeypatch.setattr(probe, "discover", _found(tpu=OK))
    config = SimpleNamespace(stash=pytest.Stash())
    backends = options.auto_backends(config)
    assert [b.label for b in backends] == ["cpu", "tpu"]
    assert config.stash[options.NOTES_KEY] == [
        "--jax-backend=auto: cpu,tpu (not on this machine: gpu, rocm)"
    ]
    # The probe found is not run again when the run starts.
    assert list(config.stash[options.PROBED_KEY]) == [("tpu", ())]


def test_auto_on_this_machine_runs_what_it_has(pytester):
    pytester.makepyfile("def test_a(jax_backend):\n    assert jax_backend\n")
    result = pytester.runpytest_subprocess(
        "--jax-backend=auto", f"--jax-report-dir={pytester.path / 'r'}"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pytest-lyapax: --jax-backend=auto: cpu*"])
    result.stdout.no_fnmatch_line("*test_a?gpu*")


def test_a_gpu_label_on_a_tpu_machine_says_how_to_ask_for_the_tpu(monkeypatch):
    probed = []

    def fake_probe(backends, timeout=0.0):
        probed.append([b.label for b in backends])
        return {"tpu": probe.ProbeResult(OK, "", {"device": "TPU v5 lite"})}

    monkeypatch.setattr(probe, "probe_backends", fake_probe)
    monkeypatch.setattr(probe, "tpu_signs", lambda: ["libtpu installed"])
    backends = [Backend("cpu", "cpu"), Backend("gpu", "cuda")]
    results = {
        "cpu": probe.ProbeResult(OK),
        "gpu": probe.ProbeResult(UNAVAILABLE, "no CUDA"),
    }
    hints = probe.tpu_hints(backends, results)
    assert hints == {
        "gpu": "this machine has a TPU (TPU v5 lite) and no GPU: ask for it with "
        "--jax-backend=cpu,tpu"
    }
    assert probed == [["tpu"]]
    # Nothing to say where a TPU was asked for, or without a sign of one.
    assert probe.tpu_hints([*backends, Backend("tpu", "tpu")], results) == {}
    monkeypatch.setattr(probe, "tpu_signs", lambda: [])
    assert probe.tpu_hints(backends, results) == {}
    assert probed == [["tpu"]]


def test_auto_requests_a_platform_whose_chip_another_process_holds(monkeypatch):
    """A TPU whose probe met libtpu's lock (a previous run's worker still
    ending, found on the lent TPU) is on this machine: requested, and not
    taken from the first probe, so the run probes it again."""
    lock = "Internal error when accessing libtpu multi-process lockfile"

    def discover():
        return {
            b.label: probe.ProbeResult(
                UNAVAILABLE, lock if b.label == "tpu" else "no such platform"
            )
            for b in probe.AUTO_CANDIDATES
        }

    monkeypatch.setattr(probe, "discover", discover)
    config = SimpleNamespace(stash=pytest.Stash())
    backends = options.auto_backends(config)
    assert [b.label for b in backends] == ["cpu", "tpu"]
    assert config.stash[options.NOTES_KEY] == [
        "--jax-backend=auto: cpu,tpu (tpu: held by another process, probed "
        "again) (not on this machine: gpu, rocm)"
    ]
    assert config.stash[options.PROBED_KEY] == {}
