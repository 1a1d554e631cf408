"""Unleash's delta API and its stream, as every product serves them: the wire events, which of them a
reader may see, the server-sent-events framing, each process's open streams and the loop that feeds one.

The wire format is Unleash's (`clientFeaturesDeltaSchema`; Unleash Edge's unleash-edge-client-api
delta.rs and streaming.rs): `{"events": [...]}`, each event with a numeric `eventId` and a `type`:
`hydration` (`features`, `segments`), `feature-updated` (`feature`), `feature-removed` (`featureName`,
`project`), `segment-updated` (`segment`), `segment-removed` (`segmentId`). `GET /api/client/delta` has the
last event's id as its ETag and answers 304 when nothing newer concerns the reader; `GET
/api/client/streaming` sends `unleash-connected` first, then `unleash-updated`, the SSE `id` being the last
event's id, and `fetch-mode: polling` to a client it will not stream to.

Where the events come from is the product's: the flag server's log in its database
(flagproxy/server/delta/), edge's log derived from successive features documents (flagproxy/edge/changes.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from sanic import HTTPResponse, Request

# Under the 30 s read timeout the official Python SDK gives its stream (`request_timeout`): at 30 s an idle
# stream timed out and reconnected about every 30 s, its backoff growing each time (the SDK resets it only
# after 60 s connected), so a change could wait up to 30 s for the reconnect.
KEEP_ALIVE_SECONDS = 15.0
KEEP_ALIVE = b": keep-alive\n\n"
KEEP_ALIVE_SLOTS = 15  # the streams' keep-alives are spread over this many turns of KEEP_ALIVE_SECONDS
EMPTY = b'{"events":[]}'
MAX_PENDING = 64  # batches an open stream may have unsent before it catches up from the log instead
NO_TAGS: frozenset[tuple[str, str]] = frozenset()


class Reader(Protocol):
    """What scopes the events: the token's environment and projects, the request's filters."""

    @property
    def environment(self) -> str | None: ...
    @property
    def projects(self) -> tuple[str, ...] | None: ...  # None: every project
    @property
    def name_prefix(self) -> str | None: ...
    @property
    def tags(self) -> tuple[tuple[str, str], ...]: ...


def in_scope(reader: Reader, project: str, name: str, tags: frozenset[tuple[str, str]]) -> bool:
    """Whether a feature of this project, name and tags is in the reader's scope (any listed tag matches)."""
    if reader.projects is not None and project not in reader.projects:
        return False
    if reader.name_prefix and not name.startswith(reader.name_prefix):
        return False
    return not reader.tags or not tags.isdisjoint(reader.tags)


# ---- the wire events ------------------------------------------------------------------------------------


def feature_updated(event_id: int, feature: bytes) -> bytes:
    """`feature`: the feature's JSON as the client features document serves it."""
    return b'{"eventId":%d,"type":"feature-updated","feature":' % event_id + feature + b"}"


def feature_removed(event_id: int, name: str, project: str) -> bytes:
    body = orjson.dumps({"featureName": name, "project": project})
    return b'{"eventId":%d,"type":"feature-removed",' % event_id + body[1:]


def segment_updated(event_id: int, segment: bytes) -> bytes:
    return b'{"eventId":%d,"type":"segment-updated","segment":' % event_id + segment + b"}"


def segment_removed(event_id: int, segment_id: int) -> bytes:
    return b'{"eventId":%d,"type":"segment-removed","segmentId":%d}' % (event_id, segment_id)


def hydration(event_id: int, features: Sequence[Any], segments: Sequence[Any]) -> bytes:
    event = {"eventId": event_id, "type": "hydration", "features": features, "segments": segments}
    return orjson.dumps(event)


def document(wire_events: Sequence[bytes]) -> bytes:
    return b'{"events":[' + b",".join(wire_events) + b"]}"


@dataclass(frozen=True, slots=True)
class DeltaEvent:
    """One change to one feature (in one environment) or one segment, with its wire bytes ready: `updated`
    for a reader that has the feature in scope now, `removed` for one that had it and no longer has."""

    event_id: int
    environment: str | None  # None: for every reader of the log (a segment, or a log of one environment)
    name: str | None  # None: a segment
    project: str | None  # where the feature is now (None: it is gone)
    tags: frozenset[tuple[str, str]]
    old_project: str | None  # where it was before (None: it was not served before)
    old_tags: frozenset[tuple[str, str]]
    updated: bytes | None
    removed: bytes | None
    retagged: bool = False  # only the tags changed: news only to readers it brings into or out of a filter

    def wire_for(self, reader: Reader) -> bytes | None:
        """This event as `reader` sees it, or None when it does not concern that reader."""
        if self.environment is not None and self.environment != reader.environment:
            return None
        if self.name is None:  # a segment: every reader has every segment
            return self.updated
        name = self.name
        now = self.updated is not None and in_scope(reader, self.project or "", name, self.tags)
        before = self.removed is not None and in_scope(reader, self.old_project or "", name, self.old_tags)
        if self.retagged and now == before:
            return None
        if now:
            return self.updated
        return self.removed if before else None


