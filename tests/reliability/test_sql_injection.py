"""SQL injection strings against the flag server, on SQLite and PostgreSQL: in every free-text field they
round-trip as text (stored and read back exactly), and in every path parameter of every operation of the
server's OpenAPI document (the other parameters naming real objects) they find nothing and change nothing.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from tests.reliability.figures import FIGURES
from tests.reliability.injections import SQL_INJECTIONS
from tests.reliability.logs import SERVER_SECRETS, assert_no_secret
from tests.reliability.scale import LONG
from tests.server.harness import PASSWORD, Api, ServerProcess, base_env

pytestmark = pytest.mark.slow

# Every path parameter gets every string in the long form; the short form takes a third of them.
PROBES = SQL_INJECTIONS if LONG else SQL_INJECTIONS[::3]


def strings(value: Any) -> set[str]:
    """Every string anywhere in a JSON value, keys included."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set(value) | {s for v in value.values() for s in strings(v)}
    if isinstance(value, list):
        return {s for v in value for s in strings(v)}
    return set()


def world(api: Api) -> dict[str, Any]:
    """What a request that changes nothing must leave as it was."""
    return {
        path: api.get(path).json()
        for path in (
            "/api/admin/projects",
            "/api/admin/projects/default/features",
            "/api/admin/segments",
            "/api/admin/api-tokens",
            "/api/admin/user-admin",
            "/api/admin/roles",
            "/api/admin/groups",
            "/api/admin/environments",
            "/api/admin/archive/features",
            "/api/admin/features/real-flag/tags",
        )
    } | {"client": _without_revision(api.client_features())}


def _without_revision(document: dict[str, Any]) -> dict[str, Any]:
    # A request that changes nothing may still raise the data revision (a DELETE of a tag that is not there
    # does): proxies then fetch an unchanged document once more. Noted in docs/reliability.md.
    return {key: value for key, value in document.items() if key != "meta"}


@pytest.fixture
def seeded(backend: str, backend_env: Any, tmp_path: Any) -> Any:
    """A server with one of each object, and the real values of every kind of path parameter."""
    log = tmp_path / "server.log"
    server = ServerProcess(base_env(**backend_env(backend), LOG_LEVEL="debug"), log_path=str(log)).start()
    api = server.api()
    api.create_feature("real-flag")
    api.create_feature("real-parent")
    strategy = api.add_strategy("real-flag", {"name": "userWithId", "parameters": {"userIds": "1,2"}})
    api.switch("real-flag", True)
    segment = api.create_segment("real-segment", [{"contextName": "x", "operator": "IN", "values": ["1"]}])
    assert (
        api.post("/api/admin/features/real-flag/tags", {"type": "simple", "value": "real-tag"}).status == 201
    )
    path = "/api/admin/projects/default/features/real-flag/dependencies"
    assert api.post(path, {"feature": "real-parent"}).status == 200
    user = api.create_user()
    role = api.post(
        "/api/admin/roles",
        {"name": "real-role", "type": "root-custom", "permissions": [{"name": "CREATE_FEATURE"}]},
    )
    group = api.post("/api/admin/groups", {"name": "real-group", "users": [{"user": {"id": user["id"]}}]})
    real = {
        "project_id": "default",
        "name": "real-flag",
        "environment": "development",
        "parent": "real-parent",
        "strategy_id": strategy["id"],
        "segment_id": segment["id"],
        "user_id": user["id"],
        "role_id": role.json().get("id", 1) if role.status < 300 else 1,
        "group_id": group.json().get("id", 1) if group.status < 300 else 1,
        "tag_type": "simple",
        "value": "real-tag",
        "secrets": [],  # the tokens the tests make: never in the log either
    }
    yield server, api, real
    assert server.stop() == 0
    assert_no_secret(log.read_text(), SERVER_SECRETS + real["secrets"])


def test_injection_strings_in_path_parameters_find_nothing_and_change_nothing(seeded):
    server, api, real = seeded
    document = api.get("/docs/openapi.json", token=None).json()
    before = world(api)
    sent = 0
    for template, methods in document["paths"].items():
        for method, operation in methods.items():
            names = [p["name"] for p in operation.get("parameters", []) if p.get("in") == "path"]
            for injected in names:
                for text in PROBES:
                    path = template
                    for name in names:
                        value = text if name == injected else str(real.get(name, "unknown"))
                        path = path.replace("{" + name + "}", quote(value, safe=""))
                    body = b"{}" if method in ("post", "put") else None
                    headers = {"Content-Type": "application/json"} if body else {}
                    answer = api.request(method.upper(), path, body=body, headers=headers)
                    sent += 1
                    assert answer.status < 500, (method, path, answer.status, answer.body[:300])
            # Answered or not (a DELETE of nothing may say 200, as Unleash's do), nothing changed.
            assert world(api) == before, (method, template)
    FIGURES.hostile_input(
        f"server ({'postgres' if 'DATABASE_URL' in server.env else 'sqlite'}): "
        "SQL injection in path parameters",
        sent,
    )
    assert world(api) == before


