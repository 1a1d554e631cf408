"""The proxy reveals evaluation results only (SPEC.md): no strategy parameter, constraint value, segment
content or user list reaches a client-key caller, whatever it asks.

The upstream serves flags whose internals are distinctive markers (`secret-…`); every toggle route is asked
with contexts that make the flags on, off and in between, and no answer may contain a marker. Only
`/proxy/client/features` (the server-side SDK document, behind expServerSideSdkConfig tokens) carries them.
"""

from __future__ import annotations

import json

from tests.http.loopback import KEY

MARKERS = [f"secret-{what}" for what in ("user-a", "user-b", "region", "group", "segment", "prop", "param")]

PAYLOAD = {
    "version": 2,
    "segments": [
        {"id": 7, "constraints": [{"contextName": "tier", "operator": "IN", "values": ["secret-segment"]}]}
    ],
    "features": [
        {
            "name": "listed-users",
            "enabled": True,
            "strategies": [{"name": "userWithId", "parameters": {"userIds": "secret-user-a,secret-user-b"}}],
        },
        {
            "name": "regional-rollout",
            "enabled": True,
            "strategies": [
                {
                    "name": "flexibleRollout",
                    "parameters": {"rollout": "50", "stickiness": "default", "groupId": "secret-group"},
                    "constraints": [
                        {"contextName": "region", "operator": "IN", "values": ["secret-region"]},
                        {"contextName": "secret-prop", "operator": "NOT_IN", "values": ["x"]},
                    ],
                }
            ],
        },
        {
            "name": "segmented",
            "enabled": True,
            "strategies": [{"name": "default", "segments": [7], "parameters": {"note": "secret-param"}}],
        },
        {
            "name": "with-variants",
            "enabled": True,
            "strategies": [{"name": "default"}],
            "variants": [
                {
                    "name": "blue",
                    "weight": 1000,
                    "stickiness": "default",
                    "overrides": [{"contextName": "userId", "values": ["secret-user-a"]}],
                    "payload": {"type": "string", "value": "shown-to-callers"},
                }
            ],
        },
    ],
}

CONTEXTS = [
    {},
    {"userId": "secret-user-a"},
    {"userId": "someone-else", "properties": {"region": "secret-region", "tier": "secret-segment"}},
    {"userId": "u3", "sessionId": "s3", "properties": {"region": "elsewhere", "tier": "gold"}},
]


def test_no_answer_reveals_what_a_flag_is_made_of(proxy_factory, upstream):
    upstream.payload = json.loads(json.dumps(PAYLOAD))
    proxy = proxy_factory(enable_all_endpoint=True, exp_server_side_sdk_config_tokens=["server-token"])
    names = [f["name"] for f in PAYLOAD["features"]]
    answers: list[bytes] = []
    seen_on: set[str] = set()
    for context in CONTEXTS:
        # Some contexts carry markers themselves (a listed userId, the region a constraint wants): the
        # answers echo no context value either.
        for path in ("/proxy", "/proxy/all"):
            status, _, body = proxy.post(path, {"context": context}, key=KEY)
            assert status == 200
            answers.append(body)
            seen_on |= {t["name"] for t in json.loads(body)["toggles"] if t["enabled"]}
        status, _, body = proxy.post("/proxy", {"context": context, "toggles": names}, key=KEY)
        assert status == 200
        answers.append(body)
        query = "&".join(f"{k}={v}" for k, v in context.items() if isinstance(v, str))
        answers.append(proxy.get(f"/proxy?{query}", key=KEY)[2])
        answers.append(proxy.get(f"/proxy/all?{query}", key=KEY)[2])
    assert seen_on == set(names)  # the contexts made every flag answer on somewhere
    for body in answers:
        text = body.decode()
        assert not [marker for marker in MARKERS if marker in text], text
    assert any(b"shown-to-callers" in body for body in answers)  # variant payloads are results: shown
    # The server-side SDK document has them all, and only a server-side token gets it.
    assert proxy.get("/proxy/client/features", key=KEY)[0] == 401
    status, _, document = proxy.get(
        "/proxy/client/features", headers={proxy.settings.client_keys_header_name: "server-token"}
    )
    assert status == 200 and all(marker.encode() in document for marker in MARKERS)
