"""Request size and header limits on every route of both apps, as docs/reliability.md states them: a body
past the limit gets 413, a request line and headers past theirs get 431, on every
operation each app's OpenAPI document lists (path parameters filled in); a body at the limit is read."""

from __future__ import annotations

import http.client
import json

import pytest

from flagproxy.proxy.app import create_app as proxy_app
from flagproxy.proxy.settings import ProxySettings
from flagproxy.server.app import create_app as server_app
from flagproxy.server.settings import ServerSettings
from tests.http.loopback import KEY
from tests.http.test_workers import proxy_env
from tests.reliability.figures import FIGURES
from tests.server.harness import ADMIN_TOKEN, ServerProcess, base_env

pytestmark = pytest.mark.slow

# The limits docs/reliability.md states, written down here rather than read from flagproxy: the proxy's body
# 102,400 bytes (the Node proxy's 100 kB) and request line + headers 16,384 bytes (Node's
# --max-http-header-size); the server's MAX_REQUEST_SIZE default 1,048,576 bytes (docs/server.md).
SDK_BODY_LIMIT = 102_400
HEADER_LIMIT = 16_384
DEFAULT_MAX_REQUEST_SIZE = 1_048_576
SERVER_HEADER_LIMIT = 8192  # Sanic's REQUEST_MAX_HEADER_SIZE, which the server keeps
SERVER_HEADER_STATUS = 431  # as the proxy answers (and Node): Sanic's own answer, 413, named the body


def send(port: int, method: str, path: str, headers: dict[str, str], body: bytes | None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    except (ConnectionResetError, BrokenPipeError):
        return 0  # closed while the rest of the body was still being sent: no answer read
    finally:
        connection.close()


def operations(port: int) -> list[tuple[str, str, bool]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/docs/openapi.json")
    document = json.loads(connection.getresponse().read())
    connection.close()
    found = []
    for template, methods in document["paths"].items():
        path = template
        for part in template.split("{")[1:]:
            path = path.replace("{" + part.split("}")[0] + "}", "x")
        for method, operation in methods.items():
            found.append((method.upper(), path, "requestBody" in operation or method in ("post", "put")))
    return found


def check_every_route(
    port: int, token: str, body_limit: int, header_limit: int, header_status: int, family: str
) -> None:
    routes = operations(port)
    assert len(routes) > 5
    for method, path, takes_body in routes:
        padded = {"Authorization": token, "X-Pad": "a" * (header_limit + 100)}
        assert send(port, method, path, padded, None) == header_status, (method, path)
        long_line = path + "?pad=" + "a" * (header_limit + 100)
        assert send(port, method, long_line, {"Authorization": token}, None) == header_status, (method, path)
        FIGURES.hostile_input(family, 2)
        if takes_body:
            headers = {"Authorization": token, "Content-Type": "application/json"}
            body = b'{"pad": "' + b"a" * (body_limit + 1) + b'"}'
            # 413, or the credential check's 401/403, which answers before any of the body is read.
            assert send(port, method, path, headers, body) in (413, 401, 403, 0), (method, path)
            FIGURES.hostile_input(family)


def test_every_proxy_route_refuses_bodies_and_headers_past_its_limits(launch, upstream):
    process = launch(proxy_env(upstream, ENABLE_OAS="true", ENABLE_ALL_ENDPOINT="true"))
    process.wait_ready()
    check_every_route(
        process.port, KEY, SDK_BODY_LIMIT, HEADER_LIMIT, 431, "proxy: bodies and headers past the limits"
    )
    # At the limit itself the body is read (and answered on its merits).
    context = {"context": {"userId": ""}}
    pad = SDK_BODY_LIMIT - len(json.dumps(context).encode())
    exact = json.dumps({"context": {"userId": "u" * pad}}).encode()
    assert len(exact) == SDK_BODY_LIMIT
    headers = {"Authorization": KEY, "Content-Type": "application/json"}
    assert send(process.port, "POST", "/proxy", headers, exact) == 200


def test_every_server_route_refuses_bodies_and_headers_past_its_limits(tmp_path):
    server = ServerProcess(
        base_env(DATABASE_PATH=str(tmp_path / "f.db")), log_path=str(tmp_path / "log")
    ).start()
    try:
        check_every_route(
            server.port,
            ADMIN_TOKEN,
            DEFAULT_MAX_REQUEST_SIZE,
            SERVER_HEADER_LIMIT,
            SERVER_HEADER_STATUS,
            "server: bodies and headers past the limits",
        )
        headers = {"Authorization": ADMIN_TOKEN, "Content-Type": "application/json"}
        exact = b'{"name": "limit", "description": "' + b"a" * DEFAULT_MAX_REQUEST_SIZE
        exact = exact[: DEFAULT_MAX_REQUEST_SIZE - 2] + b'"}'
        assert send(server.port, "POST", "/api/admin/projects/default/features", headers, exact) != 413
    finally:
        assert server.stop() == 0


def test_the_documented_timeouts_are_those_both_apps_run_with(tmp_path):
    """docs/reliability.md: an idle keep-alive connection is closed after 5 s and a request that has not
    arrived in full after 60 s, so a slowloris connection holds a socket, never a worker."""
    options = {"service_url": "http://127.0.0.1:1/api", "service_api_token": "t", "client_keys": [KEY]}
    proxy = proxy_app(ProxySettings.load(options, env={}))
    server = server_app(ServerSettings.load({"DATABASE_PATH": str(tmp_path / "f.db")}, []), name="limits")
    for app in (proxy, server):
        assert (app.config.KEEP_ALIVE_TIMEOUT, app.config.REQUEST_TIMEOUT) == (5, 60), app.name
