"""The bad input table: every kind of malformed request gets a clear 4xx, never a 500, and the worker stays.

Each row is sent to a real proxy; after it the same proxy must still answer /proxy/health, so a row that
broke the worker fails too. Rows on the toggle routes check the Node proxy's statuses (415 → 400 → 401);
where the Node proxy answers 500 (a body over 100 kB, a foreign charset) flagproxy answers a 4xx instead.
"""

from __future__ import annotations

import http.client
import json

import pytest

from tests.http.loopback import KEY

JSON = {"Content-Type": "application/json"}
METRICS = {
    "appName": "web",
    "instanceId": "browser-1",
    "bucket": {"start": "2024-01-01T00:00:00.000Z", "stop": "2024-01-01T00:01:00.000Z", "toggles": {}},
}

# (method, path, headers, body, status, what the body says)
ROWS = [
    # malformed JSON
    ("POST", "/proxy", JSON, '{"toggles": [', 400, "unable to parse"),
    ("POST", "/proxy", JSON, "{'context': {}}", 400, "unable to parse"),
    ("POST", "/proxy", JSON, '{"context": {"userId": "\\ud800"}}', 400, "unable to parse"),
    ("POST", "/proxy", JSON, '{"context": {"userId": 1e400}}', 400, "unable to parse"),
    ("POST", "/proxy/client/metrics", JSON, "{nope", 400, "unable to parse"),
    ("POST", "/proxy/client/register", JSON, "[1,", 400, "unable to parse"),
    # a body or a context that is not an object
    ("POST", "/proxy", JSON, '"just a string"', 400, "unable to parse"),
    ("POST", "/proxy", JSON, "[]", 400, "must be object"),
    ("POST", "/proxy", JSON, '{"context": "userId=1"}', 400, "must be object"),
    ("POST", "/proxy", JSON, '{"context": [{"userId": "1"}]}', 400, "must be object"),
    ("POST", "/proxy", JSON, '{"context": {"properties": "eu"}}', 400, "must be object"),
    ("POST", "/proxy", JSON, '{"toggles": {"a": 1}}', 400, "must be array"),
    ("POST", "/proxy/client/metrics", JSON, "[]", 400, "must be object"),
    # values that are not strings
    ("POST", "/proxy", JSON, '{"context": {"userId": {"id": 1}}}', 400, "must be string"),
    ("POST", "/proxy", JSON, '{"context": {"properties": {"region": ["eu"]}}}', 400, "must be string"),
    ("POST", "/proxy", JSON, '{"toggles": [["a"]]}', 400, "must be string"),
    ("GET", "/proxy?properties[region][x]=eu", {}, None, 400, "must be string"),
    ("GET", "/proxy?tags[]=a&tags[]=b", {}, None, 400, "must be string"),
    ("GET", "/proxy?properties=eu", {}, None, 400, "must be object"),
    # repeated query fields
    ("GET", "/proxy?userId=a&userId=b", {}, None, 400, "must be string"),
    ("GET", "/proxy?properties[region]=eu&properties[region]=us", {}, None, 400, "must be string"),
    ("GET", "/proxy?tenant=a&tenant=b", {}, None, 400, "must be string"),
    # a content type that is not JSON
    ("POST", "/proxy", {"Content-Type": "text/plain"}, "{}", 415, "application/json"),
    (
        "POST",
        "/proxy",
        {"Content-Type": "application/x-www-form-urlencoded"},
        "userId=1",
        415,
        "application/json",
    ),
    ("POST", "/proxy", {"Content-Type": "multipart/form-data; boundary=x"}, "--x--", 415, "application/json"),
    ("POST", "/proxy", {"Content-Type": "application/json; charset=latin1"}, "{}", 415, "charset"),
    (
        "POST",
        "/proxy/client/metrics",
        {"Content-Type": "text/plain"},
        json.dumps(METRICS),
        415,
        "application/json",
    ),
    ("POST", "/proxy/client/register", {"Content-Type": "text/xml"}, "<a/>", 415, "application/json"),
    # bodies over the limit
    ("POST", "/proxy", JSON, json.dumps({"context": {"userId": "x" * 110_000}}), 413, "too large"),
    ("POST", "/proxy/client/metrics", JSON, json.dumps({**METRICS, "pad": "x" * 110_000}), 413, "too large"),
    # unknown routes and methods
    ("GET", "/proxy/nothing-here", {}, None, 404, "Cannot GET /proxy/nothing-here"),
    ("GET", "/api/client/features", {}, None, 404, "Cannot GET /api/client/features"),
    ("DELETE", "/proxy", {}, None, 404, "Cannot DELETE /proxy"),
    ("PATCH", "/proxy/client/metrics", JSON, "{}", 404, "Cannot PATCH /proxy/client/metrics"),
    ("GET", "/proxy/client/metrics", {}, None, 404, "Cannot GET /proxy/client/metrics"),
    ("TRACE", "/proxy", {}, None, 404, "Cannot TRACE /proxy"),
]


