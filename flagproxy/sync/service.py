"""One proxy instance's sync: backup → bootstrap → poll, register once, send usage; stop cleanly.

One per instance, whatever the number of workers (flagproxy/instance/leader.py runs it): `install` publishes
each document for the workers, `gather_usage` brings in the counts the workers handed over.

With `streaming` the features come from the upstream's event stream (flagproxy/sync/stream.py), which falls
back to the same poller while the stream is refused or unreachable.

Start-up order: the backup (if it holds at least one feature) and the bootstrap document make the proxy
ready before the upstream answers (DESIGN D4); the first upstream payload replaces either, and from then
on the bootstrap is ignored. Registration is sent once, after the first upstream payload.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import inspect
import platform
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from flagproxy.sync.backup import call, save_document
from flagproxy.sync.documents import DocumentError
from flagproxy.sync.poller import Poller
from flagproxy.sync.upstream import CLIENT_SPEC_VERSION, SDK_NAME, UpstreamClient, UpstreamConfig
from flagproxy.sync.usage_sender import UsageCollector, UsageSender

BUILTIN_STRATEGIES = (
    "default",
    "applicationHostname",
    "gradualRolloutRandom",
    "gradualRolloutUserId",
    "gradualRolloutSessionId",
    "userWithId",
    "remoteAddress",
    "flexibleRollout",
)


# Seconds between a streamed change patched in (nothing published) and its backup: one write of the whole
# document (megabytes at 5000 flags) for all the changes of that second, not one per change.
STREAMED_BACKUP_DELAY = 1.0


class SyncService:
    def __init__(
        self,
        config: UpstreamConfig,
        *,
        # (document bytes, source) -> how many flags it holds, plain or async; ValueError: not installed
        install: Callable[[bytes, str], Any],
        touch: Callable[[], None],
        is_ready: Callable[[], bool],
        collector: UsageCollector,
        logger: Any,
        storage: Any = None,
        bootstrap_url: str | None = None,
        bootstrap_authorization: str | None = None,
        metrics_jitter: int = 0,
        custom_strategy_names: Sequence[str] = (),
        client: Any = None,
        gather_usage: Callable[[UsageCollector], Any] | None = None,
        observer: Any = None,
        on_stop: Callable[[], None] | None = None,
        ready_line: Callable[[int, str], str] | None = None,
    ) -> None:
        self.config = config
        # (flags, source) -> the one line said when the first flags are installed
        self.ready_line = ready_line or (
            lambda flags, source: (
                f"{flags} flags loaded from the {source}. Proxy is now ready to receive traffic."
            )
        )
        self.install = install
        self.is_ready = is_ready
        self.logger = logger
        self.storage = storage
        self.bootstrap_url = bootstrap_url
        self.bootstrap_authorization = bootstrap_authorization
        self.custom_strategy_names = tuple(custom_strategy_names)
        self.client = client if client is not None else UpstreamClient(config)
        self.collector = collector
        self.poller = Poller(
            self.client,
            interval_ms=config.refresh_interval,
            on_update=self._upstream_payload,
            on_not_modified=touch,
            logger=logger,
            on_result=observer.fetched if observer is not None else None,
        )
        self.usage_sender = UsageSender(
            collector,
            self.client,
            app_name=config.app_name,
            instance_id=config.instance_id,
            connection_id=config.connection_id,
            interval_ms=config.metrics_interval,
            jitter_ms=metrics_jitter,
            logger=logger,
            gather=gather_usage,
            on_sent=observer.usage_sent if observer is not None else None,
        )
        self.streamer: Any = None
        if config.streaming:
            from flagproxy.sync.stream import StreamingSync

            self.streamer = StreamingSync(
                self.client,
                self.poller,
                on_update=self._upstream_payload,
                on_checked=touch,
                logger=logger,
                observer=observer,
            )
            self.streamer.on_patched = self._back_up_streamed
        self._backing_up: asyncio.Task[None] | None = None
        self.observer = observer  # the Prometheus series of the sync (flagproxy/proxy/series.py)
        self.on_stop = on_stop  # what `install` holds (the compile process) goes with the sync
        self.started = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        self.from_upstream = False
        self.registered: asyncio.Task[Any] | None = None
        self.tasks: list[asyncio.Task[Any]] = []

    @property
    def storage_key(self) -> str:
        return self.config.app_name

    async def _install(self, document: bytes, source: str) -> bool:
        """Install `document` (a features document's JSON bytes); whether it was. A refused upstream
        document raises its DocumentError for the poller, which says it once while it lasts."""
        was_ready = self.is_ready()
        try:
            flags = self.install(document, source)
            if inspect.isawaitable(flags):  # compiled apart from the serving loop
                flags = await flags
        except ValueError as exc:
            if isinstance(exc, DocumentError) and source == "upstream":
                raise
            self.logger.error(f"Ignoring the features document from the {source}: {exc}")
            if isinstance(exc, DocumentError) and self.observer is not None:
                self.observer.refused(exc.reason, source, str(exc))
            return False
        if not was_ready:
            announce = getattr(self.logger, "announce", self.logger.info)
            announce(self.ready_line(flags, source))
        return True

    async def _upstream_payload(self, document: bytes) -> bool:
        if not await self._install(document, "upstream"):
            return False
        self.from_upstream = True
        if self.storage is not None:
            try:
                await save_document(self.storage, self.storage_key, document)
            except Exception as exc:  # a full disk must not stop serving
                self.logger.warn(f"Could not back up the features: {exc!r}")
        if self.registered is None and self.config.metrics_interval > 0:
            self.registered = asyncio.get_running_loop().create_task(self.register())
        return True

    def _back_up_streamed(self) -> None:
        """A streamed change was patched into the served engine, not published: the backup follows within
        STREAMED_BACKUP_DELAY."""
        if self.storage is not None and self._backing_up is None:
            self._backing_up = asyncio.get_running_loop().create_task(self._write_streamed_backup())

    async def _write_streamed_backup(self) -> None:
        try:
            await asyncio.sleep(STREAMED_BACKUP_DELAY)
            parts = self.streamer.encoder.parts(self.streamer.state)
            self._backing_up = None  # a change from here on is backed up by the next write
            # b"".join lets go of the GIL while it copies megabytes: the loop goes on answering.
            await save_document(self.storage, self.storage_key, await asyncio.to_thread(b"".join, parts))
        except Exception as exc:  # a full disk must not stop serving
            self.logger.warn(f"Could not back up the features: {exc!r}")
        finally:
            if self._backing_up is asyncio.current_task():
                self._backing_up = None

    async def load_backup(self) -> None:
        if self.storage is None:
            return
        try:
            payload = await call(self.storage.get, self.storage_key)
        except Exception as exc:
            self.logger.warn(f"Could not read the features backup: {exc!r}")
            return
        rejected = getattr(self.storage, "rejected", None)
        if rejected:
            self.logger.warn(f"Features backup {rejected}")
        if isinstance(payload, dict) and payload.get("features"):
            await self._install(orjson.dumps(payload), "backup")

    async def bootstrap(self) -> None:
        assert self.bootstrap_url is not None
        document = await self.client.fetch_document(self.bootstrap_url, self.bootstrap_authorization)
        if isinstance(document, str):
            self.logger.warn(f"Bootstrap from {self.bootstrap_url} failed: {document}")
            return
        if self.from_upstream:
            return  # the upstream already answered; its flags are newer
        if not (document.get("features") or document.get("events")):
            self.logger.warn(f"Bootstrap document at {self.bootstrap_url} has no features; ignored")
            return
        await self._install(orjson.dumps(document), "bootstrap")

    def register_body(self) -> dict[str, Any]:
        c = self.config
        return {
            "appName": c.app_name,
            "instanceId": c.instance_id,
            "sdkVersion": SDK_NAME,
            "strategies": [*BUILTIN_STRATEGIES, *self.custom_strategy_names],
            "started": self.started,
            "interval": c.metrics_interval,
            "connectionId": c.connection_id,
            "platformName": platform.python_implementation().lower(),
            "platformVersion": platform.python_version(),
            "yggdrasilVersion": None,
            "specVersion": CLIENT_SPEC_VERSION,
        }

    async def register(self) -> None:
        status = await self.client.register(self.register_body())
        if not (isinstance(status, int) and 200 <= status < 300):
            self.logger.warn(f"Registering with the upstream failed ({status})")

    async def start(self) -> None:
        await self.load_backup()
        loop = asyncio.get_running_loop()
        if self.bootstrap_url:
            self.tasks.append(loop.create_task(self.bootstrap()))
        self.tasks.append(loop.create_task((self.streamer or self.poller).run()))
        if self.config.metrics_interval > 0:
            self.tasks.append(loop.create_task(self.usage_sender.run()))

    async def stop(self, flush_timeout: float = 2.0) -> None:
        tasks = [*self.tasks, *(task for task in (self.registered, self._backing_up) if task is not None)]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.tasks = []
        if self.config.metrics_interval > 0:
            # What was counted since the last flush would otherwise be lost with this process.
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(self.usage_sender.flush(), flush_timeout)
        await self.client.close()
        if self.observer is not None:
            self.observer.close()
        if self.on_stop is not None:
            self.on_stop()
