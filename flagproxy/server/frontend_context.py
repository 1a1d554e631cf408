"""The Unleash context of a frontend API request: the query string of a GET, `body.context` of a POST.

Root fields (appName, environment, userId, sessionId, remoteAddress, currentTime) stay at the top, every
other field goes into `properties` (`properties[name]=value` in a query, a `properties` object in a body),
as Unleash's frontend API reads them. Values are strings; numbers and booleans in a body are written out.
A nested or repeated query value, or a body value that is an object or array, is a ValidationError naming
the field. The environment is always the token's.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from flagproxy.server.errors import ValidationFailed

ROOT_FIELDS = ("appName", "environment", "userId", "sessionId", "remoteAddress", "currentTime")


def _text(value: Any, field: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ValidationFailed(field, "must be a string, a number or a boolean")


def query_context(query_string: str) -> dict[str, Any]:
    fields: dict[str, str] = {}
    for key, value in parse_qsl(query_string, keep_blank_values=True):
        if key in fields or (key.count("[") > 1):
            raise ValidationFailed(key, "must be given once, as a plain value")
        fields[key] = value
    properties = {}
    context: dict[str, Any] = {}
    for key, value in fields.items():
        if key.startswith("properties[") and key.endswith("]"):
            properties[key[len("properties[") : -1]] = value
        elif key in ROOT_FIELDS:
            if value:
                context[key] = value
        elif "[" in key:
            raise ValidationFailed(key, "must be a plain value")
        else:
            properties[key] = value
    context["properties"] = properties
    return context


def body_context(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValidationFailed("body", "must be an object")
    raw = body.get("context", {})
    if not isinstance(raw, dict):
        raise ValidationFailed("context", "must be an object")
    context: dict[str, Any] = {}
    properties: dict[str, str] = {}
    for key, value in raw.items():
        if key == "properties":
            if not isinstance(value, dict):
                raise ValidationFailed("context.properties", "must be an object")
            for name, item in value.items():
                properties[name] = _text(item, f"context.properties.{name}")
        elif value is None:
            continue
        elif key in ROOT_FIELDS:
            context[key] = _text(value, f"context.{key}")
        else:
            properties[key] = _text(value, f"context.{key}")
    context["properties"] = properties
    return context
