"""GET/POST /proxy and /proxy/all over real sockets, checked against the Node proxy's recorded answers.

Where proxy-transcripts.md recorded an ETag for the same request and features file, Express's ETag of the
body we received must be identical: it hashes the exact bytes, so it proves byte-for-byte compatibility. Our
own ETag header (XXH3, not Express's) must be XXH3-128's of exactly the bytes sent (tests/etags.py xxh3_etag,
written from the documented format); a 304 or a HEAD has no body, so its ETag must be the matching 200's.
"""

from __future__ import annotations

import email.utils
import json
import time

import pytest

from tests.etags import assert_node_body, xxh3_etag
from tests.http.loopback import KEY

U1 = "/proxy?userId=u1&sessionId=s1"
NODE_U1_ETAG = 'W/"876-gEN+QlEcLKfCqM0uTN6Nv+KrNKI"'


def names(body: bytes) -> list[str]:
    return [t["name"] for t in json.loads(body)["toggles"]]


def u1_etag(proxy) -> str:
    """Our ETag for U1, from a 200 whose body is checked to be the Node proxy's."""
    status, headers, body = proxy.get(U1, key=KEY)
    assert status == 200
    assert_node_body(headers, body, NODE_U1_ETAG)
    return headers["etag"]


def test_get_proxy_answers_like_the_node_proxy(proxy):
    status, headers, body = proxy.get(U1, key=KEY)
    assert status == 200
    assert_node_body(headers, body, NODE_U1_ETAG)
    assert headers["content-type"] == "application/json; charset=utf-8"
    assert headers["cache-control"] == "public, max-age=2"
    assert headers["access-control-allow-origin"] == "*"
    assert headers["access-control-expose-headers"] == "ETag"
    assert headers["vary"] == "Accept-Encoding"
    assert headers["keep-alive"] == "timeout=5"
    toggles = json.loads(body)["toggles"]
    assert all(t["enabled"] for t in toggles)
    assert toggles[0] == {
        "name": "default-on",
        "enabled": True,
        "variant": {"name": "disabled", "enabled": False, "feature_enabled": True, "featureEnabled": True},
        "impressionData": False,
    }


def test_get_proxy_with_properties_and_extra_parameters(proxy):
    path = (
        "/proxy?userId=u1&sessionId=s1&properties[region]=eu&email=Bob@Example.COM&age=30"
        "&appVersion=1.3.0&country=no"
    )
    status, headers, body = proxy.get(path, key=KEY)
    assert status == 200
    assert_node_body(headers, body, 'W/"b70-H7nc0ZdsQ6knb2reen5wilTfvEg"')
    assert {"c-in-region", "c-str-contains-ci", "c-num-gt", "c-semver-gt", "segment-eu"} <= set(names(body))


def test_url_encoded_brackets_work_like_plain_ones(proxy):
    plain = proxy.get("/proxy?userId=u-green&sessionId=s2&properties[region]=eu", key=KEY)
    encoded = proxy.get("/proxy?userId=u-green&sessionId=s2&properties%5Bregion%5D=eu", key=KEY)
    assert plain[2] == encoded[2]
    assert "segment-eu" in names(plain[2])


def test_answers_carry_a_date_header_as_the_node_proxy_does(proxy):
    requests = [
        ("GET", U1, {}, 200),  # a toggle answer (PreparedResponse)
        ("GET", U1, {"If-None-Match": u1_etag(proxy)}, 304),  # its 304
        ("GET", "/proxy/health", {}, 200),
        ("GET", "/proxy/nowhere", {}, 404),
        ("OPTIONS", "/proxy", {"Origin": "https://app.example"}, 204),
    ]
    for method, path, headers, expected in requests:
        status, answer, _ = proxy.request(method, path, key=KEY, headers=headers)
        assert status == expected, (method, path)
        sent = email.utils.parsedate_to_datetime(answer["date"])
        assert abs(sent.timestamp() - time.time()) < 5, (method, path, status)
    assert proxy.get("/proxy?userId=u1")[0] == 401 and "date" in proxy.get("/proxy?userId=u1")[1]


