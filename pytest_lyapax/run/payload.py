"""The run's settings as JSON, for the one payload a worker receives.

Every field of :class:`~pytest_lyapax.run.options.Settings` travels, read
from ``dataclasses.fields`` and rebuilt from the fields' type hints, so a new
option reaches the workers without an edit here.  A field marked
``metadata={CONTROLLER_ONLY: True}`` stays in the controller (a saved report, say, that
only the controller reads).  Values are dataclasses, tuples, mappings with
string keys, paths, ``None`` and JSON's scalars; anything else is a
:class:`TypeError` at the controller, before a worker starts.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_lyapax.run.options import CONTROLLER_ONLY, Settings


def travels(f: dataclasses.Field[Any]) -> bool:
    """Whether a field of Settings goes to the workers."""
    return f.init and not f.metadata.get(CONTROLLER_ONLY, False)


def settings_to_json(settings: Settings) -> dict[str, Any]:
    """The settings a worker needs, as JSON-ready data."""
    return {
        f.name: encode(getattr(settings, f.name))
        for f in dataclasses.fields(settings)
        if travels(f)
    }


def settings_from_json(data: Mapping[str, Any]) -> Settings:
    """The settings :func:`settings_to_json` wrote (fields left local keep
    their defaults)."""
    return decode(Settings, data)


def encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: encode(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if travels(f)
        }
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (tuple, list, frozenset, set)):
        return [encode(v) for v in value]
    raise TypeError(
        f"a setting of type {type(value).__name__} cannot travel to the workers; "
        "use dataclasses, tuples, mappings, paths or JSON scalars"
    )


def decode(hint: Any, value: Any) -> Any:
    """``value`` (from :func:`encode`) rebuilt as type ``hint``."""
    origin = typing.get_origin(hint)
    if hint is Any or hint is object:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return decode(options[0], value) if len(options) == 1 else value
    if value is None:
        return None
    if origin is typing.Literal:
        return value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        known = {f.name for f in dataclasses.fields(hint) if travels(f)}
        return hint(
            **{
                name: decode(hints[name], v)
                for name, v in value.items()
                if name in known
            }
        )
    if hint is Path:
        return Path(value)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], v) for v in value)
        return tuple(decode(a, v) for a, v in zip(args, value, strict=True))
    if origin in (frozenset, set):
        (arg,) = typing.get_args(hint)
        return origin(decode(arg, v) for v in value)
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        args = typing.get_args(hint)
        inner = args[1] if args else Any
        return {k: decode(inner, v) for k, v in value.items()}
    if hint in (int, str, bool):
        return hint(value)
    if hint is float:
        return float(value)
    return value
