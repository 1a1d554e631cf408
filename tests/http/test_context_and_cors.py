"""How the context is built (seen by a recording enricher), trustProxy, environment, and CORS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.http.loopback import KEY


class Seen:
    """The contexts the recording enricher wrote, one JSON line each, read back in order."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __getitem__(self, index: int) -> dict[str, Any]:
        return [json.loads(line) for line in self.path.read_text().splitlines()][index]


def enricher_file(folder: Path, source: str) -> str:
    path = folder / "enrichers.py"
    path.write_text(source)
    return str(path)


@pytest.fixture(scope="module")
def recorder(tmp_path_factory):
    """An enricher file (as an operator gives one) that writes every context it sees to a log file."""
    folder = tmp_path_factory.mktemp("recorder")
    log = folder / "contexts.jsonl"
    source = (
        "import json\n"
        "def record(context):\n"
        f"    with open({str(log)!r}, 'a') as out:\n"
        "        out.write(json.dumps(context) + '\\n')\n"
        "    return context\n"
        "enrichers = [record]\n"
    )
    return enricher_file(folder, source), Seen(log)


@pytest.fixture
def recorded(shared_proxy, recorder):
    """A proxy process with the recording enricher (one per configuration, shared), and its log."""
    path, seen = recorder

    def start(**options: Any):
        return shared_proxy(exp_custom_enrichers=path, **options), seen

    return start


def test_get_context_with_every_root_field(recorded):
    proxy, seen = recorded()
    proxy.get(
        "/proxy?appName=a1&environment=e1&userId=u1&sessionId=s1&remoteAddress=1.2.3.4"
        "&currentTime=2024-05-06T07:08:09Z&properties[region]=eu&properties[tier]=gold&tenant=t1"
        "&region=top-level-loses",
        key=KEY,
    )
    assert seen[-1] == {
        "appName": "a1",
        "currentTime": "2024-05-06T07:08:09.000Z",
        "environment": "e1",
        "properties": {"region": "eu", "tenant": "t1", "tier": "gold"},
        "remoteAddress": "1.2.3.4",
        "sessionId": "s1",
        "userId": "u1",
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("userId=&sessionId=&tenant=", {"properties": {"tenant": ""}, "remoteAddress": "127.0.0.1"}),
        (
            "properties[appName]=x&properties[userId]=y",
            {"properties": {"appName": "x", "userId": "y"}, "remoteAddress": "127.0.0.1"},
        ),
        ("properties.region=eu", {"properties": {"properties.region": "eu"}, "remoteAddress": "127.0.0.1"}),
        (
            "userId=a%20b%2Bc&properties%5Bemail%5D=x%40Example.com",
            {"properties": {"email": "x@Example.com"}, "remoteAddress": "127.0.0.1", "userId": "a b+c"},
        ),
        ("userId=a+b", {"properties": {}, "remoteAddress": "127.0.0.1", "userId": "a b"}),
    ],
)
def test_get_context_details(recorded, query, expected):
    proxy, seen = recorded()
    assert proxy.get(f"/proxy?{query}", key=KEY)[0] == 200
    assert seen[-1] == expected


def test_post_context_converts_scalars_and_ignores_outside_keys(recorded):
    proxy, seen = recorded()
    body = {
        "userId": "outside-is-ignored",
        "toggles": ["default-on"],
        "context": {
            "userId": 7,
            "sessionId": True,
            "appName": None,
            "properties": {"region": "eu", "n": 5, "b": False, "f": 1.5},
            "customTop": "x",
            "currentTime": "2024-05-06T07:08:09Z",
            "remoteAddress": "10.1.2.3",
        },
    }
    assert proxy.post("/proxy", body, key=KEY)[0] == 200
    assert seen[-1] == {
        "currentTime": "2024-05-06T07:08:09.000Z",
        "properties": {"b": "false", "customTop": "x", "f": "1.5", "n": "5", "region": "eu"},
        "remoteAddress": "10.1.2.3",
        "sessionId": "true",
        "userId": "7",
    }


