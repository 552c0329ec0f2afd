"""Pytree helpers that let numbers travel as traced leaves and code stay static.

The engine compiles one program per *structure* of a problem (its functions,
integrator names, shapes) and feeds every number (parameters, ``dt``, initial
state) in as a runtime argument. Rebuilding a problem with new numbers in a loop
therefore reuses the compiled program instead of retracing it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import numpy as np

_DYNAMIC_TYPES = (jax.Array, np.ndarray, np.generic, float, complex)


def _is_dynamic(leaf: Any) -> bool:
    # Python ints/bools stay static: they often set shapes or loop counts.
    if isinstance(leaf, bool | np.bool_):
        return False
    return isinstance(leaf, _DYNAMIC_TYPES)


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
    dynamic = [leaf if _is_dynamic(leaf) else None for leaf in leaves]
    static = tuple(None if _is_dynamic(leaf) else _Static(leaf) for leaf in leaves)
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