def test_if_none_match_gives_304_without_body(proxy):
    etag = u1_etag(proxy)
    status, headers, body = proxy.get(U1, key=KEY, headers={"If-None-Match": etag})
    assert (status, body) == (304, b"")
    assert headers["etag"] == etag
    assert headers["cache-control"] == "public, max-age=2"
    assert headers["access-control-allow-origin"] == "*"
    assert "content-type" not in headers and "vary" not in headers


@pytest.mark.parametrize(
    ("if_none_match", "status"),
    [
        ('W/"nope"', 200),
        ("*", 304),
        ('"x", {etag}', 304),
        ("{strong}", 304),  # weak comparison: the same tag without W/
        (NODE_U1_ETAG, 200),  # the Node proxy's tag for the same bytes: a client moving over revalidates once
    ],
)
def test_if_none_match_forms(proxy, if_none_match, status):
    etag = u1_etag(proxy)
    if_none_match = if_none_match.format(etag=etag, strong=etag[2:])
    assert proxy.get(U1, key=KEY, headers={"If-None-Match": if_none_match})[0] == status


def test_no_cache_request_is_never_304(proxy):
    headers = {"If-None-Match": u1_etag(proxy), "Cache-Control": "no-cache"}
    assert proxy.get(U1, key=KEY, headers=headers)[0] == 200


def test_head_has_headers_and_no_body(proxy):
    etag = u1_etag(proxy)
    status, headers, body = proxy.request("HEAD", U1, key=KEY)
    assert (status, body) == (200, b"")
    assert headers["etag"] == etag  # the GET's, whose body is the Node proxy's
    assert headers["content-length"] == str(0x876)


@pytest.mark.parametrize("path", ["/proxy/?userId=u1&sessionId=s1", "/PROXY?userId=u1&sessionId=s1"])
def test_trailing_slash_and_any_case_paths(proxy, path):
    status, headers, body = proxy.get(path, key=KEY)
    assert status == 200
    assert_node_body(headers, body, NODE_U1_ETAG)


def test_currenttime_in_the_query(proxy):
    assert "c-date-after" in names(proxy.get("/proxy?currentTime=2031-01-01T00:00:00.000Z", key=KEY)[2])
    assert "c-date-after" not in names(proxy.get("/proxy?currentTime=garbage", key=KEY)[2])


def test_remote_address_from_the_query_wins(proxy):
    assert "remote-address" in names(proxy.get("/proxy?remoteAddress=10.1.2.3", key=KEY)[2])
    assert "remote-address" not in names(proxy.get("/proxy", key=KEY)[2])


@pytest.mark.parametrize(
    ("query", "instance_path", "message", "node_etag"),
    [
        ("userId=a&userId=b", "/query/userId", "must be string", 'W/"d5-H5vojKebj0D2ipnN3DJ3Q+TNZ3w"'),
        ("properties=str", "/query/properties", "must be object", 'W/"dd-T30TWmpFJjcst1qEkz8ihNqDg3U"'),
        ("properties[]=a", "/query/properties", "must be object", 'W/"dd-T30TWmpFJjcst1qEkz8ihNqDg3U"'),
        ("properties[a][b]=c", "/query/properties/a", "must be string", None),
        ("tenant=a&tenant=b", "/query/tenant", "must be string", None),
        ("tags[]=a", "/query/tags", "must be string", None),
    ],
)
def test_bad_queries_get_400_with_the_node_validation_body(proxy, query, instance_path, message, node_etag):
    status, headers, body = proxy.get(f"/proxy?{query}", key=KEY)
    assert status == 400
    assert headers["content-type"] == "application/json; charset=utf-8"
    error = json.loads(body)
    assert error["error"] == "Request validation failed"
    assert error["validation"][0]["instancePath"] == instance_path
    assert error["validation"][0]["message"] == message
    if node_etag:
        assert_node_body(headers, body, node_etag)
    else:
        assert headers["etag"] == xxh3_etag(body)


