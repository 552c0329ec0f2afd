"""The work of a host-side driver (a callable ``jax.jit`` cannot trace):
the programs its first call compiled, summed."""

import jax
import jax.numpy as jnp

from pytest_lyapax.measuring import roofline


def _driver(x):
    # Host-side control flow on a value: jax.jit cannot trace it.
    y = jax.jit(lambda v: jnp.sin(v) @ v)(x)
    if float(y[0, 0]) > -1e9:
        y = jax.jit(lambda v: v * 2.0 + 1.0)(y)
    return y


def test_a_driver_is_costed_from_the_programs_its_first_call_compiled():
    x = jnp.ones((24, 24)) * 0.5
    programs = []
    with roofline.programs_compiled(programs):
        jax.block_until_ready(_driver(x))
    assert len(programs) >= 2
    entry = roofline.cost_of_call(_driver, None, (x,), {}, programs)
    assert entry["source"] == roofline.SOURCE, entry
    assert entry["flops"] >= 2 * 24**3  # the matmul at least
    assert entry["programs"] == len(programs)
    assert "ConcretizationTypeError" in entry["programs_note"]


def test_without_collected_programs_the_reason_is_kept():
    entry = roofline.cost_of_call(_driver, None, (jnp.ones((4, 4)),), {})
    assert entry["source"] == roofline.NOT_AVAILABLE
    assert "ConcretizationTypeError" in entry["reason"]


def test_the_compiler_is_restored_after_the_block():
    from jax._src import compiler

    before = compiler.compile_or_get_cached
    with roofline.programs_compiled([]):
        assert compiler.compile_or_get_cached is not before
    assert compiler.compile_or_get_cached is before
