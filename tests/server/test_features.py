"""Authoring features: create, update, archive, tags, environments, strategies, variants, dependencies,
and SPEC.md's feature listing with every field of its Feature, Feature environment, Strategy,
Constraint and Variant tables, each of the type the table gives."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from tests.server.harness import CLIENT_TOKEN, Api, assert_error, unique

# SPEC.md's tables, field -> what its values may be.
Check = Callable[[Any], bool]


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _boolean(value: Any) -> bool:
    return isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _date_time(value: Any) -> bool:
    return isinstance(value, str) and datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None


def _nullable(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _list_of(check: Check) -> Check:
    return lambda value: isinstance(value, list) and all(check(item) for item in value)


def _one_of(*choices: str) -> Check:
    return lambda value: value in choices


def _uuid(value: Any) -> bool:
    return isinstance(value, str) and str(uuid.UUID(value)) == value


def _object(table: dict[str, Check], optional: frozenset[str] = frozenset()) -> Check:
    def check(value: Any) -> bool:
        assert isinstance(value, dict), value
        assert set(table) - optional <= set(value) <= set(table), (sorted(value), sorted(table))
        for field, field_check in table.items():
            if field in value:
                assert field_check(value[field]), (field, value[field])
        return True

    return check


OPERATORS = (
    "NOT_IN", "IN", "STR_ENDS_WITH", "STR_STARTS_WITH", "STR_CONTAINS", "NUM_EQ", "NUM_GT", "NUM_GTE",
    "NUM_LT", "NUM_LTE", "DATE_AFTER", "DATE_BEFORE", "SEMVER_EQ", "SEMVER_GT", "SEMVER_LT",
)  # fmt: skip
CONSTRAINT = {
    "contextName": _string,
    "operator": _one_of(*OPERATORS, "SEMVER_GTE", "SEMVER_LTE", "REGEX", "IN_CIDR"),  # decision E1
    "caseInsensitive": _boolean,
    "inverted": _boolean,
    "values": _list_of(_string),
    "value": _string,  # single-value operators only
}
PAYLOAD = _object({"type": _one_of("json", "csv", "string", "number"), "value": _string})
OVERRIDE = _object({"contextName": _string, "values": _list_of(_string)})
STRATEGY_VARIANT = {
    "name": _string,
    "weight": lambda w: isinstance(w, int) and 0 <= w <= 1000,
    "weightType": _one_of("variable", "fix"),
    "stickiness": _string,
    "payload": PAYLOAD,
}
VARIANT = {**STRATEGY_VARIANT, "overrides": _list_of(OVERRIDE)}  # feature-environment variants
STRATEGY = {
    "id": _uuid,
    "name": _string,
    "title": _nullable(_string),
    "disabled": _nullable(_boolean),
    "featureName": _string,
    "sortOrder": _number,
    "segments": _list_of(_number),
    "constraints": _list_of(_object(CONSTRAINT, frozenset({"value"}))),
    "variants": _list_of(_object(STRATEGY_VARIANT, frozenset({"payload"}))),
    "parameters": lambda value: isinstance(value, dict) and all(map(_string, [*value, *value.values()])),
}
FEATURE_ENVIRONMENT = {
    "name": _string,
    "featureName": _string,
    "environment": _string,
    "type": _string,
    "enabled": _boolean,
    "sortOrder": _number,
    "variantCount": _number,
    "strategies": _list_of(_object(STRATEGY)),
    "variants": _list_of(_object(VARIANT, frozenset({"payload"}))),
    "lastSeenAt": _nullable(_date_time),
    "hasStrategies": _boolean,
    "hasEnabledStrategies": _boolean,
}
TAG_TEXT = lambda text: isinstance(text, str) and 2 <= len(text) <= 50  # noqa: E731
FEATURE = {
    "name": _string,
    "type": _string,
    "description": _nullable(_string),
    "archived": _boolean,
    "project": _string,
    "enabled": _boolean,
    "stale": _boolean,
    "favorite": _boolean,
    "impressionData": _boolean,
    "createdAt": _nullable(_date_time),
    "archivedAt": _nullable(_date_time),
    "lastSeenAt": _nullable(_date_time),
    "environments": _list_of(_object(FEATURE_ENVIRONMENT)),
    "variants": _list_of(_object(VARIANT, frozenset({"payload"}))),
    "strategies": _list_of(_object(STRATEGY)),
    "tags": _nullable(_list_of(_object({"value": TAG_TEXT, "type": TAG_TEXT}))),
    "children": _list_of(_string),
    "lifecycle": _object(
        {
            "stage": _one_of("initial", "pre-live", "live", "completed", "archived"),
            "enteredStageAt": _date_time,
        }
    ),
    "dependencies": _list_of(
        _object(
            {"feature": _string, "enabled": _boolean, "variants": _list_of(_string)}, frozenset({"variants"})
        )
    ),
}
check_feature = _object(FEATURE)


def test_create_feature(api: Api) -> None:
    name = unique("checkout")
    answer = api.post(
        "/api/admin/projects/default/features",
        {"name": name, "type": "experiment", "description": "new checkout", "impressionData": True},
    )
    assert answer.status == 201
    created = answer.json()
    assert created["name"] == name and created["type"] == "experiment" and created["project"] == "default"
    assert created["impressionData"] is True and created["stale"] is False and created["archived"] is False
    assert created["createdAt"].endswith("Z")


def test_create_feature_errors(api: Api) -> None:
    name = unique("dup")
    api.create_feature(name)
    duplicate = api.post("/api/admin/projects/default/features", {"name": name})
    assert_error(duplicate, 409, "NameExistsError")
    bad_name = api.post("/api/admin/projects/default/features", {"name": "has space"})
    assert_error(bad_name, 400, "ValidationError", "name")
    bad_type = api.post("/api/admin/projects/default/features", {"name": unique("x"), "type": "nope"})
    assert_error(bad_type, 400, "ValidationError", "type")
    no_project = api.post("/api/admin/projects/nope/features", {"name": unique("x")})
    assert_error(no_project, 404, "NotFoundError")
    text = api.post(
        "/api/admin/projects/default/features",
        body=b"name=x",
        headers={"Content-Type": "text/plain"},
    )
    assert_error(text, 415, "ContentTypeerror")


def test_listing_has_every_spec_field(api: Api) -> None:
    name, parent = unique("full"), unique("parent")
    segment = api.create_segment(
        unique("seg"), [{"contextName": "userId", "operator": "IN", "values": ["1"]}]
    )
    api.create_feature(parent)
    api.create_feature(name, description="everything", tags=[{"type": "simple", "value": "payments"}])
    strategy = api.add_strategy(
        name,
        {
            "name": "flexibleRollout",
            "title": "half",
            "parameters": {"rollout": 50, "stickiness": "userId"},
            "constraints": [
                {"contextName": "appName", "operator": "IN", "values": ["web"]},
                {"contextName": "version", "operator": "SEMVER_GT", "value": "1.2.3", "inverted": True},
            ],
            "segments": [segment["id"]],
            "variants": [
                {"name": "blue", "weightType": "variable", "stickiness": "default"},
                {"name": "red", "weight": 300, "weightType": "fix", "stickiness": "default",
                 "payload": {"type": "json", "value": "{\"a\": 1}"}},
            ],
        },
    )  # fmt: skip
    assert strategy["parameters"] == {"rollout": "50", "stickiness": "userId", "groupId": name}
    assert [v["weight"] for v in strategy["variants"]] == [700, 300]
    api.add_strategy(name, {"name": "default", "disabled": True}, "production")
    variants = api.put(
        f"/api/admin/projects/default/features/{name}/environments/development/variants",
        [
            {"name": "a", "weightType": "variable", "stickiness": "default",
             "overrides": [{"contextName": "userId", "values": ["7"]}]},
            {"name": "b", "weightType": "variable", "stickiness": "default",
             "payload": {"type": "number", "value": "7"}},
            {"name": "c", "weightType": "variable", "stickiness": "default"},
        ],
    )  # fmt: skip
    assert variants.status == 200
    assert [v["weight"] for v in variants.json()["variants"]] == [334, 333, 333]
    dependency = {"feature": parent, "enabled": True, "variants": ["blue"]}
    assert api.post(f"/api/admin/projects/default/features/{name}/dependencies", dependency).status == 200
    api.switch(name, True)
    metrics = {"appName": "listing", "bucket": {"toggles": {name: {"yes": 1}}}}
    assert api.post("/api/client/metrics", metrics, token=CLIENT_TOKEN).status == 202

    feature = api.listed_feature(name)
    assert check_feature(feature)
    assert feature["enabled"] is True and feature["archived"] is False and feature["favorite"] is False
    assert feature["description"] == "everything" and feature["archivedAt"] is None
    assert feature["tags"] == [{"value": "payments", "type": "simple"}]
    assert feature["lifecycle"]["stage"] == "pre-live"
    assert feature["children"] == [] and feature["dependencies"] == [dependency]
    assert api.listed_feature(parent)["children"] == [name]
    development, production = feature["environments"][:2]
    assert development["name"] == development["environment"] == "development"
    assert development["featureName"] == name and development["type"] == "development"
    assert development["enabled"] is True and production["enabled"] is False
    assert development["variantCount"] == 3 and development["hasEnabledStrategies"] is True
    assert development["lastSeenAt"] == feature["lastSeenAt"] is not None
    assert production["hasStrategies"] is True and production["hasEnabledStrategies"] is False
    assert production["lastSeenAt"] is None
    listed_strategy = development["strategies"][0]
    assert listed_strategy["segments"] == [segment["id"]] and listed_strategy["title"] == "half"
    assert listed_strategy["disabled"] is False and listed_strategy["featureName"] == name
    assert set(listed_strategy["constraints"][1]) == set(CONSTRAINT)
    assert listed_strategy["constraints"][1]["inverted"] is True
    assert set(development["variants"][1]) == set(VARIANT)
    assert set(listed_strategy["variants"][1]) == set(STRATEGY_VARIANT)
    # The deprecated feature-level lists are those of the first environment that has any.
    assert feature["strategies"] == development["strategies"]
    assert feature["variants"] == development["variants"]
    # Every item of the list, and a single feature read on its own, has the same shape.
    listing = api.get("/api/admin/projects/default/features")
    assert listing.status == 200 and set(listing.json()) == {"version", "features"}
    assert isinstance(listing.json()["version"], int)
    assert all(check_feature(item) for item in listing.json()["features"])
    assert api.get(f"/api/admin/projects/default/features/{name}").json() == feature


def test_listing_filters_and_unknown_project(api: Api) -> None:
    prefix = unique("pre")
    api.create_feature(f"{prefix}-one", tags=[{"type": "simple", "value": "team-a"}])
    api.create_feature(f"{prefix}-two")
    listed = api.get(f"/api/admin/projects/default/features?namePrefix={prefix.upper()}").json()
    assert [f["name"] for f in listed["features"]] == [f"{prefix}-one", f"{prefix}-two"]
    assert listed["version"] == 2
    tagged = api.get(f"/api/admin/projects/default/features?namePrefix={prefix}&tag=simple:team-a").json()
    assert [f["name"] for f in tagged["features"]] == [f"{prefix}-one"]
    bad = api.get("/api/admin/projects/default/features?tag=nocolon")
    assert bad.status == 400 and '"tag[0]"' in bad.json()["message"]
    assert api.get("/api/admin/projects/nope/features").json() == {"version": 2, "features": []}


def test_update_and_archive(api: Api) -> None:
    name = unique("upd")
    api.create_feature(name)
    updated = api.put(
        f"/api/admin/projects/default/features/{name}",
        {"description": "changed", "stale": True, "type": "kill-switch"},
    )
    assert updated.status == 200
    assert updated.json()["description"] == "changed" and updated.json()["stale"] is True
    assert api.listed_feature(name)["type"] == "kill-switch"
    assert api.delete(f"/api/admin/projects/default/features/{name}").status == 202
    listed = api.get(f"/api/admin/projects/default/features?namePrefix={name}").json()["features"]
    assert listed == []
    archived = api.get("/api/admin/archive/features").json()["features"]
    entry = next(f for f in archived if f["name"] == name)
    assert entry["archived"] is True and entry["archivedAt"] and entry["lifecycle"]["stage"] == "archived"
    assert api.get(f"/api/admin/projects/default/features/{name}").json()["archived"] is True
    assert api.post(f"/api/admin/archive/revive/{name}").status == 200
    assert api.listed_feature(name)["lifecycle"]["stage"] == "initial"
    gone = api.put(f"/api/admin/projects/default/features/{unique('nope')}", {"description": "x"})
    assert_error(gone, 404, "NotFoundError")
    renamed = api.put(f"/api/admin/projects/default/features/{name}", {"name": unique("other")})
    assert_error(renamed, 400, "ValidationError", "name")
    assert api.delete(f"/api/admin/projects/default/features/{name}").status == 202
    assert api.delete(f"/api/admin/archive/{name}").status == 200
    assert_error(api.get(f"/api/admin/projects/default/features/{name}"), 404, "NotFoundError")
    assert_error(api.post(f"/api/admin/archive/revive/{name}"), 404, "NotFoundError")


def test_tags(api: Api) -> None:
    name = unique("tagged")
    api.create_feature(name)
    assert api.post(f"/api/admin/features/{name}/tags", {"type": "simple", "value": "ab"}).status == 201
    assert api.get(f"/api/admin/features/{name}/tags").json()["tags"] == [{"value": "ab", "type": "simple"}]
    short = api.post(f"/api/admin/features/{name}/tags", {"type": "simple", "value": "a"})
    assert_error(short, 400, "ValidationError", "value")
    long_type = api.post(f"/api/admin/features/{name}/tags", {"type": "t" * 51, "value": "ab"})
    assert_error(long_type, 400, "ValidationError", "type")
    assert api.delete(f"/api/admin/features/{name}/tags/simple/ab").status == 200
    assert api.listed_feature(name)["tags"] is None
    # Tag types and values may hold spaces and slashes; the path carries them percent-encoded.
    assert (
        api.post(f"/api/admin/features/{name}/tags", {"type": "team / area", "value": "a b%"}).status == 201
    )
    assert api.listed_feature(name)["tags"] == [{"value": "a b%", "type": "team / area"}]
    assert api.delete(f"/api/admin/features/{name}/tags/team%20%2F%20area/a%20b%25").status == 200
    assert api.listed_feature(name)["tags"] is None
    assert_error(api.get(f"/api/admin/features/{unique('nope')}/tags"), 404, "NotFoundError")


def test_turning_on_without_strategies_adds_a_full_rollout(api: Api) -> None:
    name = unique("bare")
    api.create_feature(name)
    api.switch(name, True, "production")
    production = api.listed_feature(name)["environments"][1]
    assert production["enabled"] is True
    assert production["strategies"][0]["name"] == "flexibleRollout"
    assert production["strategies"][0]["parameters"]["rollout"] == "100"
    missing = api.post(f"/api/admin/projects/default/features/{name}/environments/nope/on")
    assert_error(missing, 404, "NotFoundError")


def test_strategy_crud_and_validation(api: Api) -> None:
    name = unique("strat")
    api.create_feature(name)
    base = f"/api/admin/projects/default/features/{name}/environments/development/strategies"
    first = api.add_strategy(name, {"name": "default"})
    second = api.add_strategy(name, {"name": "userWithId", "parameters": {"userIds": "1,2"}})
    assert (first["sortOrder"], second["sortOrder"]) == (0, 1)
    assert [s["id"] for s in api.get(base).json()] == [first["id"], second["id"]]
    replaced = api.put(f"{base}/{second['id']}", {"name": "default", "disabled": True})
    assert replaced.status == 200 and replaced.json()["disabled"] is True
    assert api.get(f"{base}/{second['id']}").json()["name"] == "default"
    assert api.delete(f"{base}/{first['id']}").status == 200
    assert api.get(f"{base}/{first['id']}").status == 404
    cases = [
        ({"name": "nope"}, "name"),
        ({"name": "default", "constraints": [{"contextName": "x", "operator": "LIKE"}]},
         "constraints[0].operator"),
        ({"name": "default", "constraints": [{"contextName": "x", "operator": "NUM_GT"}]},
         "constraints[0].value"),
        ({"name": "default", "constraints": [{"contextName": "x", "operator": "NUM_GT", "value": "old"}]},
         "constraints[0].value"),
        ({"name": "default", "constraints": [{"contextName": "x", "operator": "DATE_AFTER", "value": "x"}]},
         "constraints[0].value"),
        ({"name": "default", "constraints": [{"contextName": "x", "operator": "SEMVER_EQ", "value": "1.2"}]},
         "constraints[0].value"),
        ({"name": "default", "constraints": [{"contextName": "x", "operator": "REGEX", "value": "(a"}]},
         "constraints[0].value"),
        ({"name": "default", "constraints": [{"contextName": "x", "operator": "IN_CIDR",
                                              "values": ["10.0.0.0/8", "banana"]}]},
         "constraints[0].values[1]"),
        ({"name": "default", "segments": [99999999]}, "segments[0]"),
        ({"name": "default", "variants": [{"name": "a", "weight": 1001}]}, "variants[0].weight"),
        ({"name": "default", "variants": [{"name": "a"}, {"name": "a"}]}, "variants[1].name"),
        ({"name": "default", "variants": [{"name": "a", "payload": {"type": "json", "value": "{"}}]},
         "variants[0].payload.value"),
        ({"name": "default", "variants": [{"name": "a", "weight": 600, "weightType": "fix"},
                                          {"name": "b", "weight": 600, "weightType": "fix"}]}, "variants"),
        ({"name": "default", "parameters": {"x": [1]}}, "parameters.x"),
    ]  # fmt: skip
    for body, field in cases:
        assert_error(api.post(base, body), 400, "ValidationError", field, context=body)
    assert [s["id"] for s in api.get(base).json()] == [second["id"]]  # none of them was added


def test_dependencies(api: Api) -> None:
    parent, child = unique("parent"), unique("child")
    api.create_feature(parent)
    api.create_feature(child)
    added = api.post(
        f"/api/admin/projects/default/features/{child}/dependencies",
        {"feature": parent, "enabled": True, "variants": ["blue"]},
    )
    assert added.status == 200
    assert api.listed_feature(child)["dependencies"] == [
        {"feature": parent, "enabled": True, "variants": ["blue"]}
    ]
    assert api.listed_feature(parent)["children"] == [child]
    self_dependency = api.post(
        f"/api/admin/projects/default/features/{parent}/dependencies", {"feature": child}
    )
    assert_error(self_dependency, 400, "ValidationError", "feature")
    assert api.delete(f"/api/admin/projects/default/features/{child}/dependencies/{parent}").status == 200
    assert api.listed_feature(child)["dependencies"] == []
