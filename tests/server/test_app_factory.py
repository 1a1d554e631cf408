"""create_app() called more than once in one process (tests, embedding): each app gets every blueprint once,
and no app that already exists gets its blueprints registered again."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from sanic import Blueprint

from flagproxy.server.app import create_app
from flagproxy.server.settings import ServerSettings
from tests.server.harness import unique


def test_each_app_registers_each_blueprint_once(monkeypatch: pytest.MonkeyPatch) -> None:
    registered: Counter[tuple[str, str]] = Counter()
    original = Blueprint.register

    def counting(self: Blueprint, app: Any, options: Any) -> Any:
        registered[(self.name, app.name)] += 1
        return original(self, app, options)

    monkeypatch.setattr(Blueprint, "register", counting)
    names = [unique("factory").replace("-", "_") for _ in range(3)]
    apps = [create_app(ServerSettings.load({}, {}), name=name) for name in names]
    # Adding a handler to a blueprint that serves an app re-registers it on that app (Sanic), which raised
    # RouteExists for the console's routes once that app's router was in use.
    assert registered and max(registered.values()) == 1, [pair for pair, n in registered.items() if n > 1]
    for app in apps:  # and each app has the console's routes
        paths = {"/".join(parts) for parts in app.router.routes_all}
        assert "new-user" in paths and "console/login" in paths, app.name
