"""The server's Prometheus series (served at `GET /internal-backstage/prometheus`,
flagproxy/server/routes/backstage.py): its delta streams' (connected stream clients, events sent), summed
over every worker of the server.

Each process writes its samples into one folder shared by the server's workers (flagproxy/http/series.py,
prometheus_client's multiprocess files): `flagproxy server` makes it in the main process before any worker
starts and removes it at the end; an app made by create_app alone (a program, a test) makes a private one.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile

from flagproxy.http.series import RequestSeries


class ServerSeries:
    def __init__(self, directory: str | None = None) -> None:
        self.given = directory
        self.directory: str | None = None
        self.series = RequestSeries(enabled=True)
        # /api/client/streaming (flagproxy/server/routes/delta.py): streams open now, messages sent.
        self.open_streams, self.stream_messages = self.series.stream_cells()

    def start(self) -> None:
        self.directory = self.given or tempfile.mkdtemp(prefix="flagproxy-server-series-")
        self.series.start(self.directory)

    async def stop(self) -> None:
        await self.series.stop()
        if self.given is None and self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


def series_folder() -> str:
    """A folder for `flagproxy server`'s workers to share, made by its main process."""
    return tempfile.mkdtemp(prefix="flagproxy-server-series-")


def remove_series_folder(directory: str) -> None:
    with contextlib.suppress(OSError):
        shutil.rmtree(directory)
