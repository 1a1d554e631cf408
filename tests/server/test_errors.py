"""Every failure is an error record {id, name, message}; bad input never gives a 500."""

from __future__ import annotations

import json

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.server.harness import CLIENT_TOKEN, Api, ServerProcess, unique

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
FIELD_NAMES = st.sampled_from(
    ["name", "type", "constraints", "operator", "values", "variants", "weight", "segments", "parameters",
     "payload", "description", "project", "tokenName", "environment", "bucket", "toggles", "appName"]
)  # fmt: skip
BODIES = st.dictionaries(FIELD_NAMES, JSON, max_size=5) | JSON


def _is_record(answer_body: bytes) -> bool:
    record = orjson.loads(answer_body)
    return isinstance(record, dict) and {"id", "name", "message"} <= set(record)


def test_unknown_route_and_method(api: Api) -> None:
    missing = api.get(f"/api/admin/{unique('nowhere')}")
    assert (missing.status, missing.json()["name"]) == (404, "NotFoundError") and _is_record(missing.body)
    wrong_method = api.request("PATCH", "/api/admin/environments")
    assert wrong_method.status == 405 and _is_record(wrong_method.body)


def test_body_too_large_is_refused(api: Api) -> None:
    huge = b'{"name": "' + b"x" * 2_000_000 + b'"}'
    try:
        answer = api.post("/api/admin/segments", body=huge, headers={"Content-Type": "application/json"})
    except ConnectionError:
        return  # the server may close the connection while the body is still being sent
    assert answer.status == 413 and _is_record(answer.body)


def test_non_object_bodies(api: Api) -> None:
    for body in (b"[]", b"1", b'"x"', b"null", b""):
        answer = api.post("/api/admin/segments", body=body, headers={"Content-Type": "application/json"})
        assert (answer.status, answer.json()["name"]) == (400, "ValidationError"), body


ROUTES = [
    ("POST", "/api/admin/projects/default/features"),
    ("PUT", "/api/admin/projects/default/features/{feature}"),
    ("POST", "/api/admin/projects/default/features/{feature}/environments/development/strategies"),
    ("PUT", "/api/admin/projects/default/features/{feature}/environments/development/variants"),
    ("POST", "/api/admin/projects/default/features/{feature}/dependencies"),
    ("POST", "/api/admin/segments"),
    ("PUT", "/api/admin/segments/{segment}"),
    ("POST", "/api/admin/api-tokens"),
    ("POST", "/api/admin/environments"),
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
        max_examples=60,
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
