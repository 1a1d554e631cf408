"""Request series in Prometheus (through prometheus_client), added up over an instance's processes.

Every process of an instance writes its own samples into prometheus_client's multiprocess files, in one
folder (the proxy's is the `prometheus/` folder of its instance, flagproxy/instance/leader.py; `flagproxy
edge` has one of its own); a scrape, on whichever worker it lands, reads them all with
`MultiProcessCollector`, so N workers add up and a replaced worker's counts stay in the sums. The folder
is emptied when the instance starts. Both products wrap their routes with `RequestSeries`; what only one
product counts lives with it (flagproxy/proxy/series.py, flagproxy/edge/backstage.py).

The hot path pays for a handler wrapper only: two clock reads and two appends to lists bound once per
route (`RouteSeries`: no label lookup, no bucketing, no allocation but the float of the duration). Every
`FLUSH_SECONDS`, and before a scrape or a stop, the lists are folded into the route's cells in C (sort,
bisect, Counter) and the cells written to the process's file, so a scrape sees the other workers' requests
of the last fraction of a second a little late, never lost or twice. Folding runs first and cannot fail,
so the lists stay bounded even when a write does (a full disk). Folding runs on the loop; the files are
written on the process's writer thread (flagproxy/disk.py: the serving loop never waits on the disk,
and each file has that one writer); a scrape awaits its own flush there before it reads the files.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import os
import secrets
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.utils import floatToGoString

from flagproxy.disk import Coalesced, disk_writer

FLUSH_SECONDS = 0.25
# Request durations: proxy answers take tens of microseconds to a few milliseconds, so the buckets start
# well below prometheus_client's default 5 ms.
DURATION_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, float("inf"),
)  # fmt: skip

REQUESTS = ("flagproxy_http_requests", "Requests answered, by route and status.")
DURATION = (
    "flagproxy_http_request_duration_seconds",
    "Time spent answering a request in its route, seconds.",
)
CONTENT_TYPE = "text/plain; charset=utf-8; version=0.0.4"
# The delta stream's series, the same names on the server and on edge (flagproxy/http/delta.py serves both).
OPEN_STREAMS = ("flagproxy_delta_streams", "Open /api/client/streaming connections.")
STREAM_MESSAGES = (
    "flagproxy_delta_stream_messages",
    "Server-sent events sent on /api/client/streaming (unleash-connected, unleash-updated).",
)


class WriteTrouble:
    """Whether writing the series fails, said once when it starts and once when it ends: a full disk would
    otherwise put a line in the log at every flush (four a second), burying everything else."""

    def __init__(self, logger: Any) -> None:
        self.logger = logger
        self.failing = False

    def failed(self, exc: BaseException) -> None:
        if not self.failing and self.logger is not None:
            self.logger.error(
                f"Writing the Prometheus series failed: {exc!r}; counting on in memory and retrying at "
                "every flush (said once until it succeeds)"
            )
        self.failing = True

    def succeeded(self) -> None:
        if self.failing and self.logger is not None:
            self.logger.info("Writing the Prometheus series works again; nothing counted was lost")
        self.failing = False


class Cell:
    """One sample of this process: counted in memory, written to the process's file on flush."""

    __slots__ = ("key", "value", "written")

    def __init__(self, key: str) -> None:
        self.key = key
        self.value = 0.0
        self.written = -1.0  # never: zeros are written too (a histogram needs every bucket)


