"""flagproxy/tokens.py, the token rules the server and edge share: a token's scope, Bearer, digests and
the one fail-closed expiry rule. (Through real processes: tests/server/test_tokens.py and
tests/edge/test_tokens.py.)"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from flagproxy.tokens import TokenFormatError, digest, expired, hex_digest, masked, parse_scope, strip_bearer

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("moment", "passed"),
    [
        (None, False),
        ("", False),
        ("2026-01-01T00:00:01Z", False),
        ("2026-01-01T00:00:00Z", True),  # the moment itself has passed
        ("2026-01-01T01:00:00+02:00", True),
        ("2026-01-01T00:00:01", False),  # no offset: UTC, as the server writes them
        ("2025-12-31T23:59:59.999Z", True),
        ("not a date", True),  # fail closed
        ("2026-13-01T00:00:00Z", True),
        ("0001-01-01T00:00:00+14:00", True),
    ],
)
def test_one_expiry_rule_that_fails_closed(moment: str | None, passed: bool) -> None:
    assert expired(moment, NOW) is passed


def test_scope_bearer_digest_and_mask() -> None:
    assert parse_scope("default:development.abc") == (("default",), "development")
    assert parse_scope(" *:production.x.y ") == (("*",), "production")
    assert parse_scope("[]:development.abc") == ((), "development")
    for bad in ("secret", "default.x", ":development.x", "default:.x", "default:development.", "a:b:c.x"):
        with pytest.raises(TokenFormatError):
            parse_scope(bad)
    assert strip_bearer("Bearer abc") == strip_bearer("bearer abc ") == strip_bearer("BEARER abc") == "abc"
    assert strip_bearer(" abc ") == "abc" and strip_bearer("Bearerabc") == "Bearerabc"
    assert digest("a").hex() == hex_digest("a") and len(hex_digest("\ud800")) == 64  # any str hashes
    assert masked("default:development.secret") == "default:development.****"
    assert masked("node-proxy-key") == masked("key@production") == "****"
