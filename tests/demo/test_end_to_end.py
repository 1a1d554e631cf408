"""An admin change reaches a running proxy's answers within one refresh interval (real processes)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.demo.processes import ProxyProcess
from tests.demo.timing import wait_for_propagation
from tests.server.harness import CLIENT_TOKEN, ServerProcess, unique

REFRESH_MS = 1000


@pytest.mark.slow
def test_admin_changes_reach_the_proxy_within_one_refresh_interval(
    server: ServerProcess, proxy_factory: Callable[..., ProxyProcess]
) -> None:
    proxy = proxy_factory(REFRESH_MS)
    api = server.api()

    def upstream() -> object:  # what each of the proxy's polls asks the server
        return api.get("/api/client/features", token=CLIENT_TOKEN)

    def reaches_proxy(change: Callable[[], None], shown: Callable[[], bool], what: str) -> None:
        started = time.monotonic()
        change()
        wait_for_propagation(shown, also_time=upstream, started=started).assert_within_one_refresh(
            REFRESH_MS, what
        )

    name = unique("e2e")
    api.create_feature(name)
    api.add_strategy(
        name,
        {"name": "default", "constraints": [{"contextName": "userId", "operator": "IN", "values": ["42"]}]},
    )
    assert name not in proxy.enabled_names("?userId=42")

    reaches_proxy(
        lambda: api.switch(name, True), lambda: name in proxy.enabled_names("?userId=42"), "turning it on"
    )
    assert name not in proxy.enabled_names("?userId=7")

    segment = api.create_segment(
        unique("e2e-seg"), [{"contextName": "userId", "operator": "IN", "values": ["7"]}]
    )
    strategy_path = f"/api/admin/projects/default/features/{name}/environments/development/strategies"
    strategy_id = api.get(strategy_path).json()[0]["id"]

    def use_segment() -> None:
        replaced = api.put(f"{strategy_path}/{strategy_id}", {"name": "default", "segments": [segment["id"]]})
        assert replaced.status == 200, replaced.body

    reaches_proxy(use_segment, lambda: name in proxy.enabled_names("?userId=7"), "a strategy change")

    def widen_segment() -> None:
        assert api.put(f"/api/admin/segments/{segment['id']}", {"constraints": []}).status == 204

    reaches_proxy(widen_segment, lambda: name in proxy.enabled_names("?userId=1"), "a segment update")
    reaches_proxy(
        lambda: api.switch(name, False),
        lambda: name not in proxy.enabled_names("?userId=7"),
        "turning it off",
    )
