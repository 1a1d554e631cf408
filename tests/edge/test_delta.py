"""Edge re-serving Unleash's delta API and stream (`/api/client/delta`, `/api/client/streaming`) from a real
`flagproxy server`, every change made through the server's admin API and seen through real `flagproxy edge`
processes: hydration, the events of each change once and in order, ETag and 304, the same event ids on
every worker, scoping by token, `project` and `namePrefix`, `Last-Event-ID` replay, the kept-events bound,
the stream limit's `fetch-mode: polling`, ids that go on across a restart, a clean stop with streams open.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.edge.harness import CountingUpstream, EdgeProcess, edge, features_doc
from tests.http.processes import ask_worker
from tests.server.harness import (
    CLIENT_TOKEN,
    DEFAULT_PROJECT_CLIENT_TOKEN,
    FRONTEND_TOKEN,
    PROD_CLIENT_TOKEN,
    Api,
    ServerProcess,
    base_env,
    unique,
)
from tests.server.sse import SseStream, StreamEnded
from tests.server.test_delta import kinds

WAIT = 30.0  # how long a step may take before the test fails (never a measured bound)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = Path(tmp_path_factory.mktemp("delta-upstream"))
    process = ServerProcess(
        base_env(DATABASE_PATH=str(folder / "flags.db")), log_path=str(folder / "server.log")
    )
    process.start()
    answer = process.api().post("/api/admin/projects", {"id": "other", "name": "Other"})
    assert answer.status in (200, 201), answer.body
    yield process
    assert process.stop() == 0


@pytest.fixture
def api(server: ServerProcess) -> Api:
    return server.api()


# Polling, the edge derives each change's events from two whole documents; streaming (its polls a minute
# apart, so only the stream brings a change in time), it relays the upstream's own events
# (flagproxy/edge/relayed.py) and each worker patches them in: every test here holds for both.
SYNCS = {"polling": (), "streaming": ("--streaming", "--features-refresh-interval-seconds", "60")}


@pytest.fixture(params=list(SYNCS))
def start(server: ServerProcess, request: pytest.FixtureRequest) -> Callable[..., EdgeProcess]:
    """An edge reading `server` (polling or streaming), ready; stopped after the test."""

    def run(
        *extra: str, tokens: tuple[str, ...] = (CLIENT_TOKEN, PROD_CLIENT_TOKEN), **env: str
    ) -> EdgeProcess:
        process = edge(server.url, list(tokens), *SYNCS[request.param], *extra, env=env or None)
        request.addfinalizer(process.stop)
        process.wait_ready()
        return process

    return run


def delta(process: EdgeProcess, token: str = CLIENT_TOKEN, etag: str | None = None, query: str = "") -> Any:
    headers = {"If-None-Match": etag} if etag else {}
    status, headers, body = process.get(f"/api/client/delta{query}", token, headers=headers)
    return status, headers.get("etag"), orjson.loads(body) if body else None


def next_delta(
    process: EdgeProcess, etag: str, token: str = CLIENT_TOKEN, query: str = ""
) -> tuple[str, list]:
    """Polls until the edge has something newer than `etag`: (its ETag, its events)."""
    deadline = time.monotonic() + WAIT
    while True:
        status, new_etag, body = delta(process, token, etag, query)
        if status == 200:
            return new_etag, body["events"]
        assert status == 304, status
        assert new_etag == etag
        assert time.monotonic() < deadline, "the edge never served the change"
        time.sleep(0.1)


def hydrated_names(body: dict[str, Any]) -> set[str]:
    [event] = body["events"]
    assert event["type"] == "hydration"
    return {f["name"] for f in event["features"]}


def test_delta_hydrates_then_serves_each_change_once_with_the_same_ids_on_every_worker(
    start: Callable[..., EdgeProcess], api: Api
) -> None:
    first = unique("first")
    api.create_feature(first)
    process = start("--workers", "2")
    # A new connection per request: both workers answer, with the same revision and bytes.
    answers = {}
    workers = set()
    deadline = time.monotonic() + WAIT
    while len(workers) < 2:
        assert time.monotonic() < deadline, "one worker answered every connection"
        status, headers, body, worker = ask_worker(
            process, "GET", "/api/client/delta", {"Authorization": CLIENT_TOKEN}
        )
        assert status == 200, body
        workers.add(worker)
        answers[headers["etag"]] = body
    assert len(answers) == 1, answers  # one ETag, one body, whichever worker answered
    [(etag, body)] = answers.items()
    hydration = orjson.loads(body)["events"][0]
    assert first in hydrated_names(orjson.loads(body))
    assert etag == f'"{hydration["eventId"]}"'

    second = unique("second")
    api.create_feature(second)
    newer, events = next_delta(process, etag)
    assert kinds(events) == [("feature-updated", second)]
    assert newer == f'"{events[0]["eventId"]}"' and int(newer.strip('"')) > int(etag.strip('"'))
    for _ in range(6):  # every worker: nothing newer than that
        status, headers, _, _ = ask_worker(
            process, "GET", "/api/client/delta", {"Authorization": CLIENT_TOKEN, "If-None-Match": newer}
        )
        assert (status, headers["etag"]) == (304, newer)

    api.switch(second, True)
    newest, events = next_delta(process, newer)
    assert kinds(events) == [("feature-updated", second)] and events[0]["feature"]["enabled"] is True
    # Asked from the older revision, both changes (the later state of `second` once is enough: it is
    # upserted) come in order.
    status, _, body = delta(process, etag=etag)
    assert status == 200 and kinds(body["events"]) == [("feature-updated", second)] * 2

    assert api.delete(f"/api/admin/projects/default/features/{second}").status in (200, 202)
    _, events = next_delta(process, newest)
    assert events == [
        {
            "eventId": events[0]["eventId"],
            "type": "feature-removed",
            "featureName": second,
            "project": "default",
        }
    ]


def test_the_token_and_the_filters_scope_the_events(start: Callable[..., EdgeProcess], api: Api) -> None:
    process = start(tokens=(CLIENT_TOKEN,))
    _, everything, _ = delta(process)
    _, default_only, _ = delta(process, DEFAULT_PROJECT_CLIENT_TOKEN)
    prefixed_query = "?namePrefix=pre-"
    _, prefixed, _ = delta(process, query=prefixed_query)

    elsewhere = unique("other-flag")
    api.create_feature(elsewhere, "other")
    everything, events = next_delta(process, everything)
    assert kinds(events) == [("feature-updated", elsewhere)]
    # The default project's token and the name prefix never hear of it.
    assert delta(process, DEFAULT_PROJECT_CLIENT_TOKEN, default_only)[0] == 304
    assert delta(process, etag=prefixed, query=prefixed_query)[0] == 304
    # A token of every project narrowed by `project`; a project token's own scope wins over it.
    _, _, body = delta(process, query="?project=other")
    assert elsewhere in hydrated_names(body)  # with those of the other parameter's run, on this server
    assert {f["project"] for f in body["events"][0]["features"]} == {"other"}
    _, _, body = delta(process, DEFAULT_PROJECT_CLIENT_TOKEN, query="?project=other")
    assert elsewhere not in hydrated_names(body)
    # `tag` narrows nothing, as on Unleash Edge (whose delta filters are the token's projects and
    # `namePrefix`): the hydration is the unfiltered one.
    _, _, tagged = delta(process, query="?tag=simple:no-such-tag")
    assert hydrated_names(tagged) == hydrated_names(delta(process)[2])

    named = unique("pre-flag")
    api.create_feature(named)
    _, events = next_delta(process, default_only, DEFAULT_PROJECT_CLIENT_TOKEN)
    assert kinds(events) == [("feature-updated", named)]
    _, events = next_delta(process, prefixed, query=prefixed_query)
    assert kinds(events) == [("feature-updated", named)]

    # Only client tokens read it: a frontend token is refused, an unknown one too.
    assert delta(process, FRONTEND_TOKEN)[0] == 403
    assert delta(process, "*:development.made-up-secret")[0] == 403


def test_segment_events_come_before_the_flags_that_use_them(
    start: Callable[..., EdgeProcess], api: Api
) -> None:
    process = start(tokens=(CLIENT_TOKEN,))
    _, etag, _ = delta(process)
    name = unique("segmented")
    api.create_feature(name)
    etag, _ = next_delta(process, etag)
    segment = api.create_segment(
        unique("segment"), [{"contextName": "userId", "operator": "IN", "values": ["7"]}]
    )
    api.add_strategy(name, {"name": "default", "segments": [segment["id"]]})
    found: list[dict[str, Any]] = []
    while ("feature-updated", name) not in kinds(found):
        etag, events = next_delta(process, etag)
        found += events
    assert kinds(found)[-2:] == [("segment-updated", segment["id"]), ("feature-updated", name)]
    assert found[-1]["feature"]["strategies"][0]["segments"] == [segment["id"]]


def test_a_stream_sends_each_change_and_resumes_after_its_last_event_id(
    start: Callable[..., EdgeProcess], api: Api
) -> None:
    process = start(tokens=(CLIENT_TOKEN,))
    stream = SseStream(process.port, CLIENT_TOKEN)
    assert stream.status == 200 and stream.headers["content-type"] == "text/event-stream"
    connected = stream.next()
    assert connected.event == "unleash-connected" and connected.json()["events"][0]["type"] == "hydration"
    assert connected.id == str(connected.json()["events"][0]["eventId"])

    name = unique("streamed")
    api.create_feature(name)
    updated = stream.next()
    assert updated.event == "unleash-updated"
    assert kinds(updated.json()["events"]) == [("feature-updated", name)]
    assert updated.id == str(updated.json()["events"][-1]["eventId"]) and int(updated.id) > int(connected.id)
    stream.close()

    # Missed while away: replayed after Last-Event-ID, in order, not a hydration.
    api.switch(name, True)
    next_delta(process, f'"{updated.id}"')
    api.switch(name, False)
    latest = updated.id
    while True:
        newer, events = next_delta(process, f'"{latest}"')
        latest = newer.strip('"')
        if events[-1]["feature"]["enabled"] is False:
            break
    resumed = SseStream(process.port, CLIENT_TOKEN, last_event_id=updated.id)
    again = resumed.next()
    assert again.event == "unleash-connected" and again.id == latest
    events = again.json()["events"]
    assert kinds(events) == [("feature-updated", name)] * 2
    assert [e["feature"]["enabled"] for e in events] == [True, False]
    resumed.close()
    # Up to date: connected with nothing; from an id this edge never had: a hydration.
    current = SseStream(process.port, CLIENT_TOKEN, last_event_id=latest)
    assert current.next().json() == {"events": []}
    current.close()
    unknown = SseStream(process.port, CLIENT_TOKEN, last_event_id="12")
    assert unknown.next().json()["events"][0]["type"] == "hydration"
    unknown.close()


def test_a_reader_behind_the_kept_events_hydrates(start: Callable[..., EdgeProcess], api: Api) -> None:
    process = start("--delta-kept-events", "1", tokens=(CLIENT_TOKEN,))
    _, start_etag, _ = delta(process)
    names = [unique("kept"), unique("kept")]
    etag = start_etag
    for name in names:
        api.create_feature(name)
        etag, _ = next_delta(process, etag)
    status, _, body = delta(process, etag=start_etag)
    assert status == 200 and set(names) <= hydrated_names(body)


def test_streams_beyond_the_limit_are_told_to_poll(start: Callable[..., EdgeProcess]) -> None:
    process = start("--max-streams", "0", tokens=(CLIENT_TOKEN,))
    stream = SseStream(process.port, CLIENT_TOKEN)
    assert stream.status == 200 and stream.headers["fetch-mode"] == "polling"
    told = stream.next()
    assert (told.event, told.data) == ("fetch-mode", "polling")
    assert stream.ends()
    stream.close()
    assert delta(process)[0] == 200  # the delta API still answers


def test_event_ids_go_on_across_a_restart(
    start: Callable[..., EdgeProcess], server: ServerProcess, tmp_path: Path
) -> None:
    backup = ("--backup-folder", str(tmp_path))
    before = start(*backup, tokens=(CLIENT_TOKEN,))
    _, etag, _ = delta(before)
    port = before.port
    before.stop(signal.SIGTERM)
    assert before.popen.returncode == 0
    after = start(*backup, tokens=(CLIENT_TOKEN,), PORT=str(port))
    status, new_etag, body = delta(after, etag=etag)
    # The old id is not this run's: a hydration with a newer id, never a 304 that would hide changes.
    assert status == 200 and body["events"][0]["type"] == "hydration"
    assert int(new_etag.strip('"')) > int(etag.strip('"'))


def test_each_change_reaches_the_backup_with_its_event_id(
    start: Callable[..., EdgeProcess], api: Api, tmp_path: Path
) -> None:
    """Polling, each new document is written as it comes; streaming, a change relayed to the workers
    (flagproxy/edge/relayed.py) reaches the backup within about a second, with the log's last id."""
    process = start("--backup-folder", str(tmp_path), tokens=(CLIENT_TOKEN,))
    _, etag, _ = delta(process)
    name = unique("backed-up")
    api.create_feature(name)
    etag, _ = next_delta(process, etag)

    def backed_up() -> bool:
        for path in tmp_path.glob("flagproxy-backup-edge-*.json"):
            saved = orjson.loads(path.read_bytes())
            if not isinstance(saved, dict) or "eventId" not in saved:
                continue  # the tokens' file
            names = {feature["name"] for feature in saved["features"]["features"]}
            if name in names and f'"{saved["eventId"]}"' == etag:
                return True
        return False

    deadline = time.monotonic() + WAIT
    while not backed_up():
        assert time.monotonic() < deadline, "the change never reached the backup"
        time.sleep(0.1)


