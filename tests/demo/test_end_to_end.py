"""An admin change reaches a running proxy's answers within one refresh interval (real processes)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.demo.processes import ProxyProcess
from tests.server.harness import ServerProcess, unique

REFRESH_MS = 1000
# One refresh interval, plus what one fetch and snapshot swap may take on a loaded CI machine.
SLACK_S = 1.0


def _seconds_until(condition: Callable[[], bool], limit: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if condition():
            return time.monotonic() - started
        time.sleep(0.02)
    raise AssertionError(f"not seen within {limit:.1f}s")


@pytest.mark.slow
def test_admin_changes_reach_the_proxy_within_one_refresh_interval(
    server: ServerProcess, proxy_factory: Callable[..., ProxyProcess]
) -> None:
    proxy = proxy_factory(REFRESH_MS)
    api = server.api()
    limit = REFRESH_MS / 1000 + SLACK_S
    name = unique("e2e")
    api.create_feature(name)
    api.add_strategy(
        name,
        {"name": "default", "constraints": [{"contextName": "userId", "operator": "IN", "values": ["42"]}]},
    )
    assert name not in proxy.enabled_names("?userId=42")

    api.switch(name, True)
    _seconds_until(lambda: name in proxy.enabled_names("?userId=42"), limit)
    assert name not in proxy.enabled_names("?userId=7")

    segment = api.create_segment(
        unique("e2e-seg"), [{"contextName": "userId", "operator": "IN", "values": ["7"]}]
    )
    strategy_path = f"/api/admin/projects/default/features/{name}/environments/development/strategies"
    strategy_id = api.get(strategy_path).json()[0]["id"]
    replaced = api.put(f"{strategy_path}/{strategy_id}", {"name": "default", "segments": [segment["id"]]})
    assert replaced.status == 200
    _seconds_until(lambda: name in proxy.enabled_names("?userId=7"), limit)

    assert api.put(f"/api/admin/segments/{segment['id']}", {"constraints": []}).status == 204
    _seconds_until(lambda: name in proxy.enabled_names("?userId=1"), limit)

    api.switch(name, False)
    _seconds_until(lambda: name not in proxy.enabled_names("?userId=7"), limit)
