"""The sync parts with in-test fakes for the upstream: URLs, backoff, metrics buckets, backup, start-up."""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import json
import os
from typing import Any

import pytest

from flagproxy.sync.backup import FileStorageProvider
from flagproxy.sync.poller import Poller
from flagproxy.sync.service import SyncService
from flagproxy.sync.upstream import (
    NOT_MODIFIED,
    Failed,
    Updated,
    UpstreamConfig,
    base_url,
    classify_status,
    features_url,
    is_features_document,
    retry_after_seconds,
)
from flagproxy.sync.usage_sender import UsageCollector, UsageCounts, UsageSender

PAYLOAD = {"version": 2, "features": [{"name": "a", "enabled": True, "strategies": []}]}
DOCUMENT = json.dumps(PAYLOAD).encode()  # as the upstream sends it

# docs/proxy.md: the next poll waits refreshInterval x (1 + failures), failures capped at 10 (the Node SDK's
# backoff), written down here rather than read from flagproxy/sync/poller.py.
MAX_FAILURES = 10


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def __getattr__(self, level: str):
        return lambda message, *args: self.lines.append((level, message))


def config(**overrides: Any) -> UpstreamConfig:
    return UpstreamConfig(
        **{
            "url": "http://up/api",
            "token": "t",
            "app_name": "app",
            "instance_id": "i",
            "refresh_interval": 100,
            **overrides,
        }
    )


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://up/api", "http://up/api/"),
        ("http://up/api/", "http://up/api/"),
        ("http://up/api/features", "http://up/api/"),
    ],
)
def test_base_url(url, base):
    assert base_url(url) == base


def test_features_url_filters_in_node_order():
    assert features_url(config()) == "http://up/api/client/features"
    url = features_url(config(project="p a", name_prefix="c-", tags=(("simple", "proxy"), ("demo", "t:x"))))
    assert (
        url == "http://up/api/client/features?project=p+a&namePrefix=c-&tag=simple%3Aproxy&tag=demo%3At%3Ax"
    )


def test_classify_and_documents():
    assert [classify_status(s) for s in (401, 403, 404, 408, 429, 500, 503, 400, 418)] == [
        "auth",
        "auth",
        "retry",
        "retry",
        "retry",
        "retry",
        "retry",
        "other",
        "other",
    ]
    assert is_features_document(PAYLOAD) and is_features_document({"events": []})
    assert not is_features_document({"features": {}}) and not is_features_document([])


class FakeSource:
    features_url = "http://up/api/client/features"

    def __init__(self, results: list[Any]) -> None:
        self.results = results
        self.etags: list[str | None] = []

    async def fetch_features(self, etag):
        self.etags.append(etag)
        return self.results.pop(0)


def test_poller_backs_off_and_recovers():
    installed: list[bytes] = []

    async def on_update(payload):
        installed.append(payload)
        return True

    touched = []
    log = Log()
    source = FakeSource(
        [
            Updated(DOCUMENT, '"e1"'),
            NOT_MODIFIED,
            Failed("retry", "answered 503", 503),
            Failed("retry", "timed out"),
            Failed("auth", "answered 401", 401),
            Updated(DOCUMENT, '"e2"'),
            Failed("other", "answered 400", 400),
        ]
    )
    poller = Poller(
        source, interval_ms=100, on_update=on_update, on_not_modified=lambda: touched.append(1), logger=log
    )

    async def run():
        delays = []
        for _ in range(7):
            await poller.poll_once()
            delays.append(poller.next_delay_ms())
        return delays

    delays = asyncio.run(run())
    assert delays == [100, 100, 200, 300, 100 * (1 + MAX_FAILURES), 100 * MAX_FAILURES, 100 * MAX_FAILURES]
    assert source.etags == [None, '"e1"', '"e1"', '"e1"', '"e1"', '"e1"', '"e2"']
    assert len(installed) == 2 and touched == [1]
    levels = [level for level, _ in log.lines]
    assert levels == ["warn", "warn", "error", "info", "error"]  # info: the upstream answers again
    assert "SERVICE_API_TOKEN" in log.lines[2][1]