def test_enrichers_change_the_evaluation(proxy_factory, tmp_path):
    source = (
        "def add_user(context):\n"
        "    return {**context, 'userId': 'u1'}\n"
        "async def add_region(context):\n"
        "    context['properties']['region'] = 'eu'\n"
        "    return context\n"
        "enrichers = [add_user, add_region]\n"
    )
    proxy = proxy_factory(exp_custom_enrichers=enricher_file(tmp_path, source))
    toggles = {t["name"] for t in proxy.toggles()}
    assert {"user-with-id", "segment-eu", "c-in-region"} <= toggles


def test_enrichers_from_a_file(proxy_factory, tmp_path):
    path = tmp_path / "enrichers.py"
    path.write_text("def tier(ctx):\n    ctx['userId'] = 'u2'\n    return ctx\nenrichers = [tier]\n")
    proxy = proxy_factory(exp_custom_enrichers=str(path))
    assert "user-with-id" in {t["name"] for t in proxy.toggles()}


def test_a_failing_enricher_is_a_logged_500_and_the_worker_survives(proxy_factory, tmp_path):
    source = "def broken(context):\n    raise RuntimeError('boom')\nenrichers = [broken]\n"
    proxy = proxy_factory(exp_custom_enrichers=enricher_file(tmp_path, source))
    status, _, body = proxy.get("/proxy", key=KEY)
    assert status == 500
    assert "boom" in json.loads(body)["error"]
    assert proxy.get("/proxy/health")[0] == 200


def test_forced_environment_and_app_name(recorded):
    proxy, seen = recorded(environment="production", service_app_name="my-app")
    ask = {"toggles": ["c-app-env"], "context": {"userId": "u1", "environment": "staging"}}
    assert json.loads(proxy.post("/proxy", ask, key=KEY)[2])["toggles"][0]["enabled"] is True
    assert seen[-1]["environment"] == "staging"  # enrichers run before the environment is forced
    other_app = {"toggles": ["c-app-env"], "context": {"appName": "other"}}
    assert json.loads(proxy.post("/proxy", other_app, key=KEY)[2])["toggles"][0]["enabled"] is False
    assert "c-app-env" in {t["name"] for t in proxy.toggles("/proxy?environment=staging")}


def test_without_forced_environment_the_caller_decides(shared_proxy):
    proxy = shared_proxy(service_app_name="my-app")
    assert "c-app-env" in {t["name"] for t in proxy.toggles("/proxy?environment=production")}
    assert "c-app-env" not in {t["name"] for t in proxy.toggles("/proxy")}


@pytest.mark.parametrize(
    ("trust", "forwarded", "expected"),
    [
        (None, None, "127.0.0.1"),
        (None, "10.1.2.3", "127.0.0.1"),
        (False, "10.1.2.3", "127.0.0.1"),
        ("false", "10.1.2.3", "127.0.0.1"),
        ("true", "10.1.2.3", "10.1.2.3"),
        ("127.0.0.1", "192.168.1.5, 10.9.9.9", "10.9.9.9"),  # one IP: only the socket peer is trusted
        ("127.0.0.0/8", "10.9.9.9", "10.9.9.9"),  # one CIDR range
        ("10.9.9.9", "192.168.1.5, 10.9.9.9", "127.0.0.1"),  # the socket peer is not that IP
        ("127.0.0.1,10.9.9.9", "192.168.1.5, 10.9.9.9", "192.168.1.5"),  # a list: two trusted hops
        (["127.0.0.1", "10.0.0.0/8"], "1.1.1.1, 10.9.9.9, 10.1.1.1", "1.1.1.1"),
        (True, None, "127.0.0.1"),
        (True, "10.1.2.3", "10.1.2.3"),
        (True, "192.168.1.5, 10.9.9.9", "192.168.1.5"),
        ("loopback", "192.168.1.5, 10.9.9.9", "10.9.9.9"),
        ("127.0.0.1, 10.0.0.0/8", "192.168.1.5, 10.9.9.9", "192.168.1.5"),
        ("10.0.0.0/8", "192.168.1.5", "127.0.0.1"),
    ],
)
def test_remote_address_and_trust_proxy(recorded, trust, forwarded, expected):
    options = {} if trust is None else {"trust_proxy": trust}
    proxy, seen = recorded(**options)
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    proxy.get("/proxy", key=KEY, headers=headers)
    assert seen[-1]["remoteAddress"] == expected


