"""progress=: a tqdm bar for long runs, silent by default, the same numbers."""

import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.precision import assert_same_numbers
from support.warned import assert_warned_here

from lyapax import lyapunov_spectrum
from lyapax._engine import progress, run
from lyapax.sweep import sweep_lyapunov_spectrum
from lyapax.systems import henon_map

HENON = henon_map()
X0 = jnp.array([0.1, 0.1])
KW = dict(renorm_every=4, t_transient=40.0, save_states=True, decimate=2)


def last_line(text: str) -> str:
    return text.rstrip("\n").split("\r")[-1]


@pytest.fixture(autouse=True)
def _bars_without_delay(monkeypatch):
    monkeypatch.setattr(progress, "DELAY_S", 0.0)  # short test runs draw their bars


def test_a_run_in_pieces_with_a_bar_gives_the_numbers_of_one_call(monkeypatch):
    plain = lyapunov_spectrum(HENON, X0, 1.0, 4000, **KW)
    # Pieces of a few blocks each: the transient ends inside the first one.
    monkeypatch.setattr(run, "PIECE_SECONDS", 1e-6)
    bar = io.StringIO()
    shown = lyapunov_spectrum(HENON, X0, 1.0, 4000, progress=bar, **KW)
    for field in ("exponents", "history", "times", "trajectory", "stderr"):
        got, want = getattr(shown, field), getattr(plain, field)
        assert_same_numbers(got, want, err_msg=field)
    for got, want in zip(shown.checkpoint, plain.checkpoint, strict=True):
        assert_same_numbers(got, want)
    line = last_line(bar.getvalue())
    assert "lyapunov_spectrum: 100%" in line and "4040/4040" in line  # + transient


def test_work_shorter_than_the_delay_draws_no_bar(monkeypatch):
    monkeypatch.setattr(progress, "DELAY_S", 3600.0)
    bar = io.StringIO()
    shown = lyapunov_spectrum(HENON, X0, 1.0, 400, renorm_every=4, progress=bar)
    plain = lyapunov_spectrum(HENON, X0, 1.0, 400, renorm_every=4)
    np.testing.assert_array_equal(shown.exponents, plain.exponents)
    assert bar.getvalue() == ""
    # Past the delay the first move draws it, counting from where the work is.
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    with progress.Bar(bar, 10, "work", "step", initial=4) as b:
        b.postfix("note")
        b.to(7)
    line = last_line(bar.getvalue())
    assert "work:" in line and "7/10" in line and "note" in line


def test_silent_by_default_and_a_clear_error_for_a_bad_progress(capsys):
    lyapunov_spectrum(HENON, X0, 1.0, 400, renorm_every=4)
    assert capsys.readouterr().err == ""
    with pytest.raises(TypeError, match="progress must be True, False or a text file"):
        lyapunov_spectrum(HENON, X0, 1.0, 400, renorm_every=4, progress="yes")


def test_under_a_trace_the_bar_is_off_with_a_warning():
    bar = io.StringIO()

    @jax.jit
    def leading(x0):
        return lyapunov_spectrum(HENON, x0, 1.0, 40, progress=bar).exponents[0]

    with pytest.warns(UserWarning, match="no effect under jax.jit") as record:
        value = leading(X0)
    assert_warned_here(record, "no effect under jax.jit")
    assert np.isfinite(value) and bar.getvalue() == ""


def test_a_sweep_moves_its_bar_by_chunks_of_rows():
    bar = io.StringIO()
    seeds = jnp.arange(5)
    kw = dict(n_steps=200, renorm_every=4, batch_size=2)
    shown = sweep_lyapunov_spectrum(
        HENON, X0, None, 1.0, seed=seeds, progress=bar, **kw
    )
    plain = sweep_lyapunov_spectrum(HENON, X0, None, 1.0, seed=seeds, **kw)
    np.testing.assert_array_equal(shown.exponents, plain.exponents)
    assert "5/5" in last_line(bar.getvalue())


def test_covariant_vectors_and_the_msf_show_bars_and_keep_their_numbers():
    from lyapax import covariant_vectors
    from lyapax.network import master_stability_function

    kw = dict(n_steps=400, renorm_every=4, t_transient=20.0)
    bar = io.StringIO()
    shown = covariant_vectors(HENON, X0, 1.0, progress=bar, **kw)
    plain = covariant_vectors(HENON, X0, 1.0, **kw)
    np.testing.assert_array_equal(shown.vectors, plain.vectors)
    assert "420/420" in last_line(bar.getvalue())  # window + transient steps

    def henon_node(x):
        return jnp.stack([1 - 1.4 * x[0] ** 2 + x[1], 0.3 * x[0]])

    bar = io.StringIO()
    alphas = np.linspace(0.0, 1.0, 5)
    msf = dict(integrator="map", batch_size=2, renorm_every=4)
    args = (henon_node, np.eye(2), alphas, X0, 1.0, 200)
    shown = master_stability_function(*args, progress=bar, **msf)
    np.testing.assert_array_equal(
        shown.exponent, master_stability_function(*args, **msf).exponent
    )
    assert "5/5" in last_line(bar.getvalue())
