"""Auth, the server-side and SDK routes, health, 404s, base path, OpenAPI and the not-ready 503."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from tests.etags import assert_node_body, xxh3_etag
from tests.http.loopback import KEY
from tests.http.processes import ProxyUnderTest

UNAUTHORIZED_NODE_ETAG = 'W/"c-dAuDFQrdjS3hezqxDTNgW7AOlYk"'  # Express's ETag of the Node proxy's 401
NOT_READY = b"The Unleash Proxy has not connected to the Unleash API and is not ready to accept requests yet."
METRICS = {
    "appName": "web",
    "instanceId": "browser-1",
    "environment": "ignored",
    "bucket": {
        "start": "2024-01-01T00:00:00.000Z",
        "stop": "2024-01-01T00:01:00.000Z",
        "toggles": {"default-on": {"yes": 2, "no": 1, "variants": {"disabled": 3}}},
    },
}
REGISTER = {
    "appName": "web",
    "instanceId": "browser-1",
    "sdkVersion": "unleash-client-js:3.0.0",
    "interval": 15000,
    "started": "2024-01-01T00:00:00.000Z",
    "strategies": ["default"],
}


@pytest.mark.parametrize("key", [None, "nope", "Bearer proxy-secret", "server-token", ""])
def test_missing_or_wrong_key_is_401(shared_proxy, key):
    proxy = shared_proxy(exp_server_side_sdk_config_tokens=["server-token"])
    status, headers, body = proxy.get("/proxy", key=key)
    assert (status, body) == (401, b"Unauthorized")
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert_node_body(headers, body, UNAUTHORIZED_NODE_ETAG)


def test_every_configured_key_works(proxy):
    assert proxy.get("/proxy", key="another-secret")[0] == 200


def test_custom_key_header(shared_proxy):
    proxy = shared_proxy(client_keys_header_name="X-Client-Key")
    assert proxy.get("/proxy", headers={"X-Client-Key": KEY})[0] == 200
    assert proxy.get("/proxy", headers={"Authorization": KEY})[0] == 401


def test_deprecated_proxy_secrets(shared_proxy):
    proxy = shared_proxy(client_keys=None, proxy_secrets=["old-secret"])
    assert proxy.get("/proxy", key="old-secret")[0] == 200
    assert proxy.get("/proxy", key=KEY)[0] == 401


def test_client_features_needs_a_server_side_token(proxy_factory):
    closed = proxy_factory()
    assert closed.get("/proxy/client/features", key=KEY)[0] == 401
    proxy = proxy_factory(exp_server_side_sdk_config_tokens="server-token, server-token-2")
    assert proxy.get("/proxy/client/features", key=KEY)[0] == 401
    assert proxy.get("/proxy/client/features")[0] == 401
    status, headers, body = proxy.get("/proxy/client/features", key="server-token-2")
    assert status == 200
    assert headers["cache-control"] == "public, max-age=2"
    assert headers["etag"] == xxh3_etag(body)  # computed once per snapshot, of exactly these bytes
    document = json.loads(body)
    assert document["version"] == 2
    assert len(document["features"]) == 29
    assert document["segments"] == proxy.upstream.payload["segments"]  # downstream SDKs can use segments
    again = proxy.get(
        "/proxy/client/features", key="server-token", headers={"If-None-Match": headers["etag"]}
    )
    assert (again[0], again[2]) == (304, b"")
    assert proxy.get("/proxy", key="server-token")[0] == 401


def usage_upstream_got(upstream, flag: str) -> dict[str, Any]:
    """yes, no and variants of `flag` added up over every metrics post the upstream received."""
    total: dict[str, Any] = {"yes": 0, "no": 0, "variants": {}}
    for request in upstream.received("/api/client/metrics"):
        counts = request["body"]["bucket"]["toggles"].get(flag, {})
        total["yes"] += counts.get("yes", 0)
        total["no"] += counts.get("no", 0)
        for name, count in counts.get("variants", {}).items():
            total["variants"][name] = total["variants"].get(name, 0) + count
    return total


def test_a_downstream_proxy_evaluates_segments_from_client_features(
    proxy_factory, upstream, base_env, tmp_path
):
    # A tree of proxy processes: `leaf` syncs from `root`'s /proxy/client/features with a server-side token.
    root = proxy_factory(exp_server_side_sdk_config_tokens=["server-token"], metrics_interval=100)
    (tmp_path / "leaf").mkdir()
    leaf_options = {
        "service_url": f"http://127.0.0.1:{root.port}/proxy",
        "service_api_token": "server-token",
        "client_keys": ["leaf-key"],
        "refresh_interval": 100,
        "metrics_interval": 100,
    }
    leaf = ProxyUnderTest(leaf_options, None, {**base_env, "TMPDIR": str(tmp_path / "leaf")})
    try:
        leaf.wait_ready()
        for query in (
            "userId=u1&sessionId=s1&properties[region]=eu",
            "userId=u2&sessionId=s2",
            "sessionId=s3&region=eu",
        ):
            from_root = root.get(f"/proxy?{query}", key=KEY)
            from_leaf = leaf.get(f"/proxy?{query}", key="leaf-key")
            assert from_leaf[0] == 200
            assert from_leaf[2] == from_root[2], query  # the same answers, segment constraints included
        assert "segment-eu" in [t["name"] for t in json.loads(from_leaf[2])["toggles"]]
        named = {"toggles": ["segment-eu"], "context": {"properties": {"region": "us"}}}
        assert json.loads(leaf.post("/proxy", named, key="leaf-key")[2])["toggles"][0]["enabled"] is False
        # The leaf reports usage to the root, which adds it to what it sends its own upstream.
        deadline = time.monotonic() + 10
        while usage_upstream_got(upstream, "segment-eu")["no"] < 1:
            assert time.monotonic() < deadline, "the leaf's usage never reached the root's upstream"
            time.sleep(0.05)
    finally:
        leaf.stop()


def test_create_app_takes_spec_md_keywords(embedded, upstream):
    # A program that embeds the proxy (tests/http/embedded.py) with SPEC.md's camelCase keywords, nested
    # objects among them, and a client key in its environment too: the keyword wins over the environment.
    proxy = embedded(
        {
            "serviceUrl": upstream.url,
            "serviceApiToken": "stub-server-token",
            "clientKeys": ["kw-key"],
            "refreshInterval": 100,
            "metricsInterval": 0,
            "proxyBasePath": "kw",
            "enableAllEndpoint": True,
            "cors": {"origin": "https://app.example", "maxAge": 60},
        },
        env={"SERVICE_PROXY_CLIENT_KEYS": "env-key"},
    )
    status, headers, _ = proxy.get("/kw/proxy/all", key="kw-key", headers={"Origin": "https://app.example"})
    assert status == 200 and headers["access-control-allow-origin"] == "https://app.example"
    assert proxy.get("/kw/proxy", key="env-key")[0] == 401
    preflight = {"Origin": "https://app.example", "Access-Control-Request-Method": "GET"}
    assert proxy.request("OPTIONS", "/kw/proxy", headers=preflight)[1]["access-control-max-age"] == "60"


@pytest.mark.parametrize("path", ["/proxy/client/metrics", "/proxy/all/client/metrics"])
def test_client_metrics_are_accepted_with_either_key(proxy_factory, upstream, path):
    proxy = proxy_factory(exp_server_side_sdk_config_tokens=["server-token"], metrics_interval=100)
    for key in (KEY, "server-token"):
        status, headers, body = proxy.post(path, METRICS, key=key)
        assert (status, body) == (200, b"OK")
        assert_node_body(headers, body, 'W/"2-nOO9QiTIwXgNtWtBJezz8kv3SLc"')
    assert proxy.post(path, METRICS)[0] == 401
    wanted = {"yes": 4, "no": 2, "variants": {"disabled": 6}}  # both posts, passed on upstream
    deadline = time.monotonic() + 10
    while usage_upstream_got(upstream, "default-on") != wanted:
        assert time.monotonic() < deadline, usage_upstream_got(upstream, "default-on")
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("body", "instance_path", "message"),
    [
        ({"some": "blob"}, "/body", "must have required property 'appName'"),
        (
            {**METRICS, "bucket": {**METRICS["bucket"], "toggles": {"a": {"yes": -1}}}},
            "/body/bucket/toggles/a/yes",
            "must be >= 0",
        ),
        (
            {**METRICS, "bucket": {**METRICS["bucket"], "start": "yesterday"}},
            "/body/bucket/start",
            'must match format "date-time"',
        ),
        (
            {**METRICS, "bucket": {**METRICS["bucket"], "toggles": {"a": {"variants": {"v": "1"}}}}},
            "/body/bucket/toggles/a/variants/v",
            "must be integer",
        ),
        ([], "/body", "must be object"),
    ],
)
def test_bad_client_metrics_get_400_before_the_key_check(proxy, body, instance_path, message):
    status, headers, answer = proxy.post("/proxy/client/metrics", body)
    assert status == 400
    if body == {"some": "blob"}:
        assert_node_body(headers, answer, 'W/"fe-gS1a6ZlqxmFHMnJ3UtPLnMhz1Q4"')  # the Node proxy's body
    error = json.loads(answer)["validation"][0]
    assert (error["instancePath"], error["message"]) == (instance_path, message)


def test_client_register(proxy):
    assert proxy.post("/proxy/client/register", REGISTER, key=KEY)[:3:2] == (200, b"OK")
    assert proxy.post("/proxy/client/register", {**REGISTER, "started": 1700000000000}, key=KEY)[0] == 200
    assert proxy.post("/proxy/client/register", REGISTER)[0] == 401
    status, _, body = proxy.post("/proxy/client/register", {"appName": "web"}, key=KEY)
    assert status == 400
    assert json.loads(body)["validation"][0]["message"] == "must have required property 'interval'"
    assert (
        proxy.request(
            "POST", "/proxy/client/register", key=KEY, body="{x", headers={"Content-Type": "application/json"}
        )[0]
        == 400
    )


def test_health_and_prometheus(proxy):
    status, headers, body = proxy.get("/proxy/health")
    assert (status, body) == (200, b"ok")
    assert_node_body(headers, body, 'W/"2-eoX0dku9ba8cNUXvu/DyeabcC+s"')
    assert headers["content-type"] == "text/html; charset=utf-8"
    status, headers, body = proxy.get("/proxy/internal-backstage/prometheus")
    assert status == 200
    assert b"unleash_proxy_up 1" in body
    assert re.search(rb"last_metrics_update_epoch_timestamp_ms [1-9]\d+", body)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/proxy"),
        ("DELETE", "/proxy/health"),
        ("GET", "/"),
        ("GET", "/proxy/unknown"),
        ("GET", "/proxy/all/client/metrics"),
        ("GET", "/docs/openapi.json"),
        ("GET", "/<script>"),
    ],
)
def test_unknown_routes_get_the_express_404_page(proxy, method, path):
    status, headers, body = proxy.request(method, path, key=KEY)
    assert status == 404
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert headers["content-security-policy"] == "default-src 'none'"
    assert headers["access-control-allow-origin"] == "*"
    shown = path.replace("<", "&lt;").replace(">", "&gt;")
    assert f"<pre>Cannot {method} {shown}</pre>".encode() in body
    if path == "/":
        assert len(body) == 139  # byte-identical to Express's page


def test_base_path(shared_proxy):
    proxy = shared_proxy(proxy_base_path=" base/path/ ", enable_oas=True)
    status, headers, body = proxy.get("/base/path/proxy?userId=u1&sessionId=s1", key=KEY)
    assert status == 200
    assert_node_body(headers, body, 'W/"876-gEN+QlEcLKfCqM0uTN6Nv+KrNKI"')
    assert proxy.get("/base/path/proxy/health")[0] == 200
    assert proxy.get("/proxy", key=KEY)[0] == 404
    spec = json.loads(proxy.get("/base/path/docs/openapi.json")[2])
    assert spec["servers"] == [{"url": "/base/path"}]
    assert proxy.get("/docs/openapi.json")[0] == 404


def test_openapi_document_and_offline_page(shared_proxy):
    proxy = shared_proxy(enable_oas=True, client_keys_header_name="X-Key")
    status, headers, body = proxy.get("/docs/openapi.json")
    assert status == 200
    assert "access-control-allow-origin" not in headers  # mounted before CORS, as in the Node proxy
    spec = json.loads(body)
    assert spec["openapi"] == "3.0.3"
    assert spec["servers"] == []
    assert spec["components"]["securitySchemes"]["apiKey"]["name"] == "x-key"
    assert {
        "/proxy",
        "/proxy/all",
        "/proxy/health",
        "/proxy/client/features",
        "/proxy/client/metrics",
        "/proxy/client/register",
    } <= set(spec["paths"])
    for path in ("/docs/openapi", "/docs/openapi/"):
        status, headers, page = proxy.get(path)
        assert status == 200
        assert headers["content-type"] == "text/html; charset=utf-8"
        assert b"<script>" in page and b"fetch(" in page
        assert not re.search(rb"""(src|href)=["']?(https?:)?//""", page)  # nothing from the network
        assert b"http://" not in page and b"https://" not in page and b"@import" not in page
        assert b'"/proxy/client/features"' in page  # the document is in the page, not fetched


