"""Custom strategies written in Python, loaded from a file (SPEC.md rule 7)."""

from __future__ import annotations

import pathlib

import pytest

from flagproxy.evaluator import CACHE_NEVER, CACHE_SNAPSHOT
from flagproxy.snapshot import compile_snapshot
from flagproxy.strategies import StrategyFileError, load_strategies_file

STRATEGIES = """
from flagproxy.strategies import Strategy

class BetaTesters(Strategy):
    name = "betaTesters"

    def is_enabled(self, parameters, context):
        return context.get("properties", {}).get("beta") == parameters.get("flag")

class Broken(Strategy):
    name = "broken"

    def is_enabled(self, parameters, context):
        raise RuntimeError("boom")

strategies = [BetaTesters(), Broken()]
"""


@pytest.fixture
def strategies_file(tmp_path: pathlib.Path) -> str:
    path = tmp_path / "my_strategies.py"
    path.write_text(STRATEGIES)
    return str(path)


def test_custom_strategies_are_called_for_their_names(implementation: str, strategies_file: str) -> None:
    strategies = load_strategies_file(strategies_file)
    assert [s.name for s in strategies] == ["betaTesters", "broken"]
    beta = {
        "name": "betaTesters",
        "parameters": {"flag": "yes"},
        "constraints": [{"contextName": "appName", "operator": "IN", "values": ["web"]}],
    }
    payload = {
        "features": [
            {"name": "beta", "enabled": True, "strategies": [beta]},
            {"name": "broken", "enabled": True, "strategies": [{"name": "broken", "parameters": {}}]},
            {"name": "unknown", "enabled": True, "strategies": [{"name": "notLoaded", "parameters": {}}]},
        ]
    }
    s = compile_snapshot(payload, custom_strategies=strategies, implementation=implementation)
    assert s.is_enabled("beta", {"appName": "web", "properties": {"beta": "yes"}})
    assert not s.is_enabled("beta", {"appName": "ios", "properties": {"beta": "yes"}})  # constraints apply
    assert not s.is_enabled("beta", {"appName": "web", "properties": {"beta": "no"}})
    assert not s.is_enabled("broken", {})  # an exception is off, never an error
    assert not s.is_enabled("unknown", {})
    assert s.evaluate_all_body({"appName": "web"})[1] == CACHE_NEVER  # custom answers are never cached
    assert s.evaluate_named_body({"appName": "web"}, ["beta"])[1] == CACHE_NEVER
    # Only an evaluation that reaches the custom strategy is affected.
    assert s.evaluate_named_body({"appName": "ios"}, ["beta"])[1] == CACHE_SNAPSHOT


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("x = 1", "must define `strategies"),
        ("strategies = [object()]", "has no `name`"),
        ("raise ValueError('nope')", "failed to load: ValueError: nope"),
    ],
)
def test_bad_strategy_files_give_one_clear_error(tmp_path: pathlib.Path, content: str, message: str) -> None:
    path = tmp_path / "s.py"
    path.write_text(content)
    with pytest.raises(StrategyFileError, match=message):
        load_strategies_file(str(path))
    with pytest.raises(StrategyFileError, match="no such file"):
        load_strategies_file(str(tmp_path / "missing.py"))
