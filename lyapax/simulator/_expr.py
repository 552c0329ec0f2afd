"""Whitelisted arithmetic expressions compiled to JAX functions.

A model string such as ``"omega + c"`` is parsed with :mod:`ast` and checked
node by node against a small grammar (numbers, names the model declares,
``+ - * / **``, unary minus, the functions ``sin cos tan exp log sqrt tanh abs
where`` and the constant ``pi``, comparisons only inside ``where``). The checked
tree is then turned into nested Python closures that call ``jax.numpy``: user
text is never handed to ``exec``, ``eval`` or ``compile``.
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import jax.numpy as jnp
from jax import lax

__all__ = ["FUNCTIONS", "RESERVED", "compile_expression"]

# Evaluates an expression given a mapping from names to arrays.
Evaluator = Callable[[Mapping[str, Any]], Any]

FUNCTIONS: dict[str, tuple[int, Callable[..., Any]]] = {
    "sin": (1, jnp.sin),
    "cos": (1, jnp.cos),
    "tan": (1, jnp.tan),
    "exp": (1, jnp.exp),
    "log": (1, jnp.log),
    "sqrt": (1, jnp.sqrt),
    "tanh": (1, jnp.tanh),
    "abs": (1, jnp.abs),
    "where": (3, jnp.where),
}
CONSTANTS: dict[str, float] = {"pi": math.pi}
# Names a model may not give to its own variables or parameters.
RESERVED = frozenset(FUNCTIONS) | frozenset(CONSTANTS)

_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: jnp.add,
    ast.Sub: jnp.subtract,
    ast.Mult: jnp.multiply,
    ast.Div: jnp.true_divide,
    ast.Pow: jnp.power,
}
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: jnp.less,
    ast.LtE: jnp.less_equal,
    ast.Gt: jnp.greater,
    ast.GtE: jnp.greater_equal,
    ast.Eq: jnp.equal,
    ast.NotEq: jnp.not_equal,
}
_SYMBOL = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.USub: "-",
    ast.UAdd: "+",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}
_ALLOWED_TEXT = (
    "numbers, the model's state variables and parameters, c and c_<cvar>, "
    "+ - * / ** and unary minus, comparisons inside where(), and the functions "
    + " ".join(sorted(FUNCTIONS))
    + " and the constant pi"
)


class _Compiler:
    """Checks one parsed expression and builds its evaluator."""

    def __init__(self, text: str, names: frozenset[str], where: str) -> None:
        self.text = text
        self.names = names
        self.where = where

    def reject(self, node: ast.AST, what: str, hint: str = "") -> ValueError:
        token = ast.get_source_segment(self.text, node) or type(node).__name__
        return ValueError(
            f"{self.where}: {what} {token!r} is not allowed in {self.text!r}"
            f"{hint}; allowed are {_ALLOWED_TEXT}"
        )

    def build(self, node: ast.AST, in_where: bool = False) -> Evaluator:
        if isinstance(node, ast.Constant):
            return self._constant(node)
        if isinstance(node, ast.Name):
            return self._name(node)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return self._binop(node, in_where)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.build(node.operand, in_where)
            if isinstance(node.op, ast.USub):
                return lambda env: jnp.negative(operand(env))
            return operand
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.Compare):
            if not in_where:
                raise self.reject(node, "a comparison outside where()")
            return self._compare(node)
        if isinstance(node, ast.BinOp | ast.UnaryOp):
            raise self.reject(node, "the operator")
        raise self.reject(node, _describe(node))

    def _constant(self, node: ast.Constant) -> Evaluator:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.reject(node, "the literal")
        number = float(value)
        return lambda env: number

    def _name(self, node: ast.Name) -> Evaluator:
        name = node.id
        if name in CONSTANTS:
            number = CONSTANTS[name]
            return lambda env: number
        if name in FUNCTIONS:
            raise self.reject(node, "the function used without a call")
        if name not in self.names:
            known = ", ".join(sorted(self.names))
            raise self.reject(node, "the unknown name", f" (known names: {known})")
        return lambda env: env[name]

    def _binop(self, node: ast.BinOp, in_where: bool) -> Evaluator:
        left = self.build(node.left, in_where)
        right_node = node.right
        # x ** <integer literal> lowers to integer_pow: exact for negative x
        # and a cheaper derivative than the general power.
        if (
            isinstance(node.op, ast.Pow)
            and isinstance(right_node, ast.Constant)
            and type(right_node.value) is int
        ):
            exponent = right_node.value
            return lambda env: lax.integer_pow(_as_array(left(env)), exponent)
        op = _BINOPS[type(node.op)]
        right = self.build(right_node, in_where)
        return lambda env: op(left(env), right(env))

    def _call(self, node: ast.Call) -> Evaluator:
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            raise self.reject(node.func, "the call of")
        name = node.func.id
        arity, fn = FUNCTIONS[name]
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.reject(node, "the keyword or starred arguments in")
        if len(node.args) != arity:
            raise self.reject(node, f"{name}() takes {arity} argument(s), so the call")
        args = [
            self.build(arg, in_where=(name == "where" and i == 0))
            for i, arg in enumerate(node.args)
        ]
        if arity == 1:
            (arg,) = args
            return lambda env: fn(arg(env))
        return lambda env: fn(*(a(env) for a in args))

    def _compare(self, node: ast.Compare) -> Evaluator:
        operands = [self.build(node.left)] + [self.build(c) for c in node.comparators]
        ops = [_COMPARE[type(op)] for op in node.ops]

        def evaluate(env: Mapping[str, Any]) -> Any:
            values = [operand(env) for operand in operands]
            # a < b < c means (a < b) and (b < c), as in Python.
            out = ops[0](values[0], values[1])
            for i in range(1, len(ops)):
                out = jnp.logical_and(out, ops[i](values[i], values[i + 1]))
            return out

        return evaluate


def _as_array(x: Any) -> Any:
    return jnp.asarray(x) if isinstance(x, float) else x


def _describe(node: ast.AST) -> str:
    kinds = {
        ast.Attribute: "the attribute access",
        ast.Subscript: "the subscript",
        ast.Lambda: "the lambda",
        ast.BoolOp: "the boolean operator",
        ast.IfExp: "the conditional expression",
        ast.NamedExpr: "the assignment expression",
    }
    for kind, text in kinds.items():
        if isinstance(node, kind):
            return text
    return f"the construct ({type(node).__name__})"


@functools.lru_cache(maxsize=512)
def compile_expression(text: str, names: frozenset[str], where: str) -> Evaluator:
    """Check ``text`` against the grammar and return ``env -> array``.

    Evaluators hold no state, so one is kept per ``(text, names, where)`` (the
    last 512): a model rebuilt from the same strings parses nothing again.

    Args:
        text: one right-hand side, e.g. ``"a * x - x ** 3 + c"``.
        names: the names ``text`` may read from ``env``.
        where: context for messages, e.g. ``"ModelSpec 'fhn', dfun_str['x']"``.

    Raises:
        ValueError: a syntax error, or a token outside the grammar (named in the
            message together with ``where``).
    """
    if not isinstance(text, str):
        raise ValueError(f"{where}: expected an expression string; got {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise ValueError(
            f"{where}: {text!r} is not a valid expression ({err.msg})"
        ) from None
    return _Compiler(text.strip(), names, where).build(tree.body)
