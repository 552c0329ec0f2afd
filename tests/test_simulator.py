"""ModelSpec strings: the whitelist grammar, defaults, reserved names; Connectivity."""

import ast
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import lyapax
from lyapax.simulator import (
    Connectivity,
    ModelSpec,
    Parameter,
    StateVar,
    build_jax_dfun,
)


def fhn(**overrides):
    """FitzHugh-Nagumo node, two variables, coupled through v."""
    kwargs = dict(
        name="fhn",
        state_variables=(StateVar("v", 0.1), StateVar("w", -0.2)),
        parameters=(Parameter("a", 0.7), Parameter("b", 0.8), Parameter("eps", None)),
        cvar=("v",),
        dfun_str={"v": "v - v**3 / 3 - w + c", "w": "eps * (v + a - b * w)"},
    )
    kwargs.update(overrides)
    return ModelSpec(**kwargs)


def test_compiled_dfun_matches_hand_written():
    dfun = build_jax_dfun(fhn())
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(2, 5)))
    c = jnp.asarray(rng.normal(size=(1, 5)))
    eps = jnp.linspace(0.05, 0.1, 5)  # per-node parameter
    got = dfun(x, c, {"eps": eps, "G": 3.0})  # G belongs to the coupling: ignored
    v, w = x
    want = jnp.stack([v - v**3 / 3 - w + c[0], eps * (v + 0.7 - 0.8 * w)])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-14)


def test_defaults_filled_and_overridden():
    spec = fhn()
    assert spec.default_params == {"a": 0.7, "b": 0.8}
    assert spec.cvar_indices == (0,)
    dfun = build_jax_dfun(spec)
    x = jnp.ones((2, 3))
    c = jnp.zeros((1, 3))
    base = dfun(x, c, {"eps": 1.0})
    np.testing.assert_allclose(base[1], (1.0 + 0.7 - 0.8) * np.ones(3))
    np.testing.assert_allclose(dfun(x, c, {"eps": 1.0, "b": 0.0})[1], 1.7)


def test_missing_param_without_default_is_a_clear_error():
    dfun = build_jax_dfun(fhn())
    with pytest.raises(
        ValueError, match=r"'eps'.*no default.*fhn|fhn.*'eps'.*no default"
    ):
        dfun(jnp.ones((2, 3)), jnp.zeros((1, 3)), {"a": 1.0})


def test_functions_constants_where_and_comparisons():
    spec = ModelSpec(
        "all_functions",
        (StateVar("x"), StateVar("y")),
        (Parameter("k", 2.0),),
        ("x", "y"),
        {
            "x": "sin(x) + cos(y) + tan(x / 4) + exp(-x) + log(1 + x**2)"
            " + sqrt(abs(y))",
            "y": "where(0 < x < 1, tanh(c_y) * k, -c_x) + pi + 1e-3 * x ** 2.5 + +y",
        },
    )
    dfun = build_jax_dfun(spec)
    x, y = jnp.array([0.5, 1.5, 0.2]), jnp.array([-1.0, 2.0, 0.3])
    c = jnp.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    out = dfun(jnp.stack([x, y]), c, {})
    want_x = (
        jnp.sin(x)
        + jnp.cos(y)
        + jnp.tan(x / 4)
        + jnp.exp(-x)
        + jnp.log(1 + x**2)
        + jnp.sqrt(jnp.abs(y))
    )
    inside = (x > 0) & (x < 1)
    want_y = jnp.where(inside, jnp.tanh(c[1]) * 2.0, -c[0]) + jnp.pi + 1e-3 * x**2.5 + y
    np.testing.assert_allclose(out, jnp.stack([want_x, want_y]), atol=1e-14)
    assert spec.cvar_indices == (0, 1)


def test_constant_expression_broadcasts_to_nodes():
    spec = ModelSpec("const", (StateVar("x"),), (Parameter("r", 1.5),), (), {"x": "r"})
    out = build_jax_dfun(spec)(jnp.zeros((1, 4)), jnp.zeros((0, 4)), None)
    np.testing.assert_allclose(out, 1.5 * np.ones((1, 4)))


@pytest.mark.parametrize(
    "expr,token",
    [
        ("__import__('os').system('true')", "__import__"),
        ("os.system", "os.system"),
        ("v.real", "v.real"),
        ("().__class__.__bases__", "().__class__"),
        ("v[0]", "v[0]"),
        ("(lambda: 1)()", "lambda: 1"),
        ("lambda v: v", "lambda v: v"),
        ("exec('1')", "exec"),
        ("eval('v')", "eval"),
        ("getattr(v, 'real')", "getattr"),
        ("foo + v", "foo"),
        ("v if w else 1", "v if w else 1"),
        ("v and w", "v and w"),
        ("'text'", "'text'"),
        ("[v]", "[v]"),
        ("v < 1", "v < 1"),
        ("sin(v, w)", "sin(v, w)"),
        ("sin(x=v)", "sin(x=v)"),
        ("sin", "sin"),
        ("v // 2", "v // 2"),
        ("v @ w", "v @ w"),
        ("True * v", "True"),
        ("(y := 2)", "y := 2"),
    ],
)
def test_unsafe_or_unknown_expressions_rejected(expr, token):
    with pytest.raises(ValueError) as info:
        fhn(dfun_str={"v": expr, "w": "w"})
    message = str(info.value)
    assert repr(token) in message or token in message
    assert "'fhn'" in message and "dfun_str['v']" in message