def created(answer: Any, what: str) -> dict[str, Any]:
    assert answer.status in (200, 201), (what, answer.status, answer.body[:300])
    return answer.json() if answer.body else {}


def test_injection_strings_in_every_free_text_field_round_trip_as_text(seeded):
    _, api, real = seeded
    secrets = real["secrets"]
    before = world(api)
    sent = 0
    for number, text in enumerate(SQL_INJECTIONS):
        name = f"inj-{number}"
        if "\x00" in text:
            # docs/server.md: PostgreSQL cannot store a NUL, so every body holding one is refused.
            answer = api.post("/api/admin/projects", {"id": name, "name": text})
            assert answer.status == 400 and answer.json()["name"] == "ValidationError", answer.body
            continue
        project = created(
            api.post("/api/admin/projects", {"id": name, "name": text, "description": text}), "project"
        )
        feature = created(
            api.post(f"/api/admin/projects/{name}/features", {"name": name, "description": text}), "feature"
        )
        strategy = {
            "name": "flexibleRollout",
            "title": text,
            "parameters": {"rollout": "50", "stickiness": "default", "groupId": text},
            "constraints": [{"contextName": text, "operator": "IN", "values": [text]}],
        }
        path = f"/api/admin/projects/{name}/features/{name}/environments/development"
        created(api.post(path + "/strategies", strategy), "strategy")
        variants = [
            {
                "name": text,
                "weight": 1000,
                "weightType": "variable",
                "stickiness": "default",
                "payload": {"type": "string", "value": text},
            }
        ]
        created(api.put(path + "/variants", variants), "variants")
        tag = created(
            api.post(f"/api/admin/features/{name}/tags", {"type": "simple", "value": text[:50]}), "tag"
        )
        segment = created(
            api.post(
                "/api/admin/segments",
                {
                    "name": f"seg-{number}",
                    "description": text,
                    "constraints": [{"contextName": "userId", "operator": "IN", "values": [text]}],
                },
            ),
            "segment",
        )
        token = created(api.post("/api/admin/api-tokens", {"tokenName": text, "type": "client"}), "token")
        secrets.append(token["secret"])
        user = created(
            api.post(
                "/api/admin/user-admin",
                {"email": f"inj{number}@example.com", "name": text, "password": PASSWORD, "rootRole": 3},
            ),
            "user",
        )
        sent += 8
        # Read back through other routes than the one that wrote.
        assert {text} <= strings(api.get(f"/api/admin/projects/{name}").json()), project
        stored = api.get(f"/api/admin/projects/{name}/features/{name}").json()
        assert text == stored["description"], feature
        assert text in strings(stored["environments"]), stored
        assert text in strings(api.get(path + "/variants").json())
        assert text[:50] in strings(api.get(f"/api/admin/features/{name}/tags").json()), tag
        assert text in strings(api.get(f"/api/admin/segments/{segment['id']}").json())
        assert text in {t["tokenName"] for t in api.get("/api/admin/api-tokens").json()["tokens"]}, token
        assert text == api.get(f"/api/admin/user-admin/{user['id']}").json()["name"]
        client = {f["name"]: f for f in api.client_features()["features"]}
        assert text in strings(client[name]), client[name]
        # The tag goes as it came: percent-encoded in the path.
        assert api.delete(f"/api/admin/features/{name}/tags/simple/{quote(text, safe='')}").status in (
            200,
            204,
        )
        assert text not in strings(api.get(f"/api/admin/features/{name}/tags").json())
    FIGURES.hostile_input("server: SQL injection in every free-text field (both databases)", sent)
    after = world(api)
    # What was there before is there as it was.
    assert all(feature in after["client"]["features"] for feature in before["client"]["features"])
    for key in (
        "/api/admin/environments",
        "/api/admin/roles",
        "/api/admin/groups",
        "/api/admin/features/real-flag/tags",
    ):
        assert after[key] == before[key], key
    real_flag = [
        f for f in after["/api/admin/projects/default/features"]["features"] if f["name"] == "real-flag"
    ]
    assert real_flag == [
        f for f in before["/api/admin/projects/default/features"]["features"] if f["name"] == "real-flag"
    ]
    assert len(after["/api/admin/user-admin"]["users"]) == len(
        before["/api/admin/user-admin"]["users"]
    ) + sum("\x00" not in text for text in SQL_INJECTIONS)
