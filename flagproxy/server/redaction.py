"""Secrets never reach the access log.

Some URLs carry a secret: Unleash's `DELETE /api/admin/api-tokens/:secret` (a script's; the console's
Revoke names the token by its digest instead, redacted all the same), an invite link's
`/api/admin/invite-link/tokens/:secret`, `/invite/:secret/...` and the signup page
`/new-user?invite=<secret>`. With LOG_LEVEL=debug Sanic's access log writes every request's URL, so
this filter on the `sanic.access` logger replaces those parts with `<redacted>` before anything is written.
"""

from __future__ import annotations

import logging
import re

REDACTED = "<redacted>"
_SECRET_PARTS = (
    re.compile(r"(/api/admin/api-tokens/)[^\s?#]+"),
    re.compile(r"(/api/admin/invite-link/tokens/)[^\s/?#]+"),
    re.compile(r"(/invite/)[^\s/?#]+"),
    re.compile(r"([?&]invite=)[^\s&#]+"),
)


def redact(text: str) -> str:
    for pattern in _SECRET_PARTS:
        text = pattern.sub(lambda found: found.group(1) + REDACTED, text)
    return text


class RedactSecrets(logging.Filter):
    """Rewrites the `request` field Sanic's access log records carry ("METHOD URL")."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        if isinstance(request, str):
            record.request = redact(request)
        return True


ACCESS_LOG_FILTER = RedactSecrets()


def install() -> None:
    """Idempotent: the same filter object is added at most once."""
    logging.getLogger("sanic.access").addFilter(ACCESS_LOG_FILTER)
