"""Every failure is an error record {id, name, message} with SPEC.md's names; bad input never gives a 500.

The first test walks every administrative operation the OpenAPI document lists, so a new route is
covered the day it is added.
"""

from __future__ import annotations

import json
import re
import socket
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.harness import (
    CLIENT_TOKEN,
    FRONTEND_TOKEN,
    Api,
    ServerProcess,
    assert_error,
    unique,
)

# Values that have broken servers like this one: NUL characters (PostgreSQL cannot store them) and
# integers at the edges of 32-bit, 53-bit and 64-bit columns.
NASTY_TEXT = st.sampled_from(["\x00", "a\x00b", "é", "\ud7ff", " ", "%00", "../x"])
EDGE_INTEGERS = st.sampled_from([2**31 - 1, 2**31, -(2**31) - 1, 2**53, 2**63 - 1, 2**63, 2**64 - 1, -1])
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | EDGE_INTEGERS
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | NASTY_TEXT,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=12) | NASTY_TEXT, children, max_size=4)
    ),
    max_leaves=12,
)
FIELD_NAMES = st.sampled_from(
    ["name", "type", "constraints", "operator", "values", "value", "variants", "weight", "segments",
     "parameters", "payload", "description", "project", "tokenName", "environment", "bucket", "toggles",
     "appName", "sortOrder", "title", "expiresAt", "interval", "projects", "feature", "yes"]
)  # fmt: skip
BODIES = st.dictionaries(FIELD_NAMES, JSON, max_size=5) | JSON


def _is_record(answer_body: bytes) -> bool:
    record = orjson.loads(answer_body)
    return isinstance(record, dict) and {"id", "name", "message"} <= set(record)


def _admin_operations(api: Api) -> list[tuple[str, str, bool]]:
    """(method, path template, takes a body) of every /api/admin operation in the OpenAPI document."""
    paths = api.get("/docs/openapi.json", token=None).json()["paths"]
    return [
        (method.upper(), path, "requestBody" in operation)
        for path, operations in paths.items()
        if path.startswith("/api/admin")
        for method, operation in operations.items()
    ]


# A valid body for each operation that takes one, so that what is checked is the unknown resource.
VALID_BODIES: dict[str, Any] = {
    "/api/admin/api-tokens": {"tokenName": "t", "type": "client"},
    "/api/admin/projects": {"id": "p", "name": "P"},
    "/api/admin/projects/{project_id}": {"name": "P"},
    "/api/admin/environments": {"name": "e", "type": "test"},
    "/api/admin/segments": {"name": "s", "constraints": []},
    "/api/admin/playground": {"environment": "development", "context": {}},
    "/api/admin/projects/{project_id}/features/{name}/environments/{environment}/strategies"
    "/set-sort-order": [],
    "/api/admin/projects/{project_id}/features": {"name": "f"},
    "/api/admin/projects/{project_id}/features/{name}": {},
    "/api/admin/projects/{project_id}/features/{name}/variants": [],
    "/api/admin/projects/{project_id}/features/{name}/environments/{environment}/variants": [],
    "/api/admin/projects/{project_id}/features/{name}/dependencies": {"feature": "parent"},
    "/api/admin/projects/{project_id}/features/{name}/environments/{environment}/strategies": {
        "name": "default"
    },
    "/api/admin/projects/{project_id}/features/{name}/environments/{environment}/strategies/{strategy_id}": {
        "name": "default"
    },
    "/api/admin/features/{name}/tags": {"value": "ab"},
    "/api/admin/segments/{segment_id}": {},
    "/api/admin/user-admin": {"email": "someone@example.com"},
    "/api/admin/user-admin/{user_id}": {},
    "/api/admin/user/tokens": {"description": "d", "expiresAt": "2099-01-01T00:00:00Z"},
    "/api/admin/invite-link/tokens": {"name": "n", "expiresAt": "2099-01-01T00:00:00Z"},
    "/api/admin/invite-link/tokens/{secret}": {},
    "/api/admin/roles": {"name": "r"},
    "/api/admin/roles/{role_id}": {"name": "r"},
    "/api/admin/groups": {"name": "g"},
    "/api/admin/groups/{group_id}": {"name": "g"},
    "/api/admin/projects/{project_id}/access": {"roles": []},
}
# Routes that act for the signed-in user (their personal access tokens): an admin token has no user, so
# they are asked with a personal access token.
USER_ONLY = {"/api/admin/user/tokens", "/api/admin/user/tokens/{token_id}"}
# What an unknown resource in the path gives, where that is not 404 NotFoundError.
UNKNOWN_RESOURCE = {
    # Unleash lists an unknown project's features as an empty list.
    ("GET", "/api/admin/projects/{project_id}/features"): (200, None),
    # SPEC.md: the segment update answers only 204, 400, 401, 403, 409, 415.
    ("PUT", "/api/admin/segments/{segment_id}"): (400, "ValidationError"),
}


