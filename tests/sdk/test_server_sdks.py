"""Server-side SDKs against the real thing: the official Node SDK (npm `unleash-client`, pinned in
tests/sdk/node/package-lock.json) and the official Python SDK (`UnleashClient`) each read both the proxy's
server-side endpoint (`/proxy/client/features` with an expServerSideSdkConfig token) and the flag server's
client API, and all four agree with the proxy's own POST /proxy answers on every flag for 1000 seeded
contexts. Real `flagproxy server` (SQLite and PostgreSQL) and `flagproxy proxy` processes on loopback.

Flags whose answer depends on randomness are left out by a rule read from the features document
(`depends_on_randomness`), not by name: the sample set holds one such flag, and the test checks the rule
finds exactly it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flagproxy.demo import seed
from tests.demo.processes import ProxyProcess
from tests.demo.test_sdk_agreement import _contexts, _more_flags
from tests.sdk.oracle import depends_on_randomness, node_answers, python_answers
from tests.server.harness import ADMIN_TOKEN, CLIENT_TOKEN, ServerProcess

pytestmark = pytest.mark.slow

CONTEXTS = 1000
SEED = 20261125
APP_NAME = "sdk-agreement"
ENVIRONMENT = "development"  # sdk_client's
SERVER_SIDE_TOKEN = "sdk-test-server-side-token"
RANDOM_FLAG = "coin-flip"


def proxy_answers(proxy: ProxyProcess, flags: list[str], contexts: list[dict[str, Any]]) -> list[dict]:
    answers = []
    for context in contexts:
        body = {"toggles": flags, "context": {**context, "appName": APP_NAME, "environment": ENVIRONMENT}}
        status, answer = proxy.request("POST", "/proxy", body)
        assert status == 200, answer
        toggles = {t["name"]: t for t in answer["toggles"]}
        answers.append(
            {
                flag: (
                    toggles[flag]["enabled"],
                    {
                        k: v
                        for k, v in toggles[flag]["variant"].items()
                        if k in ("name", "enabled", "payload")
                    },
                )
                for flag in flags
            }
        )
    return answers


def test_node_and_python_sdks_agree_with_the_proxy(
    server: ServerProcess, proxy_factory: Callable[..., ProxyProcess], tmp_path: Path
) -> None:
    api = server.api()
    seed(server.url, ADMIN_TOKEN)
    _more_flags(api)
    api.create_feature(RANDOM_FLAG)
    api.add_strategy(
        RANDOM_FLAG, {"name": "flexibleRollout", "parameters": {"rollout": "50", "stickiness": "random"}}
    )
    api.switch(RANDOM_FLAG, True)
    proxy = proxy_factory(500, "--exp-server-side-sdk-config-tokens", SERVER_SIDE_TOKEN)

    answer = server.api(CLIENT_TOKEN).get("/api/client/features")
    assert answer.status == 200
    document = answer.json()
    random_flags = {f["name"] for f in document["features"] if depends_on_randomness(f)}
    assert random_flags == {RANDOM_FLAG}
    flags = sorted(f["name"] for f in document["features"] if f["name"] not in random_flags)
    assert len(flags) >= 13

    contexts = _contexts(CONTEXTS, SEED)
    expected = proxy_answers(proxy, flags, contexts)
    proxy_api = f"http://127.0.0.1:{proxy.port}/proxy"
    readers = {
        "node via the proxy": node_answers(proxy_api + "/", SERVER_SIDE_TOKEN, flags, contexts, APP_NAME),
        "node via the server": node_answers(f"{server.url}/api/", CLIENT_TOKEN, flags, contexts, APP_NAME),
        "python via the proxy": python_answers(
            proxy_api, SERVER_SIDE_TOKEN, flags, contexts, APP_NAME, tmp_path / "p"
        ),
        "python via the server": python_answers(
            f"{server.url}/api", CLIENT_TOKEN, flags, contexts, APP_NAME, tmp_path / "s"
        ),
    }
    for reader, answers in readers.items():
        disagreements = [
            (flag, context, expected[i][flag], answers[i][flag])
            for i, context in enumerate(contexts)
            for flag in flags
            if answers[i][flag] != expected[i][flag]
        ]
        assert disagreements == [], (reader, len(disagreements), disagreements[:3])
    # The contexts reach both outcomes of every flag that is neither simply on nor simply off.
    for flag in ("new-checkout", "premium-search", "legacy-gradual", "numbers", "session-sticky"):
        outcomes = {answer[flag][0] for answer in expected}
        assert outcomes == {True, False}, flag
