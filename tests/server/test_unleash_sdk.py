"""The official Python SDK (UnleashClient) reads the server's client API and evaluates what was authored
through the admin API."""

from __future__ import annotations

from pathlib import Path

from UnleashClient import UnleashClient

from tests.server.harness import CLIENT_TOKEN, ServerProcess, unique


def test_unleash_client_evaluates_flags_authored_through_the_admin_api(
    server: ServerProcess, tmp_path: Path
) -> None:
    api = server.api()
    prefix = unique("sdk")
    gated, variant_flag, segmented, off = (f"{prefix}-{n}" for n in ("gated", "variants", "segment", "off"))
    api.create_feature(gated)
    api.add_strategy(
        gated,
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": "100", "stickiness": "default"},
            "constraints": [{"contextName": "userId", "operator": "IN", "values": ["7", "8"]}],
        },
    )
    api.switch(gated, True)
    api.create_feature(variant_flag)
    api.add_strategy(
        variant_flag,
        {
            "name": "default",
            "variants": [
                {"name": "dark", "weight": 1000, "weightType": "fix", "stickiness": "default",
                 "payload": {"type": "json", "value": "{\"theme\": \"dark\"}"}}
            ],
        },
    )  # fmt: skip
    api.switch(variant_flag, True)
    segment = api.create_segment(
        unique("sdk-seg"), [{"contextName": "country", "operator": "IN", "values": ["NO"]}]
    )
    api.create_feature(segmented)
    api.add_strategy(segmented, {"name": "default", "segments": [segment["id"]]})
    api.switch(segmented, True)
    api.create_feature(off)
    api.add_strategy(off, {"name": "default"})

    client = UnleashClient(
        url=f"{server.url}/api",
        app_name=f"{prefix}-app",
        instance_id="sdk-test",
        custom_headers={"Authorization": CLIENT_TOKEN},
        disable_metrics=True,
        cache_directory=str(tmp_path),
        refresh_interval=60,
        request_timeout=10,
    )
    client.initialize_client()
    try:
        assert client.is_initialized
        assert client.is_enabled(gated, {"userId": "7"}) is True
        assert client.is_enabled(gated, {"userId": "9"}) is False
        variant = client.get_variant(variant_flag, {"userId": "1"})
        assert variant["name"] == "dark" and variant["enabled"] is True
        assert variant["payload"] == {"type": "json", "value": '{"theme": "dark"}'}
        assert client.is_enabled(segmented, {"userId": "1", "properties": {"country": "NO"}}) is True
        assert client.is_enabled(segmented, {"userId": "1", "properties": {"country": "SE"}}) is False
        assert client.is_enabled(off, {"userId": "1"}) is False
    finally:
        client.destroy()
    applications = api.get("/api/admin/metrics/applications").json()["applications"]
    assert f"{prefix}-app" in {a["appName"] for a in applications}  # the SDK registered itself
