"""The official SDKs pointed at `flagproxy edge` agree with `flagproxy proxy` on the same flags.

npm `unleash-client` (the Node server SDK: reads the edge's /api/client/features and evaluates itself) and
npm `unleash-proxy-client` (the frontend SDK, run in Node: asks the edge's /api/frontend, by GET and by
POST) decide every flag for a few hundred contexts; `unleash-proxy-client` pointed at `flagproxy proxy`
(same server, same flags) is the reference. The SDKs are pinned in tests/sdk/node/package-lock.json, the one
npm project of the tests (tests/sdk/node/agree.mjs runs them here), and installed by .ci/run (`npm ci`).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.edge.conftest import DEV_CLIENT, DEV_FRONTEND
from tests.edge.harness import EdgeProcess, edge
from tests.http.processes import Process
from tests.server.harness import Api, ServerProcess, base_env

SDK_FOLDER = Path(__file__).resolve().parents[1] / "sdk" / "node"
PROXY_KEY = "sdk-agreement-proxy-key"
FLAGS = ["sdk-rollout", "sdk-constrained", "sdk-variants", "sdk-off", "sdk-listed", "sdk-strategy-variants"]


def contexts() -> list[dict[str, Any]]:
    regions = ["eu", "us", None]
    found = []
    for i in range(300):
        context: dict[str, Any] = {"userId": str(i), "sessionId": f"s{i % 7}"}
        region = regions[i % 3]
        if region is not None:
            context["properties"] = {"region": region}
        found.append(context)
    return found


def seed(api: Api) -> None:
    rollout = {"name": "flexibleRollout", "constraints": [],
               "parameters": {"rollout": "50", "stickiness": "userId", "groupId": "sdk-rollout"}}  # fmt: skip
    region = {"contextName": "region", "operator": "IN", "values": ["eu"]}
    listed = {"contextName": "userId", "operator": "IN", "values": [str(i) for i in range(0, 300, 7)]}
    strategies: dict[str, list[dict[str, Any]]] = {
        "sdk-rollout": [rollout],
        "sdk-constrained": [{"name": "default", "constraints": [region], "parameters": {}}],
        "sdk-variants": [{"name": "default", "constraints": [], "parameters": {}}],
        "sdk-off": [{"name": "default", "constraints": [], "parameters": {}}],
        "sdk-listed": [{"name": "default", "constraints": [listed], "parameters": {}}],
        "sdk-strategy-variants": [
            {
                "name": "flexibleRollout",
                "constraints": [],
                "parameters": {"rollout": "100", "stickiness": "default", "groupId": "sdk-strategy-variants"},
                "variants": [
                    {"name": "red", "weight": 300, "weightType": "variable", "stickiness": "default"},
                    {"name": "green", "weight": 700, "weightType": "variable", "stickiness": "default"},
                ],
            }
        ],
    }
    for name, listed_strategies in strategies.items():
        api.create_feature(name)
        for strategy in listed_strategies:
            api.add_strategy(name, strategy)
        if name != "sdk-off":
            api.switch(name, True)
    variants = [
        {"name": name, "weight": weight, "weightType": "variable", "stickiness": "userId"}
        for name, weight in (("a", 200), ("b", 300), ("c", 500))
    ]
    answer = api.put(
        "/api/admin/projects/default/features/sdk-variants/environments/development/variants", variants
    )
    assert answer.status == 200, answer.body


@pytest.fixture(scope="module")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EdgeProcess, Process]]:
    # A server of its own: these flags must not show up in other tests' answers.
    folder = tmp_path_factory.mktemp("sdk-agreement")
    upstream_server = ServerProcess(
        base_env(DATABASE_PATH=str(folder / "flags.db")), log_path=str(folder / "log")
    )
    upstream_server.start()
    seed(upstream_server.api())
    edge_process = edge(upstream_server.url, [DEV_CLIENT])
    proxy = Process(
        [],
        {
            **os.environ,
            "SERVICE_URL": f"{upstream_server.url}/api",
            "SERVICE_API_TOKEN": DEV_CLIENT,
            "SERVICE_PROXY_CLIENT_KEYS": PROXY_KEY,
            "SERVICE_FETCH_INTERVAL": "500",
            "ENABLE_ALL_ENDPOINT": "true",
        },
    )
    try:
        edge_process.wait_ready()
        proxy.wait_ready()
        yield edge_process, proxy
    finally:
        edge_process.stop()
        proxy.stop()
        upstream_server.stop()


def decide(sdk: str, url: str, token: str, *, post: bool = False) -> list[dict[str, list[Any]]]:
    assert (SDK_FOLDER / "node_modules" / sdk).is_dir(), "run `npm ci` in tests/sdk/node (.ci/run does)"
    job = {"sdk": sdk, "url": url, "token": token, "flags": FLAGS, "contexts": contexts(), "post": post}
    answer = subprocess.run(
        ["node", "agree.mjs"],
        cwd=SDK_FOLDER,
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert answer.returncode == 0, answer.stderr
    rows: list[dict[str, list[Any]]] = json.loads(answer.stdout)
    assert len(rows) == len(job["contexts"])
    return rows


def test_the_official_sdks_agree_through_the_edge(targets: tuple[EdgeProcess, Process]) -> None:
    edge_process, proxy = targets
    reference = decide("unleash-proxy-client", f"http://127.0.0.1:{proxy.port}/proxy", PROXY_KEY)
    # The reference is not trivial: rollouts split, constraints and lists select, variants vary.
    for flag in ("sdk-rollout", "sdk-constrained", "sdk-listed"):
        assert {row[flag][0] for row in reference} == {True, False}, flag
    assert {row["sdk-variants"][1] for row in reference} == {"a", "b", "c"}
    assert {row["sdk-strategy-variants"][1] for row in reference} == {"red", "green"}
    assert {row["sdk-off"][0] for row in reference} == {False}
    edge_url = f"http://127.0.0.1:{edge_process.port}"
    frontend_get = decide("unleash-proxy-client", f"{edge_url}/api/frontend", DEV_FRONTEND)
    frontend_post = decide("unleash-proxy-client", f"{edge_url}/api/frontend", DEV_FRONTEND, post=True)
    server_sdk = decide("unleash-client", f"{edge_url}/api", DEV_CLIENT)
    for answers, what in (
        (frontend_get, "frontend GET"),
        (frontend_post, "frontend POST"),
        (server_sdk, "server SDK"),
    ):
        differences = [
            (i, flag, reference[i][flag], row[flag])
            for i, row in enumerate(answers)
            for flag in FLAGS
            if row[flag] != reference[i][flag]
        ]
        assert differences == [], (what, differences[:5])
