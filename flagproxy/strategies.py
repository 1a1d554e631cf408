"""Custom activation strategies, written in Python (SPEC.md rule 7, with Python instead of JavaScript).

Subclass `Strategy`, give it a `name` and an `is_enabled(parameters, context)`, and list instances in a file:

    # my_strategies.py
    from flagproxy.strategies import Strategy

    class ActiveForBetaTesters(Strategy):
        name = "betaTesters"

        def is_enabled(self, parameters, context):
            return context.get("properties", {}).get("beta") == "true"

    strategies = [ActiveForBetaTesters()]

`load_strategies_file("my_strategies.py")` returns that list; pass it to `compile_snapshot` (the proxy
does this for `customStrategies` / SERVICE_CUSTOM_STRATEGIES_FILE). `parameters` is the strategy's
parameter map (strings); `context` is the Unleash context as a dict (userId, sessionId, environment,
appName, currentTime, remoteAddress, properties). A strategy whose name no loaded strategy has is false;
constraints and segments of a custom strategy still apply; an exception counts as false.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from typing import Any


class Strategy:
    """Base class of a custom activation strategy."""

    name: str = ""

    def is_enabled(self, parameters: Mapping[str, str], context: Mapping[str, Any]) -> bool:
        raise NotImplementedError


class StrategyFileError(ValueError):
    """A custom strategies file that cannot be used; the message says why."""


def load_strategies_file(path: str) -> list[Strategy]:
    """Import a Python file and return its `strategies` list, checked."""
    module = _load_module(path, "flagproxy_custom_strategies")
    found = getattr(module, "strategies", None)
    if not isinstance(found, Sequence) or isinstance(found, str | bytes):
        raise StrategyFileError(f"{path}: must define `strategies = [...]`, a list of Strategy objects")
    for item in found:
        if not isinstance(getattr(item, "name", None), str) or not item.name:
            raise StrategyFileError(f"{path}: {item!r} has no `name`")
        if not callable(getattr(item, "is_enabled", None)):
            raise StrategyFileError(f"{path}: strategy {item.name!r} has no is_enabled(parameters, context)")
    return list(found)


def _load_module(path: str, module_name: str) -> Any:
    if not os.path.isfile(path):
        raise StrategyFileError(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise StrategyFileError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a user's file: report any failure as one clear line
        raise StrategyFileError(f"{path}: failed to load: {exc.__class__.__name__}: {exc}") from exc
    return module


def by_name(strategies: Sequence[Strategy]) -> dict[str, Strategy]:
    """The strategies keyed by name; a later one replaces an earlier one of the same name."""
    return {s.name: s for s in strategies}