# ---- CORS -------------------------------------------------------------------------------------------


def test_default_preflight_on_any_path(proxy):
    for path in ("/proxy", "/anything"):
        status, headers, body = proxy.request(
            "OPTIONS",
            path,
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            },
        )
        assert (status, body) == (204, b"")
        assert headers["access-control-allow-origin"] == "*"
        assert headers["access-control-allow-methods"] == "GET, POST"
        assert headers["access-control-allow-headers"] == "authorization, content-type"
        assert headers["access-control-max-age"] == "172800"
        assert headers["vary"] == "Access-Control-Request-Headers"


def test_origin_list_with_credentials(shared_proxy):
    proxy = shared_proxy(
        cors_origin="https://a.example, https://b.example",
        cors_credentials=True,
        cors_max_age=600,
        cors_exposed_headers="ETag, X-Custom",
    )
    status, headers, _ = proxy.get("/proxy", key=KEY, headers={"Origin": "https://b.example"})
    assert status == 200
    assert headers["access-control-allow-origin"] == "https://b.example"
    assert headers["vary"] == "Origin, Accept-Encoding"
    assert headers["access-control-allow-credentials"] == "true"
    assert headers["access-control-expose-headers"] == "ETag, X-Custom"
    status, headers, _ = proxy.get("/proxy", key=KEY, headers={"Origin": "https://evil.example"})
    assert status == 200 and "access-control-allow-origin" not in headers
    status, headers, _ = proxy.request(
        "OPTIONS",
        "/proxy",
        headers={"Origin": "https://a.example", "Access-Control-Request-Headers": "authorization"},
    )
    assert status == 204
    assert headers["access-control-allow-origin"] == "https://a.example"
    assert headers["vary"] == "Origin, Access-Control-Request-Headers"
    assert headers["access-control-max-age"] == "600"
    status, headers, _ = proxy.request("OPTIONS", "/proxy", headers={"Origin": "https://evil.example"})
    assert status == 204 and "access-control-allow-origin" not in headers


def test_single_origin_fixed_headers_and_status(shared_proxy):
    proxy = shared_proxy(
        cors_origin="https://only.example",
        cors_allowed_headers="authorization, content-type",
        cors_methods="GET",
        cors_options_success_status=200,
    )
    headers = proxy.get("/proxy", key=KEY, headers={"Origin": "https://evil.example"})[1]
    assert headers["access-control-allow-origin"] == "https://only.example"
    status, headers, _ = proxy.request(
        "OPTIONS",
        "/proxy",
        headers={"Origin": "https://only.example", "Access-Control-Request-Headers": "x-whatever"},
    )
    assert status == 200
    assert headers["access-control-allow-methods"] == "GET"
    assert headers["access-control-allow-headers"] == "authorization, content-type"
    assert headers["vary"] == "Origin"


def test_preflight_continue(shared_proxy):
    proxy = shared_proxy(cors_preflight_continue=True)
    status, headers, body = proxy.request("OPTIONS", "/proxy", headers={"Origin": "https://x.example"})
    assert (status, body, headers["allow"]) == (200, b"GET,HEAD,POST", "GET,HEAD,POST")
    assert headers["access-control-allow-origin"] == "*"
    status, headers, body = proxy.request("OPTIONS", "/proxy/health")
    assert (status, body) == (200, b"GET,HEAD")
    assert proxy.request("OPTIONS", "/anything")[0] == 404


def test_cors_headers_on_errors_too(proxy):
    for status, path in ((401, "/proxy"), (404, "/nope")):
        answer = proxy.get(path)
        assert answer[0] == status
        assert answer[1]["access-control-allow-origin"] == "*"
