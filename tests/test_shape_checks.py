"""The suite really checks the shape annotations of the public entry points
(``tests/support/shape_check.py``), and the check catches what it should."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from jaxtyping import Array, Float, TypeCheckError
from support.shape_check import ENTRY_POINTS, shape_checked

import lyapax
import lyapax.dde
import lyapax.sweep


def test_the_entry_points_are_checked():
    for fn in (
        lyapax.lyapunov_spectrum,
        lyapax.core.lyapunov_spectrum,
        lyapax.lyapunov_spectrum_dde,
        lyapax.dde.lyapunov_spectrum_dde,
        lyapax.sweep.sweep_lyapunov_spectrum,
        lyapax.run_until_converged,
    ):
        assert getattr(fn, "__wrapped_by_shape_check__", False), fn
    assert len(ENTRY_POINTS) >= 10


def _matmul(A: Float[Array, "m n"], x: Float[Array, " n"]) -> Float[Array, " m"]:
    return A[:, : x.shape[0]] @ x  # accepts a mismatch the annotation forbids


def _strict(A: Float[Array, "m n"], x: Float[Array, " n"]) -> Float[Array, " m"]:
    if A.shape[1] != x.shape[0]:
        raise ValueError("x must have A's column count")
    return A @ x


def test_a_shape_mismatch_the_function_accepts_fails_the_check():
    checked = shape_checked(_matmul)
    assert checked(jnp.ones((2, 3)), jnp.ones(3)).shape == (2,)
    with pytest.raises(TypeCheckError):
        checked(jnp.ones((2, 3)), jnp.ones(2))


def test_a_call_the_function_rejects_shows_its_own_error():
    with pytest.raises(ValueError, match="column count"):
        shape_checked(_strict)(jnp.ones((2, 3)), jnp.ones(2))