def test_a_failure_is_logged_once_until_it_changes_and_retry_after_is_honoured():
    async def on_update(payload):
        return True

    log = Log()
    source = FakeSource(
        [
            Failed("auth", "answered 401", 401),
            Failed("auth", "answered 401", 401),
            Failed("auth", "answered 401", 401),
            Failed("retry", "answered 429", 429, retry_after=30.0),
            Failed("retry", "answered 429", 429, retry_after=30.0),
            Updated(DOCUMENT, '"e1"'),
            Failed("retry", "answered 429", 429, retry_after=30.0),
        ]
    )
    poller = Poller(source, interval_ms=100, on_update=on_update, on_not_modified=lambda: None, logger=log)

    async def run():
        delays = []
        for _ in range(7):
            await poller.poll_once()
            delays.append(poller.next_delay_ms())
        return delays

    delays = asyncio.run(run())
    assert delays[3:5] == [30_000, 30_000]  # Retry-After beats the backoff
    assert delays[5] == 100 * MAX_FAILURES  # a success forgets it; the backoff comes down one step
    said = [(level, message) for level, message in log.lines if level != "debug"]
    assert [level for level, _ in said] == ["error", "warn", "info", "warn"]
    assert "answered 429" in said[1][1] and "answers again" in said[2][1]
    assert sum(level == "debug" for level, _ in log.lines) == 3  # the repeats


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("120", 120.0), ("0", 0.0), ("99999", 600.0), ("soon", None), (None, None), ("", None)],
)
def test_retry_after_values(header, seconds):
    assert retry_after_seconds(header) == seconds


def test_retry_after_as_an_http_date():
    when = email.utils.format_datetime(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=90), usegmt=True)
    assert 85 <= retry_after_seconds(when) <= 90
    past = email.utils.format_datetime(dt.datetime.now(dt.UTC) - dt.timedelta(seconds=90), usegmt=True)
    assert retry_after_seconds(past) == 0.0


# The bounds docs/proxy.md states ("a bucket holds at most 10,000 toggle names and 100 variants per toggle"),
# written down here rather than read from flagproxy/sync/usage.py.
MAX_TOGGLES = 10_000
MAX_VARIANTS = 100


def test_a_bucket_is_bounded_and_says_what_it_dropped():
    counts = UsageCounts()
    for i in range(MAX_TOGGLES + 5):
        counts.count(f"made-up-{i}", True)
    assert len(counts.toggles) == MAX_TOGGLES and counts.dropped == 5
    counts.count("made-up-0", False)  # a name already in the bucket still counts
    assert counts.toggles["made-up-0"][:2] == [1, 1]
    counts.merge(
        {"made-up-1": {"yes": 1, "no": 0, "variants": {f"v{i}": 1 for i in range(MAX_VARIANTS + 3)}}}
    )
    assert len(counts.toggles["made-up-1"][2]) == MAX_VARIANTS and counts.dropped == 8
    counts.merge({"one-too-many": {"yes": 2, "no": 1, "variants": {}}})
    assert "one-too-many" not in counts.toggles and counts.dropped == 11


def test_poller_refetches_whole_after_a_rejected_payload():
    async def reject(payload):
        return False

    source = FakeSource([Updated(DOCUMENT, '"e1"'), Updated(DOCUMENT, '"e1"')])
    poller = Poller(source, interval_ms=10, on_update=reject, on_not_modified=lambda: None, logger=Log())

    async def run():
        await poller.poll_once()
        await poller.poll_once()

    asyncio.run(run())
    assert source.etags == [None, None]


def test_a_refused_document_is_a_failure_said_once_and_the_last_etag_stays():
    """The installer checks the bytes (flagproxy/sync/documents.py); its DocumentError is the poll's failure:
    said once while the upstream sends such documents, counted as refused, and the next poll asks with the
    ETag of the last good document."""
    from flagproxy.sync.documents import DocumentError, read_document

    async def install(document):
        read_document(document)
        return True

    results = []
    source = FakeSource(
        [
            Updated(DOCUMENT, '"good"'),
            Updated(b'{"version": 2, "features": [1]}', '"bad"'),
            Updated(b'{"version": 2, "features": [1]}', '"bad"'),
            Updated(b"{not json", '"worse"'),
            Updated(DOCUMENT, '"good2"'),
        ]
    )
    log = Log()
    poller = Poller(source, interval_ms=10, on_update=install, on_not_modified=lambda: None, logger=log,
                    on_result=lambda result, accepted: results.append(result))  # fmt: skip

    async def run():
        for _ in range(5):
            await poller.poll_once()

    asyncio.run(run())
    assert source.etags == [None, '"good"', '"good"', '"good"', '"good"']
    refused = [getattr(r, "refused", None) for r in results]
    assert refused == [None, "wrong_type", "wrong_type", "not_json", None]
    said = [text for level, text in log.lines if level == "error"]
    assert len(said) == 2, said
    assert "refused whole: $.features[0] must be an object" in said[0] and "sent invalid JSON" in said[1]
    assert "answers again" in log.lines[-1][1]
    assert poller.etag == '"good2"'
    assert issubclass(DocumentError, ValueError)


