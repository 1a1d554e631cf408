"""Streaming from the upstream instead of polling: Unleash's server-sent events (`GET /api/client/streaming`),
applied to the held state as they come, with a fall back to polling and a way back.

The wire (Unleash Edge's delta_refresh.rs, the Node SDK's streaming-fetcher.ts): the first event,
`unleash-connected`, carries a delta document (`{"events": [...]}`: a hydration, or after `Last-Event-ID` what
was missed); then each `unleash-updated` carries a change's events; the SSE `id` is the last event id, sent
back as `Last-Event-ID` when reconnecting so nothing is missed; a `: keep-alive` comment comes every 30 s.
Each document is checked whole (flagproxy/sync/documents.py) before it is applied to the `DeltaState`
(flagproxy/compiler/delta.py); one refused, or a `unleash-updated` that is no JSON, makes the reader
reconnect without `Last-Event-ID` to be hydrated again, as the Node SDK does ("full re-hydration to prevent
data loss"). Only an event that changes the state publishes: a repeated hydration after a reconnect moves
no revision, so the workers' answers, ETags and response caches stay as they are.

Applying costs a dictionary operation per event; the document is then published through the same path as a
poll's (`on_update`: compiled apart from the serving loop, flagproxy/instance/compiler.py), as JSON bytes
joined from each feature's own (`DocumentEncoder`: only a feature the events replaced is encoded again, so
a change of one flag at 5000 costs the loop a join, not an encode of the whole document). Events that come
while a document is being compiled are applied meanwhile and published together once that compile is done.
With one serving process (`--workers 1`), once the engine served is the one built from the state, each change
is patched into it on the loop instead (`patcher`: flagproxy/instance/patcher.py), and nothing is published.

Reconnecting (Edge's policy): a stream that was up a while and ends is reconnected at once; a failure to
connect waits 5 s, doubling to 30 s. A stream silent for 90 s (three keep-alives missed) is taken as dead.
Falling back to polling (the Node SDK's streaming-fail-over.ts): at once when the stream is answered 401,
403, 404, 429 or 501, or the upstream sends the `fetch-mode` event (or header) `polling`; after 5 failed or
ended connections within 60 s otherwise. Back to streaming: when a poll's answer carries `fetch-mode:
streaming` (as the Node SDK's polling fetcher switches); 30 s after `fetch-mode: polling` (the upstream's
stream limit may have room again: one short request to find out); after an unreachable stream, at the first
answered poll at least 30 s later; 5 minutes after a refusing status (a token not yet allowed, an upstream
without streaming), so one that comes to allow it is streamed from again. Polls go on meanwhile, every
refresh interval.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from flagproxy.compiler.delta import DeltaState, DocumentEncoder
from flagproxy.sync.documents import DocumentError, check_document
from flagproxy.sync.poller import Poller
from flagproxy.sync.upstream import NOT_MODIFIED, Updated, UpstreamClient, describe_failure

RECONNECT_FIRST = 5.0  # seconds before the first reconnect after a failed one (Edge)
RECONNECT_MAX = 30.0  # the longest wait between two connection attempts (Edge)
STAYED_UP = 5.0  # seconds a stream must have stayed up for its end to be reconnected at once
IDLE_LIMIT = 90.0  # seconds without a byte (keep-alives come every 30 s) before the stream is dropped (Edge)
REFUSING = frozenset((401, 403, 404, 429, 501))  # polling at once (the Node SDK's hard fail-over statuses)
FAILURES_TO_POLL = 5  # failed or ended connections within FAILURE_WINDOW that make it poll (Node SDK)
FAILURE_WINDOW = 60.0
RETRY_AFTER_REFUSAL = 300.0  # seconds of polling before a refused stream is tried again
RETRY_AFTER_FAILURES = RECONNECT_MAX  # ... before an unreachable one is, once polls are answered
MAX_EVENT_BYTES = 256 * 1024 * 1024  # one event's data: a hydration of a very large project still fits

# Why a stream ended (the Prometheus label of flagproxy_upstream_stream_connections_total): a closed set.
ENDED, FAILED, REFUSED, TOLD_TO_POLL, REHYDRATE = "ended", "failed", "refused", "told_to_poll", "rehydrate"


@dataclass(frozen=True)
class SseEvent:
    event: str  # "message" when the event names none, as in the EventSource standard
    data: str
    id: str | None  # the last event id after this event (an event without `id` keeps the previous one)


async def sse_events(
    chunks: AsyncIterator[bytes], last_id: str | None = None
) -> AsyncIterator[SseEvent | None]:
    """Server-sent events from the response body's chunks (the HTML standard's parsing: lines end with
    CRLF, LF or CR; `data` lines joined by LF; a blank line dispatches). None for a comment (a keep-alive),
    so the reader sees the stream is alive. One event's data is bounded by MAX_EVENT_BYTES."""
    buffer = bytearray()
    data: list[bytes] = []
    size = 0
    event = b""
    async for chunk in chunks:
        buffer += chunk
        start = 0
        while True:
            end = _line_end(buffer, start)
            if end < 0:
                break
            line = bytes(buffer[start:end])
            start = end + (2 if buffer[end : end + 2] == b"\r\n" else 1)
            if not line:
                if data:
                    yield SseEvent(
                        (event or b"message").decode(errors="replace"), b"\n".join(data).decode(), last_id
                    )
                data, size, event = [], 0, b""
                continue
            name, colon, value = line.partition(b":")
            if not name and colon:
                yield None
                continue
            value = value[1:] if value[:1] == b" " else value
            if name == b"data":
                size += len(value) + 1
                if size > MAX_EVENT_BYTES:
                    raise ValueError(f"an event of more than {MAX_EVENT_BYTES} bytes")
                data.append(value)
            elif name == b"event":
                event = value
            elif name == b"id" and b"\0" not in value:
                last_id = value.decode(errors="replace")
        del buffer[:start]
        if len(buffer) > MAX_EVENT_BYTES:
            raise ValueError(f"a line of more than {MAX_EVENT_BYTES} bytes")