def test_an_edge_restarted_within_a_second_of_a_change_hydrates_a_reader_of_its_last_run(
    start: Callable[..., EdgeProcess], api: Api
) -> None:
    """Without a backup the new run's ids start at the clock: an id of the last run, however recent, is
    not taken for this run's revision (ids in seconds collided when the restart took under a second, and
    the reader was told nothing changed while the edge was down)."""
    before = start(tokens=(CLIENT_TOKEN,))
    _, etag, _ = delta(before)
    api.create_feature(unique("before-restart"))
    etag, _ = next_delta(before, etag)
    port = before.port
    before.stop(signal.SIGTERM)
    assert before.popen.returncode == 0
    missed = unique("while-down")
    api.create_feature(missed)
    after = start(tokens=(CLIENT_TOKEN,), PORT=str(port))
    status, new_etag, body = delta(after, etag=etag)
    assert status == 200 and body["events"][0]["type"] == "hydration"
    assert missed in hydrated_names(body)
    assert int(new_etag.strip('"')) > int(etag.strip('"'))


def test_sigterm_with_streams_open_stops_cleanly(start: Callable[..., EdgeProcess]) -> None:
    process = start("--workers", "2", tokens=(CLIENT_TOKEN,))
    streams = [SseStream(process.port, CLIENT_TOKEN) for _ in range(4)]
    for stream in streams:
        assert stream.next().event == "unleash-connected"
    process.popen.send_signal(signal.SIGTERM)
    assert process.popen.wait(20) == 0
    for stream in streams:
        assert stream.ends()
        stream.close()


