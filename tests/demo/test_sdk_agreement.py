"""The official Python SDK (UnleashClient), reading the server's client API, and our proxy, reading the
same server, agree on every flag for a few hundred contexts."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from UnleashClient import UnleashClient

from flagproxy.demo import seed
from tests.demo.processes import ProxyProcess
from tests.server.harness import ADMIN_TOKEN, CLIENT_TOKEN, Api, ServerProcess

CONTEXTS = 300
APP_NAME = "agreement-test"


def _more_flags(api: Api) -> list[str]:
    """Flags beyond the demo's: legacy strategies, numeric/string/date operators, env variants, overrides."""
    flags = {
        "legacy-user-ids": {"name": "userWithId", "parameters": {"userIds": "u1,u5,u9,u13"}},
        "legacy-gradual": {"name": "gradualRolloutUserId",
                           "parameters": {"percentage": "30", "groupId": "g"}},
        "numbers": {"name": "default", "constraints": [
            {"contextName": "age", "operator": "NUM_GTE", "value": "30"},
            {"contextName": "email", "operator": "STR_ENDS_WITH", "values": ["@EXAMPLE.com"],
             "caseInsensitive": True}]},
        "not-in-country": {"name": "flexibleRollout",
                           "parameters": {"rollout": "70", "stickiness": "default"},
                           "constraints": [{"contextName": "country", "operator": "IN", "values": ["DE"],
                                            "inverted": True}]},
        "session-sticky": {"name": "flexibleRollout",
                           "parameters": {"rollout": "40", "stickiness": "sessionId", "groupId": "s"}},
        "after-2020": {"name": "default", "constraints": [
            {"contextName": "currentTime", "operator": "DATE_AFTER", "value": "2020-01-01T00:00:00.000Z"}]},
    }  # fmt: skip
    for name, strategy in flags.items():
        api.create_feature(name)
        api.add_strategy(name, strategy)
        api.switch(name, True)
    api.create_feature("env-variants")
    api.add_strategy("env-variants", {"name": "default"})
    answer = api.put(
        "/api/admin/projects/default/features/env-variants/environments/development/variants",
        [
            {"name": "a", "weightType": "variable", "stickiness": "default",
             "overrides": [{"contextName": "userId", "values": ["u3"]}]},
            {"name": "b", "weightType": "variable", "stickiness": "default", "payload": {"type": "number",
                                                                                        "value": "7"}},
            {"name": "c", "weight": 200, "weightType": "fix", "stickiness": "default"},
        ],
    )  # fmt: skip
    assert answer.status == 200
    api.switch("env-variants", True)
    return [*flags, "env-variants"]


def _contexts(count: int = CONTEXTS, seed: int = 20261122) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    contexts = []
    for index in range(count):
        properties = {
            "plan": rng.choice(["free", "premium"]),
            "country": rng.choice(["NO", "SE", "DE", "no"]),
        }
        if rng.random() < 0.7:
            properties["version"] = f"{rng.randint(1, 3)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}"
        if rng.random() < 0.7:
            properties["age"] = str(rng.randint(10, 60))
        if rng.random() < 0.5:
            properties["email"] = f"user{index}@{rng.choice(['example.com', 'Example.COM', 'other.org'])}"
        user = rng.choice(["alice", "bob"]) if index % 25 == 0 else f"u{index}"
        contexts.append({"userId": user, "sessionId": f"s{rng.randint(0, 10**6)}", "properties": properties})
    return contexts


def sdk_client(url: str, token: str, app_name: str, cache_directory: Path, **options: Any) -> UnleashClient:
    """UnleashClient reading `url` (a server's /api or a proxy's /proxy) in `development`, started, with no
    metrics or registration of its own; `options` are more of UnleashClient's (experimental_mode, ...)."""
    client = UnleashClient(
        url=url,
        app_name=app_name,
        environment="development",
        custom_headers={"Authorization": token},
        disable_metrics=True,
        disable_registration=True,
        cache_directory=str(cache_directory),
        refresh_interval=60,
        **options,
    )
    client.initialize_client()
    return client


def _sdk_answer(client: UnleashClient, flag: str, context: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    variant = client.get_variant(flag, dict(context))
    shown = {"name": variant["name"], "enabled": variant["enabled"]}
    if variant.get("payload"):
        shown["payload"] = variant["payload"]
    return client.is_enabled(flag, dict(context)), shown


@pytest.mark.slow
def test_unleash_client_and_proxy_agree(
    server: ServerProcess, proxy_factory: Callable[..., ProxyProcess], tmp_path: Path
) -> None:
    api = server.api()
    flags = seed(server.url, ADMIN_TOKEN) + _more_flags(api)
    proxy = proxy_factory(500)
    status, listed = proxy.request("POST", "/proxy", {"toggles": flags, "context": {"userId": "x"}})
    assert status == 200 and {t["name"] for t in listed["toggles"]} == set(flags)

    client = sdk_client(f"{server.url}/api", CLIENT_TOKEN, APP_NAME, tmp_path)
    disagreements = []
    enabled_counts = dict.fromkeys(flags, 0)
    try:
        for context in _contexts():
            proxy_context = {**context, "appName": APP_NAME, "environment": "development"}
            status, body = proxy.request("POST", "/proxy", {"toggles": flags, "context": proxy_context})
            assert status == 200, body
            answers = {t["name"]: t for t in body["toggles"]}
            for flag in flags:
                sdk_enabled, sdk_variant = _sdk_answer(client, flag, context)
                toggle = answers[flag]
                proxy_variant = {
                    k: v for k, v in toggle["variant"].items() if k in ("name", "enabled", "payload")
                }
                enabled_counts[flag] += sdk_enabled
                if (toggle["enabled"], proxy_variant) != (sdk_enabled, sdk_variant):
                    disagreements.append(
                        (flag, context, (toggle["enabled"], proxy_variant), sdk_enabled, sdk_variant)
                    )
    finally:
        client.destroy()
    assert disagreements == [], disagreements[:5]
    # The contexts exercise both outcomes of every flag that is not simply on or off.
    assert enabled_counts["payments-kill-switch"] == 0
    for flag in (
        "new-checkout",
        "premium-search",
        "legacy-gradual",
        "numbers",
        "not-in-country",
        "session-sticky",
    ):
        assert 0 < enabled_counts[flag] < CONTEXTS, (flag, enabled_counts[flag])