def test_before_the_first_sync_every_request_is_503(proxy_factory, upstream):
    upstream.features_status = 503
    proxy = proxy_factory(wait=False, enable_oas=True)
    for method, path in [
        ("GET", "/proxy"),
        ("GET", "/proxy/health"),
        ("POST", "/proxy/client/metrics"),
        ("POST", "/proxy/client/register"),
        ("OPTIONS", "/proxy"),
        ("GET", "/nowhere"),
        ("GET", "/docs/openapi.json"),
        ("GET", "/proxy/client/features"),
        ("GET", "/proxy?properties=str"),
        ("PUT", "/proxy"),
    ]:
        status, headers, body = proxy.request(method, path, key=KEY)
        assert (status, body) == (503, NOT_READY), (method, path)
        assert_node_body(headers, body, 'W/"5f-/Ax8AW1R+iIMrOmyt1sJUvPwB8g"')
        assert headers["content-type"] == "text/html; charset=utf-8"
    big = json.dumps({"pad": "x" * 200_000})
    assert proxy.request("POST", "/proxy", key=KEY, body=big)[0] == 503
    upstream.features_status = 200
    deadline = time.monotonic() + 5
    while proxy.get("/proxy/health")[0] != 200:
        assert time.monotonic() < deadline, "never became ready"
        time.sleep(0.05)
    assert proxy.get("/proxy", key=KEY)[0] == 200
