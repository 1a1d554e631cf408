"""The streamed state's document as bytes (flagproxy/sync/stream.py DocumentEncoder): after any sequence of
events (updates, removals, flags removed and added again, hydrations) it is exactly
`orjson.dumps(state.document())`, the bytes a full encode gives, whatever it reused."""

from __future__ import annotations

import random

import orjson

from benchmarks.datasets import snapshot_payload
from flagproxy.compiler.delta import DeltaState
from flagproxy.sync.stream import DocumentEncoder


def hydrated(payload: dict) -> tuple[DeltaState, DocumentEncoder]:
    """A state and its encoder after a hydration of `payload`, checked once."""
    state, encoder = DeltaState(), DocumentEncoder()
    hydration = [{"eventId": 1, "type": "hydration", **payload}]
    state.apply(hydration)
    encoder.note(hydration)
    assert encoder.document(state) == orjson.dumps(state.document())
    return state, encoder


def test_the_joined_document_is_the_full_encode_after_random_events() -> None:
    payload = snapshot_payload(60)
    rng = random.Random(24)
    state, encoder = hydrated(payload)
    for event_id in range(2, 300):
        feature = dict(rng.choice(payload["features"]))
        kind = rng.randrange(5)
        if kind == 0:
            event = {"type": "feature-removed", "featureName": feature["name"], "project": "default"}
        elif kind == 1:
            event = {"type": "feature-updated", "feature": {**feature, "enabled": rng.random() < 0.5}}
        elif kind == 2:
            event = {"type": "feature-updated", "feature": {**feature, "name": f"new-{event_id}"}}
        elif kind == 3:
            event = {"type": "segment-updated", "segment": {"id": rng.randrange(5), "constraints": []}}
        else:
            event = {"type": "hydration", **snapshot_payload(rng.randrange(1, 60))}
        events = [{"eventId": event_id, **event}]
        state.apply(events)
        encoder.note(events)
        if rng.random() < 0.5:  # a publish now and then: what it kept must not go stale in between
            assert encoder.document(state) == orjson.dumps(state.document())
    assert encoder.document(state) == orjson.dumps(state.document())


def test_many_changes_between_two_publishes_are_all_in_the_next() -> None:
    # The encoder lists the flags noted since its last publish; more notes than it holds flags start it
    # over (everything encoded at the next publish) instead of a list that grows without one.
    payload = snapshot_payload(10)
    state, encoder = hydrated(payload)
    for number in range(2, 40):
        feature = {**payload["features"][number % 10], "enabled": number % 3 == 0, "description": str(number)}
        events = [{"eventId": number, "type": "feature-updated", "feature": feature}]
        state.apply(events)
        encoder.note(events)
    assert encoder.document(state) == orjson.dumps(state.document())
