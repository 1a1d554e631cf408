"""Hostile input, generated: whatever arrives, the proxy answers with a status under 500 (503 only before it
is ready), keeps its worker, and gives the same answers afterwards.

hypothesis draws requests over every route (and near misses: other methods, any-case paths, unknown
paths): query strings with brackets, %-escapes, NUL and invalid UTF-8; headers (content types, charsets,
keys, origins, X-Forwarded-For, If-None-Match, very long values); bodies that are JSON of any shape, deeply
nested JSON, huge strings and numbers, or bytes that are not JSON or not UTF-8. Raw sockets send what an
HTTP client would refuse to: bad request lines, broken chunked encoding, headers without a colon, requests
that never finish (slowloris).
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.http.hostile import MALFORMED_HTTP, send_raw
from tests.http.loopback import KEY, fetch

PATHS = [
    "/proxy",
    "/proxy/all",
    "/proxy/client/metrics",
    "/proxy/all/client/metrics",
    "/proxy/client/register",
    "/proxy/client/features",
    "/proxy/health",
    "/proxy/internal-backstage/prometheus",
    "/docs/openapi.json",
    "/docs/openapi",
    "/PROXY",
    "/proxy/",
    "/proxy/unknown",
    "/",
    "/%00",
    "/proxy/%ff%fe",
]
METHODS = ["GET", "POST", "HEAD", "OPTIONS", "PUT", "DELETE", "PATCH"]
CONTENT_TYPES = [
    None,
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=latin1",
    "APPLICATION/JSON",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/json; charset=",
    ";;;",
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=50),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=20), children, max_size=5)
    ),
    max_leaves=30,
)
context_like = st.fixed_dictionaries(
    {},
    optional={
        "toggles": st.lists(st.text(max_size=30), max_size=5) | json_values,
        "context": st.dictionaries(
            st.sampled_from(["userId", "sessionId", "remoteAddress", "currentTime", "properties", "appName"])
            | st.text(max_size=10),
            json_values,
            max_size=6,
        )
        | json_values,
    },
)
bodies = st.one_of(
    st.none(),
    context_like.map(lambda value: json.dumps(value).encode()),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.binary(max_size=300),  # not JSON, not UTF-8, NUL bytes
    st.integers(min_value=1, max_value=5000).map(lambda depth: b"[" * depth + b"]" * depth),
    st.integers(min_value=1, max_value=20).map(
        lambda n: json.dumps({"context": {"userId": "x" * n * 4000}}).encode()
    ),
    st.just(b'{"context": {"userId": 1e999}}'),
    st.just(b'{"context": {"userId": "\\ud800"}}'),
)
query_strings = st.one_of(
    st.just(""),
    st.text(
        alphabet=st.sampled_from(list("abcuserIdpropertis[]=&%0123456789ABCDEF+.-_~!$'()*,;:@/?")),
        max_size=80,
    ),
    st.lists(
        st.tuples(
            st.sampled_from(["userId", "sessionId", "properties[region]", "properties[a][b]", "tags[]", "x"]),
            st.text(max_size=20),
        ),
        max_size=6,
    ).map(lambda pairs: "&".join(f"{k}={v}" for k, v in pairs)),
)


@st.composite
def requests(draw: Any) -> tuple[str, str, dict[str, str], bytes | None]:
    method = draw(st.sampled_from(METHODS))
    path = draw(st.sampled_from(PATHS))
    query = draw(query_strings)
    if query:
        path += "?" + "".join(c if 32 < ord(c) < 127 else f"%{ord(c) & 0xFF:02X}" for c in query)
    headers: dict[str, str] = {}
    if draw(st.booleans()):
        headers["Authorization"] = draw(st.sampled_from([KEY, "wrong", "", KEY + " ", "x" * 8000]))
    content_type = draw(st.sampled_from(CONTENT_TYPES))
    if content_type is not None:
        headers["Content-Type"] = content_type
    for name, values in (
        ("Origin", ["https://a.example", "null", "*", "x" * 3000]),
        ("X-Forwarded-For", ["1.2.3.4", "not-an-ip, ::1", ", , ,", "1.2.3.4, " * 200]),
        ("If-None-Match", ['W/"abc"', "*", '"', "W/" * 500]),
        ("Access-Control-Request-Headers", ["authorization,content-type", "x" * 2000]),
    ):
        if draw(st.booleans()):
            headers[name] = draw(st.sampled_from(values))
    body = draw(bodies) if method not in ("GET", "HEAD") else None
    return method, path, headers, body


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=requests())
def test_generated_requests_never_get_a_5xx_and_leave_the_proxy_answering(proxy, request):
    method, path, headers, body = request
    status, _, answer = fetch(proxy.port, method, path, headers, body)
    assert status < 500, (method, path, headers, body, status, answer[:200])


@pytest.mark.parametrize(
    "data",
    MALFORMED_HTTP,
    ids=lambda data: data[:30].decode("latin1"),
)
def test_malformed_http_is_refused_and_the_proxy_keeps_answering(proxy, data):
    answer = send_raw(proxy.port, data)
    if answer:
        status = int(answer.split(b" ", 2)[1])
        assert 400 <= status < 500, answer[:300]
    assert proxy.get("/proxy?userId=u1", key=KEY)[0] == 200


def test_slowloris_connections_do_not_stop_other_callers(proxy):
    expected = proxy.get("/proxy?userId=u1", key=KEY)[2]
    hanging = []
    try:
        for _ in range(100):
            sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
            sock.sendall(
                b"POST /proxy HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"
            )  # and nothing more
            hanging.append(sock)
        started = time.monotonic()
        for _ in range(20):
            assert proxy.get("/proxy?userId=u1", key=KEY)[2] == expected
        assert time.monotonic() - started < 5
    finally:
        for sock in hanging:
            sock.close()
