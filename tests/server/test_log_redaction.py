"""Secrets in URLs (API tokens being revoked, invite links) never reach the access log: unit cases of the
filter, and a real `flagproxy server --log-level debug` whose log holds every request but no secret."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from flagproxy.server.redaction import redact
from tests.server.harness import PASSWORD, Api, ServerProcess, base_env, unique


def test_the_filter_hides_secret_parts_of_urls_and_nothing_else():
    cases = {
        "DELETE http://h/api/admin/api-tokens/*:development.abc123": "DELETE http://h/api/admin/api-tokens/<redacted>",
        "DELETE http://h/api/admin/api-tokens/%2A%3Adev.x?y=1": "DELETE http://h/api/admin/api-tokens/<redacted>?y=1",
        "PUT http://h/api/admin/invite-link/tokens/s3cr3t": "PUT http://h/api/admin/invite-link/tokens/<redacted>",
        "POST http://h/invite/s3cr3t/signup": "POST http://h/invite/<redacted>/signup",
        "GET http://h/new-user?invite=s3cr3t": "GET http://h/new-user?invite=<redacted>",
        "GET http://h/new-user?a=1&invite=s3cr3t&b=2": "GET http://h/new-user?a=1&invite=<redacted>&b=2",
        "GET http://h/api/admin/api-tokens": "GET http://h/api/admin/api-tokens",
        "GET http://h/console/projects/default": "GET http://h/console/projects/default",
    }
    for raw, shown in cases.items():
        assert redact(raw) == shown, raw


def test_a_debug_log_names_the_requests_but_holds_no_secret(tmp_path: Path):
    log = tmp_path / "server.log"
    server = ServerProcess(
        base_env(DATABASE_PATH=str(tmp_path / "f.db"), LOG_LEVEL="debug"), log_path=str(log)
    ).start()
    try:
        api = server.api()
        token = api.post("/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client"}).json()[
            "secret"
        ]
        assert api.delete(f"/api/admin/api-tokens/{token}").status == 200
        expires = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        invite = api.post("/api/admin/invite-link/tokens", {"name": "n", "expiresAt": expires}).json()[
            "secret"
        ]
        anonymous = Api(server.port, None)
        assert anonymous.get(f"/new-user?invite={invite}").status == 200
        body = {"email": f"{unique('s')}@example.com", "name": "S", "password": PASSWORD}
        assert anonymous.post(f"/invite/{invite}/signup", body).status == 200
    finally:
        assert server.stop() == 0
    text = log.read_text()
    assert "/api/admin/api-tokens/<redacted>" in text and "invite=<redacted>" in text  # they were logged
    secret_part = token.rsplit(".", 1)[1]
    assert secret_part not in text and invite not in text
