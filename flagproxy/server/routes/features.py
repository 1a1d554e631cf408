"""Features: create, read, update, archive (and revive), per-environment on/off and variants,
dependencies on parent features."""

from __future__ import annotations

import uuid
from typing import Any

import orjson
from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server import authoring
from flagproxy.server.errors import NameExists, NotFound, ValidationFailed
from flagproxy.server.routes.common import (
    changing,
    created,
    empty,
    json_response,
    require_feature,
    require_feature_environment,
    require_project,
    transaction,
)
from flagproxy.server.routes.strategies import strategy_row
from flagproxy.server.schemas import (
    CreateFeatureBody,
    DependencyBody,
    StrategyBody,
    UpdateFeatureBody,
    VariantList,
)
from flagproxy.server.shapes import feature_created_json, feature_environment_json, feature_json
from flagproxy.server.storage import catalog as catalog_rows
from flagproxy.server.storage import features as feature_rows
from flagproxy.server.storage import projects as project_rows
from flagproxy.server.storage.database import Row, Tx
from flagproxy.server.validation import json_body

bp = Blueprint("features")
FEATURES = "/api/admin/projects/<project_id>/features"
FEATURE = FEATURES + "/<name>"
FEATURE_ENV = FEATURE + "/environments/<environment>"


def _full_feature(tx: Tx, name: str) -> dict[str, Any]:
    catalog = catalog_rows.load(tx, include_archived=True, feature_name=name)
    return feature_json(catalog, catalog.features[0])


def _require_archived(tx: Tx, name: str) -> Row:
    row = feature_rows.feature(tx, name)
    if row is None or not row["archived"]:
        raise NotFound(f"Could not find archived feature {name}")
    return row


@bp.post(FEATURES)
@openapi.summary("Create a feature")
@openapi.tag("Features")
@json_body(CreateFeatureBody)
async def create_feature(request: Request, project_id: str, body: CreateFeatureBody) -> HTTPResponse:
    with changing(request) as tx:
        require_project(tx, project_id)
        if feature_rows.feature(tx, body.name) is not None:
            raise NameExists("A flag with that name already exists")
        row = feature_rows.insert_feature(
            tx,
            name=body.name,
            project=project_id,
            type=body.type,
            description=body.description,
            impression_data=body.impressionData,
        )
        for tag in body.tags or []:
            feature_rows.add_tag(tx, body.name, tag.type, tag.value)
    return created(feature_created_json(row), f"features/{body.name}")


@bp.get(FEATURE)
@openapi.summary("Read a feature with its environments and strategies")
@openapi.tag("Features")
async def get_feature(request: Request, project_id: str, name: str) -> HTTPResponse:
    with transaction(request) as tx:
        require_feature(tx, project_id, name, archived=True)
        return json_response(_full_feature(tx, name))


@bp.put(FEATURE)
@openapi.summary("Update a feature's type, description, impression data or stale flag")
@openapi.tag("Features")
@json_body(UpdateFeatureBody)
async def update_feature(
    request: Request, project_id: str, name: str, body: UpdateFeatureBody
) -> HTTPResponse:
    if body.name is not None and body.name != name:
        raise ValidationFailed("name", "cannot rename a feature; the body's name must match the path")
    with changing(request) as tx:
        require_feature(tx, project_id, name)
        changes: dict[str, Any] = {}
        given = body.model_fields_set
        if "type" in given and body.type is not None:
            changes["type"] = body.type
        if "description" in given:
            changes["description"] = body.description
        if "impressionData" in given and body.impressionData is not None:
            changes["impression_data"] = int(body.impressionData)
        if "stale" in given and body.stale is not None:
            changes["stale"] = int(body.stale)
        feature_rows.update_feature(tx, name, changes)
        if body.archived:
            feature_rows.archive(tx, name)
        row = feature_rows.feature(tx, name)
    assert row is not None
    return json_response(feature_created_json(row))


@bp.delete(FEATURE)
@openapi.summary("Archive a feature")
@openapi.tag("Features")
async def archive_feature(request: Request, project_id: str, name: str) -> HTTPResponse:
    with changing(request) as tx:
        require_feature(tx, project_id, name)
        feature_rows.archive(tx, name)
    return empty(202)


@bp.get("/api/admin/archive/features")
@openapi.summary("List archived features")
@openapi.tag("Archive")
async def archived_features(request: Request) -> HTTPResponse:
    with transaction(request) as tx:
        catalog = catalog_rows.load(tx, include_archived=True)
    features = [feature_json(catalog, f) for f in catalog.features if f["archived"]]
    return json_response({"version": 2, "features": features})


@bp.post("/api/admin/archive/revive/<name>")
@openapi.summary("Bring an archived feature back")
@openapi.tag("Archive")
async def revive_feature(request: Request, name: str) -> HTTPResponse:
    with changing(request) as tx:
        _require_archived(tx, name)
        feature_rows.revive(tx, name)
    return empty(200)


@bp.delete("/api/admin/archive/<name>")
@openapi.summary("Delete an archived feature for good")
@openapi.tag("Archive")
async def delete_archived(request: Request, name: str) -> HTTPResponse:
    with changing(request) as tx:
        _require_archived(tx, name)
        feature_rows.delete_feature(tx, name)
    return empty(200)


# --- feature environments ---------------------------------------------------------------------------