def test_usage_counts_and_collector():
    collector = UsageCollector()
    assert collector.take() is None
    collector.counts.count_outcomes([("a", True, "v"), ("a", False, "disabled"), ("b", False, "disabled")])
    collector.counts.merge({"a": {"yes": 2, "variants": {"v": 2}}, "c": {"no": 1}})
    taken = collector.take()
    assert taken.as_toggles() == {
        "a": {"yes": 3, "no": 1, "variants": {"v": 2}},
        "b": {"yes": 0, "no": 1, "variants": {}},
        "c": {"yes": 0, "no": 1, "variants": {}},
    }
    collector.counts.count("a", True)
    collector.give_back(taken)
    assert collector.counts.as_toggles()["a"]["yes"] == 4
    assert collector.counts.start == taken.start  # the bucket still starts when counting started
    assert not UsageCounts()


class FakeClient:
    def __init__(self, statuses: list[Any]) -> None:
        self.statuses = statuses
        self.metrics: list[dict[str, Any]] = []
        self.registered: list[dict[str, Any]] = []
        self.closed = False
        self.document: Any = "answered 404"
        self.features_url = "http://up/api/client/features"
        self.fetches: list[Any] = []

    async def send_usage(self, body):
        self.metrics.append(body)
        status = self.statuses.pop(0)
        if isinstance(status, Exception):
            raise status
        return status

    async def register(self, body):
        self.registered.append(body)
        return 202

    async def fetch_document(self, url, authorization):
        return self.document

    async def fetch_features(self, etag):
        self.fetches.append(etag)
        return self.fetches and Failed("retry", "answered 503", 503)

    async def close(self):
        self.closed = True


def test_metrics_sender_keeps_counts_until_the_upstream_takes_them():
    collector = UsageCollector()
    client = FakeClient([503, 401, "ConnectionError", 202])
    log = Log()
    sender = UsageSender(
        collector,
        client,
        app_name="app",
        instance_id="i",
        connection_id="c",
        interval_ms=1000,
        jitter_ms=200,
        logger=log,
    )

    async def run():
        assert await sender.flush()  # nothing to send: nothing sent
        collector.counts.count("a", True)
        results = [await sender.flush() for _ in range(4)]
        return results

    assert asyncio.run(run()) == [False, False, False, True]
    assert [body["bucket"]["toggles"]["a"]["yes"] for body in client.metrics] == [1, 1, 1, 1]
    assert client.metrics[0]["appName"] == "app" and client.metrics[0]["specVersion"] == "5.2.0"
    assert [level for level, _ in log.lines] == ["warn", "error", "warn"]
    assert collector.take() is None
    assert 800 * (1 + sender.failures) <= sender.next_delay_ms() <= 1200 * (1 + sender.failures)


def test_file_storage_roundtrip(tmp_path):
    tmp_path = tmp_path / "made-on-first-save"
    storage = FileStorageProvider(str(tmp_path))
    assert storage.get("my/app") is None
    storage.set("my/app", PAYLOAD)
    assert storage.path("my/app").endswith("flagproxy-backup-my_app.json")
    assert storage.get("my/app") == PAYLOAD
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []  # no temporary files left


def _service(client: FakeClient, storage: Any = None, **kwargs: Any) -> tuple[SyncService, list[str]]:
    sources: list[str] = []

    def install(document, source):
        payload = json.loads(document)
        if "features" not in payload:
            raise ValueError("not a features document")
        sources.append(source)
        return len(payload["features"])

    service = SyncService(
        config(metrics_interval=0),
        install=install,
        touch=lambda: None,
        is_ready=lambda: bool(sources),
        collector=UsageCollector(),
        logger=Log(),
        storage=storage,
        client=client,
        **kwargs,
    )
    return service, sources


def test_service_start_from_backup_then_bootstrap(tmp_path):
    storage = FileStorageProvider(str(tmp_path))
    storage.set("app", PAYLOAD)
    client = FakeClient([])
    client.document = PAYLOAD
    service, sources = _service(client, storage, bootstrap_url="http://boot/x.json")

    async def run():
        await service.start()
        await asyncio.sleep(0.05)
        await service.stop()

    asyncio.run(run())
    assert sources == ["backup", "bootstrap"]
    assert client.closed


def test_service_ignores_empty_backups_and_bootstrap_after_upstream(tmp_path):
    storage = FileStorageProvider(str(tmp_path))
    storage.set("app", {"version": 2, "features": []})
    client = FakeClient([])
    client.document = PAYLOAD
    service, sources = _service(client, storage, bootstrap_url="http://boot/x.json")

    async def run():
        await service.load_backup()
        await service._upstream_payload(DOCUMENT)
        await service.bootstrap()
        assert not await service._upstream_payload(b'{"nope": 1}')

    asyncio.run(run())
    assert sources == ["upstream"]
    assert json.loads((tmp_path / "flagproxy-backup-app.json").read_text()) == PAYLOAD


def test_register_body():
    service, _ = _service(FakeClient([]), custom_strategy_names=["mine"])
    body = service.register_body()
    assert body["strategies"][-1] == "mine" and "default" in body["strategies"]
    assert body["appName"] == "app" and body["interval"] == 0 and body["started"].endswith("Z")
