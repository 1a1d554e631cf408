"""`flagproxy server`: read the settings, then serve until Ctrl-C or SIGTERM."""

from __future__ import annotations

import logging
import os
import sys
from functools import partial

from sanic.worker.loader import AppLoader

from flagproxy.http.serving import StoppingHttpProtocol
from flagproxy.http.serving import serve as run_workers
from flagproxy.server import redaction
from flagproxy.server.app import LOG_LEVELS, create_app
from flagproxy.server.settings import ServerSettings, SettingsError
from flagproxy.server.startup import open_and_prepare


def configure_logging(level_name: str) -> None:
    """Our messages on stderr; Sanic's start/stop chatter only at info or debug."""
    level = LOG_LEVELS.get(level_name, logging.WARNING)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    ours = logging.getLogger("flagproxy.server")
    ours.addHandler(handler)
    ours.setLevel(level)
    ours.propagate = False
    for name in ("sanic.root", "sanic.server", "sanic.error"):
        logging.getLogger(name).setLevel(level)
    redaction.install()  # token and invite secrets in URLs never reach the access log


def main(argv: list[str]) -> int:
    try:
        settings = ServerSettings.load(os.environ, argv)
    except SettingsError as exc:
        print(f"flagproxy server: {exc}", file=sys.stderr)
        return 2
    try:
        # Migrate and store the INIT tokens once, here, before any worker starts: N workers opening a new
        # database at the same moment would race for it, and a bad INIT token is one line, not N tracebacks.
        open_and_prepare(settings).close()
    except SettingsError as exc:
        print(f"flagproxy server: {exc}", file=sys.stderr)
        return 2
    loader = AppLoader(factory=partial(create_app, settings))
    app = loader.load()
    configure_logging(settings.log_level)  # after the app exists: creating it installs Sanic's logging
    app.prepare(
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        single_process=settings.workers == 1,
        access_log=settings.log_level == "debug",
        motd=False,
        protocol=StoppingHttpProtocol,
    )
    try:
        run_workers(app, loader, settings.workers)
    except SettingsError as exc:
        print(f"flagproxy server: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # most often: the port is taken
        print(f"flagproxy server: cannot listen on {settings.host}:{settings.port}: {exc}", file=sys.stderr)
        return 1
    return 0