def _line_end(buffer: bytearray, start: int) -> int:
    newline = buffer.find(b"\n", start)
    ret = buffer.find(b"\r", start, newline if newline >= 0 else len(buffer))
    if ret >= 0 and ret == len(buffer) - 1 and newline < 0:
        return -1  # a CR at the end of what came: wait for what follows (it may be CRLF)
    return ret if ret >= 0 else newline


class StreamEnd(Exception):
    """Why a connection ended: `why` is one of ENDED, FAILED, REFUSED, TOLD_TO_POLL, REHYDRATE."""

    def __init__(self, why: str, reason: str, up_for: float = 0.0) -> None:
        super().__init__(reason)
        self.why = why
        self.reason = reason
        self.up_for = up_for  # seconds the stream was connected (0: it never was)


class StreamingSync:
    """One upstream feed kept by streaming, falling back to `poller` (whose `on_update` installs the same
    way) while the stream is refused or unreachable. `run()` until cancelled."""

    def __init__(
        self,
        client: UpstreamClient,
        poller: Poller,
        *,
        on_update: Callable[[bytes], Awaitable[bool]],
        on_checked: Callable[[], None],
        logger: Any,
        observer: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.poller = poller
        self.on_update = on_update  # publishes a full document; False when it was not installed
        self.on_checked = on_checked  # the upstream was heard from and nothing changed (a keep-alive)
        self.logger = logger
        self.observer = observer  # SyncSeries (flagproxy/proxy/series.py) or None: stream_* methods
        self.clock = clock
        self.state = DeltaState()
        self.encoder = DocumentEncoder()
        # With one serving process, what patches a change into the served engine instead of publishing
        # the whole state (flagproxy/instance/patcher.py `ServedPatcher`, set by flagproxy/proxy/app.py),
        # and what is told after each patch (the backup: flagproxy/sync/service.py).
        self.patcher: Any = None
        self.on_patched: Callable[[], None] | None = None
        self._version = 0  # counts the state's changes: a publish is adopted only if none came meanwhile
        self.held = False  # whether a state was handed to `on_update` (or polled) yet
        self.last_event_id: str | None = None
        self.mode = "streaming"
        self.connected = False
        self.failures: collections.deque[float] = collections.deque()
        self._changed = asyncio.Event()
        self._published = asyncio.Event()  # nothing waits to be published (tests and stops read it)
        self._published.set()

    # ---- the loop -----------------------------------------------------------------------------------

    async def run(self) -> None:
        publisher = asyncio.get_running_loop().create_task(self._publish_changes())
        try:
            while True:
                why = await self._stream()
                await self._poll(why)
        finally:
            publisher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await publisher

    async def _stream(self) -> str:
        """Stream until it should poll instead; why (REFUSED, TOLD_TO_POLL or FAILED)."""
        self.mode = "streaming"
        self._observe("stream_mode", "streaming")
        delay = 0.0
        while True:
            try:
                await self._connection()
                raise StreamEnd(ENDED, "the upstream ended the stream")  # pragma: no cover - never returns
            except StreamEnd as end:
                self.connected = False
                self._observe("stream_ended", end.why)
                if end.why in (REFUSED, TOLD_TO_POLL):
                    self.logger.warn(f"Upstream {self.client.streaming_url} {end.reason}; polling instead")
                    return end.why
                if end.why == REHYDRATE:
                    self.last_event_id = None
                if end.up_for >= STAYED_UP:
                    self.failures.clear()  # a working stream: what failed before it is history
                    delay = 0.0
                now = self.clock()
                self.failures.append(now)
                while self.failures and self.failures[0] < now - FAILURE_WINDOW:
                    self.failures.popleft()
                if len(self.failures) >= FAILURES_TO_POLL:
                    self.logger.warn(
                        f"Upstream {self.client.streaming_url}: {len(self.failures)} streams failed within "
                        f"{FAILURE_WINDOW:.0f} s ({end.reason}); polling instead"
                    )
                    self.failures.clear()
                    return FAILED
                self.logger.info(
                    f"Upstream {self.client.streaming_url} {end.reason}; reconnecting in {delay:.0f} s"
                )
            await asyncio.sleep(delay)
            delay = min(RECONNECT_MAX, max(RECONNECT_FIRST, delay * 2))

    async def _connection(self) -> None:
        """One connection, until it ends: raises StreamEnd."""
        since: float | None = None
        try:
            async with self.client.open_stream(self.last_event_id) as response:
                if response.headers.get("fetch-mode") == "polling":
                    raise StreamEnd(TOLD_TO_POLL, "asks for polling (fetch-mode)")
                if response.status in REFUSING:
                    raise StreamEnd(REFUSED, f"answered {response.status}")
                if response.status != 200:
                    raise StreamEnd(FAILED, f"answered {response.status}")
                kind = response.headers.get("Content-Type", "")
                if not kind.startswith("text/event-stream"):
                    raise StreamEnd(REFUSED, f"answered {kind or 'no content type'}, not an event stream")
                since = self.clock()
                events = sse_events(_chunks(response.content), self.last_event_id)
                while True:
                    try:
                        event = await asyncio.wait_for(anext(events), IDLE_LIMIT)
                    except StopAsyncIteration:
                        raise StreamEnd(ENDED, "ended the stream", self.clock() - since) from None
                    except TimeoutError:
                        raise StreamEnd(
                            FAILED, f"sent nothing for {IDLE_LIMIT:.0f} s", self.clock() - since
                        ) from None
                    await self._event(event, since)
        except StreamEnd:
            raise
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
            up_for = 0.0 if since is None else self.clock() - since
            raise StreamEnd(FAILED, f"stream failed: {describe_failure(exc)}", up_for) from None

    async def _event(self, event: SseEvent | None, since: float) -> None:
        if event is None:  # a keep-alive
            self.on_checked()
            return
        self._observe("stream_event", event.event)
        if event.event == "fetch-mode":
            if event.data.strip() == "polling":
                raise StreamEnd(TOLD_TO_POLL, "asks for polling (fetch-mode event)", self.clock() - since)
            return
        if event.event not in ("unleash-connected", "unleash-updated"):
            return
        try:
            document = orjson.loads(event.data)
            check_document(document)
            events = document.get("events")
            if not isinstance(events, list):
                raise DocumentError("not_a_document", "", "has no `events` list")
        except (orjson.JSONDecodeError, DocumentError) as exc:
            self.logger.error(
                f"Upstream {self.client.streaming_url} sent an {event.event} event that was refused ({exc}); "
                "reconnecting to be hydrated again"
            )
            if isinstance(exc, DocumentError) and self.observer is not None:
                self.observer.refused(exc.reason, "upstream", str(exc))
            raise StreamEnd(REHYDRATE, "sent an event that was refused", self.clock() - since) from None
        if event.event == "unleash-connected" and not self.connected:
            self.connected = True
            self.logger.info(f"Streaming from {self.client.streaming_url}")
        self.last_event_id = event.id
        if self.patcher is not None and self.held and self._patched(events):
            return
        # The first state is published even when empty (an upstream without flags): it makes it ready.
        try:
            changed = self.state.apply(events)
        except BaseException:
            self.encoder.reset()  # what it applied before failing is not known to the encoder
            raise
        self.encoder.note(events)
        self._changed_whole(changed)

    def _patched(self, events: list[Any]) -> bool:
        """Whether the patcher took `events` (applied to the state, and served or to be published)."""
        try:
            outcome = self.patcher.apply(self.state, events)
        except Exception as exc:  # a bug: what was applied is not known; the whole state goes out again
            self.logger.error(f"Patching the streamed change in failed unexpectedly: {exc!r}")
            self.patcher.forget()
            self.encoder.reset()
            self._changed_whole(True)
            return True
        if outcome == "not_taken":
            return False
        self.encoder.note(events)
        if outcome == "patched":
            self._observe("stream_change", "patched")
            self._version += 1
            # A relay hands the events on and each worker builds its own body: none made here for it.
            parts = self.encoder.parts(self.state) if self.patcher.serves_body else None
            self.patcher.serve(parts, events)
            if self.on_patched is not None:
                self.on_patched()
        self._changed_whole(outcome == "whole")
        return True

    def _changed_whole(self, changed: bool) -> None:
        """After the state was applied: publish it whole if it changed (or was never handed over)."""
        if changed:
            self._observe("stream_change", "whole")
            if self.patcher is not None:
                self.patcher.forget()
        if changed or not self.held:
            self._version += 1
            self.held = True
            self._published.clear()
            self._changed.set()
        else:
            self.on_checked()

    async def _publish_changes(self) -> None:
        """Publish the state whenever it changed; what changes during one publish goes in the next."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            state, version = self.state, self._version
            try:
                # As a poll hands its document over: JSON bytes (flagproxy/sync/upstream.py's Updated).
                installed = await self.on_update(self.encoder.document(state))
                unchanged = state is self.state and version == self._version
                if installed and unchanged and self.patcher is not None:
                    self.patcher.published(state)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug here must not end streaming for good
                self.logger.error(f"Publishing the streamed features failed unexpectedly: {exc!r}")
            if not self._changed.is_set():
                self._published.set()

    async def _poll(self, why: str) -> None:
        """Poll until the stream should be tried again."""
        self.mode = "polling"
        self._observe("stream_mode", "polling")
        self.last_event_id = None  # the polled documents are newer than the stream's last event
        self.poller.etag = None
        retry_at = self.clock() + (RETRY_AFTER_REFUSAL if why == REFUSED else RETRY_AFTER_FAILURES)
        while True:
            result = await self.poller.poll_once()
            if isinstance(result, Updated):
                self.held = True
                # What a hydration after this is compared with (installed already: well-typed JSON).
                self.state = DeltaState(orjson.loads(result.document))
                self.encoder.reset()
                if self.patcher is not None:
                    self.patcher.forget()
                if result.fetch_mode == "streaming":
                    self.logger.info(f"Upstream {self.client.features_url} offers streaming again")
                    return
            delay = self.poller.next_delay_ms() / 1000
            if why == FAILED:  # unreachable: tried again once polls are answered
                if self.clock() >= retry_at and (isinstance(result, Updated) or result is NOT_MODIFIED):
                    return
                await asyncio.sleep(delay)
                continue
            wait = retry_at - self.clock()  # refused or told to poll: tried again at its time
            if wait <= 0:
                return
            await asyncio.sleep(min(delay, wait))
            if self.clock() >= retry_at:
                return

    def _observe(self, what: str, value: str) -> None:
        if self.observer is not None and hasattr(self.observer, what):
            getattr(self.observer, what)(value)


async def _chunks(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    while True:
        chunk = await content.readany()
        if not chunk:
            return
        yield chunk