def test_syntax_error_is_value_error():
    with pytest.raises(ValueError, match="fhn.*not a valid expression"):
        fhn(dfun_str={"v": "v +", "w": "w"})


@pytest.mark.parametrize("bad", ["c", "c_v", "sin", "pi"])
def test_reserved_names_rejected_at_construction(bad):
    with pytest.raises(ValueError, match=f"named '{bad}'"):
        fhn(parameters=(Parameter(bad, 1.0),))
    with pytest.raises(ValueError, match=f"named '{bad}'"):
        ModelSpec("m", (StateVar("v"), StateVar(bad)), (), ("v",), {"v": "v", bad: "v"})


def test_spec_structure_errors():
    with pytest.raises(ValueError, match="cvar"):
        fhn(cvar=("u",))
    with pytest.raises(ValueError, match="missing \\['w'\\]"):
        fhn(dfun_str={"v": "v"})
    with pytest.raises(ValueError, match="declared twice"):
        fhn(parameters=(Parameter("v", 1.0),))


def test_equal_specs_compile_to_equal_dfuns():
    assert build_jax_dfun(fhn()) == build_jax_dfun(fhn())
    assert hash(build_jax_dfun(fhn())) == hash(build_jax_dfun(fhn()))
    assert build_jax_dfun(fhn()) != build_jax_dfun(fhn(name="other"))


def test_the_same_strings_build_the_same_dfun():
    """A model rebuilt from the same strings gets the function built before
    (a cache keyed by the parsed model, not by the spec object); other
    strings, names or defaults get another one."""
    first = build_jax_dfun(fhn())
    assert build_jax_dfun(fhn()) is first
    other_text = {"v": "v - v**3 / 3 - w + 2 * c", "w": "eps * (v + a - b * w)"}
    for changed in (
        fhn(dfun_str=other_text),
        fhn(name="other"),
        fhn(parameters=(Parameter("a", 0.5), Parameter("b", 0.8), "eps")),
    ):
        assert build_jax_dfun(changed) is not first
        assert build_jax_dfun(changed) is build_jax_dfun(changed)
    x, c = jnp.ones((2, 3)), jnp.ones((1, 3))
    v = build_jax_dfun(fhn(dfun_str=other_text))(x, c, {"eps": 0.1})[0]
    np.testing.assert_allclose(v, [1 - 1 / 3 - 1 + 2] * 3)


def test_the_dfun_cache_is_bounded():
    from lyapax.simulator import _model

    for i in range(_model._MAX_DFUNS + 5):
        build_jax_dfun(fhn(name=f"bounded{i}"))
    assert len(_model._DFUNS) <= _model._MAX_DFUNS


def test_no_exec_eval_or_compile_in_the_model_compiler():
    root = Path(lyapax.__file__).parent
    for name in ("simulator/_expr.py", "simulator/_model.py", "simulator/__init__.py"):
        tree = ast.parse((root / name).read_text())
        calls = {
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        assert not calls & {"exec", "eval", "compile"}, name


def test_connectivity_delay_steps():
    w = np.ones((3, 3))
    lengths = np.array([[0.0, 1.0, 2.5], [1.0, 0.0, 0.24], [2.5, 0.24, 0.0]])
    conn = Connectivity(w, lengths, speed=2.0)
    np.testing.assert_array_equal(
        conn.delay_steps(0.25), [[0, 2, 5], [2, 0, 0], [5, 0, 0]]
    )
    assert conn.delay_steps(0.25).dtype == np.int32
    assert conn.horizon(0.25) == 6
    np.testing.assert_array_equal(Connectivity(w).delay_steps(0.1), np.zeros((3, 3)))


def test_connectivity_bad_input():
    with pytest.raises(ValueError, match="weights"):
        Connectivity(np.ones((2, 3)))
    with pytest.raises(ValueError, match="tract_lengths"):
        Connectivity(np.ones((2, 2)), np.ones((3, 3)))
    with pytest.raises(ValueError, match="tract_lengths"):
        Connectivity(np.ones((2, 2)), -np.ones((2, 2)))
    with pytest.raises(ValueError, match="speed"):
        Connectivity(np.ones((2, 2)), np.ones((2, 2)), speed=0.0)
    with pytest.raises(ValueError, match="dt"):
        Connectivity(np.ones((2, 2))).delay_steps(-1.0)


def test_kuramoto_model_is_the_phase_oscillator():
    from lyapax.systems import kuramoto_model

    spec = kuramoto_model()
    assert spec.cvar == ("theta",)
    dfun = build_jax_dfun(spec)
    theta = jnp.array([[0.1, 0.5, -1.0]])
    c = jnp.array([[0.2, -0.3, 0.05]])
    omega = jnp.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(
        dfun(theta, c, {"omega": omega}), (omega + c[0])[None], atol=1e-15
    )
    # omega defaults to 0: the oscillator only follows its coupling.
    np.testing.assert_allclose(dfun(theta, c, {}), c, atol=1e-15)
