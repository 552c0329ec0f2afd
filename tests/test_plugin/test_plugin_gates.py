"""The gate options are declared once (report/gates.py) for the plugin and the CLI."""

import argparse
from typing import Any

import pytest

from pytest_lyapax import cli, plugin
from pytest_lyapax.report.gates import GATE_OPTIONS, parse_gates, refusal


class _RecordingParser:
    """Records what ``pytest_addoption`` declares, through the public methods
    of pytest's parser (``getgroup``, ``addoption``, ``addini``) only: the
    parser's stored groups and ``Argument.attrs()`` are private and changed
    in pytest 9.2."""

    def __init__(self) -> None:
        self.options: dict[str, dict[str, Any]] = {}

    def getgroup(self, name: str, description: str = "", after: Any = None):
        return self

    def addoption(self, *names: str, **attrs: Any) -> None:
        for name in names:
            self.options[name] = attrs

    def addini(self, *args: Any, **kwargs: Any) -> None:
        pass


def _plugin_options() -> dict[str, dict]:
    parser = _RecordingParser()
    plugin.pytest_addoption(parser)  # type: ignore[arg-type]
    return parser.options


def _compare_options() -> dict[str, argparse.Action]:
    sub = next(
        a
        for a in cli.build_parser()._actions
        if isinstance(a, argparse._SubParsersAction)
    )
    return {
        name: action
        for action in sub.choices["compare"]._actions
        for name in action.option_strings
    }


def test_plugin_and_cli_declare_the_same_gate_options():
    ours, theirs = _plugin_options(), _compare_options()
    for option in GATE_OPTIONS:
        in_plugin = ours[f"--jax-compare-{option.stem}"]
        in_cli = theirs[f"--{option.stem}"]
        assert in_plugin["dest"] == "jax_compare_" + in_cli.dest
        assert in_plugin["action"] == ("append" if option.repeatable else "store_true")
        assert in_plugin["default"] == in_cli.default
        # One help text: the same words, each naming its own parser's options.
        plugin_help = in_plugin["help"].replace("--jax-compare-", "--")
        assert plugin_help == in_cli.help[:-1] + " (needs --jax-backend)."


def test_pytest_parses_the_gate_options_as_declared(pytester):
    # The same declarations through pytest's own parser: repeatable gates
    # accumulate, the flags default to off.
    config = pytester.parseconfig()
    assert config.getoption("jax_compare_fail") == []
    assert config.getoption("jax_compare_allow_missing") is False
    config = pytester.parseconfig(
        "--jax-compare-fail=median:5%",
        "--jax-compare-fail=min:1ms",
        "--jax-compare-allow-missing",
        "--jax-compare-across-machines",
    )
    assert config.getoption("jax_compare_fail") == ["median:5%", "min:1ms"]
    assert config.getoption("jax_compare_allow_missing") is True
    assert config.getoption("jax_compare_across_machines") is True


def test_a_gate_expression_is_parsed_once_for_both():
    (gate,) = parse_gates(["median:25ms"], "--fail")
    assert str(gate) == str(plugin_gate(["median:25ms"]))
    with pytest.raises(ValueError, match=r"^--fail: 'median:25' has no unit"):
        parse_gates(["median:25"], "--fail")
    with pytest.raises(
        pytest.UsageError, match=r"^--jax-compare-fail: 'median:25' has no unit"
    ):
        plugin_gate(["median:25"])
    text = refusal("host 'a' vs 'b'", "--across-machines")
    assert text.startswith("host 'a' vs 'b'; a gate across machines")
    assert text.endswith("pass --across-machines to gate anyway")


def plugin_gate(texts):
    from pytest_lyapax.run.options import parse_compare_fail

    (gate,) = parse_compare_fail(texts)
    return gate
