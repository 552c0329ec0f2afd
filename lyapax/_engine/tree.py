"""Pytree helpers that let numbers travel as traced leaves and code stay static.

The engine compiles one program per *structure* of a problem (its functions,
integrator names, shapes) and feeds every number (parameters, ``dt``, initial
state) in as a runtime argument. Rebuilding a problem with new numbers in a loop
therefore reuses the compiled program instead of retracing it.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import equinox as eqx
import jax
import numpy as np

_DYNAMIC_TYPES = (jax.Array, np.ndarray, np.generic, float, complex)


def _is_dynamic(leaf: Any) -> bool:
    # Known by type, except a tracer's (jax.Array's check reads its aval).
    kind = type(leaf)
    known = _DYNAMIC_OF_TYPE.get(kind)
    if known is not None:
        return known
    # Python ints/bools stay static: they often set shapes or loop counts.
    dynamic = not isinstance(leaf, bool | np.bool_) and isinstance(leaf, _DYNAMIC_TYPES)
    if not issubclass(kind, jax.core.Tracer):
        _DYNAMIC_OF_TYPE[kind] = dynamic
    return dynamic


#: :func:`_is_dynamic` by leaf type (a split sees the same few types again).
_DYNAMIC_OF_TYPE: dict[type, bool] = {}


def leaf_shapes(leaves: Any) -> tuple[tuple[Any, Any], ...]:
    """A hashable key of ``leaves``' shapes: ``(shape, dtype)`` of each array,
    ``((), type)`` of a Python number; ``None`` leaves (the static places of a
    split) skipped."""
    key = []
    for leaf in leaves:
        if leaf is None:
            continue
        shape = getattr(leaf, "shape", None)
        key.append(((), type(leaf)) if shape is None else (shape, leaf.dtype))
    return tuple(key)


_M = TypeVar("_M", bound=eqx.Module)


def assemble(cls: type[_M], **fields: Any) -> _M:
    """``cls(**fields)`` for an equinox module whose builder has checked every
    field, without equinox's per-instance checks (~20 us for a network step,
    a third of a rebuilt N = 20 problem's construction). Built the way
    equinox builds a module it unflattens: a new object, its fields set.

    Raises:
        TypeError: ``fields`` are not exactly the dataclass fields of ``cls``.
    """
    if fields.keys() != _field_names(cls):
        raise TypeError(
            f"assemble({cls.__name__}) needs the fields "
            f"{sorted(_field_names(cls))}; got {sorted(fields)}"
        )
    self = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(self, name, value)
    return self


def read_fields(module: eqx.Module, *names: str) -> tuple[Any, ...]:
    """The values of ``module``'s fields ``names``, read as plain instance
    attributes: what a field holds, without the hook that equinox's
    ``__getattribute__`` runs on every attribute read (it wraps bound methods
    as pytrees; ~0.3 us a read, against 0.07 us). For the host's one read of
    the records a compiled program returns. Fields only: a method read this
    way is not wrapped as equinox wraps it."""
    return tuple([_READ(module, name) for name in names])


_READ = object.__getattribute__


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


#: The static half of a split pytree: its structure and its non-array leaves
#: (hashable: a static argument of ``jax.jit``).
Static = tuple[Any, tuple[Any, ...]]


def split_static(tree: Any) -> tuple[list[Any], Static]:
    """Split ``tree`` into (dynamic leaves, hashable static description)."""
    if isinstance(tree, eqx.Module):
        # A module is immutable: the split of the one seen last is reused. A
        # rebuilt network problem is split by its shape check and again by the
        # run (~25 us each at N = 20); the weak reference keeps a freed
        # module's id, reused by a new object, from matching.
        last = _LAST_SPLIT.get("module")
        if last is not None and last[0]() is tree:
            return list(last[1]), last[2]
    leaves, treedef = jax.tree.flatten(tree)
    dynamic: list[Any] = []
    static_leaves: list[_Static | None] = []
    for leaf in leaves:
        if _is_dynamic(leaf):
            dynamic.append(leaf)
            static_leaves.append(None)
        else:
            dynamic.append(None)
            static_leaves.append(_Static(leaf))
    static = tuple(static_leaves)
    if isinstance(tree, eqx.Module):
        try:
            _LAST_SPLIT["module"] = (
                weakref.ref(tree),
                tuple(dynamic),
                (treedef, static),
            )
        except TypeError:  # a module type without weak references
            pass
    return dynamic, (treedef, static)


#: The last module split by :func:`split_static` (one entry; see there).
_LAST_SPLIT: dict[str, tuple[Any, tuple[Any, ...], Static]] = {}


def merge_static(dynamic: list[Any], static: Static) -> Any:
    """Inverse of :func:`split_static`."""
    treedef, static_leaves = static
    leaves = [
        d if s is None else s.value for d, s in zip(dynamic, static_leaves, strict=True)
    ]
    return jax.tree.unflatten(treedef, leaves)


class _Static:
    """Wraps a static leaf so that unhashable objects compare by identity."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __hash__(self) -> int:
        try:
            return hash((type(self.value), self.value))
        except TypeError:
            return id(self.value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Static) or type(other.value) is not type(self.value):
            return False
        try:
            return bool(self.value == other.value)
        except Exception:
            return self.value is other.value


class Bound(eqx.Module):
    """A function with its numeric parameters carried as pytree leaves.

    ``Bound(fn, params)(*args)`` calls ``fn(*args, params)``. Two ``Bound`` objects
    built from the same ``fn`` share one compiled program whatever their numbers
    (``fn`` is static, so a ``Bound`` also passes through ``jax.jit`` or
    ``jax.grad`` as an argument).
    """

    fn: Callable[..., Any] = eqx.field(static=True)
    params: Any

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args, self.params)

    def __repr__(self) -> str:
        name = getattr(self.fn, "__name__", repr(self.fn))
        return f"Bound({name}, {self.params!r})"
