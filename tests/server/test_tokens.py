"""API tokens: INIT tokens, create/list/delete, and which token kind each route family accepts."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from urllib.parse import quote

import psycopg

from tests.server.harness import (
    ADMIN_TOKEN,
    CLIENT_TOKEN,
    DEFAULT_PROJECT_CLIENT_TOKEN,
    FRONTEND_TOKEN,
    PROD_CLIENT_TOKEN,
    Api,
    ServerProcess,
    assert_error,
    unique,
)


def _served(api: Api, token: str, query: str = "") -> set[str]:
    return {f["name"] for f in api.client_features(token, query)["features"]}


def test_init_tokens_are_listed(api: Api) -> None:
    tokens = {t["secret"]: t for t in api.get("/api/admin/api-tokens").json()["tokens"]}
    assert tokens[ADMIN_TOKEN]["type"] == "admin"
    assert tokens[CLIENT_TOKEN]["type"] == "client"
    assert tokens[CLIENT_TOKEN]["environment"] == "development"
    assert tokens[CLIENT_TOKEN]["projects"] == ["*"]
    assert tokens[FRONTEND_TOKEN]["type"] == "frontend"
    assert tokens[PROD_CLIENT_TOKEN]["environment"] == "production"  # the second of a comma-separated list
    scoped = tokens[DEFAULT_PROJECT_CLIENT_TOKEN]
    assert (scoped["type"], scoped["projects"], scoped["environment"]) == (
        "client",
        ["default"],
        "development",
    )


def test_init_client_token_is_scoped_to_its_project(api: Api) -> None:
    project = unique("proj")
    api.post("/api/admin/projects", {"id": project, "name": "P"})
    inside, outside = unique("inside"), unique("outside")
    api.create_feature(inside)
    api.create_feature(outside, project=project)
    assert inside in _served(api, DEFAULT_PROJECT_CLIENT_TOKEN)
    assert outside not in _served(api, DEFAULT_PROJECT_CLIENT_TOKEN)
    assert outside not in _served(api, DEFAULT_PROJECT_CLIENT_TOKEN, f"?project={project}")
    assert {inside, outside} <= _served(api, CLIENT_TOKEN)


def test_token_for_several_projects(api: Api) -> None:
    first, second = unique("first"), unique("second")
    for project in (first, second):
        api.post("/api/admin/projects", {"id": project, "name": project})
        api.create_feature(f"{project}-flag", project=project)
    answer = api.post(
        "/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client", "projects": [first, second]}
    )
    assert answer.status == 201
    token = answer.json()
    assert token["secret"].startswith("[]:development.") and token["projects"] == [first, second]
    assert _served(api, token["secret"]) == {f"{first}-flag", f"{second}-flag"}
    assert _served(api, token["secret"], f"?project={first}") == {f"{first}-flag", f"{second}-flag"}


def test_expired_tokens_are_unknown(api: Api) -> None:
    past = api.post(
        "/api/admin/api-tokens",
        {"tokenName": unique("t"), "type": "client", "expiresAt": "2020-01-01T00:00:00Z"},
    ).json()
    assert_error(api.get("/api/client/features", token=past["secret"]), 401, "AuthenticationRequired")
    future = api.post(
        "/api/admin/api-tokens",
        {"tokenName": unique("t"), "type": "client", "expiresAt": "2999-01-01T00:00:00+02:00"},
    ).json()
    assert future["expiresAt"] == "2998-12-31T22:00:00.000Z"
    assert api.get("/api/client/features", token=future["secret"]).status == 200
    for moment in ("9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "tomorrow"):
        refused = api.post("/api/admin/api-tokens", {"tokenName": "t", "type": "client", "expiresAt": moment})
        assert_error(refused, 400, "ValidationError", "expiresAt")


def _set_stored_expiry(server: ServerProcess, secret: str, expires_at: str) -> None:
    """Write a token row's expiry behind the server's back, as a hand edit or another tool could. The row is
    found by the secret's SHA-256 (the server keeps no secret), computed here, not with flagproxy's own."""
    secret_hash = hashlib.sha256(secret.encode()).hexdigest()
    if "DATABASE_URL" in server.env:
        with psycopg.connect(server.env["DATABASE_URL"], autocommit=True) as connection:
            sql = "UPDATE api_tokens SET expires_at = %s WHERE secret_hash = %s"
            assert connection.execute(sql, (expires_at, secret_hash)).rowcount == 1
    else:
        with sqlite3.connect(server.env["DATABASE_PATH"]) as connection:
            sql = "UPDATE api_tokens SET expires_at = ? WHERE secret_hash = ?"
            assert connection.execute(sql, (expires_at, secret_hash)).rowcount == 1


def test_an_expiry_that_cannot_be_read_has_passed(server: ServerProcess, api: Api) -> None:
    """One fail-closed rule for every credential: an API token whose stored expiry cannot be read is
    refused on every route family and by /edge/validate, as a personal access token's already was."""
    client, frontend = (
        api.post("/api/admin/api-tokens", {"tokenName": unique("t"), "type": kind}).json()["secret"]
        for kind in ("client", "frontend")
    )
    assert api.get("/api/client/features", token=client).status == 200
    assert api.get("/api/frontend", token=frontend).status == 200
    for secret in (client, frontend):
        _set_stored_expiry(server, secret, "not a date")
    assert_error(api.get("/api/client/features", token=client), 401, "AuthenticationRequired")
    assert_error(api.get("/api/frontend", token=frontend), 401, "AuthenticationRequired")
    assert api.post("/edge/validate", {"tokens": [client, frontend]}, token=None).json()["tokens"] == []
    # An expiry written without an offset is read as UTC (the server writes UTC), not refused.
    _set_stored_expiry(server, client, "2999-01-01T00:00:00")
    assert api.get("/api/client/features", token=client).status == 200


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
    assert_error(api.get("/api/client/features", token=answer.json()["secret"]), 403, "NoAccessError")