def scoped(events: Sequence[DeltaEvent], reader: Reader, after: int) -> tuple[list[bytes], int]:
    """The wire events newer than `after` that concern `reader`, in order, and the last one's id (`after`
    when there are none)."""
    chosen = []
    last = after
    for event in events:
        if event.event_id > after:
            wire = event.wire_for(reader)
            if wire is not None:
                chosen.append(wire)
                last = event.event_id
    return chosen, last


def resumes(since: int, floor: int | None, current: int) -> bool:
    """Whether a reader at revision `since` gets the events after it (the log keeps them) rather than a
    hydration (the log no longer keeps that revision, or never had it)."""
    return floor is not None and floor <= since < current


# ---- the requests -------------------------------------------------------------------------------------


def event_id(text: str | None) -> int | None:
    """A revision from If-None-Match (`"12"`, `W/"12"`, `12`) or Last-Event-ID; None for anything else."""
    if not text:
        return None
    text = text.strip().removeprefix("W/").strip('"')
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def delta_headers(last: int) -> dict[str, str]:
    return {"etag": f'"{last}"', "cache-control": "no-cache"}


def sse(event: str, data: bytes, last: int | None = None) -> bytes:
    """One server-sent event; `data` is one line of JSON."""
    head = b"event: " + event.encode() + b"\n"
    if last is not None:
        head += b"id: %d\n" % last
    return head + b"data: " + data + b"\n\n"


STREAM_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
FETCH_MODE_POLLING = sse("fetch-mode", b"polling")


def back_to_polling(extra: dict[str, str] | None = None) -> HTTPResponse:
    """The answer to a stream this process will not serve: the Node SDK's `fetch-mode` event and header
    (streaming-fetcher.ts), after which it polls instead."""
    headers = {**STREAM_HEADERS, "fetch-mode": "polling", **(extra or {})}
    return HTTPResponse(FETCH_MODE_POLLING, headers=headers, content_type="text/event-stream")


# ---- each process's open streams ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Batch:
    """Events that arrived at once; `upto` is the newest revision they bring a reader of `source` to."""

    events: Sequence[DeltaEvent]
    upto: int
    source: Any = None  # which log they belong to, for a product with several (edge: one per feed)
    after: int | None = None  # the revision they follow, when known: a reader behind it must catch up
    # The message each reader scope gets from each position, rendered by the first of its streams to send
    # it (stream_changes' `share`): ten thousand streams of one token render a change once, not 10,000 times.
    rendered: dict[tuple[Any, int], tuple[bytes | None, int]] = field(default_factory=dict, compare=False)


class Subscriber:
    """One open stream's inbox."""

    __slots__ = ("_ready", "behind", "keep_alive", "pending", "slot", "stopped")

    def __init__(self) -> None:
        self.pending: list[Batch] = []
        self.behind = False  # batches were dropped: catch up from the log
        self.keep_alive = False  # a keep-alive comment is due
        self.slot = 0  # which of Streams' keep-alive slots ticks it
        self.stopped = False
        self._ready = asyncio.Event()

    def offer(self, batch: Batch) -> None:
        if len(self.pending) >= MAX_PENDING:
            self.fell_behind()
        else:
            self.pending.append(batch)
            self._ready.set()

    def fell_behind(self) -> None:
        self.pending.clear()
        self.behind = True
        self._ready.set()

    def stop(self) -> None:
        self.stopped = True
        self._ready.set()

    def tick(self) -> None:
        self.keep_alive = True
        self._ready.set()

    async def wait(self) -> None:
        """Until there is something to do: batches, a catch-up, a keep-alive, a stop. No timeout of its
        own: on Python 3.11 each `wait_for` is one more task and timer per idle stream, woken at every
        change (Streams ticks every stream when a keep-alive is due)."""
        await self._ready.wait()
        self._ready.clear()

    def take(self) -> list[Batch]:
        taken, self.pending = self.pending, []
        return taken


