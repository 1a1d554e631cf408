"""Authoring features: create, update, archive, tags, environments, strategies, variants, dependencies,
and SPEC.md's feature listing with every field of its Feature, Feature environment, Strategy,
Constraint and Variant tables."""

from __future__ import annotations

from tests.server.harness import Api, unique

FEATURE_FIELDS = {
    "name", "type", "description", "archived", "project", "enabled", "stale", "favorite", "impressionData",
    "createdAt", "archivedAt", "lastSeenAt", "environments", "variants", "strategies", "tags", "children",
    "lifecycle", "dependencies",
}  # fmt: skip
ENVIRONMENT_FIELDS = {
    "name", "featureName", "environment", "type", "enabled", "sortOrder", "variantCount", "strategies",
    "variants", "lastSeenAt", "hasStrategies", "hasEnabledStrategies",
}  # fmt: skip
STRATEGY_FIELDS = {
    "id", "name", "title", "disabled", "featureName", "sortOrder", "segments", "constraints", "variants",
    "parameters",
}  # fmt: skip
CONSTRAINT_FIELDS = {"contextName", "operator", "caseInsensitive", "inverted", "values", "value"}
VARIANT_FIELDS = {"name", "weight", "weightType", "stickiness", "payload", "overrides"}


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
    assert (duplicate.status, duplicate.json()["name"]) == (409, "NameExistsError")
    bad_name = api.post("/api/admin/projects/default/features", {"name": "has space"})
    assert (bad_name.status, bad_name.json()["name"]) == (400, "ValidationError")
    assert '"name"' in bad_name.json()["message"]
    bad_type = api.post("/api/admin/projects/default/features", {"name": unique("x"), "type": "nope"})
    assert bad_type.status == 400 and '"type"' in bad_type.json()["message"]
    no_project = api.post("/api/admin/projects/nope/features", {"name": unique("x")})
    assert (no_project.status, no_project.json()["name"]) == (404, "NotFoundError")
    text = api.post(
        "/api/admin/projects/default/features",
        body=b"name=x",
        headers={"Content-Type": "text/plain"},
    )
    assert (text.status, text.json()["name"]) == (415, "ContentTypeerror")


def test_listing_has_every_spec_field(api: Api) -> None:
    name = unique("full")
    segment = api.create_segment(
        unique("seg"), [{"contextName": "userId", "operator": "IN", "values": ["1"]}]
    )
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
    variants = api.put(
        f"/api/admin/projects/default/features/{name}/environments/development/variants",
        [
            {"name": "a", "weightType": "variable", "stickiness": "default",
             "overrides": [{"contextName": "userId", "values": ["7"]}]},
            {"name": "b", "weightType": "variable", "stickiness": "default"},
            {"name": "c", "weightType": "variable", "stickiness": "default"},
        ],
    )  # fmt: skip
    assert variants.status == 200
    assert [v["weight"] for v in variants.json()["variants"]] == [334, 333, 333]
    api.switch(name, True)

    feature = api.listed_feature(name)
    assert set(feature) == FEATURE_FIELDS
    assert feature["enabled"] is True and feature["archived"] is False and feature["favorite"] is False
    assert feature["tags"] == [{"value": "payments", "type": "simple"}]
    assert feature["lifecycle"]["stage"] == "pre-live" and feature["lifecycle"]["enteredStageAt"]
    assert feature["children"] == [] and feature["dependencies"] == []
    development, production = feature["environments"][:2]
    assert set(development) == ENVIRONMENT_FIELDS
    assert development["name"] == development["environment"] == "development"
    assert development["featureName"] == name and development["type"] == "development"
    assert development["enabled"] is True and production["enabled"] is False
    assert development["variantCount"] == 3 and development["hasEnabledStrategies"] is True
    assert production["hasStrategies"] is False and production["lastSeenAt"] is None
    listed_strategy = development["strategies"][0]
    assert set(listed_strategy) == STRATEGY_FIELDS
    assert listed_strategy["segments"] == [segment["id"]] and listed_strategy["title"] == "half"
    assert listed_strategy["disabled"] is False and listed_strategy["featureName"] == name
    assert set(listed_strategy["constraints"][1]) == CONSTRAINT_FIELDS
    assert listed_strategy["constraints"][1]["inverted"] is True
    assert set(development["variants"][0]) == VARIANT_FIELDS - {"payload"}
    assert set(listed_strategy["variants"][1]) == VARIANT_FIELDS - {"overrides"}


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
    assert (gone.status, gone.json()["name"]) == (404, "NotFoundError")


def test_tags(api: Api) -> None:
    name = unique("tagged")
    api.create_feature(name)
    assert api.post(f"/api/admin/features/{name}/tags", {"type": "simple", "value": "ab"}).status == 201
    assert api.get(f"/api/admin/features/{name}/tags").json()["tags"] == [{"value": "ab", "type": "simple"}]
    short = api.post(f"/api/admin/features/{name}/tags", {"type": "simple", "value": "a"})
    assert short.status == 400 and '"value"' in short.json()["message"]
    assert api.delete(f"/api/admin/features/{name}/tags/simple/ab").status == 200
    assert api.listed_feature(name)["tags"] is None


def test_turning_on_without_strategies_adds_a_full_rollout(api: Api) -> None:
    name = unique("bare")
    api.create_feature(name)
    api.switch(name, True, "production")
    production = api.listed_feature(name)["environments"][1]
    assert production["enabled"] is True
    assert production["strategies"][0]["name"] == "flexibleRollout"
    assert production["strategies"][0]["parameters"]["rollout"] == "100"
    missing = api.post(f"/api/admin/projects/default/features/{name}/environments/nope/on")
    assert missing.status == 404


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
        ({"name": "nope"}, '"name"'),
        ({"name": "default", "constraints": [{"contextName": "x", "operator": "LIKE"}]},
         "constraints[0].operator"),
        ({"name": "default", "constraints": [{"contextName": "x", "operator": "NUM_GT"}]},
         "constraints[0].value"),
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
        answer = api.post(base, body)
        assert (answer.status, answer.json()["name"]) == (400, "ValidationError"), body
        assert field in answer.json()["message"], (body, answer.json())


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
    assert self_dependency.status == 400 and '"feature"' in self_dependency.json()["message"]
    assert api.delete(f"/api/admin/projects/default/features/{child}/dependencies/{parent}").status == 200
    assert api.listed_feature(child)["dependencies"] == []
