"""`GET /api/client/delta`: hydration, the events after a kept revision, 304, the kept window, scoping by
token and filters, and every kind of change appearing once, in order (on SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.server.harness import (
    CLIENT_TOKEN,
    PROD_CLIENT_TOKEN,
    Api,
    Response,
    ServerProcess,
    base_env,
    unique,
)


def delta(api: Api, since: str | None = None, query: str = "", token: str = CLIENT_TOKEN) -> Response:
    headers = {"If-None-Match": since} if since is not None else {}
    return api.get(f"/api/client/delta{query}", token=token, headers=headers)


def events(answer: Response) -> list[dict[str, Any]]:
    assert answer.status == 200, (answer.status, answer.body)
    found = answer.json()["events"]
    assert answer.headers["etag"] == f'"{found[-1]["eventId"]}"'
    return found


def kinds(found: list[dict[str, Any]]) -> list[tuple[str, str | int]]:
    """(type, feature name or segment id) of each event."""
    named = []
    for event in found:
        kind = event["type"]
        if kind == "feature-updated":
            named.append((kind, event["feature"]["name"]))
        elif kind == "feature-removed":
            named.append((kind, event["featureName"]))
        elif kind == "segment-updated":
            named.append((kind, event["segment"]["id"]))
        elif kind == "segment-removed":
            named.append((kind, event["segmentId"]))
        else:
            named.append((kind, ""))
    return named


def test_hydration_then_events_then_304(api: Api) -> None:
    prefix = unique("delta")
    first = f"{prefix}-a"
    api.create_feature(first)
    hydrated = events(delta(api, query=f"?namePrefix={prefix}"))
    assert len(hydrated) == 1 and hydrated[0]["type"] == "hydration"
    assert [f["name"] for f in hydrated[0]["features"]] == [first]
    client_view = api.client_features(query=f"?namePrefix={prefix}", spec="5.2.0")
    assert hydrated[0]["features"] == client_view["features"]
    etag = f'"{hydrated[0]["eventId"]}"'

    unchanged = delta(api, etag, f"?namePrefix={prefix}")
    assert (unchanged.status, unchanged.body) == (304, b"")

    second = f"{prefix}-b"
    api.create_feature(second)
    api.switch(second, True)
    api.switch(first, True)
    found = events(delta(api, etag, f"?namePrefix={prefix}"))
    assert kinds(found) == [
        ("feature-updated", second),
        ("feature-updated", second),
        ("feature-updated", first),
    ]
    ids = [event["eventId"] for event in found]
    assert ids == sorted(ids) and len(set(ids)) == 3
    # Each event carries the feature as /api/client/features serves it to this token now (the last one).
    served = {
        f["name"]: f for f in api.client_features(query=f"?namePrefix={prefix}", spec="5.2.0")["features"]
    }
    assert found[1]["feature"] == served[second] and found[2]["feature"] == served[first]
    assert found[0]["feature"]["enabled"] is False

    latest = f'"{found[-1]["eventId"]}"'
    assert delta(api, latest, f"?namePrefix={prefix}").status == 304
    # From the middle: only what came after.
    middle = f'"{found[0]["eventId"]}"'
    assert kinds(events(delta(api, middle, f"?namePrefix={prefix}"))) == kinds(found[1:])
    # The ETag forms Unleash and Edge send are all read.
    for form in (str(found[0]["eventId"]), f'W/"{found[0]["eventId"]}"'):
        assert kinds(events(delta(api, form, f"?namePrefix={prefix}"))) == kinds(found[1:])


def test_no_op_writes_produce_no_event(api: Api) -> None:
    name = unique("noop")
    api.create_feature(name)
    api.switch(name, True)
    etag = delta(api, query=f"?namePrefix={name}").headers["etag"]
    api.switch(name, True)  # already on
    api.put(f"/api/admin/projects/default/features/{name}", {"description": None})
    assert delta(api, etag, f"?namePrefix={name}").status == 304


def test_unknown_or_future_revisions_hydrate(api: Api) -> None:
    name = unique("future")
    api.create_feature(name)
    for since in ('"999999999999"', '"not-a-number"', '""', "*"):
        found = events(delta(api, since, f"?namePrefix={name}"))
        assert [e["type"] for e in found] == ["hydration"], since
        assert [f["name"] for f in found[0]["features"]] == [name]


def test_every_kind_of_change_is_one_event_in_order(api: Api) -> None:
    prefix = unique("kinds")
    parent, child = f"{prefix}-parent", f"{prefix}-child"
    api.create_feature(parent)
    api.create_feature(child)
    etag = delta(api, query=f"?namePrefix={prefix}").headers["etag"]

    segment = api.create_segment(
        unique("seg"), [{"contextName": "userId", "operator": "IN", "values": ["1"]}]
    )
    api.add_strategy(child, {"name": "default", "segments": [segment["id"]]})
    answer = api.post(f"/api/admin/projects/default/features/{child}/dependencies", {"feature": parent})
    assert answer.status == 200, answer.body
    api.post(f"/api/admin/features/{child}/tags", {"type": "simple", "value": "t1"})  # tag filters only
    renamed = {
        "name": segment["name"],
        "constraints": [{"contextName": "userId", "operator": "IN", "values": ["2"]}],
    }
    assert api.put(f"/api/admin/segments/{segment['id']}", renamed).status == 204
    api.delete(f"/api/admin/projects/default/features/{child}")  # archive
    assert api.delete(f"/api/admin/archive/{child}").status == 200  # gone already: no second removal
    assert api.delete(f"/api/admin/segments/{segment['id']}").status == 200

    found = events(delta(api, etag, f"?namePrefix={prefix}"))
    segment_events = [e for e in found if e["type"].startswith("segment") and _segment_id(e) == segment["id"]]
    feature_events = [e for e in found if e["type"].startswith("feature")]
    assert kinds(feature_events) == [
        ("feature-updated", child),  # the strategy with the segment
        ("feature-updated", child),  # the dependency
        ("feature-removed", child),  # archived
    ]
    assert feature_events[0]["feature"]["strategies"][0]["segments"] == [segment["id"]]
    assert feature_events[1]["feature"]["dependencies"] == [{"feature": parent, "enabled": True}]
    assert feature_events[2] == {
        "eventId": feature_events[2]["eventId"],
        "type": "feature-removed",
        "featureName": child,
        "project": "default",
    }
    assert kinds(segment_events) == [
        ("segment-updated", segment["id"]),
        ("segment-updated", segment["id"]),
        ("segment-removed", segment["id"]),
    ]
    assert segment_events[0]["segment"] == {
        "id": segment["id"],
        "name": segment["name"],
        "constraints": segment["constraints"],
    }
    assert segment_events[1]["segment"]["constraints"][0]["values"] == ["2"]
    ids = [e["eventId"] for e in found]
    assert ids == sorted(ids)
    # The segment's event comes before that of the strategy that uses it.
    assert found.index(segment_events[0]) < found.index(feature_events[0])


def _segment_id(event: dict[str, Any]) -> int:
    return event["segment"]["id"] if event["type"] == "segment-updated" else event["segmentId"]


def test_scoped_by_environment_project_prefix_and_tag(api: Api) -> None:
    project = unique("proj")
    assert api.post("/api/admin/projects", {"id": project, "name": "P"}).status == 201
    token = api.post(
        "/api/admin/api-tokens", {"tokenName": unique("t"), "type": "client", "projects": [project]}
    ).json()["secret"]
    prefix = unique("scope")
    mine, other = f"{prefix}-mine", f"{prefix}-other"
    q = f"?namePrefix={prefix}"
    start = {
        "project token": delta(api, query=q, token=token).headers["etag"],
        "production": delta(api, query=q, token=PROD_CLIENT_TOKEN).headers["etag"],
        "project query": delta(api, query=f"{q}&project={project}").headers["etag"],
        "tag": delta(api, query=f"{q}&tag=simple:{prefix}").headers["etag"],
    }
    api.create_feature(mine, project=project)
    api.create_feature(other)
    api.switch(other, True)  # development only
    api.post(f"/api/admin/features/{other}/tags", {"type": "simple", "value": prefix})
    api.switch(mine, True, project=project)

    assert kinds(events(delta(api, start["project token"], q, token))) == [
        ("feature-updated", mine),
        ("feature-updated", mine),
    ]
    # The token's projects beat the query's, as for /api/client/features.
    assert kinds(events(delta(api, start["project token"], f"{q}&project=default", token)))[0] == (
        "feature-updated",
        mine,
    )
    assert kinds(events(delta(api, start["project query"], f"{q}&project={project}"))) == [
        ("feature-updated", mine),
        ("feature-updated", mine),
    ]
    # Production saw the two features created, not the development switches.
    assert kinds(events(delta(api, start["production"], q, PROD_CLIENT_TOKEN))) == [
        ("feature-updated", mine),
        ("feature-updated", other),
    ]
    # Tagging brought `other` into the tag filter's scope; untagging takes it out again.
    tag_start = start["tag"]
    tagged = events(delta(api, tag_start, f"{q}&tag=simple:{prefix}"))
    assert kinds(tagged) == [("feature-updated", other)] and tagged[0]["feature"]["enabled"] is True
    assert api.delete(f"/api/admin/features/{other}/tags/simple/{prefix}").status == 200
    untagged = events(delta(api, f'"{tagged[-1]["eventId"]}"', f"{q}&tag=simple:{prefix}"))
    assert untagged == [
        {
            "eventId": untagged[0]["eventId"],
            "type": "feature-removed",
            "featureName": other,
            "project": "default",
        }
    ]


def test_window_exceeded_hydrates_and_delta_can_be_turned_off(
    backend: str, backend_env: Callable[[str], dict[str, str]], tmp_path: Path
) -> None:
    server = ServerProcess(
        base_env(DELTA_KEPT_EVENTS="3", **backend_env(backend)), log_path=str(tmp_path / "s.log")
    )
    server.start()
    try:
        api = server.api()
        api.create_feature("window-a")
        since = delta(api).headers["etag"]
        api.create_feature("window-b")  # two events (development, production)
        assert kinds(events(delta(api, since))) == [("feature-updated", "window-b")]
        api.switch("window-b", True)  # the third event: all still kept
        assert len(events(delta(api, since))) == 2
        api.switch("window-a", True)  # four events: the oldest revision goes, `since` is out of the window
        found = events(delta(api, since))
        assert [e["type"] for e in found] == ["hydration"]
        assert {f["name"]: f["enabled"] for f in found[0]["features"]} == {"window-a": True, "window-b": True}
    finally:
        assert server.stop() == 0

    off = ServerProcess(
        base_env(**backend_env(backend)), args=["--no-delta-api"], log_path=str(tmp_path / "o.log")
    )
    off.start()
    try:
        assert off.api().get("/api/client/delta", token=CLIENT_TOKEN).status == 404
        assert off.api().get("/api/client/streaming", token=CLIENT_TOKEN).status == 404
        assert off.api().get("/api/client/features", token=CLIENT_TOKEN).status == 200
    finally:
        assert off.stop() == 0


def test_client_tokens_only(server: ServerProcess) -> None:
    assert server.api(None).get("/api/client/delta").status == 401
    assert server.api().get("/api/client/delta").status == 403  # an admin token


def test_a_deleted_parent_updates_its_children(api: Api) -> None:
    # The dependency row goes by the database's cascade, not by a route that names the child: the delta
    # log still sees the child change (its triggers list every feature a write touched). The parent's
    # deletion touches no feature still served but the child; served segments stay as they were.
    prefix = unique("cascade")
    parent, child, user = f"{prefix}-parent", f"{prefix}-child", f"{prefix}-user"
    api.create_feature(parent)
    api.create_feature(child)
    # A segment some other feature uses stays served throughout: no segment event may appear.
    segment = api.create_segment(
        unique("kept"), [{"contextName": "userId", "operator": "IN", "values": ["1"]}]
    )
    api.create_feature(user)
    api.add_strategy(user, {"name": "default", "segments": [segment["id"]]})
    answer = api.post(f"/api/admin/projects/default/features/{child}/dependencies", {"feature": parent})
    assert answer.status == 200, answer.body
    etag = delta(api, query=f"?namePrefix={prefix}").headers["etag"]
    api.delete(f"/api/admin/projects/default/features/{parent}")
    assert api.delete(f"/api/admin/archive/{parent}").status == 200
    found = events(delta(api, etag, f"?namePrefix={prefix}"))
    assert kinds(found) == [("feature-removed", parent), ("feature-updated", child)]
    assert "dependencies" not in found[1]["feature"]
    assert (
        found[1]["feature"] == api.client_features(query=f"?namePrefix={child}", spec="5.2.0")["features"][0]
    )
