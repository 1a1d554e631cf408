"""The streaming sync's parts on their own (hypothesis): the state delta events are applied to
(flagproxy/compiler/delta.py `DeltaState`) and the server-sent-events reader (flagproxy/sync/stream.py).
Through real processes: tests/demo/test_streaming_upstream.py and tests/http/test_upstream_streaming.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from flagproxy.compiler.delta import DeltaState
from flagproxy.sync.stream import SseEvent, sse_events

NAMES = st.sampled_from(["a", "b", "c", "d"])
SEGMENTS = st.integers(1, 3)


def feature(name: str, enabled: bool) -> dict[str, Any]:
    return {"name": name, "enabled": enabled, "strategies": [{"name": "default", "segments": []}]}


EVENTS = st.one_of(
    st.builds(lambda n, on: {"type": "feature-updated", "feature": feature(n, on)}, NAMES, st.booleans()),
    st.builds(lambda n: {"type": "feature-removed", "featureName": n, "project": "default"}, NAMES),
    st.builds(
        lambda i, v: {"type": "segment-updated", "segment": {"id": i, "constraints": [{"values": [v]}]}},
        SEGMENTS,
        st.sampled_from(["x", "y"]),
    ),
    st.builds(lambda i: {"type": "segment-removed", "segmentId": i}, SEGMENTS),
    st.builds(
        lambda fs, ss: {
            "type": "hydration",
            "features": [feature(n, on) for n, on in fs],
            "segments": [{"id": i, "constraints": []} for i in ss],
        },
        st.lists(st.tuples(NAMES, st.booleans()), max_size=4, unique_by=lambda t: t[0]),
        st.lists(SEGMENTS, max_size=3, unique=True),
    ),
    st.just({"type": "something-new"}),
)


def model(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What a reader holds after `events`, by the protocol's words: features by name (an update keeps its
    place, a new one goes last), segments by id; written separately from DeltaState."""
    features: list[dict[str, Any]] = []
    segments: list[dict[str, Any]] = []
    for event in events:
        kind = event["type"]
        if kind == "hydration":
            features, segments = list(event["features"]), list(event["segments"])
        elif kind == "feature-updated":
            names = [f["name"] for f in features]
            name = event["feature"]["name"]
            if name in names:
                features[names.index(name)] = event["feature"]
            else:
                features.append(event["feature"])
        elif kind == "feature-removed":
            features = [f for f in features if f["name"] != event["featureName"]]
        elif kind == "segment-updated":
            ids = [s["id"] for s in segments]
            if event["segment"]["id"] in ids:
                segments[ids.index(event["segment"]["id"])] = event["segment"]
            else:
                segments.append(event["segment"])
        elif kind == "segment-removed":
            segments = [s for s in segments if s["id"] != event["segmentId"]]
    return {"version": 2, "features": features, "segments": segments}


@given(st.lists(st.lists(EVENTS, max_size=4), max_size=8))
def test_each_delta_document_gives_the_protocols_state_and_says_whether_it_changed(
    documents: list[list[dict[str, Any]]],
) -> None:
    state = DeltaState()
    seen: list[dict[str, Any]] = []
    for events in documents:
        before = state.document()
        changed = state.apply(events)
        seen += events
        assert state.document() == model(seen)
        assert changed == (state.document() != before)


@given(st.lists(EVENTS, max_size=10))
def test_a_hydration_of_what_is_held_changes_nothing(events: list[dict[str, Any]]) -> None:
    state = DeltaState()
    state.apply(events)
    held = state.document()
    assert not state.apply([{"type": "hydration", **held}])
    assert state.document() == held


# ---- the server-sent-events reader -------------------------------------------------------------------

SSE_TEXT = st.text(alphabet=st.characters(blacklist_characters="\r\n\0", blacklist_categories=("Cs",)))
LINE_ENDS = st.sampled_from([b"\n", b"\r\n", b"\r"])


async def _from(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


def read(chunks: list[bytes]) -> list[SseEvent | None]:
    async def collect() -> list[SseEvent | None]:
        return [event async for event in sse_events(_from(chunks))]

    return asyncio.run(collect())


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["unleash-updated", "fetch-mode", None]),
            st.lists(SSE_TEXT, min_size=1, max_size=3),
            st.one_of(st.none(), st.integers(0, 99)),
            st.booleans(),
        ),
        max_size=6,
    ),
    LINE_ENDS,
    st.data(),
)
def test_events_read_the_same_however_the_bytes_are_cut(
    sent: list[tuple[str | None, list[str], int | None, bool]], end: bytes, data: st.DataObject
) -> None:
    wire = b""
    expected: list[SseEvent | None] = []
    last_id = None
    for event, lines, event_id, comment in sent:
        if comment:
            wire += b": keep-alive" + end
            expected.append(None)
        if event is not None:
            wire += b"event: " + event.encode() + end
        if event_id is not None:
            wire += b"id: %d" % event_id + end
            last_id = str(event_id)
        for line in lines:
            wire += b"data: " + line.encode() + end
        wire += end
        expected.append(SseEvent(event or "message", "\n".join(lines), last_id))
    wire += b"\n"  # a CR at the very end waits for what follows it: the stream's next line ends it
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(wire) - 1)), max_size=8)))
    chunks = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
    assert read(chunks) == expected


def test_a_hydration_of_megabytes_is_one_event() -> None:
    document = {
        "events": [{"type": "hydration", "features": [feature(f"f{n}", True) for n in range(20_000)]}]
    }
    text = orjson.dumps(document)
    wire = b"event: unleash-connected\nid: 5\ndata: " + text + b"\n\n"
    chunks = [wire[i : i + 65536] for i in range(0, len(wire), 65536)]
    (event,) = read(chunks)
    assert (event.event, event.id, orjson.loads(event.data)) == ("unleash-connected", "5", document)