@bp.get(FEATURE_ENV)
@openapi.summary("Read a feature's state in one environment")
@openapi.tag("Features")
async def get_feature_environment(
    request: Request, project_id: str, name: str, environment: str
) -> HTTPResponse:
    with transaction(request) as tx:
        feature, env = require_feature_environment(tx, project_id, name, environment)
        catalog = catalog_rows.load(tx, feature_name=name)
    return json_response(feature_environment_json(catalog, feature, env))


async def _switch(
    request: Request, project_id: str, name: str, environment: str, enabled: bool
) -> HTTPResponse:
    with changing(request) as tx:
        feature, env = require_feature_environment(tx, project_id, name, environment)
        if enabled and not feature_rows.strategies_of(tx, name, environment):
            # As Unleash: turning on a flag without strategies gives it a 100% rollout, so "on" means on.
            full_rollout = StrategyBody(name="flexibleRollout")
            row = strategy_row(tx, full_rollout, feature, environment, str(uuid.uuid4()))
            feature_rows.save_strategy(tx, row, insert=True)
        feature_rows.set_enabled(tx, name, environment, enabled)
        if enabled and env["type"] != "production":
            feature_rows.enter_stage(tx, name, "pre-live")
    return empty(200)


@bp.post(FEATURE_ENV + "/on")
@openapi.summary("Turn a feature on in an environment")
@openapi.tag("Features")
async def feature_on(request: Request, project_id: str, name: str, environment: str) -> HTTPResponse:
    return await _switch(request, project_id, name, environment, True)


@bp.post(FEATURE_ENV + "/off")
@openapi.summary("Turn a feature off in an environment")
@openapi.tag("Features")
async def feature_off(request: Request, project_id: str, name: str, environment: str) -> HTTPResponse:
    return await _switch(request, project_id, name, environment, False)


# --- variants ---------------------------------------------------------------------------------------


@bp.get(FEATURE_ENV + "/variants")
@openapi.summary("Read a feature's variants in one environment")
@openapi.tag("Variants")
async def get_variants(request: Request, project_id: str, name: str, environment: str) -> HTTPResponse:
    with transaction(request) as tx:
        require_feature_environment(tx, project_id, name, environment)
        state = feature_rows.feature_environment(tx, name, environment)
    return json_response({"version": 1, "variants": orjson.loads(state["variants"]) if state else []})


@bp.put(FEATURE_ENV + "/variants")
@openapi.summary("Replace a feature's variants in one environment (weights resolved on save)")
@openapi.tag("Variants")
@json_body(VariantList, wrap_list=True)
async def put_variants(
    request: Request, project_id: str, name: str, environment: str, body: VariantList
) -> HTTPResponse:
    variants = authoring.variants(body.variants)
    with changing(request) as tx:
        require_feature_environment(tx, project_id, name, environment)
        feature_rows.set_variants(tx, name, environment, variants)
    return json_response({"version": 1, "variants": variants})


@bp.put(FEATURE + "/variants")
@openapi.summary("Replace a feature's variants in every environment")
@openapi.tag("Variants")
@json_body(VariantList, wrap_list=True)
async def put_variants_everywhere(
    request: Request, project_id: str, name: str, body: VariantList
) -> HTTPResponse:
    variants = authoring.variants(body.variants)
    with changing(request) as tx:
        require_feature(tx, project_id, name)
        for env in project_rows.environments(tx):
            feature_rows.set_variants(tx, name, env["name"], variants)
    return json_response({"version": 1, "variants": variants})


# --- dependencies -----------------------------------------------------------------------------------


@bp.post(FEATURE + "/dependencies")
@openapi.summary("Make a feature depend on a parent feature of the same project")
@openapi.tag("Dependencies")
@json_body(DependencyBody)
async def add_dependency(request: Request, project_id: str, name: str, body: DependencyBody) -> HTTPResponse:
    with changing(request) as tx:
        require_feature(tx, project_id, name)
        parent = feature_rows.feature(tx, body.feature)
        if parent is None or parent["archived"] or parent["project"] != project_id:
            raise ValidationFailed("feature", f"no feature {body.feature!r} in project {project_id!r}")
        if body.feature == name:
            raise ValidationFailed("feature", "a feature cannot depend on itself")
        # One level only, as in Unleash: a parent has no parents and a child has no children.
        if feature_rows.parents_of(tx, body.feature):
            raise ValidationFailed("feature", f"{body.feature!r} depends on another feature itself")
        if feature_rows.children_of(tx, name):
            raise ValidationFailed("feature", f"{name!r} is a parent of other features")
        variants = list(body.variants) if body.enabled else []
        feature_rows.set_dependency(tx, name, body.feature, body.enabled, variants)
    return json_response({"feature": body.feature, "enabled": body.enabled, "variants": variants})


@bp.delete(FEATURE + "/dependencies/<parent>")
@openapi.summary("Remove one dependency")
@openapi.tag("Dependencies")
async def remove_dependency(request: Request, project_id: str, name: str, parent: str) -> HTTPResponse:
    with changing(request) as tx:
        require_feature(tx, project_id, name)
        if not feature_rows.remove_dependencies(tx, name, parent):
            raise NotFound(f"{name} does not depend on {parent}")
    return empty(200)


@bp.delete(FEATURE + "/dependencies")
@openapi.summary("Remove every dependency of a feature")
@openapi.tag("Dependencies")
async def remove_dependencies(request: Request, project_id: str, name: str) -> HTTPResponse:
    with changing(request) as tx:
        require_feature(tx, project_id, name)
        feature_rows.remove_dependencies(tx, name)
    return empty(200)
