"""OpenFeature in the browser: `@openfeature/web-sdk` with `@openfeature/unleash-web-provider` (pinned in
tests/sdk/node/package-lock.json, loaded as ES modules through an import map) in headless Chromium, on a
page from another origin, pointed at a real `flagproxy proxy` in front of a real `flagproxy server`.
Boolean flags and variants with string, number and JSON payloads resolve to exactly what the proxy
answers for the provider's context, and a flag turned on through the admin API resolves on afterwards.
A screenshot is saved in the test's temporary folder; any console error fails the test."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from tests.browser.test_unleash_proxy_client import FEATURES, proxy_toggles, start_proxy
from tests.demo.processes import PROXY_KEY
from tests.http.test_workers import wait_until

pytestmark = pytest.mark.slow

KINDS = {"string": "string", "number": "number", "json": "object"}  # payload type → OpenFeature kind
FALLBACK = {"boolean": False, "string": "fallback", "number": -1, "object": {"fallback": True}}


def test_openfeature_resolves_boolean_and_variant_flags_through_the_proxy(
    browser, origin, flag_server, tmp_path
):
    api = flag_server.api()
    # Beside the demo's flags (dark-mode has a JSON payload): a number and a string payload.
    for flag, payload in (("checkout-discount", {"type": "number", "value": "15"}),
                          ("greeting", {"type": "string", "value": "Hej"})):  # fmt: skip
        variant = {"name": f"{flag}-v", "weight": 1000, "weightType": "variable", "stickiness": "default"}
        api.create_feature(flag)
        api.add_strategy(flag, {"name": "default", "variants": [{**variant, "payload": payload}]})
        api.switch(flag, True)
    flags = [f["name"] for f in api.get(FEATURES).json()["features"]]
    proxy = start_proxy(flag_server, tmp_path)

    page, errors = browser.page()
    context = {"userId": "carol", "plan": "premium", "country": "NO", "version": "2.1.0"}
    query = {
        "proxy": f"http://127.0.0.1:{proxy.port}/proxy",
        "key": PROXY_KEY,
        "context": json.dumps(context),
    }
    page.goto(f"{origin.url}/openfeature.html?{urllib.parse.urlencode(query)}")
    page.wait_for_function("document.getElementById('state').textContent === 'ready'")
    sdk_context = page.evaluate("flags.context()")
    assert sdk_context["userId"] == "carol" and sdk_context["properties"]["plan"] == "premium"
    toggles = proxy_toggles(proxy, sdk_context)
    assert {"premium-search", "dark-mode", "checkout-discount", "greeting"} <= set(toggles)

    def resolve(kind: str, flag: str) -> dict:
        return page.evaluate("([k, f, d]) => flags.details(k, f, d)", [kind, flag, FALLBACK[kind]])

    kinds_seen = set()
    for flag in flags:
        toggle = toggles.get(flag)
        boolean = resolve("boolean", flag)
        assert boolean == {
            "value": toggle is not None and toggle["enabled"],
            "variant": None,
            "errorCode": None,
        }
        payload = toggle["variant"].get("payload") if toggle else None
        if payload is None:  # no variant with a payload: the provider answers the fallback
            assert resolve("string", flag) == {"value": "fallback", "variant": None, "errorCode": None}
            continue
        kind = KINDS[payload["type"]]
        kinds_seen.add(kind)
        expected = float(payload["value"]) if kind == "number" else payload["value"]
        assert resolve(kind, flag) == {
            "value": expected,
            "variant": toggle["variant"]["name"],
            "errorCode": None,
        }
    assert kinds_seen == {"string", "number", "object"}, kinds_seen

    # A flag turned on through the admin API resolves on once the provider's client has refreshed.
    assert resolve("boolean", "payments-kill-switch")["value"] is False
    assert api.post(f"{FEATURES}/payments-kill-switch/environments/development/on").status == 200
    wait_until(lambda: resolve("boolean", "payments-kill-switch")["value"] is True, 30, "never turned on")

    page.screenshot(path=str(tmp_path / "openfeature.png"), full_page=True)
    assert errors == []
    proxy.stop()
