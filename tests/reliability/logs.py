"""The campaign's own secrets check: no credential it used appears in a log it read, at any level."""

from __future__ import annotations

from tests.server.harness import ADMIN_TOKEN, CLIENT_TOKEN, FRONTEND_TOKEN, PASSWORD

SERVER_SECRETS = [ADMIN_TOKEN, CLIENT_TOKEN, FRONTEND_TOKEN, PASSWORD]


def assert_no_secret(log: str, secrets: list[str]) -> None:
    """Neither a secret nor its part after the `project:environment.` prefix (what a token's holder keeps
    secret) is in `log`; nor a traceback."""
    for secret in secrets:
        for part in {secret, secret.rpartition(".")[2]}:
            assert part not in log, f"a secret ({part[:4]}...) is in the log"
    assert "Traceback" not in log, log[-3000:]