def stream_series(process: EdgeProcess) -> tuple[float, float]:
    """(open streams, stream messages sent) summed over the instance's workers, from a scrape."""
    status, _, body = process.get("/internal-backstage/metrics")
    assert status == 200
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }
    return samples["flagproxy_delta_streams"], samples["flagproxy_delta_stream_messages_total"]


def wait_for_series(process: EdgeProcess, wanted: tuple[float, float]) -> None:
    deadline = time.monotonic() + WAIT
    while (seen := stream_series(process)) != wanted:
        assert time.monotonic() < deadline, seen
        time.sleep(0.1)


def test_the_series_count_open_streams_and_messages_over_every_worker(
    start: Callable[..., EdgeProcess], api: Api
) -> None:
    process = start("--workers", "2", tokens=(CLIENT_TOKEN,))
    assert stream_series(process) == (0, 0)
    streams = [SseStream(process.port, CLIENT_TOKEN) for _ in range(3)]
    for stream in streams:
        assert stream.next().event == "unleash-connected"
    wait_for_series(process, (3, 3))
    api.create_feature(unique("counted"))
    for stream in streams:
        assert stream.next().event == "unleash-updated"
    wait_for_series(process, (3, 6))
    for stream in streams:
        stream.close()
    wait_for_series(process, (0, 6))