# ---- POST /proxy ------------------------------------------------------------------------------------


def test_post_with_toggles_returns_exactly_those_names(proxy):
    wanted = ["default-on", "disabled-feature", "does-not-exist", "impression-on", "default-on"]
    status, headers, body = proxy.post("/proxy", {"toggles": wanted, "context": {"userId": "u1"}}, key=KEY)
    assert status == 200
    toggles = json.loads(body)["toggles"]
    assert [t["name"] for t in toggles] == wanted
    assert [t["enabled"] for t in toggles] == [True, False, False, True, True]
    assert toggles[2] == {
        "name": "does-not-exist",
        "enabled": False,
        "variant": {"name": "disabled", "enabled": False, "feature_enabled": False, "featureEnabled": False},
        "impressionData": False,
    }
    assert toggles[3]["impressionData"] is True
    assert headers["cache-control"] == "public, max-age=2"


@pytest.mark.parametrize(
    ("body", "node_etag"),
    [
        (
            {"toggles": ["default-on", "default-on"], "context": {"userId": "u1"}},
            'W/"13b-5iLfpOlfhJcxgz7QeVBiR6+WHxM"',
        ),
        ({"toggles": [], "context": {"userId": "u1", "sessionId": "s1"}}, NODE_U1_ETAG),
        ({"toggles": [42, "default-on"]}, 'W/"136-DoJsUCY/qx+ysb8+YCBxyzxj1BI"'),
        (
            {"toggles": ["user-with-id", "c-num-gt"], "context": {"userId": 1, "properties": {"age": 30}}},
            'W/"13e-RarnEteLxjbU0LtLwiVyr3s6/lw"',
        ),
        ({"blah": "hello", "toggles": ["default-on"]}, 'W/"a4-j7q5nps1uGVg6TiV38ERLunI8Lc"'),
    ],
)
def test_post_answers_like_the_node_proxy(proxy, body, node_etag):
    status, headers, answer = proxy.post("/proxy", body, key=KEY)
    assert status == 200
    assert_node_body(headers, answer, node_etag)


def test_post_without_toggles_lists_enabled_toggles(proxy):
    status, _, body = proxy.post(
        "/proxy", {"context": {"userId": "u1", "properties": {"region": "eu"}}}, key=KEY
    )
    assert status == 200
    assert "segment-eu" in names(body) and "disabled-feature" not in names(body)


@pytest.mark.parametrize("path", ["/proxy", "/proxy/all"])
def test_post_answers_carry_every_header_spec_md_lists(shared_proxy, path):
    proxy = shared_proxy(enable_all_endpoint=True)
    ask = {"toggles": ["default-on"], "context": {"userId": "u1"}}
    status, headers, body = proxy.post(path, ask, key=KEY, headers={"Origin": "https://app.example"})
    assert status == 200
    assert headers["access-control-allow-origin"] == "*"
    assert headers["access-control-expose-headers"] == "ETag"
    assert headers["cache-control"] == "public, max-age=2"
    assert headers["etag"].startswith('W/"')  # weak
    assert_node_body(headers, body, 'W/"a4-j7q5nps1uGVg6TiV38ERLunI8Lc"')  # the Node proxy's, byte for byte
    assert headers["content-type"] == "application/json; charset=utf-8"
    assert headers["vary"] == "Accept-Encoding"
    assert headers["keep-alive"] == "timeout=5"
    assert headers["content-length"] == str(len(body))


def test_post_ignores_the_query_string(proxy):
    body = proxy.post("/proxy?userId=u1", {"toggles": ["user-with-id"]}, key=KEY)[2]
    assert json.loads(body)["toggles"][0]["enabled"] is False


