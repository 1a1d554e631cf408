"""A flag's page: its facts (type, stale, impression data, tags, lifecycle, dependencies, usage from client
metrics) and per environment its switch, strategies (add, edit, disable, delete: every built-in strategy,
constraints, segments), and variants. Every form sends its JSON to the admin API's own route; the
strategy form is assembled by console.js's `strategy` builder (constraint rows, the chosen strategy's
parameters), which checks each constraint before anything is sent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, get_args

import orjson
from sanic import Blueprint, HTTPResponse, Request

from flagproxy.server.authoring import BUILT_IN_STRATEGIES, SINGLE_VALUE_OPERATORS
from flagproxy.server.clock import hour_bucket
from flagproxy.server.console.render import html, signed_in
from flagproxy.server.routes.common import require_feature
from flagproxy.server.schemas import ConstraintBody
from flagproxy.server.shapes import feature_json
from flagproxy.server.storage import catalog as catalog_rows
from flagproxy.server.storage import segments as segment_rows
from flagproxy.server.storage import usage as usage_rows

bp = Blueprint("console_flag")
# What the editors offer is what the API accepts: its operator list and built-in strategies.
OPERATORS = get_args(ConstraintBody.model_fields["operator"].annotation)
STRATEGIES = ("flexibleRollout", *sorted(BUILT_IN_STRATEGIES - {"flexibleRollout"}))
STICKINESS = ("default", "userId", "sessionId", "random")
USAGE_HOURS = 24


def _usage(tx: Any, name: str) -> list[dict[str, Any]]:
    """The last day's client metrics summed per environment and application."""
    since = hour_bucket(datetime.now(UTC) - timedelta(hours=USAGE_HOURS - 1))
    totals: dict[tuple[str, str], dict[str, Any]] = {}
    for row in usage_rows.usage_of(tx, name, since):
        key = (row["environment"], row["app_name"])
        total = totals.setdefault(key, {"environment": key[0], "appName": key[1], "yes": 0, "no": 0})
        total["yes"] += int(row["yes"])
        total["no"] += int(row["no"])
    return sorted(totals.values(), key=lambda t: (t["environment"], t["appName"]))


def _moves(strategies: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """For each strategy, the body of `set-sort-order` that moves it one place up or down."""
    ids = [s["id"] for s in strategies]
    moves: dict[str, dict[str, str]] = {}
    for index, strategy_id in enumerate(ids):
        moves[strategy_id] = {}
        for label, other in (("up", index - 1), ("down", index + 1)):
            if 0 <= other < len(ids):
                order = list(ids)
                order[index], order[other] = order[other], order[index]
                body = [{"id": moved, "sortOrder": position} for position, moved in enumerate(order)]
                moves[strategy_id][label] = orjson.dumps(body).decode()
    return moves


@bp.get("/console/projects/<project_id>/features/<name>")
@signed_in
async def flag_page(request: Request, project_id: str, name: str) -> HTTPResponse:
    with request.app.ctx.db.transaction(read_only=True) as tx:
        feature = require_feature(tx, project_id, name, archived=True)
        catalog = catalog_rows.load(tx, include_archived=True, feature_name=name)
        segments = [row for row in segment_rows.segments(tx) if row["project"] in (None, project_id)]
        usage = _usage(tx, name)
        others = [
            f["name"]
            for f in catalog_rows.load(tx).features
            if f["project"] == project_id and f["name"] != name
        ]
    shown = feature_json(catalog, feature)
    if shown["archived"]:
        # An archived flag is read, not edited: the page offers reviving it and nothing else.
        may = request.ctx.may
        request.ctx.may = lambda route, *scope: route == "features.revive_feature" and may(route, *scope)
    return await html(
        request,
        "flag.html",
        project_id=project_id,
        flag=shown,
        segments=segments,
        usage=usage,
        others=others,
        operators=OPERATORS,
        single_value=sorted(SINGLE_VALUE_OPERATORS),
        strategies=STRATEGIES,
        stickiness=STICKINESS,
        moves={env["name"]: _moves(env["strategies"]) for env in shown["environments"]},
    )
