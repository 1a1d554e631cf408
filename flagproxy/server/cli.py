"""`flagproxy server`: read the settings, then serve until Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import sys
from functools import partial

from sanic.worker.loader import AppLoader

from flagproxy.http.serving import StoppingHttpProtocol
from flagproxy.http.serving import serve as run_workers
from flagproxy.server.app import create_app
from flagproxy.server.logs import configure_logging
from flagproxy.server.settings import ServerSettings, SettingsError
from flagproxy.server.startup import open_and_prepare


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