def test_post_is_never_304(proxy):
    status, _, _ = proxy.post("/proxy", {"toggles": ["default-on"]}, key=KEY, headers={"If-None-Match": "*"})
    assert status == 200


@pytest.mark.parametrize(
    ("headers", "body"),
    [({}, None), ({"Content-Type": "application/json"}, ""), ({"Content-Type": "application/json"}, "  ")],
)
def test_post_with_no_or_empty_body_is_an_empty_context(proxy, headers, body):
    status, _, answer = proxy.request("POST", "/proxy", key=KEY, headers=headers, body=body)
    assert status == 200
    assert "default-on" in names(answer)


def test_post_body_without_content_type_is_json(proxy):
    raw = json.dumps({"toggles": ["default-on"], "context": {"userId": "u1"}})
    status, headers, body = proxy.request("POST", "/proxy", key=KEY, body=raw)
    assert status == 200
    assert_node_body(headers, body, 'W/"a4-j7q5nps1uGVg6TiV38ERLunI8Lc"')


def test_json_with_utf8_charset_is_fine(proxy):
    headers = {"Content-Type": "application/json; charset=utf-8"}
    status, _, _ = proxy.request(
        "POST", "/proxy", key=KEY, headers=headers, body='{"toggles":["default-on"]}'
    )
    assert status == 200


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        ("text/plain", "{}", 415),
        ("application/vnd.api+json", "{}", 415),
        ("application/x-www-form-urlencoded", "", 415),
        ("application/json; charset=latin1", "{}", 415),
        ("application/json", '{ toggles": [] }', 400),
        ("application/json", '"hello"', 400),
        ("application/json", "42", 400),
        ("application/json", "null", 400),
        ("application/json", "[1,2]", 400),
        ("application/json", '{"context":"abc"}', 400),
        ("application/json", '{"context":null}', 400),
        ("application/json", '{"context":["a"]}', 400),
        ("application/json", '{"toggles":"default-on"}', 400),
        ("application/json", '{"toggles":[{"name":"x"}]}', 400),
        ("application/json", '{"context":{"properties":{"a":{"b":1}}}}', 400),
        ("application/json", '{"context":{"properties":null}}', 400),
        ("application/json", '{"context":{"userId":["a"]}}', 400),
        ("application/json", '{"context":{"extra":{"deep":1}}}', 400),
        ("application/json", b'{"context": {"userId": "\xff"}}', 400),
    ],
)
def test_bad_post_bodies_get_a_clear_4xx(proxy, content_type, body, status):
    answer = proxy.request("POST", "/proxy", key=KEY, headers={"Content-Type": content_type}, body=body)
    assert answer[0] == status
    if status == 400:
        assert "error" in json.loads(answer[2])


def test_malformed_json_is_400_before_the_key_check(proxy):
    status, _, body = proxy.request(
        "POST", "/proxy", headers={"Content-Type": "application/json"}, body='{ toggles": [] }'
    )
    assert status == 400
    assert json.loads(body)["error"].startswith("We were unable to parse the data you provided.")


def test_body_over_100_kb_is_413_and_just_under_is_fine(proxy):
    filler = "x" * (102400 - 80)
    small = json.dumps({"toggles": ["default-on"], "context": {"properties": {"pad": filler}}})
    assert len(small) <= 102400
    assert (
        proxy.request("POST", "/proxy", key=KEY, body=small, headers={"Content-Type": "application/json"})[0]
        == 200
    )
    big = json.dumps({"toggles": ["default-on"], "context": {"properties": {"pad": "x" * 110_000}}})
    status, _, body = proxy.request(
        "POST", "/proxy", key=KEY, body=big, headers={"Content-Type": "application/json"}
    )
    assert status == 413
    assert json.loads(body) == {"error": "request entity too large"}
    assert proxy.get("/proxy/health")[0] == 200  # the worker is still there


# ---- /proxy/all -------------------------------------------------------------------------------------

