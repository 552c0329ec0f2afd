"""run_until_converged: chunks joined exactly, stopping rules, progress."""

import io
import math

import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import tol

import lyapax.converge
from lyapax._engine import stats
from lyapax.converge import ConvergenceProgress, run_until_converged
from lyapax.core import ODEProblem, lyapunov_spectrum
from lyapax.systems import henon_map

HENON = henon_map()
X0 = jnp.array([0.1, 0.1])
KW = dict(chunk_steps=400, renorm_every=4, t_transient=20.0)


def test_stops_when_every_stderr_is_below_tol_and_equals_one_long_run():
    out = run_until_converged(
        HENON, X0, 1.0, tol=0.01, max_steps=40_000, history="all", **KW
    )
    assert out.converged and out.reason == "tol"
    assert out.n_steps % 400 == 0 and out.n_chunks == out.n_steps // 400 > 1
    assert np.all(np.asarray(out.result.stderr) < 0.01)
    one = lyapunov_spectrum(
        HENON, X0, 1.0, out.n_steps, renorm_every=4, t_transient=20.0
    )
    np.testing.assert_allclose(out.result.exponents, one.exponents, atol=tol(1e-8))
    np.testing.assert_allclose(out.result.history, one.history, atol=tol(1e-8))
    np.testing.assert_allclose(out.result.times, one.times, rtol=tol(1e-12))
    # Fewer blocks than bins (400 < BINS): the pooled error bar is the
    # square-root rule's, the one of the equivalent single run.
    assert out.n_steps // 4 <= lyapax.converge.BINS
    np.testing.assert_allclose(out.result.stderr, one.stderr, rtol=tol(1e-6))
    np.testing.assert_allclose(out.result.exponents, [0.419, -1.623], atol=0.02)


def binned_reference(history, times, bins, block_time):
    """The batch-means error bar with batches of whole bins, from the whole
    history: bins of the smallest power-of-two width w with n // w <= bins,
    batches of max(1, m // w) bins (m = n // isqrt(n), the square-root rule),
    at most isqrt(n) of them."""
    cum = history * times[:, None]
    n = cum.shape[0]
    w = 1
    while n // w > bins:
        w *= 2
    b = max(2, math.isqrt(n))
    per = max(1, (n // b) // w)
    count = min(b, (n // w) // per)
    cum = np.concatenate([np.zeros((1, cum.shape[1])), cum])
    at = cum[: count * per * w + 1 : per * w]
    tau = per * w * block_time
    rates = np.diff(at, axis=0) / tau
    return np.sqrt(np.var(rates, axis=0, ddof=1) * tau / times[-1])


def test_a_long_run_merges_its_bins_and_keeps_the_batch_means_error_bar(
    monkeypatch,
):
    # 16 bins, 1000 blocks: the bins merge pairwise four times (width 64).
    monkeypatch.setattr(lyapax.converge, "BINS", 16)
    kw = {**KW, "chunk_steps": 440}
    out = run_until_converged(
        HENON, X0, 1.0, tol=1e-9, max_steps=4000, history="all", **kw
    )
    assert out.n_steps == 4000 and out.n_chunks == 10
    one = lyapunov_spectrum(HENON, X0, 1.0, 4000, renorm_every=4, t_transient=20.0)
    np.testing.assert_allclose(out.result.history, one.history, atol=tol(1e-8))
    want = binned_reference(np.asarray(one.history), np.asarray(one.times), 16, 4.0)
    np.testing.assert_allclose(out.result.stderr, want, rtol=tol(1e-6))
    # Same size as the square-root rule's error bar, not equal to it.
    ratio = np.asarray(out.result.stderr) / np.asarray(one.stderr)
    assert np.all((ratio > 0.3) & (ratio < 3)) and not np.allclose(ratio, 1)
    # With width 1 the binned estimator is the square-root rule itself.
    growth = stats.block_growths(
        np.asarray(one.history), np.asarray(one.times), np.zeros(2)
    )
    cum = np.concatenate([np.zeros((1, 2)), np.cumsum(growth, axis=0)])
    np.testing.assert_allclose(
        stats.binned_stderr(cum, 1, 1000, 4.0, 4000.0),
        stats.batch_means_stderr(growth, 4.0, 4000.0),
        rtol=tol(1e-9),
    )


def test_budget_runs_out_with_a_shortened_last_chunk_and_a_progress_bar(
    monkeypatch,
):
    from lyapax._engine import progress

    monkeypatch.setattr(progress, "DELAY_S", 0.0)  # a short run draws its bar
    bar = io.StringIO()
    problem = ODEProblem(HENON, X0, 1.0)
    out = run_until_converged(problem, tol=1e-9, max_steps=1000, progress=bar, **KW)
    assert not out.converged and out.reason == "max_steps"
    assert out.n_steps == 1000 and out.n_chunks == 3  # 400 + 400 + 200
    # history="last" (the default): the last chunk's 50 rows, at its times.
    assert out.result.history.shape == (50, 2)
    np.testing.assert_allclose(out.result.times, 4.0 * np.arange(201, 251))
    text = bar.getvalue()
    # tqdm's bar: steps done of the budget, the worst stderr / tol, a newline.
    last = text.rstrip("\n").split("\r")[-1]
    assert "1000/1000" in last and "100%" in last and text.endswith("\n")
    assert "max stderr/tol" in last


def test_callback_sees_progress_and_can_stop_the_run():
    seen = []

    def callback(info):
        seen.append(info)
        return len(seen) == 2

    out = run_until_converged(
        HENON, X0, 1.0, tol=1e-9, max_steps=4000, callback=callback, **KW
    )
    assert out.reason == "callback" and out.n_chunks == 2 and not out.converged
    assert all(isinstance(info, ConvergenceProgress) for info in seen)
    assert [info.n_steps for info in seen] == [400, 800]
    assert seen[-1].stderr.shape == (2,) and seen[-1].tol.shape == (2,)
    np.testing.assert_array_equal(seen[-1].exponents, out.result.exponents)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(tol=0.0), ValueError, "tol must be a positive number"),
        (dict(tol=np.ones((2, 2))), ValueError, "tol must be a positive number"),
        (dict(chunk_steps=402), ValueError, "chunk_steps=402 must be a multiple"),
        (dict(max_steps=2), ValueError, "max_steps=2 must be at least renorm_every"),
        (dict(chunk_steps=0), ValueError, "chunk_steps must be >= 1"),
        (dict(min_blocks=1), ValueError, "min_blocks must be >= 2"),
    ],
)
def test_bad_arguments_are_clear_errors(kwargs, error, match):
    args = dict(tol=0.01, max_steps=4000, chunk_steps=400, renorm_every=4)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        run_until_converged(HENON, X0, 1.0, **args)


def test_problem_form_refuses_a_state0():
    with pytest.raises(TypeError, match="takes no state0"):
        run_until_converged(
            ODEProblem(HENON, X0, 1.0), X0, tol=0.01, max_steps=400, chunk_steps=400
        )
