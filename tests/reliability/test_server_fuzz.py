"""The flag server fuzzed from its own OpenAPI document (/docs/openapi.json), on SQLite and PostgreSQL.

For every operation the document lists, hypothesis draws path parameters (known names, numbers past any
integer column, SQL injection strings, any text), query strings, headers and credentials, and a body built
from the operation's schema (hostile values in every field), JSON of any other shape, or bytes that are not
JSON. Every answer is under 500; afterwards the server still runs, its log (at debug level) holds no
traceback and none of the credentials used, and a
sentinel project that no generated request names answers exactly as before.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.reliability.figures import FIGURES
from tests.reliability.injections import KNOWN_WORDS, SQL_INJECTIONS
from tests.reliability.logs import SERVER_SECRETS, assert_no_secret
from tests.reliability.scale import SERVER_FUZZ_EXAMPLES, fuzz_settings
from tests.server.harness import ADMIN_TOKEN, CLIENT_TOKEN, FRONTEND_TOKEN, Api, ServerProcess, base_env

pytestmark = pytest.mark.slow

SENTINEL_PROJECT = "sentinel-project"
SENTINEL_FLAG = "sentinel-flag"
# Generated text that would name the sentinel (or switch off the environment it is read in) is left out.
FORBIDDEN = {SENTINEL_PROJECT, SENTINEL_FLAG, "development"}

hostile_text = (
    st.text(max_size=40)
    | st.sampled_from(SQL_INJECTIONS + KNOWN_WORDS)
    | st.sampled_from(["", " ", "x" * 20_000, "\u202e\u0000\ud7ff", "../../etc/passwd", "%00", "null"])
).filter(lambda text: text not in FORBIDDEN)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | hostile_text
)
junk = st.recursive(
    leaves,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(hostile_text, children, max_size=4),
    max_leaves=15,
)


def from_schema(schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values shaped like `schema` (its types, enums and properties), hostile within that shape."""
    if depth > 5:
        return leaves
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(option, depth + 1) for option in schema[key]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"]) | hostile_text
    kind = schema.get("type")
    if kind == "object":
        properties = {k: v for k, v in (schema.get("properties") or {}).items() if k != "model_config"}
        if not properties:
            return st.dictionaries(hostile_text, leaves, max_size=4)
        return st.fixed_dictionaries(
            {}, optional={k: from_schema(v, depth + 1) for k, v in properties.items()}
        )
    if kind == "array":
        return st.lists(from_schema(schema.get("items") or {}, depth + 1), max_size=3)
    if kind == "string":
        return hostile_text
    if kind == "integer":
        return st.integers(min_value=-(2**70), max_value=2**70) | st.integers(min_value=-5, max_value=50)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    return junk


def operations(document: dict[str, Any]) -> list[tuple[str, str, list[str], dict[str, Any] | None]]:
    found = []
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            if _streams(operation):
                continue  # an answer that never ends (tests/server/test_streaming.py tests those)
            names = [p["name"] for p in operation.get("parameters", []) if p.get("in") == "path"]
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
            found.append((method.upper(), path, names, body.get("schema")))
    return found


def _streams(operation: dict[str, Any]) -> bool:
    """Whether the operation answers with server-sent events: a stream that stays open."""
    answers = operation.get("responses", {}).values()
    return any("text/event-stream" in answer.get("content", {}) for answer in answers)


ODD_PATH_VALUES = ["default", "production", "1", "0", "-1", "99999999999999999999", "*", "%2F"]


@st.composite
def requests(
    draw: Any, document: dict[str, Any], real: list[str]
) -> tuple[str, str, dict[str, str], bytes | None]:
    """A request for one operation of `document`; path parameters are often `real` names and ids (so
    hostile bodies reach objects that exist), else odd or hostile text."""
    method, template, names, schema = draw(st.sampled_from(operations(document)))
    path = template
    values = st.sampled_from(real) | st.sampled_from(ODD_PATH_VALUES) | hostile_text.filter(bool)
    for name in names:
        path = path.replace("{" + name + "}", quote(draw(values), safe=""))
    if draw(st.booleans()):
        path += "?" + quote(draw(hostile_text), safe="=&")
    headers = {
        "Authorization": draw(st.sampled_from([ADMIN_TOKEN] * 6 + [CLIENT_TOKEN, FRONTEND_TOKEN, "x", ""]))
    }
    body: bytes | None = None
    if method in ("POST", "PUT") or draw(st.booleans()):
        choice = draw(st.integers(min_value=0, max_value=5))
        if schema is not None and choice < 3:
            body = json.dumps(draw(from_schema(schema))).encode()
        elif choice < 5:
            body = json.dumps(draw(junk)).encode()
        else:
            body = draw(st.binary(max_size=200))
        headers["Content-Type"] = draw(
            st.sampled_from(["application/json"] * 4 + ["text/plain", "application/json; charset=latin1"])
        )
    return method, path, headers, body


def sentinel(api: Api) -> tuple[Any, Any]:
    features = api.client_features()["features"]
    listed = api.get(f"/api/admin/projects/{SENTINEL_PROJECT}/features").json()
    return [f for f in features if f["name"] == SENTINEL_FLAG], listed


def test_requests_generated_from_the_openapi_document_never_get_a_5xx(backend, backend_env, tmp_path):
    log = tmp_path / "server.log"
    server = ServerProcess(base_env(**backend_env(backend), LOG_LEVEL="debug"), log_path=str(log)).start()
    try:
        api = server.api()
        assert api.post("/api/admin/projects", {"id": SENTINEL_PROJECT, "name": "Sentinel"}).status == 201
        api.create_feature(SENTINEL_FLAG, project=SENTINEL_PROJECT)
        segment = api.create_segment(
            "sentinel-segment", [{"contextName": "region", "operator": "IN", "values": ["eu"]}]
        )
        strategy = {"name": "flexibleRollout", "parameters": {"rollout": "40"}, "segments": [segment["id"]]}
        api.add_strategy(SENTINEL_FLAG, strategy, project=SENTINEL_PROJECT)
        api.switch(SENTINEL_FLAG, True, project=SENTINEL_PROJECT)
        before = sentinel(api)
        # Objects the generated requests may reach and change (the sentinel's project they never name).
        api.create_feature("fuzz-flag")
        fuzz_strategy = api.add_strategy("fuzz-flag", {"name": "userWithId", "parameters": {"userIds": "1"}})
        fuzz_segment = api.create_segment("fuzz-segment", [])
        fuzz_user = api.create_user()
        real = ["fuzz-flag", fuzz_strategy["id"], str(fuzz_segment["id"]), str(fuzz_user["id"]), "simple"]
        document = api.get("/docs/openapi.json", token=None).json()
        family = f"server ({backend}): requests generated from its OpenAPI document"

        @fuzz_settings(SERVER_FUZZ_EXAMPLES)
        @given(request=requests(document, real))
        def fuzz(request: tuple[str, str, dict[str, str], bytes | None]) -> None:
            method, path, headers, body = request
            answer = api.request(method, path, body=body, headers=headers, token=None)
            FIGURES.hostile_input(family)
            assert answer.status < 500, (method, path, headers, body, answer.status, answer.body[:300])

        fuzz()
        assert api.get("/health").status == 200
        assert sentinel(api) == before
    finally:
        assert server.stop() == 0
    assert_no_secret(log.read_text(), SERVER_SECRETS)