def test_every_admin_operation_fails_with_spec_error_records(api: Api) -> None:
    _, personal = api.user_with_token(root_role=1)
    operations = _admin_operations(api)
    assert len(operations) >= 40, operations  # the document lists them all; none is skipped silently
    for method, template, takes_body in operations:
        path = re.sub(r"\{segment_id\}", "99999999", template)
        path = re.sub(r"\{(\w+)\}", lambda _: unique("nope"), path)
        body = VALID_BODIES.get(template) if takes_body else None
        if method == "POST" and template == "/api/admin/projects/{project_id}/access":
            body = {"roles": [5]}
        where = (method, template)
        as_owner = Api(api.port, personal if template in USER_ONLY else api.token)
        for token in (None, "nope", "*:*.wrong-secret"):
            unknown = api.request(method, path, body, token=token)
            assert_error(unknown, 401, "AuthenticationRequired", context=where)
        for token in (CLIENT_TOKEN, FRONTEND_TOKEN):
            wrong_kind = api.request(method, path, body, token=token)
            assert_error(wrong_kind, 403, "NoAccessError", context=where)
        if takes_body:
            assert body is not None, f"no valid body for {where}"
            for headers in ({"Content-Type": "text/plain"}, {}):
                wrong_type = as_owner.request(method, path, body=orjson.dumps(body), headers=headers)
                assert_error(wrong_type, 415, "ContentTypeerror", context=where)
            malformed = as_owner.request(
                method, path, body=b"{", headers={"Content-Type": "application/json"}
            )
            assert_error(malformed, 400, "ValidationError", "body", context=where)
        if "{" not in template:
            continue
        expected_status, expected_name = UNKNOWN_RESOURCE.get(where, (404, "NotFoundError"))
        answer = as_owner.request(method, path, body)
        if expected_name is None:
            assert answer.status == expected_status, (where, answer.body)
        else:
            assert_error(answer, expected_status, expected_name, context=where)


def test_unknown_route_and_method(api: Api) -> None:
    missing = api.get(f"/api/admin/{unique('nowhere')}")
    assert_error(missing, 404, "NotFoundError")
    wrong_method = api.request("PATCH", "/api/admin/environments")
    assert wrong_method.status == 405 and _is_record(wrong_method.body)


