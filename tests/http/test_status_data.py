"""The status page's routes over HTTP (flagproxy/proxy/status_page.py): the page is open and holds no data,
its data needs a client key and tells the instance's state without credentials; ENABLE_STATUS_PAGE=false
removes both. What a person sees is checked in Chromium (tests/browser/test_status_page.py)."""

from __future__ import annotations

import json

from flagproxy.proxy.status_page import public_url
from tests.http.loopback import KEY, SAMPLE
from tests.http.test_prometheus import requests_of
from tests.http.test_workers import wait_until


def test_the_page_is_open_and_holds_no_flag_names(shared_proxy):
    proxy = shared_proxy()
    status, headers, body = proxy.get("/proxy/status")
    assert status == 200
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert b'<meta name="flagproxy-data" content="/proxy/status.json">' in body
    assert b'<meta name="flagproxy-key-header" content="authorization">' in body
    assert not any(feature["name"].encode() in body for feature in SAMPLE["features"])


def test_the_data_needs_a_client_key(shared_proxy):
    proxy = shared_proxy()
    assert proxy.get("/proxy/status.json")[0] == 401
    assert proxy.get("/proxy/status.json", key="wrong")[0] == 401


def test_the_data_tells_the_state_without_credentials(proxy_factory, upstream):
    proxy = proxy_factory()
    body = json.dumps({"toggles": ["default-on"], "context": {"userId": "u"}})
    assert proxy.post("/proxy", json.loads(body), key=KEY)[0] == 200
    wait_until(lambda: requests_of(proxy.port, "toggles_post") == 1, 10, "the request was not counted")

    def usage() -> list[float] | None:
        data = json.loads(proxy.get("/proxy/status.json", key=KEY)[2])
        return (data["usage"] or {}).get("default-on")

    wait_until(lambda: usage() == [1, 0], 10, "the usage never reached the status data")
    status, headers, raw = proxy.get("/proxy/status.json", key=KEY)
    assert status == 200
    assert headers["cache-control"] == "no-store"
    data = json.loads(raw)
    assert data["ready"] is True
    assert data["revision"] >= 1
    assert data["source"] == "upstream"
    assert data["upstream"] == upstream.url
    assert b"stub-server-token" not in raw
    assert data["flags"] == sorted(f["name"] for f in SAMPLE["features"])
    assert data["requests_total"] >= 1
    assert data["last_success"] > 0


def test_a_failing_upstream_shows_its_error(proxy_factory, upstream):
    proxy = proxy_factory(refresh_interval=50)
    upstream.features_status = 503

    def error() -> str | None:
        return json.loads(proxy.get("/proxy/status.json", key=KEY)[2])["last_error"]

    wait_until(lambda: error() is not None, 10, "the failure never reached the status data")
    assert error().startswith("status: ")


def test_enable_status_page_false_removes_both(shared_proxy):
    proxy = shared_proxy(enable_status_page=False)
    assert proxy.get("/proxy/status")[0] == 404
    assert proxy.get("/proxy/status.json", key=KEY)[0] == 404


def test_the_upstream_url_is_shown_without_user_password_or_query():
    assert (
        public_url("https://user:pw@unleash.example:8443/api?token=x#f") == "https://unleash.example:8443/api"
    )
    assert public_url("http://[::1]:4242/api/") == "http://[::1]:4242/api/"


def test_the_page_sends_the_key_in_the_configured_header_under_the_base_path(shared_proxy):
    proxy = shared_proxy(client_keys_header_name="X-Flag-Key", proxy_base_path="/flags")
    status, _, body = proxy.get("/flags/proxy/status")
    assert status == 200
    assert b'<meta name="flagproxy-key-header" content="x-flag-key">' in body
    assert b'<meta name="flagproxy-data" content="/flags/proxy/status.json">' in body
    assert proxy.get("/flags/proxy/status.json", headers={"X-Flag-Key": KEY})[0] == 200
    assert proxy.get("/flags/proxy/status.json", key=KEY)[0] == 200  # the harness sends the configured one
    assert proxy.get("/flags/proxy/status.json", headers={"Authorization": KEY})[0] == 401


def test_without_prometheus_the_data_says_so_and_tells_the_rest(shared_proxy):
    proxy = shared_proxy(enable_prometheus=False)
    data = json.loads(proxy.get("/proxy/status.json", key=KEY)[2])
    assert data["requests_total"] is None and data["usage"] is None  # the page shows "off"
    assert data["ready"] is True and data["flags"] == sorted(f["name"] for f in SAMPLE["features"])
