"""The proxy's own Prometheus series (ENABLE_PROMETHEUS, docs/proxy.md), beside the request series every
product counts (flagproxy/http/series.py): the Node proxy's three series first, in its own text (integer
milliseconds, `unleash_proxy_up` a counter without `_total`; with ENABLE_PROMETHEUS=false they are all
that is served), per-flag usage at each hand-off, the response cache's hits, what the scraping worker's
store holds, and the sync's series (upstream fetches and errors, usage batches) with what the status page
says of the upstream.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import orjson
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

from flagproxy.disk import Coalesced, disk_writer
from flagproxy.http.series import REQUESTS, Cell, RequestSeries, SeriesFile

USAGE = ("flagproxy_toggle_usage", "Yes/no counts of each flag: named lookups and what SDKs reported.")
UPSTREAM_ERRORS = ("flagproxy_upstream_errors", "Failed upstream feature fetches, by kind.")
UPSTREAM_FETCHES = ("flagproxy_upstream_fetches", "Upstream feature fetches, by result.")
REFUSED_DOCUMENTS = (
    "flagproxy_refused_documents",
    "Features documents refused whole (upstream, backup, bootstrap), by reason.",
)
CACHE_HITS = (
    "flagproxy_response_cache_hits",
    "Toggle answers sent from a worker's response cache, without evaluating.",
)
USAGE_BATCHES = ("flagproxy_usage_batches", "Usage batches (client metrics) posted upstream, by result.")
LAST_SUCCESS = (
    "flagproxy_upstream_last_success_timestamp_seconds",
    "When the upstream last answered a feature fetch (200 or 304), Unix time.",
)
STREAM_EVENTS = (
    "flagproxy_upstream_stream_events",
    "Events read from the upstream's stream (streaming on), by event.",
)
STREAM_ENDS = (
    "flagproxy_upstream_stream_ends",
    "Upstream streams that ended, by why; a reconnect or polling follows each (streaming on).",
)
STREAM_CHANGES = (
    "flagproxy_upstream_stream_changes",
    "Streamed changes applied, by how: patched into the served engine, or published whole (streaming on).",
)
STREAMING = ("flagproxy_upstream_streaming", "1 while the sync streams from the upstream, 0 while it polls.")
# The closed sets of their labels (an upstream names its events: anything else counts as `other`).
STREAM_EVENT_NAMES = frozenset(("unleash-connected", "unleash-updated", "fetch-mode"))
LAST_FAILURE = (
    "flagproxy_upstream_last_failure_timestamp_seconds",
    "When a feature fetch last failed, Unix time.",
)


class FlagUsageSeries:
    """Per-flag yes/no counts (`flagproxy_toggle_usage_total`), in the worker's request series file."""

    def __init__(self, series: RequestSeries) -> None:
        self.series = series
        self._usage: dict[tuple[str, bool], Cell] = {}
        self._known: tuple[Any, frozenset[str]] = (None, frozenset())

    def count_usage(self, counts: Any, snapshot: Any) -> None:
        """Add a hand-off's yes/no counts (flagproxy/sync/usage.py) for the flags the snapshot has: callers
        may name flags that do not exist, and a label per made-up name would grow without bound."""
        if not self.series.enabled or snapshot is None:
            return
        if self._known[0] is not snapshot:
            self._known = (snapshot, frozenset(snapshot.names))
        known = self._known[1]
        for name, (yes, no, _variants) in counts.toggles.items():
            if name not in known:
                continue
            for enabled, n in ((True, yes), (False, no)):
                if n:
                    cell = self._usage.get((name, enabled))
                    if cell is None:
                        labels = {"toggle": name, "result": "yes" if enabled else "no"}
                        cell = self._usage[(name, enabled)] = self.series.counters.cell(
                            USAGE, USAGE[0] + "_total", labels
                        )
                    cell.value += n


class ResponseCacheSeries:
    """`flagproxy_response_cache_hits_total`: the toggle routes add each answer they send from the cache to
    its `hits` (one integer add, no cell lookup on the hot path); each flush copies the count into the
    worker's cell. A worker without a cache (RESPONSE_CACHE_MB=0, custom enrichers) says 0, so the series
    is always there."""

    def __init__(self, series: RequestSeries, cache: Any) -> None:
        self.cache = cache
        self.hits = series.counters.cell(CACHE_HITS, CACHE_HITS[0] + "_total", {})
        if cache is not None:
            series.before_flush.append(self.gather)

    def gather(self) -> None:
        self.hits.value = float(self.cache.hits)


