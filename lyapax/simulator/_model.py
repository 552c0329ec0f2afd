"""Node models written as strings: ``ModelSpec`` and its compiled ``dfun``.

A :class:`ModelSpec` names the state variables, parameters and coupled
variables of one node and gives each state variable's right-hand side as an
expression string. :func:`build_jax_dfun` turns it into the network ``dfun``
``(state (n_sv, n), coupling (n_cvar, n), params) -> (n_sv, n)``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp

from lyapax.simulator._expr import RESERVED, compile_expression

__all__ = ["StateVar", "Parameter", "ModelSpec", "ModelDfun", "build_jax_dfun"]


@dataclass(frozen=True)
class StateVar:
    """A state variable of one node; ``default_init`` is its initial value."""

    name: str
    default_init: float = 0.0


@dataclass(frozen=True)
class Parameter:
    """A model parameter; ``default=None`` makes it required in ``params``."""

    name: str
    default: Any = None


def _coupling_names(cvar: tuple[str, ...]) -> dict[str, int]:
    """Expression names of the coupling rows: ``c`` (first) and ``c_<cvar>``."""
    names = {f"c_{name}": i for i, name in enumerate(cvar)}
    if cvar:
        names["c"] = 0
    return names


class ModelSpec:
    """One node's model: variables, parameters, coupled variables, equations.

    Args:
        name: model name (used in error messages).
        state_variables: :class:`StateVar` objects (or plain names), in state
            row order.
        parameters: :class:`Parameter` objects (or plain names: required).
        cvar: names of the state variables the network couples through; row
            ``i`` of the coupling array belongs to ``cvar[i]``.
        dfun_str: ``{state variable: right-hand side}``; the expressions may
            use the state variables, parameters, ``c`` (first coupling row),
            ``c_<cvar>``, numbers, ``+ - * / **``, unary minus, comparisons
            inside ``where`` and ``sin cos tan exp log sqrt tanh abs where pi``.

    Attributes:
        cvar_indices: state rows of the coupled variables (tuple of ints).
        default_params: ``{name: default}`` of parameters that have one.

    Raises:
        ValueError: duplicate or reserved names (a variable or parameter named
            ``c``, ``c_<cvar>``, a function name or ``pi``), unknown ``cvar``,
            ``dfun_str`` keys that differ from the state variables, or an
            expression outside the grammar (the message names the token).
    """

    def __init__(
        self,
        name: str,
        state_variables: Any,
        parameters: Any = (),
        cvar: Any = (),
        dfun_str: Mapping[str, str] | None = None,
    ) -> None:
        self.name = str(name)
        self.state_variables = tuple(
            sv if isinstance(sv, StateVar) else StateVar(str(sv))
            for sv in state_variables
        )
        self.parameters = tuple(
            p if isinstance(p, Parameter) else Parameter(str(p)) for p in parameters
        )
        self.cvar = (cvar,) if isinstance(cvar, str) else tuple(cvar)
        self.dfun_str = dict(dfun_str or {})
        self._check_names()
        self._evaluators = self._compile()
        # Fixed with the evaluators: what was compiled is what compares equal
        # (and jit hashes it at every call of a program that closes over it).
        self._key = (
            self.name,
            self.state_variables,
            tuple((p.name, _hashable(p.default)) for p in self.parameters),
            self.cvar,
            tuple(sorted(self.dfun_str.items())),
        )

    def _where(self, detail: str = "") -> str:
        return f"ModelSpec {self.name!r}" + (f", {detail}" if detail else "")

    def _check_names(self) -> None:
        sv_names = [sv.name for sv in self.state_variables]
        p_names = [p.name for p in self.parameters]
        if not sv_names:
            raise ValueError(f"{self._where()}: needs at least one state variable")
        seen: set[str] = set()
        for n in sv_names + p_names:
            if not isinstance(n, str) or not n.isidentifier():
                raise ValueError(f"{self._where()}: {n!r} is not a valid name")
            if n in seen:
                raise ValueError(
                    f"{self._where()}: the name {n!r} is declared twice "
                    "(state variables and parameters share one namespace)"
                )
            seen.add(n)
        unknown = [cv for cv in self.cvar if cv not in sv_names]
        if unknown:
            raise ValueError(
                f"{self._where()}: cvar {unknown} are not state variables "
                f"(state variables: {sv_names})"
            )
        if len(set(self.cvar)) != len(self.cvar):
            raise ValueError(f"{self._where()}: cvar {self.cvar} repeats a name")
        coupling = _coupling_names(self.cvar)
        for n in sv_names + p_names:
            if n in coupling or (n == "c") or n in RESERVED:
                what = "a coupling input" if n in coupling or n == "c" else "reserved"
                raise ValueError(
                    f"{self._where()}: a state variable or parameter may not be "
                    f"named {n!r}: that name is {what} in dfun_str, so it would "
                    "be silently shadowed; rename it"
                )
        missing = [n for n in sv_names if n not in self.dfun_str]
        extra = [n for n in self.dfun_str if n not in sv_names]
        if missing or extra:
            raise ValueError(
                f"{self._where()}: dfun_str must give one expression per state "
                f"variable {sv_names}; missing {missing}, unknown {extra}"
            )

    def _compile(self):
        names = frozenset(
            [sv.name for sv in self.state_variables]
            + [p.name for p in self.parameters]
            + list(_coupling_names(self.cvar))
        )
        return tuple(
            compile_expression(
                self.dfun_str[sv.name], names, self._where(f"dfun_str[{sv.name!r}]")
            )
            for sv in self.state_variables
        )

    @property
    def cvar_indices(self) -> tuple[int, ...]:
        """State rows of the coupled variables, in ``cvar`` order."""
        order = [sv.name for sv in self.state_variables]
        return tuple(order.index(cv) for cv in self.cvar)

    @property
    def default_params(self) -> dict[str, Any]:
        """``{name: default}`` for every parameter that has a default."""
        return {p.name: p.default for p in self.parameters if p.default is not None}

    def initial_state(self, n_nodes: int) -> jnp.ndarray:
        """``(n_sv, n_nodes)`` array filled with each variable's ``default_init``."""
        inits = jnp.asarray([float(sv.default_init) for sv in self.state_variables])
        return jnp.broadcast_to(inits[:, None], (len(inits), int(n_nodes)))

    def key(self) -> tuple[Any, ...]:
        """Hashable description: equal specs compile to the same program."""
        return self._key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelSpec) and (
            self is other or self._key == other._key
        )

    def __hash__(self) -> int:
        # Not cached: string hashes differ between processes (a pickled spec).
        return hash(self._key)

    def __repr__(self) -> str:
        svs = [sv.name for sv in self.state_variables]
        return f"ModelSpec(name={self.name!r}, state_variables={svs}, cvar={self.cvar})"


