"""Options that change how requests are answered: base path, allow/deny lists, trust proxy, CORS origins,
--disable-all-endpoint, --backup-folder; against a real `flagproxy server` upstream of this module's own
(flags `plain` and `office`, the latter on only for the address 10.1.2.3)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.edge.harness import edge
from tests.http.loopback import fetch
from tests.server.harness import CLIENT_TOKEN, FRONTEND_TOKEN, ServerProcess, base_env

DEV_CLIENT = CLIENT_TOKEN
DEV_FRONTEND = FRONTEND_TOKEN


def _seeded_server(folder: Path) -> ServerProcess:
    process = ServerProcess(
        base_env(DATABASE_PATH=str(folder / "flags.db")), log_path=str(folder / "server.log")
    )
    process.start()
    api = process.api()
    for name, strategy in (
        ("plain", {"name": "default"}),
        ("office", {"name": "remoteAddress", "parameters": {"IPs": "10.1.2.3"}}),
    ):
        api.create_feature(name)
        api.add_strategy(name, strategy)
        api.switch(name, True)
    return process


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    process = _seeded_server(tmp_path_factory.mktemp("edge-options"))
    yield process
    assert process.stop() == 0


def test_base_path_disable_all_and_cors_origins(upstream: ServerProcess) -> None:
    process = edge(
        upstream.url, [DEV_CLIENT], "--base-path", "edge/", "--disable-all-endpoint",
        "--cors-origin", "https://a.example,https://b.example",
    )  # fmt: skip
    try:
        process.wait_ready(health="/edge/internal-backstage/ready")
        assert process.get("/edge/api/frontend", DEV_FRONTEND)[0] == 200
        assert process.get("/api/frontend", DEV_FRONTEND)[0] == 404
        assert process.get("/edge/api/frontend/all", DEV_FRONTEND)[0] == 404
        assert process.get("/edge/api/proxy/all", DEV_FRONTEND)[0] == 404
        _, headers, _ = process.get(
            "/edge/api/frontend", DEV_FRONTEND, headers={"Origin": "https://b.example"}
        )
        assert headers["access-control-allow-origin"] == "https://b.example"
        _, headers, _ = process.get(
            "/edge/api/frontend", DEV_FRONTEND, headers={"Origin": "https://evil.example"}
        )
        assert "access-control-allow-origin" not in headers
    finally:
        process.stop()


def test_allow_and_deny_lists(upstream: ServerProcess) -> None:
    process = edge(upstream.url, [DEV_CLIENT], "--allow-list", "127.0.0.0/24", "--deny-list", "127.0.0.7/32")
    try:
        process.wait_ready()
        headers = {"Authorization": DEV_FRONTEND}
        assert fetch(process.port, "GET", "/api/frontend", headers, source="127.0.0.1")[0] == 200
        assert fetch(process.port, "GET", "/api/frontend", headers, source="127.0.0.7")[0] == 403
        assert fetch(process.port, "GET", "/api/frontend", headers, source="127.0.1.1")[0] == 403
        assert fetch(process.port, "GET", "/internal-backstage/health", source="127.0.1.1")[0] == 403
    finally:
        process.stop()


def test_trust_proxy_reads_the_forwarded_address(upstream: ServerProcess) -> None:
    forwarded = {"X-Forwarded-For": "10.1.2.3"}
    plain = edge(upstream.url, [DEV_CLIENT])
    trusting = edge(upstream.url, [DEV_CLIENT], "--trust-proxy", "--proxy-trusted-servers", "127.0.0.1")
    try:
        for process in (plain, trusting):
            process.wait_ready()

        def on(process, headers) -> bool:
            body = process.get("/api/frontend", DEV_FRONTEND, headers=headers)[2]
            return "office" in {t["name"] for t in orjson.loads(body)["toggles"]}

        assert not on(plain, forwarded)
        assert on(trusting, forwarded)
        assert not on(trusting, {})
    finally:
        plain.stop()
        trusting.stop()


def test_backup_folder_serves_the_last_flags_when_the_upstream_is_down(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    backup.mkdir()
    upstream = _seeded_server(tmp_path)  # its own server: this test stops it
    process = edge(upstream.url, [DEV_CLIENT], "--backup-folder", str(backup))
    process.wait_ready()
    assert process.get("/api/frontend", DEV_FRONTEND)[0] == 200  # validated: its hash is kept
    process.stop()
    saved = b"".join(p.read_bytes() for p in backup.iterdir())
    assert b"plain" in saved
    assert b"test-client-secret" not in saved and b"test-frontend-secret" not in saved  # hashes only
    url = upstream.url
    assert upstream.stop() == 0
    process = edge(url, [DEV_CLIENT], "--backup-folder", str(backup))
    try:
        process.wait_ready()  # from the backup, with the upstream gone
        body = process.get("/api/frontend", DEV_FRONTEND)[2]
        assert {t["name"] for t in orjson.loads(body)["toggles"]} == {"plain"}  # office: not from here
        assert process.get("/api/client/features", DEV_CLIENT)[0] == 200
        assert process.get("/api/frontend", "*:development.never-seen")[0] == 401  # nobody to ask
    finally:
        process.stop()
