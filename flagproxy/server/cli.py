"""`flagproxy server`: read the settings, then serve until Ctrl-C or SIGTERM; `flagproxy server
create-admin` makes a console Admin (server/create_admin.py). A setting that cannot work: one line, exit 2."""

from __future__ import annotations

import os
from functools import partial

from sanic.worker.loader import AppLoader

from flagproxy.http.command_line import check_listen, refused
from flagproxy.http.serving import StoppingHttpProtocol
from flagproxy.http.serving import serve as run_workers
from flagproxy.options import ConfigError
from flagproxy.server.app import create_app
from flagproxy.server.logs import configure_logging
from flagproxy.server.series import remove_series_folder, series_folder
from flagproxy.server.settings import ServerSettings, SettingsError
from flagproxy.server.startup import open_and_prepare

PROG = "flagproxy server"


def main(argv: list[str]) -> int:
    if argv[:1] == ["create-admin"]:
        from flagproxy.server import create_admin

        return create_admin.main(argv[1:])
    try:
        settings = ServerSettings.load(os.environ, argv)
        check_listen(settings.host, settings.port, settings.named("host"), settings.named("port"))
    except ConfigError as exc:  # SettingsError is one
        return refused(PROG, exc)
    configure_logging(settings.log_level)
    try:
        # Migrate, store the INIT tokens and the first admin once, here, before any worker starts: N workers
        # opening a new database at the same moment would race for it, and a setting that cannot work is one
        # line, not N tracebacks.
        open_and_prepare(settings).close()
    except SettingsError as exc:
        return refused(PROG, exc)
    series = series_folder()  # every worker's Prometheus samples, summed at each scrape
    try:
        return _serve(settings, series)
    finally:
        remove_series_folder(series)


def _serve(settings: ServerSettings, series: str) -> int:
    loader = AppLoader(factory=partial(create_app, settings, series_directory=series))
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
        return refused(PROG, exc)
    except OSError as exc:  # the port was taken between the check above and now
        return refused(
            PROG, f"{settings.named('port')}: cannot listen on {settings.host}:{settings.port}: {exc}"
        )
    return 0
