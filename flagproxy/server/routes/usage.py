"""What SDKs reported, for admins: usage counts per feature and the applications seen."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
from sanic import Blueprint, HTTPResponse, Request
from sanic_ext import openapi

from flagproxy.server.clock import hour_bucket
from flagproxy.server.errors import NotFound, ValidationFailed
from flagproxy.server.routes.common import json_response, transaction
from flagproxy.server.storage import features as feature_rows
from flagproxy.server.storage import usage as usage_rows

bp = Blueprint("usage")


@bp.get("/api/admin/client-metrics/features/<name>")
@openapi.summary("Usage counts of a feature per hour, environment and application")
@openapi.description("Query `hoursBack` (1-168, default 24): how many hours of counts to return.")
@openapi.tag("Metrics")
async def feature_usage(request: Request, name: str) -> HTTPResponse:
    text = request.args.get("hoursBack", "24")
    if not (text.isascii() and text.isdigit() and len(text) <= 3) or not 1 <= int(text) <= 168:
        raise ValidationFailed("hoursBack", "must be a whole number of hours from 1 to 168")
    since = hour_bucket(datetime.now(UTC) - timedelta(hours=int(text) - 1))
    with transaction(request) as tx:
        if feature_rows.feature(tx, name) is None:
            raise NotFound(f"Could not find feature {name}")
        rows = usage_rows.usage_of(tx, name, since)
    usage = [
        {
            "featureName": name,
            "environment": row["environment"],
            "appName": row["app_name"],
            "timestamp": row["hour"],
            "yes": int(row["yes"]),
            "no": int(row["no"]),
            "variants": orjson.loads(row["variants"]),
        }
        for row in rows
    ]
    return json_response(
        {
            "version": 1,
            "maturity": "stable",
            "featureName": name,
            "lastHourUsage": usage,
            "seenApplications": sorted({row["app_name"] for row in rows}),
        }
    )


@bp.get("/api/admin/metrics/applications")
@openapi.summary("Applications (SDKs, proxies) that registered or sent metrics")
@openapi.tag("Metrics")
async def applications(request: Request) -> HTTPResponse:
    with transaction(request) as tx:
        rows = usage_rows.applications(tx)
    return json_response(
        {
            "applications": [
                {
                    "appName": row["app_name"],
                    "instanceId": row["instance_id"],
                    "sdkVersion": row["sdk_version"],
                    "environment": row["environment"],
                    "strategies": orjson.loads(row["strategies"]),
                    "interval": row["interval_ms"],
                    "started": row["started"],
                    "lastSeen": row["last_seen"],
                }
                for row in rows
            ]
        }
    )
