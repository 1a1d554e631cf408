"""The official browser SDK (`unleash-proxy-client`, its browser bundle at the version package-lock.json
pins) in headless Chromium, on a page served from another origin (its own loopback port), pointed at a
real `flagproxy proxy` in front of a real `flagproxy server`:

- the page shows exactly the flags (and variants) the proxy answers for the SDK's context, through CORS
  preflights carrying the SDK's own headers, under the default CORS options and under a CORS_ORIGIN
  restricted to the page's origin (and a CORS_ORIGIN naming another origin is refused by the browser);
- a flag turned on through the flag server's admin API appears on the page within the SDK's refresh
  interval plus the proxy's;
- the SDK's usage metrics reach the flag server (its client-metrics admin route shows them).

Each test saves a screenshot in its temporary folder and fails on any browser console error.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.browser.origin import Origin
from tests.demo.processes import PROXY_KEY, ProxyProcess
from tests.demo.timing import wait_for_propagation
from tests.http.test_prometheus import scrape, value
from tests.http.test_workers import wait_until
from tests.server.harness import CLIENT_TOKEN, ServerProcess

pytestmark = pytest.mark.slow

SDK_REFRESH_MS = 1000  # the page's refreshInterval (seconds in the SDK's options)
PROXY_REFRESH_MS = 500
FEATURES = "/api/admin/projects/default/features"


def start_proxy(server: ServerProcess, tmp_path: Path, *args: str) -> ProxyProcess:
    # Usage metrics every second (the last --metrics-interval wins), so they reach the server quickly.
    extra = ("--metrics-interval", "1000", *args)
    log = str(tmp_path / "proxy.log")
    return ProxyProcess(server.url, PROXY_REFRESH_MS, log_path=log, extra_args=extra).start()


def page_url(origin: Origin, proxy: ProxyProcess, user: str = "alice") -> str:
    query = urllib.parse.urlencode(
        {"proxy": f"http://127.0.0.1:{proxy.port}/proxy", "key": PROXY_KEY, "userId": user}
    )
    return f"{origin.url}/unleash-proxy-client.html?{query}"


def shown(page: Any) -> dict[str, str]:
    """The flags on the page: name → its line."""
    pairs = page.locator("#flags li").evaluate_all("els => els.map(e => [e.dataset.name, e.textContent])")
    return dict(pairs)


def proxy_toggles(proxy: ProxyProcess, context: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The proxy's own answer (GET /proxy, as the SDK asks) for an SDK's `context`: name → toggle."""
    fields = [(k, v) for k, v in context.items() if isinstance(v, str)]
    fields += [(f"properties[{k}]", v) for k, v in (context.get("properties") or {}).items()]
    status, body = proxy.request("GET", f"/proxy?{urllib.parse.urlencode(fields)}")
    assert status == 200, body
    return {t["name"]: t for t in body["toggles"]}


def proxy_view(proxy: ProxyProcess, context: dict[str, Any]) -> dict[str, str]:
    """What the page should show for `context`: the proxy's own answer, as the page words it."""
    return {
        name: f"{name}: {'on' if t['enabled'] else 'off'}, variant {t['variant']['name']}"
        for name, t in proxy_toggles(proxy, context).items()
    }


def server_usage(server: ServerProcess, flag: str) -> tuple[int, int]:
    answer = server.api().get(f"/api/admin/client-metrics/features/{flag}")
    assert answer.status == 200, answer.body
    rows = answer.json()["lastHourUsage"]
    return sum(r["yes"] for r in rows), sum(r["no"] for r in rows)


@pytest.mark.parametrize("cors", ["default", "restricted to the page's origin"])
def test_the_browser_sdk_shows_the_proxy_flags_follows_changes_and_reports_usage(
    browser, origin, flag_server, tmp_path, cors
):
    args = ("--cors-origin", origin.url) if cors != "default" else ()
    proxy = start_proxy(flag_server, tmp_path, *args)
    page, errors = browser.page()
    page.goto(page_url(origin, proxy))
    page.wait_for_function("document.getElementById('state').textContent === 'ready'")

    # Exactly the proxy's answer for the SDK's context (its random sessionId and static fields included).
    context = page.evaluate("client.getContext()")
    assert context["userId"] == "alice" and context["appName"] == "browser-test"
    assert shown(page) == proxy_view(proxy, context)
    assert "welcome-banner" in shown(page) and "payments-kill-switch" not in shown(page)
    # The SDK's headers (authorization, unleash-appname, unleash-connection-id, unleash-sdk) made the
    # browser ask first: the proxy answered its preflights.
    assert value(scrape(proxy.port)[1], "flagproxy_http_requests_total", route="preflight", status="204") >= 1

    # Turned on through the admin API: on the page within the SDK's refresh interval plus the proxy's.
    turned_on = flag_server.api().post(f"{FEATURES}/payments-kill-switch/environments/development/on")
    assert turned_on.status == 200, turned_on.body
    propagation = wait_for_propagation(
        lambda: "payments-kill-switch" in shown(page),
        also_time=lambda: flag_server.api(CLIENT_TOKEN).get("/api/client/features"),
    )
    propagation.assert_within_one_refresh(SDK_REFRESH_MS + PROXY_REFRESH_MS, "turning a flag on")
    assert shown(page) == proxy_view(proxy, context)

    # The SDK posts its usage to the proxy every second; the proxy sends it on to the flag server.
    wait_until(
        lambda: server_usage(flag_server, "welcome-banner")[0] >= 1, 30, "usage never reached the server"
    )
    wait_until(lambda: server_usage(flag_server, "payments-kill-switch")[0] >= 1, 30, "the new flag's usage")

    page.screenshot(path=str(tmp_path / "unleash-proxy-client.png"), full_page=True)
    assert errors == []
    proxy.stop()


def test_a_cors_origin_naming_another_site_is_refused_by_the_browser(browser, origin, flag_server, tmp_path):
    proxy = start_proxy(flag_server, tmp_path, "--cors-origin", "https://app.example")
    page, errors = browser.page()
    page.goto(page_url(origin, proxy))
    page.wait_for_function("document.getElementById('state').textContent.startsWith('error')")
    assert shown(page) == {}
    assert any("CORS policy" in error for error in errors), errors
    page.screenshot(path=str(tmp_path / "refused.png"))
    proxy.stop()
