"""Activation strategies of a feature in one environment: add, list, read, replace, delete, reorder."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError
from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server import authoring
from flagproxy.server.errors import NotFound, ValidationFailed
from flagproxy.server.routes.common import (
    changing,
    empty,
    json_response,
    require_feature_environment,
    transaction,
)
from flagproxy.server.schemas import SortOrderItem, StrategyBody
from flagproxy.server.shapes import strategy_json
from flagproxy.server.storage import features as feature_rows
from flagproxy.server.storage import segments as segment_rows
from flagproxy.server.storage.catalog import decode_strategy
from flagproxy.server.storage.database import Row, Tx
from flagproxy.server.validation import json_body, require_json

bp = Blueprint("strategies")
STRATEGIES = "/api/admin/projects/<project_id>/features/<name>/environments/<environment>/strategies"
STRATEGY = STRATEGIES + "/<strategy_id>"


def strategy_row(tx: Tx, body: StrategyBody, feature: Row, environment: str, strategy_id: str) -> dict:
    """The stored form of a strategy body, checked against what exists (strategy type, segments)."""
    if body.name not in authoring.BUILT_IN_STRATEGIES:
        raise ValidationFailed("name", f"Could not find strategy type with name {body.name}")
    for index, segment_id in enumerate(body.segments):
        segment = segment_rows.segment(tx, segment_id)
        if segment is None:
            raise ValidationFailed(f"segments[{index}]", f"no segment with id {segment_id}")
        if segment["project"] and segment["project"] != feature["project"]:
            raise ValidationFailed(
                f"segments[{index}]", f"segment {segment_id} belongs to project {segment['project']}"
            )
    parameters = authoring.parameters(body.parameters)
    if body.name == "flexibleRollout":
        # Evaluators hash on groupId; Unleash's UI always sets it to the flag name.
        parameters.setdefault("groupId", feature["name"])
        parameters.setdefault("rollout", "100")
        parameters.setdefault("stickiness", "default")
    sort_order = body.sortOrder
    if sort_order is None:
        sort_order = feature_rows.next_sort_order(tx, feature["name"], environment)
    return {
        "id": strategy_id,
        "feature_name": feature["name"],
        "environment": environment,
        "name": body.name,
        "title": body.title,
        "disabled": bool(body.disabled),
        "sort_order": sort_order,
        "parameters": parameters,
        "constraints": authoring.constraints(body.constraints),
        "variants": authoring.variants(body.variants),
        "segments": list(dict.fromkeys(body.segments)),
    }


def _require_strategy(
    tx: Tx, project_id: str, name: str, environment: str, strategy_id: str
) -> tuple[Row, dict[str, Any]]:
    """The feature and the decoded strategy a `.../strategies/:strategyId` path names."""
    feature, _ = require_feature_environment(tx, project_id, name, environment)
    row = feature_rows.strategy(tx, strategy_id)
    if row is None or row["feature_name"] != name or row["environment"] != environment:
        raise NotFound(f"Could not find strategy with id {strategy_id}")
    return feature, decode_strategy(row)


@bp.post(STRATEGIES)
@openapi.summary("Add a strategy (constraints, segments, strategy variants)")
@openapi.tag("Strategies")
@json_body(StrategyBody)
async def add_strategy(
    request: Request, project_id: str, name: str, environment: str, body: StrategyBody
) -> HTTPResponse:
    with changing(request) as tx:
        feature, _ = require_feature_environment(tx, project_id, name, environment)
        row = strategy_row(tx, body, feature, environment, str(uuid.uuid4()))
        feature_rows.save_strategy(tx, row, insert=True)
    return json_response(strategy_json(row))


@bp.get(STRATEGIES)
@openapi.summary("List a feature's strategies in one environment")
@openapi.tag("Strategies")
async def list_strategies(request: Request, project_id: str, name: str, environment: str) -> HTTPResponse:
    with transaction(request) as tx:
        require_feature_environment(tx, project_id, name, environment)
        rows = feature_rows.strategies_of(tx, name, environment)
    return json_response([strategy_json(decode_strategy(row)) for row in rows])


@bp.get(STRATEGY)
@openapi.summary("Read one strategy")
@openapi.tag("Strategies")
async def get_strategy(
    request: Request, project_id: str, name: str, environment: str, strategy_id: str
) -> HTTPResponse:
    with transaction(request) as tx:
        _, strategy = _require_strategy(tx, project_id, name, environment, strategy_id)
    return json_response(strategy_json(strategy))


@bp.put(STRATEGY)
@openapi.summary("Replace one strategy")
@openapi.tag("Strategies")
@json_body(StrategyBody)
async def replace_strategy(
    request: Request, project_id: str, name: str, environment: str, strategy_id: str, body: StrategyBody
) -> HTTPResponse:
    with changing(request) as tx:
        feature, current = _require_strategy(tx, project_id, name, environment, strategy_id)
        if body.sortOrder is None:
            body = body.model_copy(update={"sortOrder": current["sort_order"]})
        row = strategy_row(tx, body, feature, environment, strategy_id)
        feature_rows.save_strategy(tx, row, insert=False)
    return json_response(strategy_json(row))


@bp.delete(STRATEGY)
@openapi.summary("Delete one strategy")
@openapi.tag("Strategies")
async def delete_strategy(
    request: Request, project_id: str, name: str, environment: str, strategy_id: str
) -> HTTPResponse:
    with changing(request) as tx:
        _require_strategy(tx, project_id, name, environment, strategy_id)
        feature_rows.delete_strategy(tx, strategy_id)
    return empty(200)


@bp.post(STRATEGIES + "/set-sort-order")
@openapi.summary("Set the evaluation order of a feature's strategies in one environment (Unleash's route)")
@openapi.description("Body: a JSON array of `{id, sortOrder}`; strategies left out keep their order.")
@openapi.tag("Strategies")
@openapi.body({"application/json": list[SortOrderItem]}, required=True)
async def set_sort_order(request: Request, project_id: str, name: str, environment: str) -> HTTPResponse:
    data = require_json(request)
    if not isinstance(data, list):
        raise ValidationFailed("body", "expected a JSON array of {id, sortOrder}")
    items = []
    for index, item in enumerate(data):
        try:
            items.append(SortOrderItem.model_validate(item))
        except ValidationError as problem:
            error = problem.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise ValidationFailed(f"[{index}]" + (f".{where}" if where else ""), error["msg"]) from None
    with changing(request) as tx:
        require_feature_environment(tx, project_id, name, environment)
        for item in items:
            _require_strategy(tx, project_id, name, environment, item.id)
            feature_rows.set_sort_order(tx, item.id, item.sortOrder)
    return empty(200)
