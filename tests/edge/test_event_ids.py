"""Edge's delta event ids across runs (flagproxy/edge/changes.py): an id an earlier run gave out never
passes for one of this run's, so a reader holding one hydrates rather than being told nothing changed while
the edge was down; and ids stay 32-bit.

The log is driven with its clock and start given, so the cases are exact: an edge restarted within the
second of its last change (what made the Python SDK miss every change made while the edge restarted, now
and then), and a run whose ids had got ahead of the clock. tests/edge/test_delta.py and
tests/sdk/test_realtime_edge.py cover the same rule through real edge processes and the official SDKs.
"""

from __future__ import annotations

from flagproxy.edge.changes import ChangeLog, FeedLog

START = 1_795_000_000


def document(*names: str) -> dict:
    return {"version": 2, "features": [{"name": name, "enabled": True, "strategies": []} for name in names]}


def worker_view(log: dict) -> FeedLog:
    view = FeedLog.read({"delta": log})
    assert view is not None
    return view


def test_a_run_restarted_within_the_second_of_the_last_change_starts_after_it() -> None:
    before = ChangeLog(kept=100, started=START - 60)
    before.record(document(), now=START - 59)
    last_of_before = before.record(document("a"), now=START)["eventId"]
    # The next run started in the same second and read the upstream at once.
    after = ChangeLog(kept=100, started=START)
    first = after.record(document("a", "while-down"), now=START)["eventId"]
    assert first > last_of_before


def test_an_earlier_runs_id_within_this_runs_range_is_not_taken_for_one_of_this_runs() -> None:
    before = ChangeLog(kept=100, started=START - 1)
    before.record(document(), now=START)
    names: list[str] = []
    for index in range(40):  # forty changes within one second: the ids get forty ahead of the clock
        names.append(f"flag-{index}")
        before.record(document(*names), now=START)
    held = before.last  # what an SDK of the earlier run holds
    after = ChangeLog(kept=100, started=START + 2)
    after.record(document(*names, "while-down"), now=START + 2)
    after.record(document(*names, "while-down", "later"), now=START + 30)
    log = after.record(document(*names, "while-down", "later", "latest"), now=START + 45)
    view = worker_view(log)
    assert view.floor < held < view.last
    assert not view.issued(held)
    assert view.issued(view.floor) and view.issued(view.last) and view.issued(view.events[0].event_id)


def test_ids_fit_the_32_bit_integers_the_sdks_read_them_as() -> None:
    log = ChangeLog(kept=10)
    log.record(document())  # the real clock
    log.record(document("a"))
    assert 0 < log.last < 2**31


def test_a_streamed_change_takes_the_upstreams_events_with_this_logs_id() -> None:
    """--streaming (flagproxy/edge/relayed.py): the upstream's events as they came, one new id per change,
    a flag's old project from what the log held; what changes nothing is left out."""
    log = ChangeLog(kept=100, started=START - 1)
    log.record({**document("a"), "segments": [{"id": 1, "constraints": []}]}, now=START)
    moved = {"name": "a", "enabled": True, "strategies": [], "project": "other"}
    published = log.streamed(
        [
            {"eventId": 7, "type": "feature-updated", "feature": moved},
            {"eventId": 7, "type": "segment-updated", "segment": {"id": 1, "constraints": []}},  # as held
            {"eventId": 7, "type": "segment-removed", "segmentId": 1},
        ],
        now=START,  # within the second of the hydration: one id ahead of the clock
    )
    assert published["eventId"] == START + 1
    assert [(e["type"], e["eventId"]) for e in published["events"]] == [
        ("feature-updated", START + 1),
        ("segment-removed", START + 1),
    ]
    assert published["events"][0]["oldProject"] == "default"
    view = worker_view(published)
    assert [(e.project, e.old_project) for e in view.events[:1]] == [("other", "default")]
    # An event that repeats what is held makes no new id; a removal carries the project it was in.
    repeated = log.streamed([{"type": "feature-updated", "feature": moved}], now=START + 5)
    assert repeated["eventId"] == START + 1
    removed = log.streamed([{"type": "feature-removed", "featureName": "a", "project": "x"}], now=START + 5)
    assert removed["eventId"] == START + 5
    assert removed["events"][-1] == {
        "eventId": START + 5, "type": "feature-removed", "featureName": "a", "project": "other",
    }  # fmt: skip
