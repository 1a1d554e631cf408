"""The server decides the client's address and scheme by TRUST_PROXY, the proxy's and edge's one rule
(flagproxy/http/trust.py, Express's `trust proxy`): X-Forwarded-For and X-Forwarded-Proto are ignored by
default, believed from every peer with `true`, and from the listed addresses or ranges only otherwise.
Sanic's own proxy settings stop start-up (they were a second rule), and so does a hop count, as on the proxy.
The same headers from the same peer give the same address on the server, a proxy and edge trusting that peer.

The address is read back through the frontend API: one flag per candidate address, each with the
`remoteAddress` strategy for that address alone, so the enabled flag names the address the server used.
"""

from __future__ import annotations

import http.client
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from tests.demo.processes import PROXY_KEY, ProxyProcess
from tests.edge.harness import edge
from tests.http.loopback import fetch
from tests.server.conftest import BACKENDS
from tests.server.harness import (
    ADMIN_TOKEN,
    CLIENT_TOKEN,
    FRONTEND_TOKEN,
    PASSWORD,
    ServerProcess,
    base_env,
    free_port,
    unique,
)

TRUSTED, UNTRUSTED = "127.0.0.1", "127.0.0.7"  # loopback sources: the first is the listed proxy
FORWARDED = "198.51.100.9, 203.0.113.7"  # client, then a proxy further out
CANDIDATES = {TRUSTED, UNTRUSTED, "198.51.100.9", "203.0.113.7"}


def _flag(address: str) -> str:
    return "at-" + address.replace(".", "-")


def _seed(server: ServerProcess) -> None:
    api = server.api()
    for address in CANDIDATES:
        api.create_feature(_flag(address))
        api.add_strategy(_flag(address), {"name": "remoteAddress", "parameters": {"IPs": address}})
        api.switch(_flag(address), True)


def _start(tmp: Path, env: dict[str, str], name: str) -> ServerProcess:
    server = ServerProcess(base_env(**env), log_path=str(tmp / f"{name}.log")).start()
    _seed(server)
    return server


def _address(port: int, path: str, key: str, source: str, forwarded: str | None) -> str:
    """The address the service evaluated with: the one candidate whose flag is on."""
    headers = {"Authorization": key, **({"X-Forwarded-For": forwarded} if forwarded else {})}
    status, _, body = fetch(port, "GET", path, headers, None, 10, source)
    assert status == 200, body[:300]
    on = [t["name"] for t in orjson.loads(body)["toggles"] if t["name"].startswith("at-")]
    matches = [a for a in CANDIDATES if _flag(a) in on]
    assert len(matches) == 1, on
    return matches[0]


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    tmp = Path(tmp_path_factory.mktemp("trust"))
    started: dict[str, ServerProcess] = {}
    try:
        for name, trust in (("default", None), ("all", "true"), ("loopback-one", TRUSTED),
                            ("chain", "loopback, 203.0.113.0/24")):  # fmt: skip
            env = {"DATABASE_PATH": str(tmp / f"{name}.db")}
            if trust is not None:
                env["TRUST_PROXY"] = trust
            started[name] = _start(tmp, env, name)
        yield started
    finally:
        for server in started.values():
            assert server.stop() == 0


def _server_address(server: ServerProcess, source: str, forwarded: str | None = FORWARDED) -> str:
    return _address(server.port, "/api/frontend", FRONTEND_TOKEN, source, forwarded)


def test_x_forwarded_for_is_ignored_by_default(servers: dict[str, ServerProcess]) -> None:
    assert _server_address(servers["default"], TRUSTED) == TRUSTED
    assert _server_address(servers["default"], UNTRUSTED) == UNTRUSTED


def test_true_believes_every_hop(servers: dict[str, ServerProcess]) -> None:
    assert _server_address(servers["all"], UNTRUSTED) == "198.51.100.9"  # the leftmost entry
    assert _server_address(servers["all"], UNTRUSTED, forwarded=None) == UNTRUSTED


def test_an_address_list_believes_only_the_listed_peers(servers: dict[str, ServerProcess]) -> None:
    one = servers["loopback-one"]
    assert _server_address(one, TRUSTED) == "203.0.113.7"  # one step left, then an untrusted hop
    assert _server_address(one, UNTRUSTED) == UNTRUSTED  # a peer not listed: its header is ignored
    chain = servers["chain"]
    assert _server_address(chain, UNTRUSTED) == "198.51.100.9"  # loopback, then 203.0.113.7, both trusted


