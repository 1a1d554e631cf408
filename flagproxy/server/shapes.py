"""The admin API's JSON shapes (SPEC.md's Feature, Feature environment, Strategy, Segment...) built from
stored rows. Pure functions: rows in, dicts out."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from flagproxy.server.storage.catalog import LIFECYCLE_ORDER, Catalog
from flagproxy.server.storage.database import Row


def strategy_json(strategy: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": strategy["id"],
        "name": strategy["name"],
        "title": strategy["title"],
        "disabled": strategy["disabled"],
        "featureName": strategy["feature_name"],
        "sortOrder": strategy["sort_order"],
        "segments": strategy["segments"],
        "constraints": strategy["constraints"],
        "variants": strategy["variants"],
        "parameters": strategy["parameters"],
    }


def feature_environment_json(catalog: Catalog, feature: Row, environment: Row) -> dict[str, Any]:
    name, env = feature["name"], environment["name"]
    state = catalog.feature_environments.get((name, env))
    strategies = catalog.strategies.get((name, env), [])
    variants = state["variants"] if state else []
    return {
        "name": env,
        "featureName": name,
        "environment": env,
        "type": environment["type"],
        "enabled": bool(state and state["enabled"]),
        "sortOrder": environment["sort_order"],
        "variantCount": len(variants),
        "strategies": [strategy_json(s) for s in strategies],
        "variants": variants,
        "lastSeenAt": state["last_seen_at"] if state else None,
        "hasStrategies": bool(strategies),
        "hasEnabledStrategies": any(not s["disabled"] for s in strategies),
    }


def lifecycle_json(catalog: Catalog, feature: Row) -> dict[str, str]:
    """The latest stage reached (stages only move forward; archiving is undone by reviving)."""
    reached = catalog.lifecycle.get(feature["name"], {})
    for stage in reversed(LIFECYCLE_ORDER):
        if stage in reached and (stage != "archived" or feature["archived"]):
            return {"stage": stage, "enteredStageAt": reached[stage]}
    return {"stage": "initial", "enteredStageAt": feature["created_at"]}


def feature_json(catalog: Catalog, feature: Row) -> dict[str, Any]:
    """One item of `GET /api/admin/projects/:projectId/features`, with every field of SPEC.md's Feature."""
    name = feature["name"]
    environments = [feature_environment_json(catalog, feature, env) for env in catalog.environments]
    seen = [env["lastSeenAt"] for env in environments if env["lastSeenAt"]]
    # The deprecated feature-level strategies/variants: those of the first environment that has any,
    # which is what Unleash 4 clients read before environments existed.
    legacy = next((env for env in environments if env["strategies"] or env["variants"]), None)
    return {
        "name": name,
        "type": feature["type"],
        "description": feature["description"],
        "archived": bool(feature["archived"]),
        "project": feature["project"],
        "enabled": any(env["enabled"] for env in environments),
        "stale": bool(feature["stale"]),
        "favorite": False,
        "impressionData": bool(feature["impression_data"]),
        "createdAt": feature["created_at"],
        "archivedAt": feature["archived_at"],
        "lastSeenAt": max(seen) if seen else None,
        "environments": environments,
        "variants": legacy["variants"] if legacy else [],
        "strategies": legacy["strategies"] if legacy else [],
        "tags": catalog.tags.get(name) or None,
        "children": catalog.children.get(name, []),
        "lifecycle": lifecycle_json(catalog, feature),
        "dependencies": catalog.parents.get(name, []),
    }


def feature_created_json(feature: Row) -> dict[str, Any]:
    """What creating or updating a feature answers (Unleash's featureSchema, short form)."""
    return {
        "name": feature["name"],
        "description": feature["description"],
        "type": feature["type"],
        "project": feature["project"],
        "stale": bool(feature["stale"]),
        "createdAt": feature["created_at"],
        "impressionData": bool(feature["impression_data"]),
        "archived": bool(feature["archived"]),
        "archivedAt": feature["archived_at"],
    }


def segment_json(segment: dict[str, Any], used_by: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    shape: dict[str, Any] = {
        "id": int(segment["id"]),
        "name": segment["name"],
        "description": segment["description"],
        "constraints": segment["constraints"],
        "createdBy": segment["created_by"],
        "createdAt": segment["created_at"],
        "project": segment["project"],
    }
    if used_by is not None:
        shape["usedInFeatures"] = len({feature for feature, _ in used_by})
        shape["usedInProjects"] = len({project for _, project in used_by})
    return shape


def environment_json(environment: Row) -> dict[str, Any]:
    return {
        "name": environment["name"],
        "type": environment["type"],
        "sortOrder": environment["sort_order"],
        "enabled": bool(environment["enabled"]),
        "protected": bool(environment["protected"]),
        "requiredApprovals": None,
    }


def project_json(project: Row) -> dict[str, Any]:
    shape = {
        "id": project["id"],
        "name": project["name"],
        "description": project["description"],
        "createdAt": project["created_at"],
    }
    if "feature_count" in project:
        shape["featureCount"] = int(project["feature_count"])
    return shape


def project_feature_list(
    catalog: Catalog, project_id: str, name_matches: Callable[[str], bool], tags: Iterable[tuple[str, str]]
) -> list[dict[str, Any]]:
    """A project's features (not archived) whose name matches and that carry any of `tags` (all when no
    tags are given): the admin API's feature list and the console's flag table."""
    wanted = set(tags)
    listed = []
    for feature in catalog.features:
        if feature["project"] != project_id or feature["archived"] or not name_matches(feature["name"]):
            continue
        item = feature_json(catalog, feature)
        if wanted and not {(t["type"], t["value"]) for t in item["tags"] or []} & wanted:
            continue
        listed.append(item)
    return listed