def test_admin_tokens_cannot_be_created_through_the_api(api: Api) -> None:
    answer = api.post("/api/admin/api-tokens", {"tokenName": unique("t"), "type": "admin"})
    assert_error(answer, 400, "ValidationError", "type")


def test_token_creation_names_the_field_at_fault(api: Api) -> None:
    answer = api.post("/api/admin/api-tokens", {"type": "client"})
    assert_error(answer, 400, "ValidationError", "tokenName")
    answer = api.post("/api/admin/api-tokens", {"tokenName": "x"})
    assert_error(answer, 400, "ValidationError", "type")
    answer = api.post("/api/admin/api-tokens", {"tokenName": "x", "type": "client", "environment": "nope"})
    assert_error(answer, 400, "ValidationError", "environment")
    answer = api.post("/api/admin/api-tokens", {"tokenName": "x", "type": "client", "projects": ["nope"]})
    assert_error(answer, 400, "ValidationError", "projects[0]")


def test_deleted_token_is_refused(api: Api) -> None:
    secret = api.post("/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client"}).json()["secret"]
    assert api.delete(f"/api/admin/api-tokens/{quote(secret)}").status == 200
    answer = api.get("/api/client/features", token=secret)
    assert_error(answer, 401, "AuthenticationRequired")
    assert secret not in {t["secret"] for t in api.get("/api/admin/api-tokens").json()["tokens"]}
    assert_error(api.delete(f"/api/admin/api-tokens/{quote(secret)}"), 404, "NotFoundError")


def test_missing_and_unknown_keys_are_401_with_an_error_record(api: Api) -> None:
    for token in (None, "nope", "*:*.wrong"):
        for path in ("/api/admin/projects", "/api/client/features", "/api/admin/no-such-route"):
            assert_error(api.get(path, token=token), 401, "AuthenticationRequired")


def test_client_and_frontend_tokens_get_403_on_the_admin_api(api: Api) -> None:
    for token in (CLIENT_TOKEN, FRONTEND_TOKEN):
        assert_error(api.get("/api/admin/projects", token=token), 403, "NoAccessError")


def test_admin_token_gets_403_on_the_client_api(api: Api) -> None:
    assert_error(api.get("/api/client/features"), 403, "NoAccessError")


def test_bearer_prefix_is_accepted(api: Api) -> None:
    assert api.get("/api/admin/projects", token=f"Bearer {ADMIN_TOKEN}").status == 200