def _raw_exchange(port: int, head: bytes, body: bytes = b"") -> tuple[bytes, BaseException | None]:
    """Send `head` and `body` on one connection and read until the server closes it: what came back, and
    the connection error that ended the exchange (None when the server answered and closed cleanly)."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        try:
            sock.sendall(head + body)
        except (BrokenPipeError, ConnectionResetError) as error:
            return received, error  # closed while the body was still going out
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError as error:
            return received, error
    return received, None


def _status_and_body(raw: bytes) -> tuple[int, bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_body_too_large_is_refused(server: ServerProcess) -> None:
    size = 2_000_000
    head = (
        f"POST /api/admin/segments HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {server.api().token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"
    ).encode()
    # The announced length alone is refused before any of the body is read: a 413 error record.
    raw, error = _raw_exchange(server.port, head)
    assert error is None, error
    status, body = _status_and_body(raw)
    assert status == 413 and _is_record(body), raw[:300]
    # Sending the body anyway: the server answers 413 and closes; the close can overtake the answer
    # (a reset while the body is still arriving), which is the only other acceptable outcome.
    raw, error = _raw_exchange(server.port, head, b'{"name": "' + b"x" * (size - 12) + b'"}')
    if raw:
        status, body = _status_and_body(raw)
        assert status == 413 and _is_record(body), raw[:300]
    else:
        assert isinstance(error, (BrokenPipeError, ConnectionResetError)), error
    assert server.api().get("/api/admin/segments").status == 200  # and it keeps serving


def test_headers_too_large_are_refused_with_431(api: Api) -> None:
    # Sanic's limit on the request line and headers (8 KB) is not the body's: 431 as the proxy answers.
    answer = api.get("/api/admin/segments", headers={"X-Padding": "p" * 9000})
    assert_error(answer, 431, "RequestHeaderFieldsTooLarge")


def test_non_object_bodies(api: Api) -> None:
    for body in (b"[]", b"1", b'"x"', b"null", b""):
        answer = api.post("/api/admin/segments", body=body, headers={"Content-Type": "application/json"})
        assert_error(answer, 400, "ValidationError", "body")


def test_text_holding_nul_is_refused_naming_the_field(api: Api) -> None:
    # PostgreSQL cannot store a NUL character; both backends refuse it alike, naming where it is.
    feature = unique("nul")
    api.create_feature(feature)
    segment = api.create_segment(unique("nul"), [])
    base = f"/api/admin/projects/default/features/{feature}"
    cases: list[tuple[str, str, Any, str, str | None]] = [
        ("POST", "/api/admin/projects/default/features", {"name": unique("n"), "description": "a\x00"},
         "description", None),
        ("PUT", base, {"description": "\x00"}, "description", None),
        ("POST", "/api/admin/segments", {"name": "a\x00b", "constraints": []}, "name", None),
        ("PUT", f"/api/admin/segments/{segment['id']}",
         {"constraints": [{"contextName": "userId", "operator": "IN", "values": ["ok", "b\x00"]}]},
         "constraints[0].values[1]", None),
        ("POST", f"{base}/environments/development/strategies", {"name": "default", "title": "\x00"},
         "title", None),
        ("POST", f"{base}/environments/development/strategies",
         {"name": "default", "parameters": {"a\x00": "1"}}, "parameters", None),
        ("PUT", f"{base}/environments/development/variants", [{"name": "a\x00"}], "variants[0].name", None),
        ("POST", f"{base}/dependencies", {"feature": "\x00"}, "feature", None),
        ("POST", f"/api/admin/features/{feature}/tags", {"type": "ab\x00", "value": "cd"}, "type", None),
        ("POST", "/api/admin/environments", {"name": unique("e"), "type": "\x00"}, "type", None),
        ("POST", "/api/admin/projects", {"id": unique("p"), "name": "\x00"}, "name", None),
        ("POST", "/api/admin/api-tokens", {"tokenName": "\x00", "type": "client"}, "tokenName", None),
        ("POST", "/api/client/metrics", {"appName": "a", "bucket": {"toggles": {"x\x00": {}}}},
         "bucket.toggles", CLIENT_TOKEN),
        ("POST", "/api/client/register", {"appName": "\x00"}, "appName", CLIENT_TOKEN),
    ]  # fmt: skip
    for method, path, body, field, token in cases:
        answer = api.request(method, path, body, token=token or api.token)
        assert_error(answer, 400, "ValidationError", field, context=(method, path, body))
    assert api.get(f"/api/admin/segments/{segment['id']}").json()["constraints"] == []  # nothing changed


def test_numbers_beyond_their_columns_are_refused_naming_the_field(api: Api) -> None:
    feature = unique("big")
    api.create_feature(feature)
    strategies = f"/api/admin/projects/default/features/{feature}/environments/development/strategies"
    # The largest sortOrder an INTEGER column holds is accepted by both backends; one more is not.
    assert api.add_strategy(feature, {"name": "default", "sortOrder": 2**31 - 1})["sortOrder"] == 2**31 - 1
    cases: list[tuple[str, Any, str, str | None]] = [
        (strategies, {"name": "default", "sortOrder": 2**31}, "sortOrder", None),
        (strategies, {"name": "default", "sortOrder": -(2**31) - 1}, "sortOrder", None),
        (strategies, {"name": "default", "segments": [2**63]}, "segments[0]", None),
        (strategies, {"name": "default", "segments": [2**63 - 1]}, "segments[0]", None),  # no such segment
        ("/api/admin/environments", {"name": unique("e"), "type": "t", "sortOrder": 2**40}, "sortOrder",
         None),
        ("/api/client/register", {"appName": "a", "interval": 1e300}, "interval", CLIENT_TOKEN),
        ("/api/client/register", {"appName": "a", "interval": -1}, "interval", CLIENT_TOKEN),
        ("/api/client/metrics", {"appName": "a", "bucket": {"toggles": {feature: {"yes": 2**53}}}},
         f"bucket.toggles.{feature}.yes", CLIENT_TOKEN),
    ]  # fmt: skip
    for path, body, field, token in cases:
        answer = api.post(path, body, token=token or api.token)
        assert_error(answer, 400, "ValidationError", field, context=body)
    # Counts up to 2^53 - 1 are taken, and they add up exactly beyond what a JSON double holds.
    big = {"appName": unique("app"), "bucket": {"toggles": {feature: {"yes": 2**53 - 1, "no": 1}}}}
    for _ in range(2):
        assert api.post("/api/client/metrics", big, token=CLIENT_TOKEN).status == 202
    usage = api.get(f"/api/admin/client-metrics/features/{feature}").json()["lastHourUsage"]
    assert [(row["yes"], row["no"]) for row in usage] == [(2 * (2**53 - 1), 2)]


def test_query_parameters_out_of_range(api: Api) -> None:
    feature = unique("hours")
    api.create_feature(feature)
    path = f"/api/admin/client-metrics/features/{feature}"
    for hours in ("%C2%B2", "9" * 30, "0", "169", "-1", "1.5"):  # %C2%B2 is a superscript two
        assert_error(api.get(f"{path}?hoursBack={hours}"), 400, "ValidationError", "hoursBack")
    assert api.get(f"{path}?hoursBack=168").status == 200


ROUTES = [
    ("POST", "/api/admin/projects/default/features"),
    ("PUT", "/api/admin/projects/default/features/{feature}"),
    ("POST", "/api/admin/projects/default/features/{feature}/environments/development/strategies"),
    ("PUT", "/api/admin/projects/default/features/{feature}/environments/development/variants"),
    ("PUT", "/api/admin/projects/default/features/{feature}/variants"),
    ("POST", "/api/admin/projects/default/features/{feature}/dependencies"),
    ("POST", "/api/admin/segments"),
    ("PUT", "/api/admin/segments/{segment}"),
    ("POST", "/api/admin/api-tokens"),
    ("POST", "/api/admin/environments"),
    ("POST", "/api/admin/projects"),
    ("POST", "/api/admin/features/{feature}/tags"),
    ("POST", "/api/client/metrics"),
    ("POST", "/api/client/register"),
]


def test_random_bodies_never_cause_a_server_error(server: ServerProcess) -> None:
    api = server.api()
    feature = unique("fuzz")
    api.create_feature(feature)
    segment = api.create_segment(unique("fuzz"), [])

    @settings(
        max_examples=150,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(route=st.sampled_from(ROUTES), body=BODIES)
    def check(route: tuple[str, str], body: object) -> None:
        method, template = route
        path = template.format(feature=feature, segment=segment["id"])
        token = CLIENT_TOKEN if path.startswith("/api/client") else api.token
        encoded = json.dumps(body).encode()  # stdlib: it also writes integers beyond 64 bits
        headers = {"Content-Type": "application/json"}
        answer = api.request(method, path, body=encoded, token=token, headers=headers)
        assert answer.status < 500, (method, path, body, answer.body)
        if answer.status >= 400:
            assert _is_record(answer.body)

    check()
