"""API tokens: INIT tokens, create/list/delete, and which token kind each route family accepts."""

from __future__ import annotations

import re
from urllib.parse import quote

from tests.server.harness import ADMIN_TOKEN, CLIENT_TOKEN, FRONTEND_TOKEN, Api, unique


def test_init_tokens_are_listed(api: Api) -> None:
    tokens = {t["secret"]: t for t in api.get("/api/admin/api-tokens").json()["tokens"]}
    assert tokens[ADMIN_TOKEN]["type"] == "admin"
    assert tokens[CLIENT_TOKEN]["type"] == "client"
    assert tokens[CLIENT_TOKEN]["environment"] == "development"
    assert tokens[CLIENT_TOKEN]["projects"] == ["*"]
    assert tokens[FRONTEND_TOKEN]["type"] == "frontend"


def test_create_client_token_in_unleash_format(api: Api) -> None:
    answer = api.post(
        "/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client", "environment": "production"}
    )
    assert answer.status == 201
    token = answer.json()
    assert re.fullmatch(r"\*:production\.[0-9a-f]{56}", token["secret"])
    assert token["projects"] == ["*"] and token["type"] == "client"
    assert api.get("/api/client/features", token=token["secret"]).status == 200


def test_backend_type_is_stored_as_client_and_projects_shape_the_secret(api: Api) -> None:
    answer = api.post(
        "/api/admin/api-tokens", {"tokenName": unique("t"), "type": "Backend", "projects": ["default"]}
    )
    assert answer.status == 201
    token = answer.json()
    assert token["type"] == "client"
    assert token["secret"].startswith("default:development.")
    assert token["project"] == "default"


def test_frontend_token_cannot_read_the_client_api(api: Api) -> None:
    answer = api.post("/api/admin/api-tokens", {"tokenName": unique("t"), "type": "frontend"})
    assert answer.status == 201
    assert api.get("/api/client/features", token=answer.json()["secret"]).error_name == "NoAccessError"


def test_admin_tokens_cannot_be_created_through_the_api(api: Api) -> None:
    answer = api.post("/api/admin/api-tokens", {"tokenName": unique("t"), "type": "admin"})
    assert answer.status == 400
    assert answer.json()["name"] == "ValidationError"
    assert '"type"' in answer.json()["message"]


def test_token_creation_names_the_field_at_fault(api: Api) -> None:
    answer = api.post("/api/admin/api-tokens", {"type": "client"})
    assert (answer.status, answer.json()["name"]) == (400, "ValidationError")
    assert "tokenName" in answer.json()["message"]
    answer = api.post("/api/admin/api-tokens", {"tokenName": "x", "type": "client", "environment": "nope"})
    assert answer.status == 400 and '"environment"' in answer.json()["message"]
    answer = api.post("/api/admin/api-tokens", {"tokenName": "x", "type": "client", "projects": ["nope"]})
    assert answer.status == 400 and '"projects[0]"' in answer.json()["message"]


def test_deleted_token_is_refused(api: Api) -> None:
    secret = api.post("/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client"}).json()["secret"]
    assert api.delete(f"/api/admin/api-tokens/{quote(secret)}").status == 200
    answer = api.get("/api/client/features", token=secret)
    assert (answer.status, answer.json()["name"]) == (401, "AuthenticationRequired")
    assert secret not in {t["secret"] for t in api.get("/api/admin/api-tokens").json()["tokens"]}
    assert api.delete(f"/api/admin/api-tokens/{quote(secret)}").status == 404


def test_missing_and_unknown_keys_are_401_with_an_error_record(api: Api) -> None:
    for token in (None, "nope", "*:*.wrong"):
        for path in ("/api/admin/projects", "/api/client/features", "/api/admin/no-such-route"):
            answer = api.get(path, token=token)
            assert answer.status == 401
            record = answer.json()
            assert record["name"] == "AuthenticationRequired"
            assert record["id"] and record["message"]


def test_client_and_frontend_tokens_get_403_on_the_admin_api(api: Api) -> None:
    for token in (CLIENT_TOKEN, FRONTEND_TOKEN):
        answer = api.get("/api/admin/projects", token=token)
        assert (answer.status, answer.json()["name"]) == (403, "NoAccessError")


def test_admin_token_gets_403_on_the_client_api(api: Api) -> None:
    assert api.get("/api/client/features").json()["name"] == "NoAccessError"


def test_bearer_prefix_is_accepted(api: Api) -> None:
    assert api.get("/api/admin/projects", token=f"Bearer {ADMIN_TOKEN}").status == 200