def test_the_server_a_proxy_and_edge_with_the_same_trust_agree(
    servers: dict[str, ServerProcess], tmp_path: Path
) -> None:
    """The proxy's --trust-proxy and edge's TRUST_PROXY + PROXY_TRUSTED_SERVERS naming the same peer."""
    server = servers["loopback-one"]
    proxy = ProxyProcess(
        server.url, 60_000, log_path=str(tmp_path / "proxy.log"), extra_args=("--trust-proxy", TRUSTED)
    ).start()
    edge_process = edge(
        server.url, [CLIENT_TOKEN], env={"TRUST_PROXY": "true", "PROXY_TRUSTED_SERVERS": TRUSTED}
    )
    try:
        edge_process.wait_ready()
        for source in (TRUSTED, UNTRUSTED):
            for forwarded in (None, "203.0.113.7", FORWARDED, " , 198.51.100.9,,"):
                on_server = _server_address(server, source, forwarded)
                on_proxy = _address(proxy.port, "/proxy", PROXY_KEY, source, forwarded)
                on_edge = _address(edge_process.port, "/api/frontend", FRONTEND_TOKEN, source, forwarded)
                assert on_server == on_proxy == on_edge, (source, forwarded, on_server, on_proxy, on_edge)
    finally:
        edge_process.stop()
        proxy.stop()


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flagproxy", "server", "--host", "127.0.0.1", "--port", str(free_port())],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"TRUST_PROXY": "1"}, "TRUST_PROXY: '1' is a number; hop counts are not supported"),
        ({"TRUST_PROXY": "proxy.example"}, "TRUST_PROXY: 'proxy.example' is not true, false, an IP address"),
        ({"SANIC_PROXIES_COUNT": "1"}, "SANIC_PROXIES_COUNT is no longer read"),
        ({"SANIC_FORWARDED_SECRET": "s"}, "SANIC_FORWARDED_SECRET is no longer read"),
    ],
)
def test_a_trust_setting_that_cannot_work_stops_start_up(
    env: dict[str, str], said: str, tmp_path: Path
) -> None:
    finished = _run({"DATABASE_PATH": str(tmp_path / "flags.db"), **env})
    assert finished.returncode == 2, finished.stderr
    assert said in finished.stderr and "Traceback" not in finished.stderr, finished.stderr


# ---- the scheme: Secure cookies and invite links -------------------------------------------------------


@pytest.fixture(scope="module", params=BACKENDS)
def behind_proxy(
    request: pytest.FixtureRequest,
    backend_env: Callable[[str], dict[str, str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ServerProcess]:
    """A server that trusts the proxy at TRUSTED, on each database (sessions and invites are stored)."""
    log = Path(tmp_path_factory.mktemp("scheme")) / "server.log"
    server = ServerProcess(base_env(TRUST_PROXY=TRUSTED, **backend_env(request.param)), log_path=str(log))
    server.start()
    yield server
    assert server.stop() == 0


def _sign_in_cookies(server: ServerProcess, source: str) -> list[str]:
    """Both Set-Cookie headers of a sign-in through a caller at `source` that says it used https."""
    user = server.api().create_user(username=unique("u"))
    body = orjson.dumps({"username": user["username"], "password": PASSWORD})
    headers = {"Content-Type": "application/json", "X-Forwarded-Proto": "https"}
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10, source_address=(source, 0))
    try:
        connection.request("POST", "/auth/simple/login", body=body, headers=headers)
        answer = connection.getresponse()
        assert answer.status == 200, answer.read()[:300]
        return [v for k, v in answer.getheaders() if k.lower() == "set-cookie"]
    finally:
        connection.close()


def _invite_url(server: ServerProcess, source: str) -> str:
    body = orjson.dumps({"name": unique("inv"), "expiresAt": "2099-01-01T00:00:00Z"})
    headers = {"Content-Type": "application/json", "Authorization": ADMIN_TOKEN, "X-Forwarded-Proto": "https"}
    status, _, answer = fetch(server.port, "POST", "/api/admin/invite-link/tokens", headers, body, 10, source)
    assert status == 201, answer[:300]
    return str(orjson.loads(answer)["url"])


def test_a_trusted_proxy_says_https_secure_cookies_and_https_invite_links(
    behind_proxy: ServerProcess,
) -> None:
    cookies = _sign_in_cookies(behind_proxy, TRUSTED)
    assert len(cookies) == 2 and all("secure" in c.lower().split("; ") for c in cookies), cookies
    assert _invite_url(behind_proxy, TRUSTED).startswith(f"https://127.0.0.1:{behind_proxy.port}/new-user?")


def test_anyone_else_saying_https_is_not_believed(
    behind_proxy: ServerProcess, servers: dict[str, ServerProcess]
) -> None:
    for server, source in ((behind_proxy, UNTRUSTED), (servers["default"], TRUSTED)):
        cookies = _sign_in_cookies(server, source)
        assert cookies and not any("secure" in c.lower().split("; ") for c in cookies), cookies
        assert _invite_url(server, source).startswith(f"http://127.0.0.1:{server.port}/new-user?")


def test_the_access_log_writes_the_address_trust_proxy_gives(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    env = base_env(DATABASE_PATH=str(tmp_path / "flags.db"), TRUST_PROXY=TRUSTED, LOG_LEVEL="debug")
    server = ServerProcess(env, log_path=str(log)).start()
    try:
        for source, path in ((TRUSTED, "/health?from=trusted"), (UNTRUSTED, "/health?from=untrusted")):
            status, _, _ = fetch(server.port, "GET", path, {"X-Forwarded-For": FORWARDED}, None, 10, source)
            assert status == 200
    finally:
        assert server.stop() == 0  # stopped first, so every access line is written
    lines = log.read_text().splitlines()
    assert any("203.0.113.7:" in line and "from=trusted" in line for line in lines), lines[-5:]
    assert any(f"{UNTRUSTED}:" in line and "from=untrusted" in line for line in lines), lines[-5:]
