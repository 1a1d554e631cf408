"""The server's logging: its messages on stderr at LOG_LEVEL, Sanic's start/stop chatter only at info or
debug, token and invite secrets in URLs redacted from the access log. Set up by `flagproxy server` and by
each worker process, which builds its own app."""

from __future__ import annotations

import logging

from flagproxy.server import redaction

LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}


def configure_logging(level_name: str) -> None:
    """Our messages on stderr; Sanic's start/stop chatter only at info or debug."""
    level = LOG_LEVELS.get(level_name, logging.WARNING)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    ours = logging.getLogger("flagproxy.server")
    if not ours.handlers:  # `flagproxy server` calls it before and after the app exists: one handler
        ours.addHandler(handler)
    ours.setLevel(level)
    ours.propagate = False
    for name in ("sanic.root", "sanic.server", "sanic.error"):
        logging.getLogger(name).setLevel(level)
    redaction.install()  # token and invite secrets in URLs never reach the access log
