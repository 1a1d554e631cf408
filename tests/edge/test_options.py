"""Options that change how requests are answered: base path, allow/deny lists, trust proxy, CORS origins,
--disable-all-endpoint, --backup-folder."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.edge.harness import CountingUpstream, edge, features_doc
from tests.http.loopback import fetch

DEV_CLIENT = "*:development.sync-secret"
DEV_FRONTEND = "*:development.frontend-secret"
REMOTE_FLAG = {
    "name": "office",
    "project": "default",
    "enabled": True,
    "strategies": [{"name": "remoteAddress", "parameters": {"IPs": "10.1.2.3"}, "constraints": []}],
}


def seeded(counting: CountingUpstream) -> CountingUpstream:
    document = features_doc(("plain", "default", True))
    document["features"].append(REMOTE_FLAG)
    counting.add(DEV_CLIENT, "client", "development", ["*"], document)
    counting.add(DEV_FRONTEND, "frontend", "development", ["*"])
    return counting


def test_base_path_disable_all_and_cors_origins(counting: CountingUpstream) -> None:
    stub = seeded(counting)
    process = edge(
        stub.url, [DEV_CLIENT], "--base-path", "edge/", "--disable-all-endpoint",
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


def test_allow_and_deny_lists(counting: CountingUpstream) -> None:
    stub = seeded(counting)
    process = edge(stub.url, [DEV_CLIENT], "--allow-list", "127.0.0.0/24", "--deny-list", "127.0.0.7/32")
    try:
        process.wait_ready()
        headers = {"Authorization": DEV_FRONTEND}
        assert fetch(process.port, "GET", "/api/frontend", headers, source="127.0.0.1")[0] == 200
        assert fetch(process.port, "GET", "/api/frontend", headers, source="127.0.0.7")[0] == 403
        assert fetch(process.port, "GET", "/api/frontend", headers, source="127.0.1.1")[0] == 403
        assert fetch(process.port, "GET", "/internal-backstage/health", source="127.0.1.1")[0] == 403
    finally:
        process.stop()


def test_trust_proxy_reads_the_forwarded_address(counting: CountingUpstream) -> None:
    stub = seeded(counting)
    forwarded = {"X-Forwarded-For": "10.1.2.3"}
    plain = edge(stub.url, [DEV_CLIENT])
    trusting = edge(stub.url, [DEV_CLIENT], "--trust-proxy", "--proxy-trusted-servers", "127.0.0.1")
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


def test_backup_folder_serves_the_last_flags_when_the_upstream_is_down(
    counting: CountingUpstream, tmp_path: Path
) -> None:
    stub = seeded(counting)
    process = edge(stub.url, [DEV_CLIENT], "--backup-folder", str(tmp_path))
    process.wait_ready()
    assert process.get("/api/frontend", DEV_FRONTEND)[0] == 200  # validated: its hash is kept
    process.stop()
    saved = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert b"plain" in saved
    assert b"sync-secret" not in saved and b"frontend-secret" not in saved  # hashes only
    url = stub.url
    stub.stop()
    process = edge(url, [DEV_CLIENT], "--backup-folder", str(tmp_path))
    try:
        process.wait_ready()  # from the backup, with the upstream gone
        body = process.get("/api/frontend", DEV_FRONTEND)[2]
        assert {t["name"] for t in orjson.loads(body)["toggles"]} == {"plain"}
        assert process.get("/api/client/features", DEV_CLIENT)[0] == 200
        assert process.get("/api/frontend", "*:development.never-seen")[0] == 401  # nobody to ask
    finally:
        process.stop()