def test_a_stream_ends_once_its_token_is_revoked(start: Callable[..., EdgeProcess], api: Api) -> None:
    process = start("--token-revalidation-interval-seconds", "1", tokens=(CLIENT_TOKEN,))
    answer = api.post(
        "/api/admin/api-tokens",
        {"tokenName": unique("revoked"), "type": "client", "environment": "development"},
    )
    assert answer.status == 201, answer.body
    secret = answer.json()["secret"]
    stream = SseStream(process.port, secret)
    assert stream.next().event == "unleash-connected"
    assert api.delete(f"/api/admin/api-tokens/{secret}").status in (200, 204)
    deadline = time.monotonic() + WAIT
    while delta(process, secret)[0] == 200:
        assert time.monotonic() < deadline, "the revoked token still reads the delta API"
        time.sleep(0.2)
    api.create_feature(unique("unseen"))
    with pytest.raises(StreamEnded):  # ended, the change never sent
        stream.next()
    stream.close()


def test_a_stream_reads_its_token_from_the_edge_auth_header(
    start: Callable[..., EdgeProcess], api: Api
) -> None:
    # --edge-auth-header (EDGE_AUTH_HEADER) carries the token, also when the stream checks it still holds.
    process = start(tokens=(CLIENT_TOKEN,), EDGE_AUTH_HEADER="X-Edge-Token")
    stream = SseStream(process.port, "", X_Edge_Token=CLIENT_TOKEN)
    assert stream.status == 200
    assert stream.next().event == "unleash-connected"
    name = unique("header-streamed")
    api.create_feature(name)
    updated = stream.next()
    assert updated.event == "unleash-updated" and kinds(updated.json()["events"]) == [
        ("feature-updated", name)
    ]
    stream.close()


def test_a_flag_moved_to_another_project_leaves_its_old_projects_readers(counting: CountingUpstream) -> None:
    """The upstream's document moves a flag to another project: it is updated for a token of every
    project and removed, with the project it left, for a token of that project."""
    every = counting.add(
        "*:development.delta-every", "client", "development", ["*"],
        features_doc(("moving", "default", True), ("staying", "default", True)),
    )  # fmt: skip
    default = counting.add("default:development.delta-default", "client", "development", ["default"])
    process = edge(counting.url, [every])
    try:
        process.wait_ready()
        _, every_etag, body = delta(process, every)
        assert hydrated_names(body) == {"moving", "staying"}
        _, default_etag, body = delta(process, default)
        assert hydrated_names(body) == {"moving", "staying"}
        counting.documents[every] = features_doc(("moving", "other", True), ("staying", "default", True))
        _, events = next_delta(process, every_etag, every)
        assert kinds(events) == [("feature-updated", "moving")] and events[0]["feature"]["project"] == "other"
        _, events = next_delta(process, default_etag, default)
        removed = {"eventId": events[0]["eventId"], "type": "feature-removed", "featureName": "moving"}
        assert events == [{**removed, "project": "default"}]
    finally:
        process.stop()