ALL_DISABLED = (
    b"The /proxy/all endpoint is disabled. Please check your server configuration. To enable it, set the "
    b"`enableAllEndpoint` configuration option or `ENABLE_ALL_ENDPOINT` environment variable to `true`."
)


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_all_endpoint_disabled_is_501_after_the_key_check(proxy, method):
    assert proxy.request(method, "/proxy/all")[0] == 401
    status, headers, body = proxy.request(method, "/proxy/all", key=KEY)
    assert (status, body) == (501, ALL_DISABLED)
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert_node_body(headers, body, 'W/"c4-wOxrHj2mg7SUSYZJeCTsCsIZtso"')  # the Node proxy's 501
    assert headers["access-control-allow-origin"] == "*"


def test_all_endpoint_disabled_checks_input_first_as_the_node_proxy(proxy):
    # The Node proxy's order: 415 → 400 → 401 → 501.
    json_type = {"Content-Type": "application/json"}
    assert proxy.request("POST", "/proxy/all", key=KEY, headers=json_type, body="{x")[0] == 400
    assert (
        proxy.request("POST", "/proxy/all", key=KEY, headers={"Content-Type": "text/plain"}, body="{}")[0]
        == 415
    )
    assert proxy.get("/proxy/all?userId=a&userId=b", key=KEY)[0] == 400
    assert proxy.request("POST", "/proxy/all", headers=json_type, body="{}")[0] == 401
    status, _, body = proxy.request("HEAD", "/proxy/all", key=KEY)
    assert (status, body) == (501, b"")
    assert proxy.post("/proxy/all/client/metrics", {}, key=KEY)[0] == 400  # a route of its own, not /all


def test_all_endpoint_lists_disabled_toggles(shared_proxy):
    proxy = shared_proxy(enable_all_endpoint=True)
    status, headers, body = proxy.get("/proxy/all?userId=u1&sessionId=s1&properties[region]=eu", key=KEY)
    assert status == 200
    assert_node_body(headers, body, 'W/"1127-66VT1Ggnc6N/ykERJHS8CDb8zCg"')
    toggles = {t["name"]: t for t in json.loads(body)["toggles"]}
    assert toggles["disabled-feature"]["variant"] == {
        "name": "disabled",
        "enabled": False,
        "feature_enabled": False,
    }
    assert len(toggles) == 29
    named = proxy.post("/proxy/all", {"toggles": ["disabled-feature", "nope"]}, key=KEY)[2]
    assert names(named) == ["disabled-feature", "nope"]
    everything = proxy.post("/proxy/all", {"context": {"userId": "u1"}}, key=KEY)[2]
    assert len(names(everything)) == 29
    assert proxy.post("/proxy/all", {"context": "x"}, key=KEY)[0] == 400
    assert proxy.get("/proxy/all", key="server-token")[0] == 401


# ---- custom strategies ------------------------------------------------------------------------------


def test_custom_strategies_are_evaluated(proxy_factory, tmp_path):
    strategies = tmp_path / "my_strategies.py"
    strategies.write_text(
        "from flagproxy.strategies import Strategy\n"
        "class Tier(Strategy):\n"
        "    name = 'myCustomStrategy'\n"
        "    def is_enabled(self, parameters, context):\n"
        "        return context.get('properties', {}).get('tier') == 'gold'\n"
        "strategies = [Tier()]\n"
    )
    proxy = proxy_factory(custom_strategies=str(strategies))
    gold = proxy.post(
        "/proxy", {"toggles": ["unknown-strategy"], "context": {"properties": {"tier": "gold"}}}, key=KEY
    )
    plain = proxy.post("/proxy", {"toggles": ["unknown-strategy"], "context": {}}, key=KEY)
    assert_node_body(gold[1], gold[2], 'W/"aa-RdKe6WdjW01zqygeBqDk9uNi8g8"')
    assert_node_body(plain[1], plain[2], 'W/"ad-RlmsAX00OIysrplMkeeSbX174ns"')
