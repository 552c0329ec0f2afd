"""Shape checks of the network builders (eager, before anything is traced).

:func:`check_shapes` traces the coupling and ``dfun`` abstractly
(``jax.eval_shape``) once per problem structure, so a problem rebuilt with new
numbers of the same shapes pays nothing for it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import jax

from lyapax._engine.tree import leaf_shapes, split_static
from lyapax._internal.checks import as_cvar_indices
from lyapax.network._step import NetworkStep

# Structures already checked: a rebuilt problem does not pay for eval_shape.
_CHECKED: OrderedDict[Any, None] = OrderedDict()
_CHECKED_MAX = 256


def check_shapes(step: NetworkStep, n_sv: int | None, dtype: Any) -> None:
    """Trace coupling and dfun abstractly once per structure; clear errors.

    Raises:
        ValueError: ``cvar_indices`` out of range, a coupling or dfun output of
            the wrong shape, or an error of the dfun itself (e.g. a missing
            parameter).
    """
    n = step.n_nodes
    dynamic, static = split_static(step)
    key: Any = (static, leaf_shapes(dynamic), n_sv, dtype)
    try:
        if key in _CHECKED:
            return
    except TypeError:  # an unhashable static part: check every time
        key = None
    # After the cache: the key holds cvar_indices (static) and n_sv.
    as_cvar_indices(step.cvar_indices, n_sv)
    n_cvar = len(step.cvar_indices)
    cv = jax.ShapeDtypeStruct((n_cvar, n), dtype)
    c = jax.eval_shape(lambda x: step.coupling(x, step.weights, step.params), cv)
    if getattr(c, "shape", None) != (n_cvar, n):
        raise ValueError(
            f"coupling must return shape (n_cvar, n_nodes) = ({n_cvar}, {n}); "
            f"{step.coupling!r} returned {getattr(c, 'shape', c)}"
        )
    if n_sv is not None:
        x = jax.ShapeDtypeStruct((n_sv, n), dtype)
        try:
            out = jax.eval_shape(lambda y, cy: step.dfun(y, cy, step.params), x, c)
        except (TypeError, IndexError) as err:
            raise ValueError(
                f"dfun failed on a state of shape ({n_sv}, {n}) with coupling "
                f"({n_cvar}, {n}): {err}"
            ) from err
        if getattr(out, "shape", None) != (n_sv, n):
            raise ValueError(
                f"dfun must return shape (n_sv, n_nodes) = ({n_sv}, {n}); "
                f"got {getattr(out, 'shape', out)}"
            )
    if key is not None:
        _CHECKED[key] = None
        if len(_CHECKED) > _CHECKED_MAX:
            _CHECKED.popitem(last=False)