@pytest.mark.parametrize(
    ("method", "path", "headers", "body", "status", "says"),
    ROWS,
    ids=[f"{m} {p[:40]} {b[:30] if b else ''}".strip() for m, p, _, b, _, _ in ROWS],
)
def test_bad_input_gets_a_clear_4xx(proxy, method, path, headers, body, status, says):
    got, answer_headers, answer = proxy.request(method, path, key=KEY, headers=headers, body=body)
    assert got == status, answer[:300]
    assert says.encode() in answer
    if status != 404:
        assert answer_headers["content-type"] == "application/json; charset=utf-8"
        assert "error" in json.loads(answer)
    assert proxy.get("/proxy/health")[0] == 200


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/proxy?currentTime=0001-01-01T00:00:00%2B01:00", None),  # before year 1 once in UTC
        ("GET", "/proxy?currentTime=9999-12-31T23:59:59-01:00", None),  # after year 9999 once in UTC
        ("POST", "/proxy", {"context": {"currentTime": "0001-01-01T00:00:00+01:00"}}),
        ("GET", "/proxy?userId=%ff%fe&%ff=1&properties[%ff]=1", None),  # not UTF-8
        ("GET", "/proxy?userId=%zz&=x&&", None),  # not percent-encoding
        ("POST", "/proxy", {"toggles": ["a"], "context": {"properties": {"\u0000": "x"}, "userId": 1e300}}),
        ("POST", "/proxy/client/register", {**METRICS, "interval": 1, "started": "0001-01-01T00:00:00+01:00",
                                            "strategies": []}),
    ],
)  # fmt: skip
def test_odd_but_valid_input_is_answered(proxy, method, path, body):
    status, _, answer = proxy.request(
        method, path, key=KEY, headers=JSON if body else {}, body=json.dumps(body) if body else None
    )
    assert status == 200, answer[:300]
    assert proxy.get("/proxy/health")[0] == 200


def test_an_out_of_range_current_time_is_dropped_like_a_garbage_one(proxy):
    # c-date-after is on only after 2030: with currentTime dropped, "now" decides.
    dropped = proxy.get("/proxy?sessionId=s&currentTime=9999-12-31T23:59:59-01:00", key=KEY)[2]
    garbage = proxy.get("/proxy?sessionId=s&currentTime=garbage", key=KEY)[2]
    assert dropped == garbage


def _chunked(port: int, path: str, chunks: list[bytes]) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        headers = {**JSON, "Authorization": KEY}
        connection.request("POST", path, body=iter(chunks), headers=headers, encode_chunked=True)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_a_chunked_body_is_read_and_limited_like_any_other(proxy):
    status, body = _chunked(proxy.port, "/proxy", [b'{"toggles":', b'["default-on"]}'])
    assert status == 200
    assert [t["name"] for t in json.loads(body)["toggles"]] == ["default-on"]
    status, body = _chunked(
        proxy.port, "/proxy", [b'{"context":{"userId":"', b"x" * 60_000, b"x" * 60_000, b'"}}']
    )
    assert (status, json.loads(body)) == (413, {"error": "request entity too large"})
    assert proxy.get("/proxy/health")[0] == 200


def test_long_get_contexts_are_read_up_to_nodes_header_limit(proxy):
    # Frontend SDKs send the context as a GET query; Node reads 16 kB of request line and headers.
    long_value = "x" * 12_000
    status, _, body = proxy.get(f"/proxy?sessionId=s&properties[token]={long_value}", key=KEY)
    assert status == 200, body[:200]
    status, _, body = proxy.get(f"/proxy?properties[token]={'x' * 20_000}", key=KEY)
    assert (status, body) == (431, b"")  # Node: 431 Request Header Fields Too Large, no body
    assert proxy.get("/proxy/health")[0] == 200