async def scrape(series: RequestSeries, store: Any) -> bytes:
    """The Node proxy's three series, then (enabled) every series of the instance."""
    body = node_series(store.last_update_ms, store.last_fetch_ms)
    if not series.enabled or series.directory is None:
        return body
    return body + b"\n" + await series.series_text(StoreCollector(store))


def node_series(last_update_ms: int, last_fetch_ms: int) -> bytes:
    """The Node proxy's prom-client registry, as it prints it."""
    return (
        "# HELP last_metrics_update_epoch_timestamp_ms An epoch timestamp (in milliseconds) set to when "
        "the proxy last got an update from upstream\n"
        "# TYPE last_metrics_update_epoch_timestamp_ms gauge\n"
        f"last_metrics_update_epoch_timestamp_ms {last_update_ms}\n\n"
        "# HELP last_metrics_fetch_epoch_timestamp_ms An epoch timestamp (in milliseconds) set to when "
        "the proxy last checked upstream (regardless if there was an update or not)\n"
        "# TYPE last_metrics_fetch_epoch_timestamp_ms gauge\n"
        f"last_metrics_fetch_epoch_timestamp_ms {last_fetch_ms}\n\n"
        "# HELP unleash_proxy_up Indication that the service is up.\n"
        "# TYPE unleash_proxy_up counter\n"
        "unleash_proxy_up 1\n"
    ).encode()