class SeriesFile:
    """One process's samples of one kind ("counter", "histogram", "gauge_max") in the instance's folder.

    Cells can be made before the folder is known (routes are wired before the server starts); they are
    written once `open()` is called. The file name carries the pid and a random part, so two apps in one
    process, or a worker that gets a dead one's pid, never share a file."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.cells: list[Cell] = []
        self.file: MmapedDict | None = None

    def open(self, directory: str) -> None:
        name = f"{self.kind}_{os.getpid()}-{secrets.token_hex(4)}.db"
        self.file = MmapedDict(os.path.join(directory, name))

    def cell(self, metric: tuple[str, str], sample: str, labels: dict[str, str]) -> Cell:
        name, help_text = metric
        made = Cell(mmap_key(name, sample, list(labels), list(labels.values()), help_text))
        self.cells.append(made)
        return made

    def flush(self) -> None:
        file = self.file
        if file is None:
            return
        for cell in self.cells:
            if cell.value != cell.written:
                value = cell.value
                try:
                    file.write_value(cell.key, value, 0.0)
                except Exception:
                    _keep_growable(file)
                    raise
                cell.written = value

    def close(self) -> None:
        self.flush()
        if self.file is not None:
            self.file.close()
            self.file = None


def _keep_growable(file: MmapedDict) -> None:
    """After a failed write: prometheus_client doubles the capacity it records before it grows the file,
    and keeps the doubled figure when growing fails (a full disk), so every later new sample would be
    written past the end of what is mapped and fail for good, even once there is room again. Putting the
    figure back to the mapped size makes the next flush grow the file again."""
    mapped = getattr(file, "_m", None)
    if mapped is not None and hasattr(file, "_capacity"):
        file._capacity = len(mapped)


Handler = Callable[..., Awaitable[Any]]


class RouteSeries:
    """One route label's requests: what the hot path appends (a duration and a status a request), folded
    into the route's cells at each flush. Appending is the least a request can pay: bucketing, counting
    by status and summing run once a flush, in C (sort, bisect, Counter, fsum) over the whole batch."""

    __slots__ = ("_buckets", "_by_status", "_counters", "_sum", "durations", "name", "statuses")

    def __init__(self, name: str, counters: SeriesFile, histograms: SeriesFile) -> None:
        self.name = name
        self.durations: list[float] = []
        self.statuses: list[int] = []
        self._counters = counters
        self._by_status: dict[int, Cell] = {}
        labels = {"route": name}
        bucket = DURATION[0] + "_bucket"
        self._buckets = [
            histograms.cell(DURATION, bucket, {**labels, "le": floatToGoString(b)}) for b in DURATION_BUCKETS
        ]
        self._sum = histograms.cell(DURATION, DURATION[0] + "_sum", labels)

    def fold(self) -> None:
        """Count what was appended since the last fold into the cells (the files are written after)."""
        durations, statuses = self.durations, self.statuses
        if not durations:
            return
        for status, n in Counter(statuses).items():
            cell = self._by_status.get(status)
            if cell is None:
                labels = {"route": self.name, "status": str(status)}
                cell = self._by_status[status] = self._counters.cell(REQUESTS, REQUESTS[0] + "_total", labels)
            cell.value += n
        durations.sort()
        below = 0
        for bound, cell in zip(DURATION_BUCKETS, self._buckets, strict=True):
            upto = bisect_right(durations, bound)  # le: a duration equal to the bound is in its bucket
            if upto != below:
                cell.value += upto - below
                below = upto
        self._sum.value += math.fsum(durations)
        durations.clear()
        statuses.clear()


class RequestSeries:
    """A worker's series: requests by route and status and their durations; `series_text` is the scrape
    of the whole instance (a product adds its own series as collectors, or as cells in `counters`)."""

    def __init__(self, enabled: bool, logger: Any = None) -> None:
        self.enabled = enabled
        self.logger = logger
        self.trouble = WriteTrouble(logger)
        self.counters = SeriesFile("counter")
        self.histograms = SeriesFile("histogram")
        self.gauges = SeriesFile("gauge_livesum")  # a product's gauges, summed over the processes
        self.directory: str | None = None
        self.flushing: asyncio.Task[None] | None = None
        self._routes: dict[str, RouteSeries] = {}
        # Called first at every flush: a product copies figures it keeps elsewhere into its cells.
        self.before_flush: list[Callable[[], None]] = []
        self._writing = Coalesced(self._write_files)

    # ---- the hot path ---------------------------------------------------------------------------------

    def _series(self, name: str) -> RouteSeries:
        found = self._routes.get(name)
        if found is None:
            found = self._routes[name] = RouteSeries(name, self.counters, self.histograms)
        return found

    def observe(self, route: str, handler: Handler, label: Callable[[Any], str] | None = None) -> Any:
        """`handler`, counted under `route` (or under `label(request)` when given: the fallback tells
        preflights from unknown paths). Disabled: `handler` itself, nothing added to a request."""
        if not self.enabled:
            return handler
        clock = time.perf_counter

        if label is None and len(inspect.signature(handler).parameters) == 1:
            # The request alone, under a fixed route (every toggle route): two clock reads and two appends
            # to lists bound here, no lookup, no *args/**kwargs to pack.
            series = self._series(route)
            durations, statuses = series.durations.append, series.statuses.append

            async def observed(request: Any) -> Any:
                started = clock()
                response = await handler(request)
                durations(clock() - started)
                statuses(response.status)
                return response

            return observed

        fixed = self._series(route) if label is None else None
        series_for = self._series

        async def observed_with_arguments(request: Any, *args: Any, **kwargs: Any) -> Any:
            # Error handlers get the exception; routes with <parameters> get them as keywords.
            started = clock()
            response = await handler(request, *args, **kwargs)
            elapsed = clock() - started
            series = fixed or series_for(label(request))  # type: ignore[misc]
            series.durations.append(elapsed)
            series.statuses.append(response.status)
            return response

        return observed_with_arguments

    def stream_cells(self) -> tuple[Cell, Cell]:
        """(open streams, messages sent): a process's /api/client/streaming series, summed over workers."""
        open_streams = self.gauges.cell(OPEN_STREAMS, OPEN_STREAMS[0], {})
        return open_streams, self.counters.cell(STREAM_MESSAGES, STREAM_MESSAGES[0] + "_total", {})

    # ---- lifetime ---------------------------------------------------------------------------------------

    def start(self, directory: str) -> None:
        """Write into `directory` (the instance's `series_directory`) from now on."""
        if not self.enabled:
            return
        self.directory = directory
        for file in (self.counters, self.histograms, self.gauges):
            file.open(self.directory)
        self.flushing = asyncio.get_running_loop().create_task(self._flush_every())

    async def _flush_every(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            self.fold()
            self._writing.ask()  # the files on the writer thread: the loop goes on answering

    def _write_files(self) -> None:
        """On the writer thread, the cells as they are when it runs."""
        try:
            self.write_files()
        except Exception as exc:  # a full disk: the counts stay in the cells, the next flush retries
            self.trouble.failed(exc)
        else:
            self.trouble.succeeded()

    def fold(self) -> None:
        """The hot path's lists into the cells (on the loop: no file touched)."""
        for gather in self.before_flush:
            gather()
        for series in self._routes.values():
            series.fold()

    def write_files(self) -> None:
        for file in (self.counters, self.histograms, self.gauges):
            file.flush()

    async def flush(self) -> None:
        """Fold, then write the files on the writer thread, in its turn; the loop goes on meanwhile."""
        self.fold()
        await disk_writer().run(self.write_files)

    async def stop(self) -> None:
        if self.flushing is not None:
            self.flushing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.flushing
            self.flushing = None
        if self.directory is None:  # never started (or disabled): no file to close
            return
        self.fold()
        await disk_writer().run(self._close_files)

    def _close_files(self) -> None:
        for file in (self.counters, self.histograms, self.gauges):
            file.close()

    # ---- the scrape -------------------------------------------------------------------------------------

    async def series_text(self, *more: Any) -> bytes:
        """Every process's series (and `more` collectors'), in the text format; b"" before `start`."""
        if not self.enabled or self.directory is None:
            return b""
        await self.flush()  # this worker's latest; the others' are at most FLUSH_SECONDS old
        registry = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(registry, path=self.directory)
        for collector in more:
            registry.register(collector)
        return generate_latest(registry)


def preflight_or_fallback(request: Any) -> str:
    """The label of what a router did not match: CORS preflights apart from unknown paths."""
    return "preflight" if request.method == "OPTIONS" else "fallback"