def _hashable(value: Any) -> Any:
    try:
        hash(value)
        return value
    except TypeError:
        # Array defaults: compare by identity rather than fail.
        return ("id", id(value))


class ModelDfun:
    """The compiled ``dfun`` of a :class:`ModelSpec`.

    ``dfun(state (n_sv, n), coupling (n_cvar, n), params) -> (n_sv, n)``.
    ``params`` is a mapping; parameters missing from it take the spec's
    defaults and extra keys (e.g. the coupling's ``G``) are ignored. Two
    ``ModelDfun`` of equal specs compare equal, so rebuilding one does not
    recompile a program that uses it.
    """

    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.n_sv = len(spec.state_variables)
        self.n_cvar = len(spec.cvar)

    def resolve_params(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Spec defaults updated by ``params``; raises if a required one is missing.

        Raises:
            ValueError: a parameter without default is absent from ``params``.
        """
        given = {} if params is None else params
        if not isinstance(given, Mapping):
            raise ValueError(
                f"ModelSpec {self.spec.name!r}: params must be a mapping "
                f"{{name: value}}; got {type(given).__name__}"
            )
        out: dict[str, Any] = {}
        for p in self.spec.parameters:
            if p.name in given:
                out[p.name] = given[p.name]
            elif p.default is not None:
                out[p.name] = p.default
            else:
                raise ValueError(
                    f"ModelSpec {self.spec.name!r}: parameter {p.name!r} has no "
                    f"default and is missing from params (got keys "
                    f"{sorted(given)}); pass params={{{p.name!r}: ...}}"
                )
        return out

    def __call__(self, state: Any, coupling: Any, params: Any = None) -> Any:
        spec = self.spec
        state = jnp.asarray(state)
        if state.ndim != 2 or state.shape[0] != self.n_sv:
            raise ValueError(
                f"ModelSpec {spec.name!r}: state must have shape "
                f"({self.n_sv}, n_nodes); got {state.shape}"
            )
        coupling = jnp.asarray(coupling)
        n = state.shape[1]
        if coupling.shape != (self.n_cvar, n):
            raise ValueError(
                f"ModelSpec {spec.name!r}: coupling must have shape "
                f"({self.n_cvar}, {n}); got {coupling.shape}"
            )
        env: dict[str, Any] = dict(self.resolve_params(params))
        for i, sv in enumerate(spec.state_variables):
            env[sv.name] = state[i]
        for cname, row in _coupling_names(spec.cvar).items():
            env[cname] = coupling[row]
        rows = [
            jnp.broadcast_to(jnp.asarray(ev(env), dtype=state.dtype), (n,))
            for ev in spec._evaluators
        ]
        return jnp.stack(rows)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelDfun) and self.spec == other.spec

    def __hash__(self) -> int:
        return hash(("ModelDfun", self.spec))

    def __repr__(self) -> str:
        return f"ModelDfun({self.spec!r})"


#: The ``dfun`` built last for each model (by :meth:`ModelSpec.key`: the
#: parsed model, not the spec object), at most :data:`_MAX_DFUNS` of them.
_DFUNS: OrderedDict[tuple[Any, ...], ModelDfun] = OrderedDict()
_MAX_DFUNS = 128
_DFUNS_LOCK = threading.Lock()


def build_jax_dfun(spec: ModelSpec) -> ModelDfun:
    """The network ``dfun`` of ``spec`` (see :class:`ModelDfun`).

    A spec equal to one built before (the same name, variables, parameters,
    ``cvar`` and strings) returns the same ``dfun`` object, from a cache of
    the last 128 models: code that rebuilds its model before each call hands
    the step the function it had.

    Raises:
        TypeError: ``spec`` is not a :class:`ModelSpec`.
    """
    if not isinstance(spec, ModelSpec):
        raise TypeError(
            f"build_jax_dfun expects a ModelSpec; got {type(spec).__name__}"
        )
    key = spec.key()
    with _DFUNS_LOCK:
        dfun = _DFUNS.get(key)
        if dfun is None:
            # The cached dfun keeps its spec, and so any array default whose
            # identity is part of the key, alive: no id is reused under it.
            dfun = _DFUNS[key] = ModelDfun(spec)
            if len(_DFUNS) > _MAX_DFUNS:
                _DFUNS.popitem(last=False)
        else:
            _DFUNS.move_to_end(key)
    return dfun