class StoreCollector:
    """What every worker holds alike (the published revision): read from the scraping worker's store."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        store = self.store
        snapshot = store.current
        for name, help_text, value in (
            ("flagproxy_snapshot_revision", "Revision of the flags being served.", store.revision),
            (
                "flagproxy_snapshot_age_seconds",
                "Seconds since the flags being served last changed.",
                max(0.0, time.time() - store.last_update_ms / 1000),
            ),
            (
                "flagproxy_flags",
                "Flags in the snapshot being served.",
                len(snapshot.names) if snapshot else 0,
            ),
        ):
            metric = Metric(name, help_text, "gauge")
            metric.add_sample(name, {}, value)
            yield metric


class SyncSeries:
    """The sync's series (upstream fetches and errors, metrics batches), in the process that runs it, and
    what the status page says of the upstream (`upstream.json` beside them). Called on the sync's loop,
    which may be serving, a few times a refresh interval at most: counted there, written on the process's
    writer thread (flagproxy/disk.py: the serving loop never waits on the disk), the latest state
    each time."""

    STATUS_FILE = "upstream.json"

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.counters = SeriesFile("counter")
        self.gauges = SeriesFile("gauge_max")
        self.counters.open(self.directory)
        self.gauges.open(self.directory)
        self._cells: dict[tuple[tuple[str, str], str, str], Cell] = {}
        self.last_success = self.gauges.cell(LAST_SUCCESS, LAST_SUCCESS[0], {})
        self.last_failure = self.gauges.cell(LAST_FAILURE, LAST_FAILURE[0], {})
        self.last_error: str | None = None
        self.last_refusal: dict[str, Any] | None = None
        self.streaming: Cell | None = None  # only with streaming on
        # A failed write (a full disk) is tried again at the next: the cells keep their counts.
        self._writing = Coalesced(self._write_now)

    def _count(self, metric: tuple[str, str], label: str, value: str) -> None:
        cell = self._cells.get((metric, label, value))
        if cell is None:
            cell = self._cells[(metric, label, value)] = self.counters.cell(
                metric, metric[0] + "_total", {label: value}
            )
        cell.value += 1

    def fetched(self, result: Any, accepted: bool) -> None:
        """One poll's result (flagproxy/sync/poller.py): "updated", "not_modified" or a failure kind."""
        # Duck-typed (upstream.py's Updated, NOT_MODIFIED, Failed): this module never loads the HTTP client.
        now = time.time()
        failed = hasattr(result, "reason")
        if failed or not accepted:
            kind = error_kind(result) if failed else "invalid"
            self._count(UPSTREAM_FETCHES, "result", "failed")
            self._count(UPSTREAM_ERRORS, "kind", kind)
            self.last_failure.value = now
            reason = result.reason if failed else "sent a document that was not installed"
            self.last_error = f"{kind}: {reason}"
            if getattr(result, "refused", None):
                self._refused(result.refused, "upstream", result.reason, now)
        else:
            self._count(
                UPSTREAM_FETCHES, "result", "updated" if hasattr(result, "document") else "not_modified"
            )
            self.last_success.value = now
        self._write()

    def refused(self, reason: str, source: str, error: str) -> None:
        """A backup or bootstrap document refused whole (flagproxy/sync/documents.py's reasons); the
        upstream's come with its fetch result."""
        self._refused(reason, source, error, time.time())
        self._write()

    def _refused(self, reason: str, source: str, error: str, at: float) -> None:
        self._count(REFUSED_DOCUMENTS, "reason", reason)
        self.last_refusal = {"at": at, "source": source, "reason": reason, "error": error}

    def stream_event(self, event: str) -> None:
        """One event of the upstream's stream (flagproxy/sync/stream.py); it was heard from."""
        self._count(STREAM_EVENTS, "event", event if event in STREAM_EVENT_NAMES else "other")
        self.last_success.value = time.time()
        self._write()

    def stream_ended(self, why: str) -> None:
        """A stream that ended: `ended`, `failed`, `refused`, `told_to_poll` or `rehydrate`."""
        self._count(STREAM_ENDS, "why", why)
        self._write()

    def stream_change(self, applied: str) -> None:
        """A streamed change that changed the flags: `patched` (flagproxy/instance/patcher.py) or `whole`."""
        self._count(STREAM_CHANGES, "applied", applied)
        self._write()

    def stream_mode(self, mode: str) -> None:
        if self.streaming is None:
            self.streaming = self.gauges.cell(STREAMING, STREAMING[0], {})
        self.streaming.value = 1 if mode == "streaming" else 0
        self._write()

    def usage_sent(self, ok: bool) -> None:
        self._count(USAGE_BATCHES, "result", "sent" if ok else "failed")
        self._write()

    def _write(self) -> None:
        self._writing.ask()

    def _write_now(self) -> None:
        """On the writer thread: the series files, then `upstream.json` as the status page reads it."""
        self.counters.flush()
        self.gauges.flush()
        status = {
            "last_success": self.last_success.value or None,
            "last_failure": self.last_failure.value or None,
            "last_error": self.last_error,
            "last_refusal": self.last_refusal,
        }
        path = os.path.join(self.directory, self.STATUS_FILE)
        temporary = path + f".{os.getpid()}.tmp"
        with open(temporary, "wb") as file:
            file.write(orjson.dumps(status))
        os.replace(temporary, path)

    def close(self) -> None:
        """Queued after every write asked for (the sync's stop drains the writer before exit)."""
        disk_writer().later(self._close)

    def _close(self) -> None:
        try:
            self._write_now()
        finally:
            self.counters.close()
            self.gauges.close()


def error_kind(failure: Any) -> str:
    """A failed fetch as a label: "auth" (401/403), "status" (another HTTP status), "network" (timeout,
    connection), "invalid" (a 200 that is no features document)."""
    if failure.kind == "auth":
        return "auth"
    if failure.status is None:
        return "network"
    if failure.status == 200:
        return "invalid"
    return "status"


def instance_totals(directory: str | None) -> tuple[float | None, dict[str, list[float]] | None]:
    """(requests answered, {flag: [yes, no]}) summed over every process of the instance; (None, None)
    without series (ENABLE_PROMETHEUS=false). Read for the status page."""
    if directory is None:
        return None, None
    requests = 0.0
    usage: dict[str, list[float]] = {}
    for metric in MultiProcessCollector(None, path=directory).collect():
        if metric.name == REQUESTS[0]:
            requests = sum(sample.value for sample in metric.samples)
        elif metric.name == USAGE[0]:
            for sample in metric.samples:
                counts = usage.setdefault(sample.labels["toggle"], [0.0, 0.0])
                counts[0 if sample.labels["result"] == "yes" else 1] += sample.value
    return requests, usage
