"""`flagproxy server`: read the settings, then serve until Ctrl-C or SIGTERM."""

from __future__ import annotations

import logging
import os
import sys
from functools import partial

from sanic import Sanic
from sanic.worker.loader import AppLoader

from flagproxy.server.app import create_app
from flagproxy.server.settings import ServerSettings, SettingsError


def main(argv: list[str]) -> int:
    try:
        settings = ServerSettings.load(os.environ, argv)
    except SettingsError as exc:
        print(f"flagproxy server: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    loader = AppLoader(factory=partial(create_app, settings))
    app = loader.load()
    app.prepare(
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        single_process=settings.workers == 1,
        access_log=settings.log_level == "debug",
        motd=False,
    )
    try:
        if settings.workers == 1:
            Sanic.serve_single(primary=app)
        else:
            Sanic.serve(primary=app, app_loader=loader)
    except SettingsError as exc:
        print(f"flagproxy server: {exc}", file=sys.stderr)
        return 2
    return 0
