"""The worker's settings: every field of Settings travels, read from its fields.

The round trip builds a Settings whose every field differs from its default,
from the fields' type hints alone, so a field added later is covered without
an edit here; the one field kept in the controller is declared so.
"""

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path

import pytest

from pytest_lyapax.backends.labels import Backend
from pytest_lyapax.run import payload
from pytest_lyapax.run.options import CONTROLLER_ONLY, Settings, read_settings
from pytest_lyapax.run.session import CONTROLLER, BackendState, LyapaxSession


def _other(hint, default):
    """A value of type ``hint`` unequal to ``default``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _other(options[0], None)
    if origin is typing.Literal:
        return next(a for a in typing.get_args(hint) if a != default)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        made = {}
        for f in dataclasses.fields(hint):
            if f.init and (f.default is dataclasses.MISSING or f.name == "label"):
                made[f.name] = _other(hints[f.name], None)
        base = hint(**made)
        return dataclasses.replace(
            base,
            **{
                f.name: _other(hints[f.name], getattr(base, f.name))
                for f in dataclasses.fields(hint)
                if f.init and f.name not in made
            },
        )
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return (_other(args[0], None),)
        return tuple(_other(a, None) for a in args)
    if origin in (frozenset, set):
        return origin({_other(typing.get_args(hint)[0], None)})
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        args = typing.get_args(hint)
        return {"key": _other(args[1], None) if args else [1, 2.5, "three"]}
    if hint is Path:
        return Path("/some/where/else")
    if hint is bool:
        return not default
    if hint is int:
        return (default or 0) + 3
    if hint is float:
        return (default or 0.0) + 1.5
    if hint is str:
        return f"x{default or ''}x"
    if hint is typing.Any:
        return [1, 2.5, "three"]
    raise AssertionError(f"no test value for {hint!r}")


def _every_field_changed() -> Settings:
    hints = typing.get_type_hints(Settings)
    default = Settings()
    values = {
        f.name: _other(hints[f.name], getattr(default, f.name))
        for f in dataclasses.fields(Settings)
        if f.init
    }
    return Settings(**values)


def test_every_field_of_settings_travels_to_the_workers():
    settings = _every_field_changed()
    default = Settings()
    back = payload.settings_from_json(payload.settings_to_json(settings))
    for f in dataclasses.fields(Settings):
        assert getattr(settings, f.name) != getattr(default, f.name), f.name
        if f.metadata.get(CONTROLLER_ONLY):
            assert getattr(back, f.name) == getattr(default, f.name), f.name
        else:
            assert getattr(back, f.name) == getattr(settings, f.name), f.name


def test_only_the_saved_report_stays_in_the_controller():
    local = [f.name for f in dataclasses.fields(Settings) if not payload.travels(f)]
    assert local == ["compare_data"]


def test_the_session_payload_carries_the_settings_and_states():
    settings = _every_field_changed()
    states = {b.label: BackendState(b, "unavailable", "why") for b in settings.backends}
    session = LyapaxSession(settings, CONTROLLER, states)
    worker = LyapaxSession.for_worker(
        session.worker_payload(settings.backends[0].label)
    )
    assert worker.settings == dataclasses.replace(settings, compare_data=None)
    assert worker.own_label == settings.backends[0].label
    assert [(s.backend, s.status, s.reason) for s in worker.states.values()] == [
        (b, "unavailable", "why") for b in settings.backends
    ]


def test_a_value_that_cannot_travel_is_refused_in_the_controller():
    with pytest.raises(TypeError, match="cannot travel to the workers"):
        payload.encode(object())


def test_no_peaks_reaches_the_workers(pytester):
    config = pytester.parseconfig("--jax-backend=cpu", "--jax-no-peaks")
    settings = read_settings(config, check_paths=False)
    assert settings.peaks is False
    session = LyapaxSession(
        settings, CONTROLLER, {"cpu": BackendState(Backend("cpu", "cpu"))}
    )
    assert (
        LyapaxSession.for_worker(session.worker_payload("cpu")).settings.peaks is False
    )