class Streams:
    """This process's open streams: at most `max_streams` at once; each new batch offered to all of them.
    Streams hold no copy of the log: every stream gets the same batch objects and picks what it may see,
    and one that falls behind (MAX_PENDING batches unsent) drops them and catches up from the log, so a
    slow client costs a bounded amount of memory. One task ticks every stream every KEEP_ALIVE_SECONDS
    (started with the first stream), a slot of them at a time: ten thousand keep-alives at once would hold
    the loop for a second, and a change arriving then would wait."""

    def __init__(self, max_streams: int, keep_alive_seconds: float = KEEP_ALIVE_SECONDS) -> None:
        self.max_streams = max_streams
        self.keep_alive_seconds = keep_alive_seconds
        self.subscribers: set[Subscriber] = set()
        self.stopping = False
        self._slots: list[set[Subscriber]] = [set() for _ in range(KEEP_ALIVE_SLOTS)]
        self._next_slot = 0
        self._ticker: asyncio.Task[None] | None = None

    def subscribe(self) -> Subscriber | None:
        """A new stream's inbox, or None when this process already serves `max_streams` streams."""
        if self.stopping or len(self.subscribers) >= self.max_streams:
            return None
        subscriber = Subscriber()
        self.subscribers.add(subscriber)
        subscriber.slot, self._next_slot = self._next_slot, (self._next_slot + 1) % KEEP_ALIVE_SLOTS
        self._slots[subscriber.slot].add(subscriber)
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._keep_alive(), name="delta-keep-alive")
        return subscriber

    async def _keep_alive(self) -> None:
        slot = 0
        while not self.stopping:
            await asyncio.sleep(self.keep_alive_seconds / KEEP_ALIVE_SLOTS)
            for subscriber in list(self._slots[slot]):
                subscriber.tick()
            slot = (slot + 1) % KEEP_ALIVE_SLOTS

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)
        self._slots[subscriber.slot].discard(subscriber)

    def offer(self, batch: Batch) -> None:
        for subscriber in list(self.subscribers):
            subscriber.offer(batch)

    def fell_behind(self) -> None:
        """Events were lost before this process read them: every stream catches up from the log."""
        for subscriber in list(self.subscribers):
            subscriber.fell_behind()

    def stop_streams(self) -> None:
        """End every open stream (their handlers finish their responses) and take no more."""
        self.stopping = True
        if self._ticker is not None:
            self._ticker.cancel()
        for subscriber in list(self.subscribers):
            subscriber.stop()


# (document or None when nothing newer concerns the reader, the revision it brings the reader to)
CatchUp = Callable[[int | None], tuple[bytes | None, int]]
# A batch as one stream sees it, from its position: (wire events, the last one's id, its new position),
# or None when the stream must catch up from the log instead.
Pick = Callable[[Batch, int], tuple[list[bytes], int, int] | None]


async def stream_changes(
    request: Request,
    subscriber: Subscriber,
    catch_up: CatchUp,
    pick: Pick,
    headers: dict[str, str],
    sent: Callable[[], None] | None = None,
    share: Any = None,
) -> None:
    """Serve one stream until the process stops it or the client goes: `unleash-connected` (a hydration,
    or after `Last-Event-ID` what was missed, or nothing), then `unleash-updated` per batch that concerns
    the reader, a keep-alive comment every KEEP_ALIVE_SECONDS. The caller subscribed before calling, so
    nothing that arrives after the first read is missed. `sent` is called per message sent
    (`unleash-connected`, `unleash-updated`). `share`: a hashable key of the reader's scope when `pick`
    depends on nothing else (and has no effect): streams of one scope at one position then share the
    batch's message, rendered once."""
    count = sent or (lambda: None)
    body, position = catch_up(event_id(request.headers.get("last-event-id")))
    response = await request.respond(headers={**STREAM_HEADERS, **headers}, content_type="text/event-stream")
    if body is None:
        await response.send(sse("unleash-connected", EMPTY))
    else:
        await response.send(sse("unleash-connected", body, position))
        body = None  # an idle stream must not hold its hydration (tens of kB) for its whole life
    count()
    while True:
        await subscriber.wait()
        if subscriber.stopped:
            break
        if subscriber.keep_alive:
            subscriber.keep_alive = False
            await response.send(KEEP_ALIVE)
        behind, subscriber.behind = subscriber.behind, False
        for batch in [] if behind else subscriber.take():
            message = message_for(batch, position, pick, share)
            if message is None:
                behind = True
                break
            update, position = message
            if update is not None:
                await response.send(update)
                count()
        if behind:
            subscriber.take()
            body, last = catch_up(position)
            position = max(position, last)
            if body is not None:
                await response.send(sse("unleash-updated", body, last))
                count()
    await response.eof()


def message_for(batch: Batch, position: int, pick: Pick, share: Any) -> tuple[bytes | None, int] | None:
    """The `unleash-updated` message `batch` makes for a stream at `position` (None: nothing for it) and the
    stream's new position; None when it must catch up from the log instead."""
    key = (share, position)
    if share is not None and key in batch.rendered:
        return batch.rendered[key]
    picked = pick(batch, position)
    if picked is None:
        return None
    wires, last, after = picked
    message = (sse("unleash-updated", document(wires), last) if wires else None), after
    if share is not None:
        batch.rendered[key] = message
    return message
